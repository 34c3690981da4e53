internal import CFFIHookObjC

// MARK: - Giving methods their implementations back

/// Giving hooked methods their own implementations back.
///
/// A method's first hook makes the engine's closure its implementation, and the closure
/// stays when the hooks go: it passes messages through to the implementation it wraps.
/// Installing and removing hooks after that changes nothing in the runtime (no
/// `method_setImplementation`, no dispatch table replaced). These calls are the one way,
/// besides another swizzler, to change the method again: each gives a method without hooks
/// the implementation its closure wraps (its own, the overriding method that sends messages
/// to the superclass for an inherited one, or another swizzler's implementation that the
/// library found in it), and so costs what a first hook costs: the runtime replaces the
/// dispatch tables of the method's class and its subclasses, and keeps the old ones for the
/// life of the process (see the module's documentation). Call them rarely, when no thread
/// sends the method's messages if that can be arranged: a message racing a replacement of
/// its class's dispatch table is what the rule above avoids.
extension ObjCHook {
    /// Gives `method` its own implementation back if it has no hooks.
    ///
    /// The closure stays alive as a pass-through: code that read it as the method's
    /// implementation may go on calling it. A later hook on the method makes the closure its
    /// implementation again.
    ///
    /// - Returns: true when the method's implementation changed; false when the library
    ///   never hooked `method` for this class (a method hooked on a superclass only is not
    ///   this class's), or the method no longer holds the library's closure (it was given
    ///   back already, or another swizzler has changed it since: theirs stays).
    /// - Throws: ``ObjCHookError`` with ``ObjCHookError/Code-swift.struct/hooksInstalled``
    ///   while hooks are installed on the method (class-wide ones; hooks on single objects
    ///   live on other classes and do not count), and nothing changes; the errors of
    ///   ``install(on:signature:position:options:_:)`` for a method that cannot be found.
    ///   A ``/FFIHook/HookOptions/once`` hook that has run counts as installed until the
    ///   engine has finished its removal (at once, or at the next install or removal when
    ///   another thread held the engine's lock).
    @discardableResult
    public static func restoreOriginalImplementation(of method: ObjCMethod) throws(ObjCHookError) -> Bool {
        do {
            return try MethodRegistry.shared.restoreImplementation(method.resolved())
        } catch {
            var restoring = error
            restoring.restoring = true
            throw restoring
        }
    }

    /// Gives every method the library has hooked, and that has no hooks now, its own
    /// implementation back; methods with hooks are left as they are.
    ///
    /// Covers class-wide hooks' methods and the methods of the classes made for
    /// per-instance hooks (see ``restoreOriginalImplementation(of:)``).
    ///
    /// - Returns: how many methods' implementations changed.
    /// - Throws: ``ObjCHookError`` with ``ObjCHookError/Code-swift.struct/hookFailed`` when
    ///   called from inside an install or removal on this thread (a `+initialize` it set
    ///   off), which would wait for itself.
    @discardableResult
    public static func restoreOriginalImplementations() throws(ObjCHookError) -> Int {
        try MethodRegistry.shared.restoreAllImplementations()
    }

    /// How many times the library has changed the Objective-C runtime's classes on the
    /// calling thread: a method's implementation set, a method added, a class registered.
    /// Installs and removals of hooks after a method's first leave it as it is. Per thread,
    /// so that tests running on other threads at the same time do not disturb a count.
    package static var runtimeChangeCount: Int { Int(ffh_objc_changes_on_this_thread()) }
}

extension MethodRegistry {
    /// What ``restoreLocked(_:runtime:)`` did.
    enum Restoration {
        case restored
        /// The method holds no closure of the shadow's: given back already, or changed by
        /// someone else.
        case notHeld
        case hooked
    }

    /// Gives the method the implementation its shadow holds, when the method holds one of
    /// the shadow's closures and the shadow holds none (no hooks). Under the lock, so no
    /// install comes between the question and the change, nor a foreign
    /// `method_setImplementation` (it takes the runtime's lock, held here).
    static func restoreLocked(_ hooked: Method, runtime: ObjCRuntime) -> Restoration {
        guard hooked.closures.contains(runtime.implementation(of: hooked.method)) else { return .notHeld }
        let shadow = hooked.shadowValue
        // The engine writes the original back into the shadow when the last hook goes.
        guard !hooked.closures.contains(shadow) else { return .hooked }
        runtime.setImplementation(of: hooked.method, in: hooked.owner, to: shadow)
        return .restored
    }

    /// See ``ObjCHook/restoreOriginalImplementation(of:)``.
    func restoreImplementation(_ target: Target) throws(ObjCHookError) -> Bool {
        let runtime = target.runtime
        guard let selector = runtime.selector(target.selector) else {
            throw target.failure(.selectorNotFound, ObjCHookError.unregistrable(selector: target.selector))
        }
        try refuseReentry { target.failure($0, $1) }
        return try state.withLock { (state: inout State) throws(ObjCHookError) -> Bool in
            guard let method = runtime.instanceMethod(of: target.cls, selector: selector) else {
                throw target.failure(.selectorNotFound, "the class has no method for this selector and inherits none")
            }
            // An inherited method that was never hooked for this class is the superclass's.
            guard runtime.defines(target.cls, method), let hooked = state.methods[method] else { return false }
            switch Self.restoreLocked(hooked, runtime: runtime) {
            case .restored: return true
            case .notHeld: return false
            case .hooked:
                throw target.failure(
                    .hooksInstalled,
                    "hooks are installed on the method; its implementation is given back once their tokens are removed"
                )
            }
        }
    }

    /// See ``ObjCHook/restoreOriginalImplementations()``.
    func restoreAllImplementations() throws(ObjCHookError) -> Int {
        guard let runtime = ObjCRuntime.current else { return 0 }
        try refuseReentry { ObjCHookError(code: $0, message: $1) }
        return state.withLock { state in
            state.methods.values.reduce(0) { count, hooked in
                count + (Self.restoreLocked(hooked, runtime: runtime) == .restored ? 1 : 0)
            }
        }
    }
}
