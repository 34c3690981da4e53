public import FFIHook

/// Per-instance hooks: blocks that run for one object's messages only.
///
/// ```swift
/// let token = try ObjCHook.before(on: ObjCObject(counter), "add:to:") { call in
///     print("this counter adds", call.argument(2, as: Int32.self))
/// }
/// ```
///
/// The object is moved to a subclass made at run time for its class (one per class, reused),
/// as Aspects does: other instances keep their class and never reach the hooks. The
/// subclass's `-class` reports the class the object reported before, and when the object's
/// last hook of its own is removed it gets its class back. An object deallocated with hooks
/// of its own takes them with it (their tokens' `remove()` then returns false).
///
/// Key-value observing keeps working in either order: observation added after the hooks,
/// or before them, and removed in any order, every change notification is delivered and
/// every hook runs (the library follows GNUstep's observer registration to put the object
/// back on a subclass of its own after observation changes its class).
///
/// Per-instance hooks and class-wide hooks (``ObjCHook/before(on:signature:options:_:)``)
/// on the same method compose: the object's own hooks run around everything the class's
/// hooks do (its before blocks first, its after blocks last, its instead blocks outermost).
///
/// A ``/FFIHook/HookOptions/once`` hook runs for the object's first message and then stays inert
/// until its token is removed or the object is deallocated.
///
/// Re-entry is counted per object: a block that sends the method's message to another
/// object of the class runs that object's hooks, while the same message sent to its own
/// object from inside one of its blocks is re-entry (its blocks run again only with
/// ``/FFIHook/HookOptions/allowsReentry``). Class-wide hooks count re-entry per method, as
/// every slot does.
extension ObjCHook {
    /// Installs `block` at `position` around `object`'s method `selector`, for that object
    /// alone.
    ///
    /// - Parameters:
    ///   - object: the object.
    ///   - selector: the selector of an instance method the object's class has or inherits.
    ///   - signature: the method's signature, when the caller wants it checked (see
    ///     ``install(on:signature:position:options:_:)``).
    ///   - position: before, instead of, or after the method's implementation.
    ///   - options: ``/FFIHook/HookOptions/once``, ``/FFIHook/HookOptions/allowsReentry``.
    ///   - block: runs with a view of each of the object's messages (self is argument 0,
    ///     `_cmd` argument 1).
    /// - Returns: the token that removes the hook.
    /// - Throws: ``ObjCHookError`` as ``install(on:signature:position:options:_:)`` does, and
    ///   when the runtime cannot make the subclass.
    public static func install(
        on object: ObjCObject, _ selector: String, signature: Signature? = nil, position: HookPosition,
        options: HookOptions = [], _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(ObjCHookError) -> HookToken {
        try MethodRegistry.shared.installInstance(
            object: object.address, selector: selector, signature: signature, position: position, options: options,
            block: block)
    }

    /// Installs a block that runs before `object`'s method (see
    /// ``install(on:_:signature:position:options:_:)``).
    public static func before(
        on object: ObjCObject, _ selector: String, signature: Signature? = nil, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(ObjCHookError) -> HookToken {
        try install(on: object, selector, signature: signature, position: .before, options: options, block)
    }

    /// Installs a block that runs instead of `object`'s method (see
    /// ``install(on:_:signature:position:options:_:)``).
    public static func instead(
        on object: ObjCObject, _ selector: String, signature: Signature? = nil, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(ObjCHookError) -> HookToken {
        try install(on: object, selector, signature: signature, position: .instead, options: options, block)
    }

    /// Installs a block that runs after `object`'s method (see
    /// ``install(on:_:signature:position:options:_:)``).
    public static func after(
        on object: ObjCObject, _ selector: String, signature: Signature? = nil, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(ObjCHookError) -> HookToken {
        try install(on: object, selector, signature: signature, position: .after, options: options, block)
    }
}

/// Typed per-instance hooks: as the typed class-wide forms
/// (``ObjCHook/before(on:arguments:returning:options:_:)``), for one object.
extension ObjCHook {
    /// Runs `block` with the receiver and the arguments before `object`'s method.
    public static func before<each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        on object: ObjCObject, _ selector: String, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [], _ block: @escaping @Sendable (ObjCObject, repeat each Argument) -> Void
    ) throws(ObjCHookError) -> HookToken {
        try installTyped(
            on: object, selector, repeat each arguments, returning: Result.self, position: .before, options: options,
            MethodBlock.reading(repeat each arguments, block: block))
    }

    /// Runs `block` after `object`'s method with the receiver, its result and the arguments;
    /// what the block returns is what the sender receives.
    public static func after<each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        on object: ObjCObject, _ selector: String, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [],
        _ block: @escaping @Sendable (ObjCObject, Result, repeat each Argument) -> Result
    ) throws(ObjCHookError) -> HookToken {
        try installTyped(
            on: object, selector, repeat each arguments, returning: Result.self, position: .after, options: options,
            MethodBlock.after(repeat each arguments, block: block))
    }

    /// Runs `block` after `object`'s method that returns `void`, with the receiver and the
    /// arguments.
    public static func after<each Argument: BitwiseCopyable>(
        on object: ObjCObject, _ selector: String, arguments: repeat (each Argument).Type, options: HookOptions = [],
        _ block: @escaping @Sendable (ObjCObject, repeat each Argument) -> Void
    ) throws(ObjCHookError) -> HookToken {
        try installTyped(
            on: object, selector, repeat each arguments, returning: Void.self, position: .after, options: options,
            MethodBlock.reading(repeat each arguments, block: block))
    }

    /// Runs `block` in place of `object`'s method, with the original to call (see
    /// ``instead(on:arguments:returning:options:_:)-9xdeu``).
    public static func instead<each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        on object: ObjCObject, _ selector: String, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [],
        _ block:
            @escaping @Sendable (
                _ original: (repeat each Argument) -> Result, _ receiver: ObjCObject, repeat each Argument
            ) -> Result
    ) throws(ObjCHookError) -> HookToken {
        try installTyped(
            on: object, selector, repeat each arguments, returning: Result.self, position: .instead, options: options,
            MethodBlock.instead(repeat each arguments, block: block))
    }

    /// Runs `block` in place of `object`'s method of one argument, with the original to call:
    /// the form the compiler picks for one argument type, which infers a block of a single
    /// expression (`{ original, receiver, x in original(x) + 5 }`).
    public static func instead<A0: BitwiseCopyable, Result: BitwiseCopyable>(
        on object: ObjCObject, _ selector: String, arguments a0: A0.Type, returning: Result.Type,
        options: HookOptions = [],
        _ block: @escaping @Sendable (_ original: (A0) -> Result, _ receiver: ObjCObject, A0) -> Result
    ) throws(ObjCHookError) -> HookToken {
        try installTyped(
            on: object, selector, a0, returning: Result.self, position: .instead, options: options,
            MethodBlock.instead(a0, block: block))
    }

    private static func installTyped<each Argument, Result>(
        on object: ObjCObject, _ selector: String, _ arguments: repeat (each Argument).Type, returning: Result.Type,
        position: HookPosition, options: HookOptions, _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(ObjCHookError) -> HookToken {
        try MethodRegistry.shared.installInstance(
            object: object.address, selector: selector, signature: nil, position: position, options: options,
            block: block
        ) { (signature: Signature, encoding: String) throws(ObjCHookError) in
            try checkTypes(
                signature, encoding: encoding, repeat each arguments, returning: Result.self,
                failure: {
                    ObjCHookError(
                        code: $0, message: $1, className: object.reportedClass?.name, selector: selector,
                        encoding: $2, hookError: $3)
                })
        }
    }
}
