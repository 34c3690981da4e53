/// Typed hooks: blocks that receive the arguments as Swift values.
///
/// The block's parameter types are checked against the C signature when the hook is
/// installed, so a block cannot read an `int` as a `double`:
///
/// ```swift
/// try Hook.before(on: slot, arguments: Int32.self, Int32.self, returning: Int32.self) { a, b in
///     print("add(\(a), \(b))")
/// }
/// try Hook.instead(on: slot, arguments: Int32.self, Int32.self, returning: Int32.self) { original, a, b in
///     original(a, b) * 2
/// }
/// ```
///
/// For a function of one argument, `instead` has forms of one generic parameter, which the
/// compiler picks: over a parameter pack of one, it did not infer a block of one expression
/// (`{ original, x in original(x) - 10 }`: "cannot pass value pack expansion to non-pack
/// parameter").
///
/// With ``CEncodable`` types the signature is derived from the Swift types. For types with no
/// single encoding (an imported C struct) pass the signature; each Swift type must then have
/// its C type's size and no stricter alignment, and standard-library scalars must agree in
/// kind (integer or floating point).
extension Hook {
    // MARK: - Signature derived from the Swift types

    /// Runs `block` with the arguments before the original.
    @inlinable
    public static func before<each Argument: CEncodable, Result: CEncodable>(
        on slot: FunctionSlot, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [], _ block: @escaping @Sendable (repeat each Argument) -> Void
    ) throws(HookError) -> HookToken {
        let signature = try derivedSignature(Result.typeEncoding, repeat each arguments)
        return try install(
            on: slot, signature: signature, position: .before, options: options,
            TypedBlock.reading(repeat each arguments, block: block))
    }

    /// Runs `block` with the arguments before the original, for a function returning void.
    @inlinable
    public static func before<each Argument: CEncodable>(
        on slot: FunctionSlot, arguments: repeat (each Argument).Type,
        options: HookOptions = [], _ block: @escaping @Sendable (repeat each Argument) -> Void
    ) throws(HookError) -> HookToken {
        let signature = try derivedSignature("v", repeat each arguments)
        return try install(
            on: slot, signature: signature, position: .before, options: options,
            TypedBlock.reading(repeat each arguments, block: block))
    }

    /// Runs `block` after the original with its result and the arguments; what the block
    /// returns is what the caller receives.
    @inlinable
    public static func after<each Argument: CEncodable, Result: CEncodable>(
        on slot: FunctionSlot, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [], _ block: @escaping @Sendable (Result, repeat each Argument) -> Result
    ) throws(HookError) -> HookToken {
        let signature = try derivedSignature(Result.typeEncoding, repeat each arguments)
        return try install(
            on: slot, signature: signature, position: .after, options: options,
            TypedBlock.after(repeat each arguments, block: block))
    }

    /// Runs `block` after the original with the arguments, for a function returning void.
    @inlinable
    public static func after<each Argument: CEncodable>(
        on slot: FunctionSlot, arguments: repeat (each Argument).Type,
        options: HookOptions = [], _ block: @escaping @Sendable (repeat each Argument) -> Void
    ) throws(HookError) -> HookToken {
        let signature = try derivedSignature("v", repeat each arguments)
        return try install(
            on: slot, signature: signature, position: .after, options: options,
            TypedBlock.reading(repeat each arguments, block: block))
    }

    /// Runs `block` in place of the original. The block receives the original (the next
    /// instead block inward, or the function itself), to call with any arguments it likes,
    /// and the arguments; what it returns is what the caller receives.
    ///
    /// A function of one argument gets the form of one generic parameter instead
    /// (``instead(on:arguments:returning:options:_:)-(_,A0.Type,_,_,_)``): with the argument
    /// types as a parameter pack of one, the compiler does not infer a block made of a single
    /// expression, `{ original, x in original(x) + 5 }`.
    @inlinable
    public static func instead<each Argument: CEncodable, Result: CEncodable>(
        on slot: FunctionSlot, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [],
        _ block: @escaping @Sendable (_ original: (repeat each Argument) -> Result, repeat each Argument) -> Result
    ) throws(HookError) -> HookToken {
        let signature = try derivedSignature(Result.typeEncoding, repeat each arguments)
        return try install(
            on: slot, signature: signature, position: .instead, options: options,
            TypedBlock.instead(repeat each arguments, block: block))
    }

    /// Runs `block` in place of the original, for a function of one argument. The block
    /// receives the original, to call with any argument it likes, and the argument; what it
    /// returns is what the caller receives.
    ///
    /// The compiler picks this form for one argument type over the parameter-pack form, and
    /// infers a block of a single expression: `{ original, x in original(x) + 5 }`.
    @inlinable
    public static func instead<A0: CEncodable, Result: CEncodable>(
        on slot: FunctionSlot, arguments a0: A0.Type, returning: Result.Type, options: HookOptions = [],
        _ block: @escaping @Sendable (_ original: (A0) -> Result, A0) -> Result
    ) throws(HookError) -> HookToken {
        let signature = try derivedSignature(Result.typeEncoding, a0)
        return try install(
            on: slot, signature: signature, position: .instead, options: options, TypedBlock.instead(a0, block: block))
    }

    /// Runs `block` in place of the original, for a function returning void.
    @inlinable
    public static func instead<each Argument: CEncodable>(
        on slot: FunctionSlot, arguments: repeat (each Argument).Type, options: HookOptions = [],
        _ block: @escaping @Sendable (_ original: (repeat each Argument) -> Void, repeat each Argument) -> Void
    ) throws(HookError) -> HookToken {
        let signature = try derivedSignature("v", repeat each arguments)
        return try install(
            on: slot, signature: signature, position: .instead, options: options,
            TypedBlock.instead(repeat each arguments, block: block))
    }

    /// Runs `block` in place of the original, for a function of one argument returning void
    /// (the form the compiler picks for one argument type: see
    /// ``instead(on:arguments:returning:options:_:)-(_,A0.Type,_,_,_)``).
    @inlinable
    public static func instead<A0: CEncodable>(
        on slot: FunctionSlot, arguments a0: A0.Type, options: HookOptions = [],
        _ block: @escaping @Sendable (_ original: (A0) -> Void, A0) -> Void
    ) throws(HookError) -> HookToken {
        let signature = try derivedSignature("v", a0)
        return try install(
            on: slot, signature: signature, position: .instead, options: options, TypedBlock.instead(a0, block: block))
    }

    // MARK: - Signature given, Swift types checked against it

    /// Runs `block` with the arguments before the original; the Swift types are checked
    /// against `signature` (use `Void.self` as `returning` for a void function).
    @inlinable
    public static func before<each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        on slot: FunctionSlot, signature: Signature, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [], _ block: @escaping @Sendable (repeat each Argument) -> Void
    ) throws(HookError) -> HookToken {
        try check(signature, slot: slot, repeat each arguments, returning: Result.self)
        return try install(
            on: slot, signature: signature, position: .before, options: options,
            TypedBlock.reading(repeat each arguments, block: block))
    }

    /// Runs `block` after the original; the Swift types are checked against `signature`.
    @inlinable
    public static func after<each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        on slot: FunctionSlot, signature: Signature, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [], _ block: @escaping @Sendable (Result, repeat each Argument) -> Result
    ) throws(HookError) -> HookToken {
        try check(signature, slot: slot, repeat each arguments, returning: Result.self)
        return try install(
            on: slot, signature: signature, position: .after, options: options,
            TypedBlock.after(repeat each arguments, block: block))
    }

    /// Runs `block` in place of the original; the Swift types are checked against `signature`.
    @inlinable
    public static func instead<each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        on slot: FunctionSlot, signature: Signature, arguments: repeat (each Argument).Type, returning: Result.Type,
        options: HookOptions = [],
        _ block: @escaping @Sendable (_ original: (repeat each Argument) -> Result, repeat each Argument) -> Result
    ) throws(HookError) -> HookToken {
        try check(signature, slot: slot, repeat each arguments, returning: Result.self)
        return try install(
            on: slot, signature: signature, position: .instead, options: options,
            TypedBlock.instead(repeat each arguments, block: block))
    }

    /// Runs `block` in place of the original, for a function of one argument; the Swift types
    /// are checked against `signature` (the form the compiler picks for one argument type:
    /// see ``instead(on:arguments:returning:options:_:)-(_,A0.Type,_,_,_)``).
    @inlinable
    public static func instead<A0: BitwiseCopyable, Result: BitwiseCopyable>(
        on slot: FunctionSlot, signature: Signature, arguments a0: A0.Type, returning: Result.Type,
        options: HookOptions = [], _ block: @escaping @Sendable (_ original: (A0) -> Result, A0) -> Result
    ) throws(HookError) -> HookToken {
        try check(signature, slot: slot, a0, returning: Result.self)
        return try install(
            on: slot, signature: signature, position: .instead, options: options, TypedBlock.instead(a0, block: block))
    }
}

// MARK: - Machinery

extension Hook {
    @usableFromInline
    static func derivedSignature<each Argument: CEncodable>(
        _ returnEncoding: String, _ arguments: repeat (each Argument).Type
    ) throws(HookError) -> Signature {
        var encoding = returnEncoding
        for argument in repeat each arguments { encoding += argument.typeEncoding }
        do {
            return try Signature(encoding)
        } catch {
            // Every CEncodable encoding is valid; this is unreachable.
            preconditionFailure("derived encoding \(encoding) did not parse: \(error)")
        }
    }

    /// Checks Swift types against `signature`: count, size and alignment, and the kind of
    /// standard-library scalars.
    @usableFromInline
    static func check<each Argument, Result>(
        _ signature: Signature, slot: FunctionSlot? = nil, symbol: String? = nil,
        _ arguments: repeat (each Argument).Type, returning: Result.Type
    ) throws(HookError) {
        do {
            try signature.checkSwiftTypes(repeat each arguments, returning: Result.self)
        } catch {
            var failure = HookError(slot: slot?.address, signature: signature, rejectedBecause: error)
            failure.symbol = symbol
            throw failure
        }
    }
}

/// Turns typed blocks into blocks over an ``Invocation``, for every kind of target (a slot,
/// an import-table symbol). Types were checked at install time, so no check runs per call.
@usableFromInline
enum TypedBlock {
    /// A block that reads the arguments (a before block, or an after block of a void function).
    @inlinable
    static func reading<each Argument: BitwiseCopyable>(
        _ arguments: repeat (each Argument).Type, block: @escaping @Sendable (repeat each Argument) -> Void
    ) -> @Sendable (borrowing Invocation) -> Void {
        { call in
            var reader = ArgumentCursor(call.argumentList)
            block(repeat reader.next((each Argument).self))
        }
    }

    /// An after block that gets the result and the arguments and returns the result.
    @inlinable
    static func after<each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        _ arguments: repeat (each Argument).Type, block: @escaping @Sendable (Result, repeat each Argument) -> Result
    ) -> @Sendable (borrowing Invocation) -> Void {
        { call in
            // No tuple of the values: a tuple of a pack costs a metadata lookup per call.
            var reader = ArgumentCursor(call.argumentList)
            let result = block(
                ReturnCursor.load(Result.self, from: call.returnBuffer), repeat reader.next((each Argument).self))
            ReturnCursor.store(result, call)
        }
    }

    /// An instead block that gets the original as a Swift closure and the arguments.
    @inlinable
    static func instead<each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        _ arguments: repeat (each Argument).Type,
        block: @escaping @Sendable ((repeat each Argument) -> Result, repeat each Argument) -> Result
    ) -> @Sendable (borrowing Invocation) -> Void {
        { call in
            var reader = ArgumentCursor(call.argumentList)
            let values = (repeat reader.next((each Argument).self))
            let list = call.argumentList
            let returnBuffer = call.returnBuffer
            let continuation = call.continuation
            // The original as a closure written in the call, so that it is known not to
            // escape and its context lives on the stack: one kept in a variable was
            // allocated on every call.
            let result = block(
                { (replacements: repeat each Argument) -> Result in
                    var writer = ArgumentCursor(list)
                    repeat writer.write(each replacements)
                    continuation.callOriginal()
                    return ReturnCursor.load(Result.self, from: returnBuffer)
                }, repeat each values)
            ReturnCursor.store(result, call)
        }
    }
}

// MARK: - CEncodable arguments

/// The blocks of ``TypedBlock`` for arguments of ``CEncodable`` types, which read each one
/// through its type's ``CEncodable/loadUnaligned(from:)``: code compiled for the type, where
/// the generic versions copy each value of the pack through its type's metadata. The
/// overloads are chosen where the argument types are known to be `CEncodable`.
extension TypedBlock {
    /// A block that reads the arguments (see the generic version).
    @inlinable
    static func reading<each Argument: CEncodable>(
        _ arguments: repeat (each Argument).Type, block: @escaping @Sendable (repeat each Argument) -> Void
    ) -> @Sendable (borrowing Invocation) -> Void {
        { call in
            var reader = ArgumentCursor(call.argumentList)
            block(repeat reader.next((each Argument).self))
        }
    }

    /// An after block that gets the result and the arguments (see the generic version).
    @inlinable
    static func after<each Argument: CEncodable, Result: BitwiseCopyable>(
        _ arguments: repeat (each Argument).Type, block: @escaping @Sendable (Result, repeat each Argument) -> Result
    ) -> @Sendable (borrowing Invocation) -> Void {
        { call in
            var reader = ArgumentCursor(call.argumentList)
            let result = block(
                ReturnCursor.load(Result.self, from: call.returnBuffer), repeat reader.next((each Argument).self))
            ReturnCursor.store(result, call)
        }
    }
}

/// Walks libffi's argument list in order, reading or writing one argument per step.
/// Types were checked at install time, so no check runs per call.
@usableFromInline
struct ArgumentCursor {
    @usableFromInline let list: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    @usableFromInline var index = 0

    @inlinable
    init(_ list: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        self.list = list
    }

    @inlinable
    @inline(__always)
    mutating func next<Value: BitwiseCopyable>(_ type: Value.Type) -> Value {
        defer { index += 1 }
        return loadValue(Value.self, from: list[index].unsafelyUnwrapped)
    }

    /// The next argument, read through its type's own code (see ``CEncodable``).
    @inlinable
    @inline(__always)
    mutating func next<Value: CEncodable>(_ type: Value.Type) -> Value {
        defer { index += 1 }
        return Value.loadUnaligned(from: list[index].unsafelyUnwrapped)
    }

    @inlinable
    @inline(__always)
    mutating func write<Value: BitwiseCopyable>(_ value: Value) {
        list[index].unsafelyUnwrapped.storeBytes(of: value, as: Value.self)
        index += 1
    }
}

/// Reads and writes a typed return value; a zero-sized `Result` stands for void.
@usableFromInline
enum ReturnCursor {
    @inlinable
    @inline(__always)
    static func load<Result: BitwiseCopyable>(_ type: Result.Type, from buffer: UnsafeMutableRawPointer?) -> Result {
        if MemoryLayout<Result>.size == 0 {
            return unsafeBitCast((), to: Result.self)
        }
        return loadValue(Result.self, from: buffer.unsafelyUnwrapped)
    }

    /// Stores a result checked against the signature at install: a small one (an integer
    /// narrower than a word, a `float`) as the slot's ``ReturnWidening`` says, inline,
    /// anything else as it is.
    @inlinable
    @inline(__always)
    static func store<Result: BitwiseCopyable>(_ value: Result, _ call: borrowing Invocation) {
        let size = MemoryLayout<Result>.size
        guard size > 0 else { return }
        let buffer = call.returnBuffer.unsafelyUnwrapped
        if size < 8 {
            call.frame.returnWidening.store(bits(of: value), byteCount: size, into: buffer)
        } else {
            buffer.storeBytes(of: value, as: Result.self)
        }
    }

    /// The bytes of a value narrower than a word, in the low end of a word: in registers for
    /// the sizes of integers, through memory for the other sizes.
    @inlinable
    @inline(__always)
    static func bits<Value: BitwiseCopyable>(of value: Value) -> UInt64 {
        switch MemoryLayout<Value>.size {
        case 1: return UInt64(unsafeBitCast(value, to: UInt8.self))
        case 2: return UInt64(unsafeBitCast(value, to: UInt16.self))
        case 4: return UInt64(unsafeBitCast(value, to: UInt32.self))
        default:
            var bits: UInt64 = 0
            withUnsafeMutableBytes(of: &bits) { $0.storeBytes(of: value, as: Value.self) }
            return bits
        }
    }
}
