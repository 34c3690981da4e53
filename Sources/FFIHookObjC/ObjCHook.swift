public import FFIHook

/// Installs hooks on Objective-C methods of the GNU runtime (gcc's `libobjc`, which
/// GNUstep uses).
///
/// ```swift
/// let counter = try ObjCClass(named: "Counter")
/// let token = try ObjCHook.before(on: .instance("add:to:", of: counter)) { call in
///     print("add", call.argument(2, as: Int32.self), "to", call.argument(3, as: Int32.self))
/// }
/// defer { token.remove() }
/// ```
///
/// A method's implementation is a C function whose first two arguments are the receiver
/// (`self`) and the selector (`_cmd`): blocks see them as arguments 0 and 1, and the
/// method's own arguments from 2 on. The signature comes from the method's type encoding as
/// the runtime records it. Hooks of a method share one libffi closure, which becomes the
/// method's implementation; they run as slot hooks do (``/FFIHook/Hook``): before, instead and after
/// blocks, ``/FFIHook/HookOptions/once``, tokens that remove hooks in any order from any thread, no
/// lock and no allocation on a hooked call.
///
/// A hook on a class covers its instances and those of its subclasses that do not override
/// the method. A method the class inherits is hooked for that class (and its subclasses)
/// alone: the class gets a method of its own that sends each call to the superclass's
/// implementation as it is then, so a hook installed on the superclass later runs too (after
/// the subclass's before blocks, before its after blocks). That method stays once the hooks
/// are gone, as a pass-through: the GNU runtime cannot take a method out of a class.
///
/// The runtime is changed once per method, not once per hook: the method's first hook makes
/// the closure its implementation, and the closure stays when the hooks are removed, passing
/// messages through to the implementation it wraps. Installs and removals after that change
/// only the hooks the closure runs: no `method_setImplementation`, no dispatch table
/// replaced, nothing the runtime keeps. ``restoreOriginalImplementation(of:)`` and
/// ``restoreOriginalImplementations()`` give methods without hooks their implementations
/// back. An implementation another swizzler installs later stays; the next hook wraps it in
/// a closure of its own, and the closure they may call as their original keeps working.
public enum ObjCHook {
    /// Installs `block` at `position` around `method`.
    ///
    /// - Parameters:
    ///   - method: an instance or class method of a registered class, its own or inherited.
    ///   - signature: the method's signature, when the caller wants it checked: it must
    ///     describe the types the runtime records (names aside). `nil` takes the runtime's.
    ///   - position: before, instead of, or after the method's implementation.
    ///   - options: ``/FFIHook/HookOptions/once``, ``/FFIHook/HookOptions/allowsReentry``.
    ///   - block: runs with a view of each message (self is argument 0, `_cmd` argument 1),
    ///     on the sending thread, possibly on several threads at once.
    /// - Returns: the token that removes the hook.
    /// - Throws: ``ObjCHookError`` when no runtime is loaded, the class is not registered or
    ///   is a metaclass or a subclass the library made for per-instance hooks (an object's
    ///   ``ObjCObject/dispatchClass`` while it has hooks of its own), a class method's
    ///   metaclass is marked under construction, neither
    ///   the class nor a superclass has a method for the selector, the method's encoding
    ///   cannot be parsed or passed, the signature given disagrees with it, or the engine
    ///   refuses the hook (``ObjCHookError/hookError``). Nothing is installed then.
    public static func install(
        on method: ObjCMethod, signature: Signature? = nil, position: HookPosition, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(ObjCHookError) -> HookToken {
        let target = try method.resolved()
        return try MethodRegistry.shared.install(
            target, signature: signature, position: position, options: options, block: block)
    }

    /// Installs a block that runs before the method (see ``install(on:signature:position:options:_:)``).
    public static func before(
        on method: ObjCMethod, signature: Signature? = nil, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(ObjCHookError) -> HookToken {
        try install(on: method, signature: signature, position: .before, options: options, block)
    }

    /// Installs a block that runs instead of the method (see ``install(on:signature:position:options:_:)``);
    /// `callOriginal()` calls the method's implementation.
    public static func instead(
        on method: ObjCMethod, signature: Signature? = nil, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(ObjCHookError) -> HookToken {
        try install(on: method, signature: signature, position: .instead, options: options, block)
    }

    /// Installs a block that runs after the method (see ``install(on:signature:position:options:_:)``).
    public static func after(
        on method: ObjCMethod, signature: Signature? = nil, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(ObjCHookError) -> HookToken {
        try install(on: method, signature: signature, position: .after, options: options, block)
    }

    /// Whether an Objective-C runtime is loaded in the process (gcc's `libobjc`, linked by
    /// the program or by a library it loaded). Every hook needs one.
    public static var isRuntimeLoaded: Bool { ObjCRuntime.current != nil }
}
