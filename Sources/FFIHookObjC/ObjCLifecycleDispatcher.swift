internal import CFFIHookObjC
public import FFIHook
import FFIHookCore

#if canImport(Glibc)
    import Glibc
#endif

/// Fans an Objective-C delegate's lifecycle messages out to components, as HoloLifecycle
/// does for an application delegate.
///
/// The dispatcher hooks the delegate object's methods for the selectors it covers (hooks of
/// that object alone: see ``ObjCHook/install(on:_:signature:position:options:_:)``). Every
/// message the delegate gets for one of them is also sent, with the same arguments, to each
/// registered component that implements it: components of priority zero or more before the
/// delegate's own method, highest first; components of negative priority after it, highest
/// first; equal priorities in registration order. A component's result is discarded: the
/// sender always gets the delegate's.
///
/// ```swift
/// let dispatcher = try ObjCLifecycleDispatcher(
///     delegate: ObjCObject(appDelegate),
///     selectors: ["applicationDidFinishLaunching:", "applicationWillTerminate:"])
/// let analytics = try dispatcher.register(ObjCObject(analyticsComponent), priority: 10)
/// // Follow the delegate wherever the application's setter puts it:
/// let following = try dispatcher.follow(setter: "setDelegate:", of: ObjCObject(application))
/// // ... later, from any thread:
/// analytics.remove()
/// ```
///
/// Components come and go at any time, from any thread, while messages are sent. The
/// dispatcher does not retain the delegate or the components. It watches the delegate's
/// deallocation with a hook of the delegate's own (which keeps the delegate on a subclass
/// made for per-instance hooks while the dispatcher holds it): a delegate deallocated while
/// the dispatcher holds it is forgotten (``delegate`` becomes nil). A component must be
/// unregistered before it is deallocated, and a message being sent to it on another thread
/// at that moment may still reach it: after removing its token, call
/// ``/FFIHook/Hook/waitForReclamation()`` before releasing it. A component is sent the message as compiled code sends it (its class's
/// implementation is looked up at each message).
///
/// The GNU runtime records only the **required** methods of a protocol; optional ones are
/// invisible to it. ``init(delegate:protocol:optionalSelectors:)`` therefore takes the
/// optional selectors to cover by name.
public final class ObjCLifecycleDispatcher: Sendable {
    /// The selectors the dispatcher covers.
    public let selectors: [String]

    private struct Registration {
        let id: Int
        let component: UInt
        let priority: Int
        /// The selectors the component implements, with the hooks that send them to it now.
        let implemented: [String]
        var tokens: [HookToken]
    }

    private struct State {
        var delegate: UInt?
        var registrations: [Registration] = []
        var nextID = 0
        /// The hook on the delegate's `-dealloc` that makes the dispatcher forget it.
        var deallocWatch: HookToken?
    }

    private let state: RuntimeLocked<State>

    /// A dispatcher for `selectors` of `delegate` (or of no delegate yet: see
    /// ``follow(setter:of:)``); nothing is hooked until a component registers.
    public init(delegate: ObjCObject?, selectors: [String]) {
        self.selectors = selectors
        state = RuntimeLocked(State(delegate: delegate?.address))
        if let delegate = delegate?.address, ObjCRuntime.current != nil {
            state.withLock { state in try? watch(delegate, &state) }
        }
    }

    /// Stops watching the delegate's deallocation; registered components stay registered.
    deinit {
        state.withLock { $0.deallocWatch }?.remove()
    }

    /// A dispatcher for the required instance methods of the protocol called `protocolName`
    /// and the `optionalSelectors` (see the note on protocols above).
    ///
    /// - Throws: ``ObjCHookError/Code-swift.struct/runtimeNotLoaded``, or
    ///   ``ObjCHookError/Code-swift.struct/classNotFound`` when the runtime knows no protocol of
    ///   that name.
    public convenience init(
        delegate: ObjCObject?, protocol protocolName: String, optionalSelectors: [String] = []
    ) throws(ObjCHookError) {
        let runtime = try ObjCRuntime.loaded()
        guard let list = ffh_objc_protocol_selectors(runtime.functions, protocolName) else {
            throw ObjCHookError(
                code: .classNotFound, message: "the runtime knows no protocol of this name", className: protocolName)
        }
        defer { free(list) }
        var required: [String] = []
        var cursor = UnsafePointer(list)
        while cursor.pointee != 0 {
            let name = String(cString: cursor)
            required.append(name)
            cursor += name.utf8.count + 1
        }
        var selectors = required
        for selector in optionalSelectors where !selectors.contains(selector) { selectors.append(selector) }
        self.init(delegate: delegate, selectors: selectors)
    }

    /// The delegate the dispatcher hooks now.
    public var delegate: ObjCObject? {
        state.withLock { state in state.delegate.map { ObjCObject(UnsafeRawPointer(bitPattern: $0)!) } }
    }

    /// Registers a component: for each covered selector that both the component and the
    /// delegate implement, a hook on the delegate that sends the message on to the component
    /// (a selector the delegate does not implement is covered again when ``follow(setter:of:)``
    /// moves the dispatcher to a delegate that does).
    ///
    /// - Returns: the token that unregisters the component; its
    ///   ``/FFIHook/HookGroupToken/skippedFields`` name the covered selectors the component does
    ///   not implement.
    /// - Throws: ``ObjCHookError`` when no runtime is loaded, the component implements a
    ///   covered selector with other types than the delegate's method
    ///   (``ObjCHookError/Code-swift.struct/signatureMismatch``), or a hook cannot be
    ///   installed; nothing of the component stays registered then.
    public func register(_ component: ObjCObject, priority: Int = 0) throws(ObjCHookError) -> HookGroupToken {
        let runtime = try ObjCRuntime.loaded()
        guard !component.isNil else {
            throw ObjCHookError(code: .invalidClass, message: "the component is nil (address 0), no object")
        }
        let componentPointer = OpaquePointer(component.pointer)
        guard runtime.kind(of: component.pointer) == FFH_OBJC_OBJECT,
            let componentClass = runtime.classOf(componentPointer)
        else {
            throw ObjCHookError(code: .invalidClass, message: "the component points to no object of the runtime")
        }
        var implemented: [String] = []
        var skipped: [String] = []
        for selector in selectors {
            if let sel = runtime.selector(selector), runtime.instanceMethod(of: componentClass, selector: sel) != nil {
                implemented.append(selector)
            } else {
                skipped.append(selector)
            }
        }
        let registration = try state.withLock { (state: inout State) throws(ObjCHookError) -> Registration in
            var registration = Registration(
                id: state.nextID, component: component.address, priority: priority, implemented: implemented,
                tokens: [])
            state.nextID += 1
            if let delegate = state.delegate {
                try watch(delegate, &state)
                registration.tokens = try Self.install(registration, on: delegate, runtime: runtime)
            }
            state.registrations.append(registration)
            return registration
        }
        let handle = Unregistration(dispatcher: self, id: registration.id, component: component.address)
        return HookGroupToken(tokens: [HookToken(handle: handle)], skippedFields: skipped)
    }

    /// Follows the delegate where `owner`'s setter (`setDelegate:`) puts it: after each call
    /// of the setter, the dispatcher's hooks move from the old delegate to the new one (none
    /// while the new one is nil). The owner's current delegate is not read: pass it to the
    /// initializer.
    ///
    /// - Returns: the token that stops following.
    /// - Throws: ``ObjCHookError`` as ``ObjCHook/after(on:_:signature:options:_:)`` does.
    public func follow(setter: String, of owner: ObjCObject) throws(ObjCHookError) -> HookToken {
        try ObjCHook.after(on: owner, setter) { [self] call in
            retarget(to: call.argument(2, as: UInt.self))
        }
    }

    /// Watches `delegate`'s deallocation (once per delegate): a delegate that goes while the
    /// dispatcher holds it is forgotten, with the hooks that went with it.
    private func watch(_ delegate: UInt, _ state: inout State) throws(ObjCHookError) {
        guard state.deallocWatch == nil else { return }
        state.deallocWatch = try ObjCHook.before(on: ObjCObject(UnsafeRawPointer(bitPattern: delegate)!), "dealloc") {
            [weak self] call in
            self?.forget(call.argument(0, as: UInt.self))
        }
    }

    /// The delegate at `delegate` is being deallocated: its hooks go with it (the engine
    /// removes an object's hooks as it is deallocated); the dispatcher holds no delegate.
    private func forget(_ delegate: UInt) {
        state.withLock { state in
            guard state.delegate == delegate else { return }
            state.delegate = nil
            state.deallocWatch = nil
            for index in state.registrations.indices { state.registrations[index].tokens = [] }
        }
    }

    /// Moves every registration's hooks to `delegate` (0: none).
    private func retarget(to delegate: UInt) {
        guard let runtime = ObjCRuntime.current else { return }
        let old: [HookToken] = state.withLock { state in
            guard state.delegate != delegate || delegate == 0 else { return [] }
            var old: [HookToken] = []
            if let watching = state.deallocWatch { old.append(watching) }
            state.deallocWatch = nil
            state.delegate = delegate == 0 ? nil : delegate
            if delegate != 0 { try? watch(delegate, &state) }
            for index in state.registrations.indices {
                old += state.registrations[index].tokens
                state.registrations[index].tokens =
                    delegate == 0
                    ? [] : (try? Self.install(state.registrations[index], on: delegate, runtime: runtime)) ?? []
            }
            return old
        }
        for token in old { token.remove() }
    }

    /// Takes a registration out, with its hooks.
    fileprivate func unregister(_ id: Int) -> Bool {
        let tokens: [HookToken]? = state.withLock { state in
            guard let index = state.registrations.firstIndex(where: { $0.id == id }) else { return nil }
            return state.registrations.remove(at: index).tokens
        }
        guard let tokens else { return false }
        for token in tokens { token.remove() }
        return true
    }

    fileprivate func isRegistered(_ id: Int) -> Bool {
        state.withLock { state in state.registrations.contains { $0.id == id } }
    }

    /// The hooks on `delegate` that send the registration's selectors to its component.
    private static func install(
        _ registration: Registration, on delegate: UInt, runtime: ObjCRuntime
    ) throws(ObjCHookError) -> [HookToken] {
        var tokens: [HookToken] = []
        let component = registration.component
        do throws(ObjCHookError) {
            let delegateClass = runtime.classOf(OpaquePointer(bitPattern: delegate)!)
            for selector in registration.implemented {
                // A selector the delegate does not implement (an optional method it skips)
                // is never sent to it, so there is nothing to dispatch.
                guard let sel = runtime.selector(selector), let delegateClass,
                    runtime.instanceMethod(of: delegateClass, selector: sel) != nil,
                    let componentClass = runtime.classOf(OpaquePointer(bitPattern: component)!),
                    let method = runtime.instanceMethod(of: componentClass, selector: sel),
                    let encoding = runtime.typeEncoding(of: method)
                else { continue }
                let priority = registration.priority
                let selectorWord = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(sel)))
                let hook = try MethodRegistry.shared.installInstance(
                    object: delegate, selector: selector, signature: nil, position: priority >= 0 ? .before : .after,
                    options: [], priority: priority,
                    block: { call in
                        // The message, sent to the component: its receiver in place of the
                        // delegate for the time of the call.
                        let delegate = call.argument(0, as: UInt.self)
                        guard let receiver = OpaquePointer(bitPattern: component),
                            let implementation = runtime.functions.pointee.objc_msg_lookup(
                                receiver, OpaquePointer(bitPattern: selectorWord))
                        else { return }
                        call.setArgument(0, to: component)
                        call.callDiscardingResult(unsafeBitCast(implementation, to: UnsafeRawPointer.self))
                        call.setArgument(0, to: delegate)
                    },
                    checking: { (signature: Signature, delegateEncoding: String) throws(ObjCHookError) in
                        guard let componentSignature = try? Signature(encoding),
                            componentSignature.abiKey == signature.abiKey
                        else {
                            throw ObjCHookError(
                                code: .signatureMismatch,
                                message:
                                    "the component implements it with types \"\(encoding)\", the delegate with \"\(delegateEncoding)\"",
                                className: runtime.className(componentClass), selector: selector, encoding: encoding)
                        }
                    })
                tokens.append(hook)
            }
        } catch {
            for token in tokens { token.remove() }
            throw error
        }
        return tokens
    }
}

/// What removes a component's registration, for its token.
private final class Unregistration: HookHandle {
    let dispatcher: ObjCLifecycleDispatcher
    let id: Int
    let component: UInt

    init(dispatcher: ObjCLifecycleDispatcher, id: Int, component: UInt) {
        self.dispatcher = dispatcher
        self.id = id
        self.component = component
    }

    func remove() -> Bool { dispatcher.unregister(id) }
    var isActive: Bool { dispatcher.isRegistered(id) }
    var summary: String { "component 0x\(String(component, radix: 16)) of a lifecycle dispatcher" }
}
