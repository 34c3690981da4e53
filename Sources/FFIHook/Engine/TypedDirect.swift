internal import CFFIHookSupport

/// A typed block in its two forms: an `Invocation` block, which the Swift dispatch runs (and
/// the C call path, where it cannot call the typed block itself), and the typed block as the C
/// call path calls it.
@usableFromInline
package struct TypedHookBlock: Sendable {
    @usableFromInline let block: @Sendable (borrowing Invocation) -> Void
    @usableFromInline let direct: TypedDirect?

    @inlinable
    init(block: @escaping @Sendable (borrowing Invocation) -> Void, direct: TypedDirect?) {
        self.block = block
        self.direct = direct
    }
}

/// A closure kept as a value of a generic type: stored in a field whose type is a generic
/// parameter, a function takes each argument by address and returns its result indirectly,
/// as a generic function's values are passed, whatever the types it was written for.
@usableFromInline
struct TypedHolder<Block>: @unchecked Sendable {
    // Sendable: `Block` is always a `@Sendable` function type.
    @usableFromInline let block: Block

    @inlinable
    init(_ block: Block) { self.block = block }
}

/// A typed block as the C call path calls it itself, without an `Invocation` or the Swift code
/// that reads the arguments from one (see ``SlotEntry/typedBlocksCalledFromC``).
///
/// The user's closure is kept in a ``TypedHolder``, where it takes each value by address: the
/// C path passes the addresses of the call's arguments (and of the result as it stands and of a
/// place for the new one, for an after block) where the closure reads them, and stores what it
/// returns as the Swift code would.
@usableFromInline
package struct TypedDirect: @unchecked Sendable {
    // Sendable: the words are the closure of `owner`, which is Sendable.
    /// The closure's function and context.
    let function: UnsafeRawPointer?
    let context: UnsafeRawPointer?
    let returnsResult: Bool
    let arity: Int
    let resultSize: Int
    /// The struct that holds the closure, which keeps its context alive.
    let owner: any Sendable

    /// A block that reads `arity` arguments.
    @usableFromInline
    init<Holder: Sendable>(reading holder: Holder, arity: Int) {
        self.init(holder, returnsResult: false, arity: arity, resultSize: 0)
    }

    /// An after block of `arity` arguments that returns a result of `resultSize` bytes.
    @usableFromInline
    init?<Holder: Sendable>(result holder: Holder, arity: Int, resultSize: Int) {
        guard resultSize > 0, resultSize <= Int(FFH_SWIFT_BLOCK_MAX_RESULT) else { return nil }
        self.init(holder, returnsResult: true, arity: arity, resultSize: resultSize)
    }

    private init<Holder: Sendable>(_ holder: Holder, returnsResult: Bool, arity: Int, resultSize: Int) {
        precondition(MemoryLayout<Holder>.size == 2 * MemoryLayout<UnsafeRawPointer>.size)
        // The arities the C path has a call for (ffh_typed_call): the fixed-arity typed forms'.
        precondition(arity >= 2 && arity <= Int(FFH_SWIFT_BLOCK_MAX_ARITY))
        (function, context) = unsafeBitCast(holder, to: (UnsafeRawPointer?, UnsafeRawPointer?).self)
        owner = holder
        self.returnsResult = returnsResult
        self.arity = arity
        self.resultSize = resultSize
    }

    /// The C path's record of the block, for a slot whose results widen as `widening` says.
    func block(widening: ReturnWidening) -> ffh_swift_block {
        ffh_swift_block(
            function: function, context: context,
            kind: UInt8(returnsResult ? FFH_SWIFT_BLOCK_RESULT.rawValue : FFH_SWIFT_BLOCK_READING.rawValue),
            arity: UInt8(arity), resultSize: UInt8(resultSize), resultWidth: UInt8(widening.width),
            resultSigned: widening.isSigned ? 1 : 0)
    }
}
