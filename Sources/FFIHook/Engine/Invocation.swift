internal import CFFIHookSupport

/// A view of one hooked call, lent to a block for the duration of the block.
///
/// Reads and writes are checked against the slot's signature: an argument index out of
/// range, or a Swift type whose size differs from the C type's, stops the program with a
/// message naming the index, the C type and the Swift type. A value written with
/// ``setArgument(_:to:)`` is what later blocks and the original see; one written with
/// ``setReturnValue(_:)`` is what the caller receives unless a later block replaces it.
///
/// An `Invocation` cannot be copied or kept: it exists only inside the block's call, on the
/// thread that made the call.
///
/// The caller finds in `errno` what the blocks and the original leave there; the library's
/// own work on the call path leaves it alone. An instead block that fails the call without
/// the original sets `errno` as the C function would (`errno = EACCES`) and the caller sees
/// it; after blocks see the original's `errno`, which reaches the caller unless one of them
/// sets another (see <doc:TestingWithHooks>).
public struct Invocation: ~Copyable {
    @usableFromInline let frame: CallFrame
    /// Where the running block is installed.
    public let position: HookPosition
    let insteadIndex: Int

    init(frame: CallFrame, position: HookPosition, insteadIndex: Int) {
        self.frame = frame
        self.position = position
        self.insteadIndex = insteadIndex
    }

    /// The signature of the hooked slot.
    public var signature: Signature { frame.entry.signature }

    /// The number of arguments of the call.
    public var argumentCount: Int { frame.argumentSizes.count }

    /// Whether this call reached the slot from inside one of its own blocks on this thread.
    public var isReentrant: Bool { frame.reentered }

    // MARK: - Arguments

    /// The value of argument `index`, read as `T`.
    ///
    /// - Precondition: `index` is a valid argument index and `T` has the argument's size
    ///   (a pointer's size for an array argument).
    public func argument<T: BitwiseCopyable>(_ index: Int, as type: T.Type = T.self) -> T {
        loadValue(T.self, from: argumentStorage(index, checking: T.self))
    }

    /// Replaces argument `index` for the blocks that follow and the original.
    ///
    /// - Precondition: as for ``argument(_:as:)``.
    public func setArgument<T: BitwiseCopyable>(_ index: Int, to value: T) {
        argumentStorage(index, checking: T.self).storeBytes(of: value, as: T.self)
    }

    /// Lends argument `index`'s bytes (the C type's size) for reading and writing, for
    /// aggregates that have no single Swift type.
    ///
    /// - Precondition: `index` is a valid argument index.
    public func withUnsafeArgument<Result, Failure: Error>(
        _ index: Int, _ body: (UnsafeMutableRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        checkIndex(index)
        return try body(UnsafeMutableRawBufferPointer(start: frame.arguments[index], count: frame.argumentSizes[index]))
    }

    // MARK: - Return value

    /// The return value as it stands: the original's result in an after block, whatever an
    /// earlier block set, zero in an instead block that has not called the original.
    ///
    /// - Precondition: the return type is not void and `T` has its size.
    public func returnValue<T: BitwiseCopyable>(as type: T.Type = T.self) -> T {
        loadValue(T.self, from: returnStorage(checking: T.self))
    }

    /// Sets the value the caller receives.
    ///
    /// - Precondition: as for ``returnValue(as:)``.
    public func setReturnValue<T: BitwiseCopyable>(_ value: T) {
        let storage = returnStorage(checking: T.self)
        if frame.returnWidening.width > 0 {
            // libffi closures return integers narrower than a word widened to one, as the
            // compilers expect of a callee; `T` has the C type's size, under a word.
            var bits: UInt64 = 0
            withUnsafeMutableBytes(of: &bits) { $0.storeBytes(of: value, as: T.self) }
            storeSmallReturnValue(bits, byteCount: MemoryLayout<T>.size)
        } else {
            storage.storeBytes(of: value, as: T.self)
        }
    }

    /// Lends the return value's bytes (the C type's size) for reading and writing.
    ///
    /// - Precondition: the return type is not void.
    public func withUnsafeReturnValue<Result, Failure: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        precondition(frame.returnSize >= 0, "the hooked signature \"\(signature)\" returns void")
        return try body(UnsafeMutableRawBufferPointer(start: frame.returnValue, count: frame.returnSize))
    }

    // MARK: - The original

    /// Runs the next instead block inward, or the original function when this is the
    /// innermost, with the current arguments; its result becomes the return value.
    ///
    /// On a slot that held NULL when the instead hook filled it, and that has no fallback
    /// (see ``FunctionSlot/withFallback(_:)``), there is no original: the innermost call sets
    /// the return value to zero (every byte of a structure or union) and calls nothing.
    ///
    /// - Precondition: called from an instead block.
    public func callOriginal() {
        precondition(position == .instead, "callOriginal() is for instead blocks; this is a \(position) block")
        continuation.callOriginal()
    }

    // MARK: - Calling other functions

    /// Calls `function`, which must have the slot's signature, with the call's current
    /// arguments, and discards its result (for lifecycle dispatch to components).
    package func callDiscardingResult(_ function: UnsafeRawPointer) {
        let arguments = frame.arguments
        frame.interface._withUnsafeGuaranteedRef { interface in
            withUnsafeTemporaryAllocation(byteCount: max(interface.returnBufferSize, 16), alignment: 16) { scratch in
                interface.call(function, returnValue: scratch.baseAddress, argumentList: arguments)
            }
        }
    }

    // MARK: - Raw access for typed blocks

    /// libffi's argument list of the call (one pointer per argument).
    @inlinable
    package var argumentList: UnsafeMutablePointer<UnsafeMutableRawPointer?> { frame.arguments }

    /// The return-value buffer of the call (`nil` for void).
    @inlinable
    package var returnBuffer: UnsafeMutableRawPointer? { frame.returnValue }

    /// Stores a return value of fewer than 8 bytes already checked against the signature,
    /// given as its bytes in the low end of `bits`: an integer widened to a word as libffi
    /// closures return it, a `float` as its 4 bytes.
    func storeSmallReturnValue(_ bits: UInt64, byteCount: Int) {
        frame.returnWidening.store(bits, byteCount: byteCount, into: frame.returnValue!)
    }

    /// A copyable handle that continues this instead block's call inward, for typed blocks
    /// that hand the original to user code as a closure.
    @usableFromInline
    package var continuation: InsteadContinuation {
        InsteadContinuation(frame: frame, insteadIndex: insteadIndex)
    }

    // MARK: - Checks

    // The checks read sizes the slot entry prepared: touching the signature here would
    // retain shared objects on every access. The signature is read only for the messages.

    private func checkIndex(_ index: Int) {
        precondition(
            index >= 0 && index < frame.argumentSizes.count,
            "argument index \(index) is out of range for signature \"\(signature)\" with \(argumentCount) arguments")
    }

    private func argumentStorage<T>(_ index: Int, checking: T.Type) -> UnsafeMutableRawPointer {
        checkIndex(index)
        let size = frame.argumentSizes[index]
        precondition(
            MemoryLayout<T>.size == size,
            "argument \(index) of \"\(signature)\" is \(signature.argumentTypes[index]) (\(size) bytes), not \(T.self) (\(MemoryLayout<T>.size) bytes)"
        )
        return frame.arguments[index]!
    }

    private func returnStorage<T>(checking: T.Type) -> UnsafeMutableRawPointer {
        precondition(frame.returnSize >= 0, "the hooked signature \"\(signature)\" returns void")
        precondition(
            MemoryLayout<T>.size == frame.returnSize,
            "the return value of \"\(signature)\" is \(signature.returnType) (\(frame.returnSize) bytes), not \(T.self) (\(MemoryLayout<T>.size) bytes)"
        )
        return frame.returnValue!
    }
}

/// Continues an instead block's call inward (see ``Invocation/callOriginal()``).
@usableFromInline
package struct InsteadContinuation {
    let frame: CallFrame
    let insteadIndex: Int

    /// Runs the next instead block inward, or the original.
    @usableFromInline
    package func callOriginal() {
        #if DEBUG
            // From a block: the library's own code until the next block or the original.
            ffh_thread_set_busy(frame.threadRecord, 1)
            frame.proceed(after: insteadIndex)
            ffh_thread_set_busy(frame.threadRecord, 0)
        #else
            frame.proceed(after: insteadIndex)
        #endif
    }
}
