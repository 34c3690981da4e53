/// What one planned function keeps, in its slab's table of records (no object of its own, so
/// that a library of thousands of functions costs a few dozen bytes each): where the patch
/// goes, the bytes it overwrites, and where each overwritten instruction went in the
/// trampoline. Written once by the planner before the plan is published; read-only after.
struct PlanRecord {
    /// The function's address.
    var function: UInt = 0
    /// Where its stub starts in the slab's code; the trampoline follows at ``CodeSlab/stubSize``.
    var stubOffset: UInt32 = 0
    /// The trampoline's length in bytes (its relocated instructions and the jump back).
    var trampolineLength: UInt16 = 0
    /// How many bytes the relocator copied from the function's start (the `endbr64` included).
    var copiedLength: UInt8 = 0
    /// Where the patch starts in the function: 4 after an `endbr64`, else 0.
    var patchOffset: UInt8 = 0
    /// The protection of the function's page (`PROT_*`), for writers that must lift it.
    var protection: UInt8 = 0
    /// Bit `k` set: an instruction starts `k` bytes into the function (k < copiedLength).
    var instructionStarts: UInt32 = 0
    /// The trampoline offset of each instruction that ``instructionStarts`` marks, in order.
    var trampolineOffsets: InlineArray<12, UInt8> = .init(repeating: 0)
    /// The bytes the patch overwrites as they were planned: the function's bytes from
    /// ``patchOffset`` to ``copiedLength``.
    var original: InlineArray<28, UInt8> = .init(repeating: 0)

    /// The longest run of bytes a plan may copy (an `endbr64`, then what the patch overwrites).
    static let maximumCopiedLength = 32
    /// The most instructions a plan may copy.
    static let maximumInstructions = 12

    /// The bytes the patch overwrites: from ``patchOffset`` to ``copiedLength``.
    var overwritten: [UInt8] {
        (0..<(Int(copiedLength) - Int(patchOffset))).map { original[$0] }
    }

    /// Where the patch starts.
    var patchStart: UInt { function + UInt(patchOffset) }

    /// Each copied instruction's offset in the function and in the trampoline, in order.
    var instructions: [(original: Int, trampoline: Int)] {
        var found: [(original: Int, trampoline: Int)] = []
        for offset in 0..<Int(copiedLength) where instructionStarts & (1 << UInt32(offset)) != 0 {
            found.append((offset, Int(trampolineOffsets[found.count])))
        }
        return found
    }
}
