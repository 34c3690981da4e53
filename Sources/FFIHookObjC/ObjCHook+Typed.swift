public import FFIHook

/// Typed hooks on methods: blocks that get the receiver and the method's arguments as Swift
/// values.
///
/// The signature comes from the runtime; the Swift types given are checked against it when
/// the hook is installed (their number, each one's size and alignment, the kind of
/// standard-library scalars), so a block cannot read an `int` as a `double`. The selector
/// (`_cmd`) is left out; the receiver comes first, as an ``ObjCObject``, which prints as
/// `<Counter: 0x…>` (its ``ObjCObject/pointer`` is the `id`). Use `Void.self` as `returning`
/// for a method that returns `void`.
///
/// ```swift
/// let add = ObjCMethod.instance("add:to:", of: try ObjCClass(named: "Counter"))
/// try ObjCHook.before(on: add, arguments: Int32.self, Int32.self, returning: Int32.self) { receiver, a, b in
///     print("add \(a) to \(b)")
/// }
/// try ObjCHook.after(on: add, arguments: Int32.self, Int32.self, returning: Int32.self) { receiver, sum, a, b in
///     sum + 1
/// }
/// ```
extension ObjCHook {
    /// Runs `block` with the receiver and the arguments before the method.
    public static func before<each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        on method: ObjCMethod, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [], _ block: @escaping @Sendable (ObjCObject, repeat each Argument) -> Void
    ) throws(ObjCHookError) -> HookToken {
        try installTyped(
            on: method, repeat each arguments, returning: Result.self, position: .before, options: options,
            MethodBlock.reading(repeat each arguments, block: block))
    }

    /// Runs `block` after the method with the receiver, its result and the arguments; what the
    /// block returns is what the sender receives. For a `void` method, see
    /// ``after(on:arguments:options:_:)``.
    public static func after<each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        on method: ObjCMethod, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [],
        _ block: @escaping @Sendable (ObjCObject, Result, repeat each Argument) -> Result
    ) throws(ObjCHookError) -> HookToken {
        try installTyped(
            on: method, repeat each arguments, returning: Result.self, position: .after, options: options,
            MethodBlock.after(repeat each arguments, block: block))
    }

    /// Runs `block` after a method that returns `void`, with the receiver and the arguments.
    public static func after<each Argument: BitwiseCopyable>(
        on method: ObjCMethod, arguments: repeat (each Argument).Type, options: HookOptions = [],
        _ block: @escaping @Sendable (ObjCObject, repeat each Argument) -> Void
    ) throws(ObjCHookError) -> HookToken {
        try installTyped(
            on: method, repeat each arguments, returning: Void.self, position: .after, options: options,
            MethodBlock.reading(repeat each arguments, block: block))
    }

    /// Runs `block` in place of the method. The block gets the original (the next instead
    /// block inward, or the method's implementation), to call with any arguments it likes
    /// (the receiver and selector stay those of the message), the receiver and the
    /// arguments; what it returns is what the sender receives.
    public static func instead<each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        on method: ObjCMethod, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [],
        _ block:
            @escaping @Sendable (
                _ original: (repeat each Argument) -> Result, _ receiver: ObjCObject, repeat each Argument
            ) -> Result
    ) throws(ObjCHookError) -> HookToken {
        try installTyped(
            on: method, repeat each arguments, returning: Result.self, position: .instead, options: options,
            MethodBlock.instead(repeat each arguments, block: block))
    }

    /// Runs `block` in place of a method of one argument, as the parameter-pack form does: the
    /// form the compiler picks for one argument type, which infers a block of a single
    /// expression, `{ original, receiver, x in original(x) + 5 }` (the pack form's is not).
    public static func instead<A0: BitwiseCopyable, Result: BitwiseCopyable>(
        on method: ObjCMethod, arguments a0: A0.Type, returning: Result.Type, options: HookOptions = [],
        _ block: @escaping @Sendable (_ original: (A0) -> Result, _ receiver: ObjCObject, A0) -> Result
    ) throws(ObjCHookError) -> HookToken {
        try installTyped(
            on: method, a0, returning: Result.self, position: .instead, options: options,
            MethodBlock.instead(a0, block: block))
    }

    /// Checks the Swift types against the method's signature as the runtime records it (with
    /// the receiver and selector as pointers), then installs `block`.
    static func installTyped<each Argument, Result>(
        on method: ObjCMethod, _ arguments: repeat (each Argument).Type, returning: Result.Type,
        position: HookPosition, options: HookOptions, _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(ObjCHookError) -> HookToken {
        let target = try method.resolved()
        return try MethodRegistry.shared.install(
            target, signature: nil, position: position, options: options, block: block
        ) { (signature: Signature, encoding: String) throws(ObjCHookError) in
            try checkTypes(
                signature, encoding: encoding, repeat each arguments, returning: Result.self,
                failure: { target.failure($0, $1, encoding: $2, hookError: $3) })
        }
    }

    /// Checks the Swift types against the method's signature (the receiver and selector as
    /// pointers, then the arguments).
    static func checkTypes<each Argument, Result>(
        _ signature: Signature, encoding: String, _ arguments: repeat (each Argument).Type,
        returning: Result.Type, failure: (ObjCHookError.Code, String, String?, HookError?) -> ObjCHookError
    ) throws(ObjCHookError) {
        // The count first, in the block's terms: the receiver and selector are not types the
        // block's caller gives ("3 arguments given where the signature has 4" read as if three
        // types had been passed).
        var given = 0
        for _ in repeat each arguments { given += 1 }
        let taken = signature.argumentTypes.count - 2
        if given != taken {
            let types = given == 1 ? "1 argument type" : "\(given) argument types"
            throw failure(
                .signatureMismatch,
                "\(types) given where the method takes \(taken) after the receiver and selector "
                    + "(\"\(signature.encoding)\")",
                encoding, nil)
        }
        do throws(CallInterfaceError) {
            try signature.checkSwiftTypes(
                UnsafeRawPointer.self, UnsafeRawPointer.self, repeat each arguments, returning: Result.self)
        } catch {
            throw failure(
                .signatureMismatch,
                "the block's Swift types do not match the method's types, \"\(signature.encoding)\": \(error)",
                encoding,
                HookError(code: .invalidSignature, message: "\(error)", signature: signature, callInterfaceError: error)
            )
        }
    }
}
