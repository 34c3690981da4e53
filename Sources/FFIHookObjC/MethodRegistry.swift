import FFIHook
import FFIHookCore
import Synchronization

/// The methods this module has hooked, and the memory that stands for each method's
/// implementation in the hook engine.
///
/// The engine hooks a word of memory holding a function pointer (a slot). A method's
/// implementation is changed only through the runtime (`method_setImplementation`, which also
/// updates the dispatch tables), so each hooked method gets a word of its own, its *shadow*:
/// the engine hooks the shadow, and this registry copies what the shadow holds into the
/// method around each install and removal. The shadow holds the method's implementation
/// while no hook is installed and the engine's closure while one is. Another swizzler's
/// implementation, found in the method at the next install, gets a new shadow holding it:
/// the engine then hooks a new slot, so their function becomes the original of a closure of
/// its own, while the old closure, which they may call as their original, stays as it was
/// (a pass-through, or running the hooks installed before).
///
/// Shadows, closures and forwarders are kept for the life of the process: the runtime can
/// call a closure it once held at any later time.
final class MethodRegistry: Sendable {
    static let shared = MethodRegistry()

    /// A hooked method and the shadow that stands for it in the engine.
    final class Method: @unchecked Sendable {
        // Sendable: `closures` is touched only under the registry's lock; the rest is constant.
        let method: OpaquePointer
        let shadow: UnsafeMutablePointer<Atomic<UInt>>
        /// Every closure the engine has written into this shadow.
        var closures: Set<UInt> = []

        init(method: OpaquePointer, implementation: UInt) {
            self.method = method
            shadow = .allocate(capacity: 1)
            shadow.initialize(to: Atomic(implementation))
        }

        /// What the shadow holds now (the engine writes it under its own lock).
        var shadowValue: UInt { shadow.pointee.load(ordering: .acquiring) }
    }

    private struct State {
        var methods: [OpaquePointer: Method] = [:]
        /// Shadows replaced by newer ones, kept: the engine's entries and closures for them
        /// refer to their memory for the life of the process.
        var replaced: [Method] = []
        /// The forwarders added to classes for inherited methods, by class and selector.
        var forwarders: [ForwarderKey: SuperForwarder] = [:]
    }

    private struct ForwarderKey: Hashable {
        let cls: OpaquePointer
        let selector: OpaquePointer
    }

    private let state = Locked(State())

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

    /// Installs `block` at `position` on the method `selector` of `target.cls` (a metaclass
    /// for a class method).
    func install(
        _ target: Target, signature given: Signature?, position: HookPosition, options: HookOptions,
        block: @escaping @Sendable (borrowing Invocation) -> Void,
        checking check: (Signature, String) throws(ObjCHookError) -> Void = { _, _ in }
    ) throws(ObjCHookError) -> HookToken {
        let runtime = target.runtime
        guard let selector = runtime.selector(target.selector) else {
            throw target.failure(.selectorNotFound, "the runtime cannot register this selector")
        }
        guard let found = runtime.instanceMethod(of: target.cls, selector: selector) else {
            throw target.failure(.selectorNotFound, "the class has no method for this selector and inherits none")
        }
        guard let encoding = runtime.typeEncoding(of: found) else {
            throw target.failure(.invalidSignature, "the runtime records no type encoding for the method")
        }
        let signature: Signature
        do {
            signature = try Signature(encoding)
        } catch {
            throw target.failure(.invalidSignature, "its type encoding cannot be parsed: \(error)", encoding: encoding)
        }
        if let given, given.abiKey != signature.abiKey {
            throw target.failure(
                .signatureMismatch,
                "the signature given, \"\(given.encoding)\", does not describe the method's types, \"\(signature.encoding)\"",
                encoding: encoding)
        }
        guard signature.argumentTypes.count >= 2 else {
            throw target.failure(
                .invalidSignature, "a method's encoding lists at least self and _cmd; this one has fewer",
                encoding: encoding)
        }
        try check(signature, encoding)
        let interface: CallInterface
        do {
            interface = try CallInterface.shared(for: signature)
        } catch {
            throw target.failure(
                .invalidSignature, "libffi cannot pass one of its types: \(error)", encoding: encoding,
                hookError: HookError(
                    code: .invalidSignature, message: "\(error)", signature: signature, callInterfaceError: error))
        }
        return try state.withLock { (state: inout State) throws(ObjCHookError) -> HookToken in
            var method = found
            if !runtime.defines(target.cls, found) {
                method = try Self.addForwarder(
                    target, selector: selector, encoding: encoding, interface: interface, state: &state)
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
                hooked = Method(method: method, implementation: current)
                if let replaced = state.methods.updateValue(hooked, forKey: method) {
                    state.replaced.append(replaced)
                }
            }
            let record: HookRecord
            do throws(HookError) {
                record = try SlotRegistry.shared.install(
                    slot: UnsafeMutableRawPointer(hooked.shadow), signature: signature, position: position,
                    options: options, block: block)
            } catch {
                throw target.failure(.hookFailed, error.message, encoding: encoding, hookError: error)
            }
            let closure = hooked.shadowValue
            hooked.closures.insert(closure)
            if runtime.implementation(of: method) != closure {
                runtime.setImplementation(of: method, to: closure)
            }
            return HookToken(record) { [self] in restore(hooked, runtime: runtime) }
        }
    }

    /// After a removal: gives the method what its shadow holds now (its original, once the
    /// last hook is gone), but only while the method still holds one of this module's
    /// closures. An implementation someone else installed since stays.
    private func restore(_ hooked: Method, runtime: ObjCRuntime) {
        state.withLock { state in
            // A shadow replaced since (someone else's implementation was found in the method)
            // no longer stands for the method.
            guard state.methods[hooked.method] === hooked else { return }
            let current = runtime.implementation(of: hooked.method)
            let shadow = hooked.shadowValue
            if current != shadow && hooked.closures.contains(current) {
                runtime.setImplementation(of: hooked.method, to: shadow)
            }
        }
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
            guard
                let forwarder = SuperForwarder.make(
                    interface: interface, runtime: runtime, superclass: superclass, selector: selector),
                let code = forwarder.code
            else {
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
