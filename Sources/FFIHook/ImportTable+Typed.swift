/// Typed import-table hooks: blocks that receive the arguments as Swift values, as the
/// typed hooks of a slot do (see ``Hook``).
///
/// ```swift
/// let group = try ImportTable.before(
///     symbol: "strlen", in: .object("libsqlite3.so.0"),
///     arguments: UnsafePointer<CChar>.self, returning: Int.self
/// ) { string in
///     print("strlen(\(String(cString: string)))")
/// }
/// ```
///
/// With ``CEncodable`` types the signature is derived from the Swift types; for other types
/// pass the signature, and the Swift types are checked against it. Everything else is as
/// for ``hook(symbol:in:signature:position:options:_:)``.
extension ImportTable {
    // MARK: - Signature derived from the Swift types

    /// Runs `block` with the arguments before `symbol` as the objects of `scope` call it.
    @inlinable
    public static func before<each Argument: CEncodable, Result: CEncodable>(
        symbol: String, in scope: ImportScope, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [], _ block: @escaping @Sendable (repeat each Argument) -> Void
    ) throws(HookError) -> HookGroupToken {
        try hook(
            symbol: symbol, in: scope, signature: Hook.derivedSignature(Result.typeEncoding, repeat each arguments),
            position: .before, options: options, TypedBlock.reading(repeat each arguments, block: block))
    }

    /// Runs `block` with the arguments before `symbol`, for a function returning void.
    @inlinable
    public static func before<each Argument: CEncodable>(
        symbol: String, in scope: ImportScope, arguments: repeat (each Argument).Type, options: HookOptions = [],
        _ block: @escaping @Sendable (repeat each Argument) -> Void
    ) throws(HookError) -> HookGroupToken {
        try hook(
            symbol: symbol, in: scope, signature: Hook.derivedSignature("v", repeat each arguments),
            position: .before, options: options, TypedBlock.reading(repeat each arguments, block: block))
    }

    /// Runs `block` after `symbol` with its result and the arguments; what the block returns
    /// is what the caller receives.
    @inlinable
    public static func after<each Argument: CEncodable, Result: CEncodable>(
        symbol: String, in scope: ImportScope, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [], _ block: @escaping @Sendable (Result, repeat each Argument) -> Result
    ) throws(HookError) -> HookGroupToken {
        try hook(
            symbol: symbol, in: scope, signature: Hook.derivedSignature(Result.typeEncoding, repeat each arguments),
            position: .after, options: options, TypedBlock.after(repeat each arguments, block: block))
    }

    /// Runs `block` after `symbol` with the arguments, for a function returning void.
    @inlinable
    public static func after<each Argument: CEncodable>(
        symbol: String, in scope: ImportScope, arguments: repeat (each Argument).Type, options: HookOptions = [],
        _ block: @escaping @Sendable (repeat each Argument) -> Void
    ) throws(HookError) -> HookGroupToken {
        try hook(
            symbol: symbol, in: scope, signature: Hook.derivedSignature("v", repeat each arguments),
            position: .after, options: options, TypedBlock.reading(repeat each arguments, block: block))
    }

    /// Runs `block` in place of `symbol`. The block receives the original, to call with any
    /// arguments it likes, and the arguments; what it returns is what the caller receives.
    @inlinable
    public static func instead<each Argument: CEncodable, Result: CEncodable>(
        symbol: String, in scope: ImportScope, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [],
        _ block: @escaping @Sendable (_ original: (repeat each Argument) -> Result, repeat each Argument) -> Result
    ) throws(HookError) -> HookGroupToken {
        try hook(
            symbol: symbol, in: scope, signature: Hook.derivedSignature(Result.typeEncoding, repeat each arguments),
            position: .instead, options: options, TypedBlock.instead(repeat each arguments, block: block))
    }

    /// Runs `block` in place of `symbol`, for a function of one argument: the form the
    /// compiler picks for one argument type, which infers a block of a single expression
    /// (`{ original, x in original(x) + 5 }`), as the parameter-pack form does not.
    @inlinable
    public static func instead<A0: CEncodable, Result: CEncodable>(
        symbol: String, in scope: ImportScope, arguments a0: A0.Type, returning: Result.Type,
        options: HookOptions = [], _ block: @escaping @Sendable (_ original: (A0) -> Result, A0) -> Result
    ) throws(HookError) -> HookGroupToken {
        try hook(
            symbol: symbol, in: scope, signature: Hook.derivedSignature(Result.typeEncoding, a0),
            position: .instead, options: options, TypedBlock.instead(a0, block: block))
    }

    /// Runs `block` in place of `symbol`, for a function of one argument returning void (the
    /// form the compiler picks for one argument type).
    @inlinable
    public static func instead<A0: CEncodable>(
        symbol: String, in scope: ImportScope, arguments a0: A0.Type, options: HookOptions = [],
        _ block: @escaping @Sendable (_ original: (A0) -> Void, A0) -> Void
    ) throws(HookError) -> HookGroupToken {
        try hook(
            symbol: symbol, in: scope, signature: Hook.derivedSignature("v", a0),
            position: .instead, options: options, TypedBlock.instead(a0, block: block))
    }

    /// Runs `block` in place of `symbol`, for a function returning void.
    @inlinable
    public static func instead<each Argument: CEncodable>(
        symbol: String, in scope: ImportScope, arguments: repeat (each Argument).Type, options: HookOptions = [],
        _ block: @escaping @Sendable (_ original: (repeat each Argument) -> Void, repeat each Argument) -> Void
    ) throws(HookError) -> HookGroupToken {
        try hook(
            symbol: symbol, in: scope, signature: Hook.derivedSignature("v", repeat each arguments),
            position: .instead, options: options, TypedBlock.instead(repeat each arguments, block: block))
    }

    // MARK: - Signature given, Swift types checked against it

    /// Runs `block` with the arguments before `symbol`; the Swift types are checked against
    /// `signature` (use `Void.self` as `returning` for a void function).
    @inlinable
    public static func before<each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        symbol: String, in scope: ImportScope, signature: Signature, arguments: repeat (each Argument).Type,
        returning: Result.Type, options: HookOptions = [], _ block: @escaping @Sendable (repeat each Argument) -> Void
    ) throws(HookError) -> HookGroupToken {
        try Hook.check(signature, symbol: symbol, repeat each arguments, returning: Result.self)
        return try hook(
            symbol: symbol, in: scope, signature: signature, position: .before, options: options,
            TypedBlock.reading(repeat each arguments, block: block))
    }

    /// Runs `block` after `symbol`; the Swift types are checked against `signature`.
    @inlinable
    public static func after<each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        symbol: String, in scope: ImportScope, signature: Signature, arguments: repeat (each Argument).Type,
        returning: Result.Type, options: HookOptions = [],
        _ block: @escaping @Sendable (Result, repeat each Argument) -> Result
    ) throws(HookError) -> HookGroupToken {
        try Hook.check(signature, symbol: symbol, repeat each arguments, returning: Result.self)
        return try hook(
            symbol: symbol, in: scope, signature: signature, position: .after, options: options,
            TypedBlock.after(repeat each arguments, block: block))
    }

    /// Runs `block` in place of `symbol`; the Swift types are checked against `signature`.
    @inlinable
    public static func instead<each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        symbol: String, in scope: ImportScope, signature: Signature, arguments: repeat (each Argument).Type,
        returning: Result.Type, options: HookOptions = [],
        _ block: @escaping @Sendable (_ original: (repeat each Argument) -> Result, repeat each Argument) -> Result
    ) throws(HookError) -> HookGroupToken {
        try Hook.check(signature, symbol: symbol, repeat each arguments, returning: Result.self)
        return try hook(
            symbol: symbol, in: scope, signature: signature, position: .instead, options: options,
            TypedBlock.instead(repeat each arguments, block: block))
    }

    /// Runs `block` in place of `symbol`, for a function of one argument; the Swift types are
    /// checked against `signature` (the form the compiler picks for one argument type).
    @inlinable
    public static func instead<A0: BitwiseCopyable, Result: BitwiseCopyable>(
        symbol: String, in scope: ImportScope, signature: Signature, arguments a0: A0.Type, returning: Result.Type,
        options: HookOptions = [], _ block: @escaping @Sendable (_ original: (A0) -> Result, A0) -> Result
    ) throws(HookError) -> HookGroupToken {
        try Hook.check(signature, symbol: symbol, a0, returning: Result.self)
        return try hook(
            symbol: symbol, in: scope, signature: signature, position: .instead, options: options,
            TypedBlock.instead(a0, block: block))
    }
}
