internal import CFFIHookObjC
import FFIHook
import FFIHookCore
import Synchronization

/// The methods this module has hooked, and the memory that stands for each method's
/// implementation in the hook engine.
///
/// The engine hooks a word of memory holding a function pointer (a slot). A method's
/// implementation is changed only through the runtime (`method_setImplementation`, which also
/// updates the dispatch tables), so each hooked method gets a word of its own, its *shadow*:
/// the engine hooks the shadow. The shadow holds the method's implementation while no hook is
/// installed and the engine's closure while one is; the engine keeps the same closure for
/// the shadow from one hook to the next, and a closure without hooks passes calls through
/// to what the shadow held before it.
///
/// The runtime is touched once per method, not once per hook: the method's first hook makes
/// the closure its implementation, and the closure stays there. Later installs and removals
/// change only the engine's snapshots, so they replace no dispatch table (a replacement that
/// a concurrent message can read half-made, and that the runtime keeps for good, see
/// `ffh_objc_runtime_functions`). Only ``restoreImplementation(_:)`` and
/// ``restoreAllImplementations()`` give a method without hooks its implementation back.
///
/// Another swizzler's implementation, found in the method at the next install, gets a new
/// shadow holding it: the engine then hooks a new slot, so their function becomes the
/// original of a closure of its own, while the old closure, which they may call as their
/// original, stays as it was (a pass-through, or running the hooks installed before). The
/// method's implementation is read and set under the runtime's lock, which
/// `method_setImplementation` takes too, so a change of theirs cannot fall between the two.
///
/// Shadows, closures and forwarders are kept for the life of the process: the runtime can
/// call a closure it once held at any later time.
final class MethodRegistry: Sendable {
    static let shared = MethodRegistry()

    /// A hooked method and the shadow that stands for it in the engine.
    final class Method: @unchecked Sendable {
        // Sendable: `closures` is touched only under the registry's lock; the rest is constant.
        let method: OpaquePointer
        /// The class that defines the method.
        let owner: OpaquePointer
        let shadow: UnsafeMutablePointer<Atomic<UInt>>
        /// Every closure the engine has written into this shadow.
        var closures: Set<UInt> = []

        init(method: OpaquePointer, owner: OpaquePointer, implementation: UInt) {
            self.method = method
            self.owner = owner
            shadow = .allocate(capacity: 1)
            // The allocator may hand out the address of a slot the program hooked and freed
            // without releasing it: what the engine kept for that slot goes first, so that
            // the shadow's first hook does not find a stale closure there.
            Hook.releaseSlots(in: UnsafeRawBufferPointer(start: shadow, count: MemoryLayout<UInt>.size))
            shadow.initialize(to: Atomic(implementation))
        }

        /// What the shadow holds now (the engine writes it under its own lock).
        var shadowValue: UInt { shadow.pointee.load(ordering: .acquiring) }
    }

    struct State {
        var methods: [OpaquePointer: Method] = [:]
        /// Shadows replaced by newer ones, kept: the engine's entries and closures for them
        /// refer to their memory for the life of the process.
        var replaced: [Method] = []
        /// The forwarders added to classes for inherited methods, by class and selector.
        var forwarders: [ForwarderKey: Forwarder] = [:]
        /// The classes made for per-instance hooks, by the class they subclass.
        var instanceClasses: [OpaquePointer: OpaquePointer] = [:]
        /// The objects with per-instance hooks, by address.
        var objects: [UInt: ObjectHooks] = [:]
        /// Whether the hooks that keep per-instance hooks across key-value observing are in.
        var followsObservation = false
    }

    /// A method added to a class to send messages on to its superclass: a forwarding stub
    /// of the attach entry (x86-64), or a libffi closure.
    enum Forwarder {
        case direct(UnsafeRawPointer)
        case closure(SuperForwarder)

        var code: UnsafeRawPointer? {
            switch self {
            case .direct(let code): code
            case .closure(let forwarder): forwarder.code
            }
        }
    }

    struct ForwarderKey: Hashable {
        let cls: OpaquePointer
        let selector: OpaquePointer
    }

    let state = RuntimeLocked(State())

    private init() {
        // Held while the engine's registry is taken: ranks below it. A child of a fork made
        // while another thread installed a method hook would otherwise find it held forever.
        state.protectAcrossFork(rank: SlotRegistry.forkRank - 50)
    }

    /// Throws when the calling thread is inside an install or removal already (a
    /// `+initialize` the runtime sent from there, or a hook block run by a message sent
    /// from there, installing a hook), where taking the lock again would wait for itself.
    func refuseReentry(_ failure: (ObjCHookError.Code, String) -> ObjCHookError) throws(ObjCHookError) {
        guard state.isHeldByCurrentThread else { return }
        throw failure(
            .hookFailed,
            "called while this thread installs or removes another Objective-C hook (from a +initialize or a hook block that it set off), which would wait for itself"
        )
    }

    /// What an install resolved: the class the method is hooked for, and the method.
    struct Target {
        let runtime: ObjCRuntime
        let cls: OpaquePointer
        let className: String
        let selector: String
        let isClassMethod: Bool

        func failure(
            _ code: ObjCHookError.Code, _ message: String, encoding: String? = nil, hookError: HookError? = nil
        )
            -> ObjCHookError
        {
            ObjCHookError(
                code: code, message: message, className: className, selector: selector, isClassMethod: isClassMethod,
                encoding: encoding, hookError: hookError)
        }
    }

    /// A method's selector and types, resolved and checked before the lock is taken.
    struct Prepared {
        let selector: OpaquePointer
        let encoding: String
        let signature: Signature
        let interface: CallInterface
    }

    /// Looks the method up in `target.cls` (its own or inherited) and parses its types;
    /// `check` sees the signature and the encoding and may refuse them.
    static func prepare(
        _ target: Target, signature given: Signature?,
        checking check: (Signature, String) throws(ObjCHookError) -> Void
    ) throws(ObjCHookError) -> Prepared {
        let runtime = target.runtime
        guard let selector = runtime.selector(target.selector) else {
            throw target.failure(.selectorNotFound, ObjCHookError.unregistrable(selector: target.selector))
        }
        guard let found = runtime.instanceMethod(of: target.cls, selector: selector) else {
            throw target.failure(.selectorNotFound, "the class has no method for this selector and inherits none")
        }
        runtime.prepareDispatch(of: target.cls, selector: selector)
        guard let encoding = runtime.typeEncoding(of: found) else {
            throw target.failure(.invalidSignature, "the runtime records no type encoding for the method")
        }
        let signature: Signature
        do {
            signature = try Signature(encoding)
        } catch {
            throw target.failure(.invalidSignature, "its type encoding cannot be parsed: \(error)", encoding: encoding)
        }
        // The signature calls go through: the method's, or one call shape of a variadic
        // method, whose encoding lists its fixed arguments alone (it does not say the method
        // is variadic).
        var hooked = signature
        if let given {
            let fixedPart = given.fixedArgumentCount.map { fixed in
                Signature(returning: given.returnType, arguments: Array(given.argumentTypes.prefix(fixed)))
            }
            guard (fixedPart ?? given).abiKey == signature.abiKey else {
                throw target.failure(
                    .signatureMismatch,
                    "the signature given, \"\(given.description)\", does not describe the method's types, \"\(signature.encoding)\"",
                    encoding: encoding)
            }
            hooked = given
        }
        guard signature.argumentTypes.count >= 2 else {
            throw target.failure(
                .invalidSignature, "a method's encoding lists at least self and _cmd; this one has fewer",
                encoding: encoding)
        }
        if let problem = frameProblem(signature, encoding: encoding) {
            throw target.failure(.invalidSignature, problem, encoding: encoding)
        }
        try check(hooked, encoding)
        do {
            let interface = try CallInterface.shared(for: hooked)
            return Prepared(selector: selector, encoding: encoding, signature: hooked, interface: interface)
        } catch {
            throw target.failure(
                .invalidSignature, "libffi cannot pass one of its types: \(error)", encoding: encoding,
                hookError: HookError(
                    code: .invalidSignature, message: "\(error)", signature: signature, callInterfaceError: error))
        }
    }

    /// What is wrong when the compiler's frame offsets in `encoding` give an argument fewer
    /// bytes than its type takes as the encoding spells it: a packed struct (`{?=cd}` of 9
    /// bytes reads as 16), which the encoding cannot tell from an unpacked one and which
    /// would be passed wrongly. Nil when the offsets agree, or are missing or out of order.
    static func frameProblem(_ signature: Signature, encoding: String) -> String? {
        guard let offsets = Signature.frameOffsets(of: encoding),
            offsets.count == signature.argumentTypes.count + 1
        else { return nil }
        let frameSize = offsets[0]
        let starts = Array(offsets.dropFirst())
        for (index, type) in signature.argumentTypes.enumerated() {
            let end = index + 1 < starts.count ? starts[index + 1] : frameSize
            let room = end - starts[index]
            guard room >= 0 else { return nil }
            if type.size > room {
                return "the compiler's frame offsets give argument \(index) \(room) bytes, but its type, "
                    + "\"\(type)\", takes \(type.size): the encoding does not describe the method's frame (a packed struct looks like this)"
            }
        }
        return nil
    }

    /// Installs `block` at `position` on the method `selector` of `target.cls` (a metaclass
    /// for a class method), for every receiver.
    func install(
        _ target: Target, signature given: Signature?, position: HookPosition, options: HookOptions,
        block: @escaping @Sendable (borrowing Invocation) -> Void,
        checking check: (Signature, String) throws(ObjCHookError) -> Void = { _, _ in }
    ) throws(ObjCHookError) -> HookToken {
        let prepared = try Self.prepare(target, signature: given, checking: check)
        try refuseReentry { target.failure($0, $1) }
        return try state.withLock { (state: inout State) throws(ObjCHookError) -> HookToken in
            let (record, _) = try Self.installLocked(
                target, prepared, position: position, options: options, block: block, state: &state)
            // Nothing to put back after the removal: the method keeps the closure, which
            // passes messages through once its last hook is gone.
            return HookToken(record, afterRemoval: {})
        }
    }

    /// Installs a hook on the method as ``install(_:signature:position:options:block:checking:)``
    /// does, under the lock; returns the engine's record and the method's shadow. `limit` is
    /// the caller limit of a hook installed again (see `CallerLimit`); by default
    /// the one `options` ask for, taken on the calling thread.
    static func installLocked(
        _ target: Target, _ prepared: Prepared, position: HookPosition, options: HookOptions, receiver: UInt = 0,
        priority: Int = 0, limit: CallerLimit? = nil, block: @escaping @Sendable (borrowing Invocation) -> Void,
        state: inout State
    ) throws(ObjCHookError) -> (HookRecord, Method) {
        let runtime = target.runtime
        guard let found = runtime.instanceMethod(of: target.cls, selector: prepared.selector) else {
            throw target.failure(.selectorNotFound, "the class has no method for this selector and inherits none")
        }
        var method = found
        if !runtime.defines(target.cls, found) {
            method = try addForwarder(
                target, selector: prepared.selector, encoding: prepared.encoding, interface: prepared.interface,
                state: &state)
        }
        // A shadow stands for the method while the method holds what the shadow holds, or
        // one of the shadow's closures. Anything else was put there by someone else (who
        // may call one of our closures as their original): it gets a new shadow, as a slot
        // someone else wrote gets a new closure, so that no closure they may call is made
        // to call them back.
        let current = runtime.implementation(of: method)
        let hooked: Method
        if let existing = state.methods[method],
            current == existing.shadowValue || existing.closures.contains(current)
        {
            hooked = existing
        } else {
            hooked = Method(method: method, owner: target.cls, implementation: current)
            if let replaced = state.methods.updateValue(hooked, forKey: method) {
                state.replaced.append(replaced)
            }
        }
        let record: HookRecord
        do throws(HookError) {
            record = try SlotRegistry.shared.install(
                slot: UnsafeMutableRawPointer(hooked.shadow), signature: prepared.signature, position: position,
                options: options, priority: priority, receiver: receiver, limit: limit, block: block)
        } catch {
            throw target.failure(.hookFailed, error.message, encoding: prepared.encoding, hookError: error)
        }
        let closure = hooked.shadowValue
        hooked.closures.insert(closure)
        if runtime.implementation(of: method) != closure {
            runtime.setImplementation(of: method, in: target.cls, to: closure)
        }
        return (record, hooked)
    }

    /// Adds to `target.cls` a method for `selector` that forwards to the superclass, and
    /// returns it.
    private static func addForwarder(
        _ target: Target, selector: OpaquePointer, encoding: String, interface: CallInterface, state: inout State
    ) throws(ObjCHookError) -> OpaquePointer {
        let runtime = target.runtime
        guard let superclass = runtime.superclass(of: target.cls) else {
            throw target.failure(.methodNotAdded, "the method is inherited but the class reports no superclass")
        }
        let key = ForwarderKey(cls: target.cls, selector: selector)
        if state.forwarders[key] == nil {
            // The forwarding stub where there is one (x86-64): it jumps to the superclass's
            // implementation with the registers as they came. Elsewhere a libffi closure.
            #if arch(x86_64)
                let inMemory = SysVArgumentPlan.returnsInMemory(interface.signature.returnType)
                var resolver: UnsafeRawPointer?
                let direct = ffh_objc_forwarder_make(superclass, inMemory ? 1 : 0, &resolver).map {
                    UnsafeRawPointer($0)
                }
                // Hooked calls whose original is the forwarder make its lookup themselves and
                // call the superclass's implementation, without the forwarder's entry.
                if let resolver { OriginalResolvers.register(resolver) }
            #else
                let direct: UnsafeRawPointer? = nil
            #endif
            let forwarder =
                direct.map { Forwarder.direct($0) }
                ?? SuperForwarder.make(
                    interface: interface, runtime: runtime, superclass: superclass, selector: selector
                )
                .map { Forwarder.closure($0) }
            guard let forwarder, let code = forwarder.code else {
                throw target.failure(
                    .hookFailed, "libffi could not make the closure that overrides the inherited method",
                    encoding: encoding,
                    hookError: HookError(code: .closureAllocationFailed, message: "libffi could not allocate a closure")
                )
            }
            state.forwarders[key] = forwarder
            _ = runtime.addMethod(to: target.cls, selector: selector, implementation: code, types: encoding)
        }
        guard let method = runtime.instanceMethod(of: target.cls, selector: selector),
            runtime.defines(target.cls, method)
        else {
            throw target.failure(
                .methodNotAdded, "the runtime did not add the method that overrides the inherited one to the class",
                encoding: encoding)
        }
        return method
    }
}
