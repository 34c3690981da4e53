/// How a closure hands back a result narrower than a word, worked out once per signature.
///
/// libffi closures return an integer narrower than a word widened to one by its C type's
/// signedness, as the compilers expect of a callee; any other result narrower than a word
/// (a `float`, a small struct) is stored as its bytes. Typed blocks read it from the slot's
/// entry and store their result inline, in the module that installs them.
@usableFromInline
struct ReturnWidening: Sendable {
    /// The integer result's width in bits; 0 when the result is not a narrow integer.
    @usableFromInline let width: Int
    /// Whether the narrow integer result is signed.
    @usableFromInline let isSigned: Bool

    /// A widening given as it is (the C call path's probe).
    init(width: Int, isSigned: Bool) {
        self.width = width
        self.isSigned = isSigned
    }

    init(_ returnType: CType) {
        if case .primitive(let primitive) = returnType.kind, primitive.isInteger, primitive.size < 8 {
            width = primitive.size * 8
            isSigned = primitive.isSigned
        } else {
            width = 0
            isSigned = false
        }
    }

    /// Stores a result of `byteCount` bytes (fewer than 8), given as its bytes in the low end
    /// of `bits`: widened to a word for a narrow integer, as its bytes otherwise.
    @inlinable
    @inline(__always)
    func store(_ bits: UInt64, byteCount: Int, into storage: UnsafeMutableRawPointer) {
        guard width > 0 else {
            withUnsafeBytes(of: bits) { storage.copyMemory(from: $0.baseAddress!, byteCount: byteCount) }
            return
        }
        // `width` is 8, 16 or 32: shift the value to the top of the word and back.
        let shift = UInt64(64 - width)
        let widened =
            isSigned ? UInt64(bitPattern: Int64(bitPattern: bits << shift) >> shift) : (bits << shift) >> shift
        storage.storeBytes(of: widened, as: UInt64.self)
    }
}
