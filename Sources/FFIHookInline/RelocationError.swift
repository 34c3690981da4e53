/// Why the relocator refused a function, or why the scan of its body for branches into the
/// patch could not be done.
struct RelocationError: Error, Equatable, CustomStringConvertible {
    enum Code: Equatable, Sendable {
        /// Fewer than 5 bytes asked to overwrite.
        case patchTooShort
        /// Zydis finds no valid instruction at `offset` (`instruction` is the hex of the bytes
        /// there).
        case undecodable
        /// The function's size ends it inside an instruction: the bytes left from `offset` to
        /// the end (`instruction`, in hex) begin an instruction but do not hold all of it.
        case crossesFunctionEnd
        /// Mapped executable memory ends inside an instruction: the bytes left from `offset`
        /// (`instruction`, in hex) begin an instruction that would go on past the last mapped
        /// byte.
        case crossesMappedEnd
        /// The function ends (its size, the end of mapped executable memory, or a `ret`, `jmp`,
        /// `int3`, `ud2`, `hlt` when the size is unknown) before the bytes to overwrite do.
        case functionTooShort
        /// A RIP-relative memory operand whose address is beyond ±2 GB of the trampoline, in an
        /// instruction that cannot reach it through a scratch register either (`explanation` says
        /// why).
        case ripRelativeOutOfRange
        /// A branch into the middle of a copied instruction.
        case branchIntoInstruction
        /// A relative instruction the relocator cannot move (`explanation` says why: a 16-bit
        /// branch, a `call` into the copied bytes other than `call $+5`, an EIP-relative
        /// operand).
        case unsupportedInstruction
    }

    /// What was being done: copying the first instructions, or reading the rest of the
    /// function for branches into them (which copies nothing).
    enum Phase: Equatable, Sendable {
        /// Decoding and copying the instructions the patch overwrites.
        case relocating
        /// Decoding the rest of the function to find branches into the overwritten bytes.
        case scanningForBranches
    }

    /// What went wrong.
    let code: Code
    /// The offset from the function's start of the instruction, or of the bytes that are none.
    let offset: Int
    /// The instruction as Zydis formats it (Intel syntax); for `undecodable`, `crossesFunctionEnd`
    /// and `crossesMappedEnd`, the hex of the bytes there (at most 4 of them for
    /// `undecodable`, all that are left for the others); empty for `patchTooShort`.
    let instruction: String
    /// Why, in words, with the numbers that matter (Zydis's reason, where the function ends,
    /// the bytes the patch needs).
    var explanation: String = ""
    /// While doing what.
    var phase: Phase = .relocating

    /// The same error, met while scanning the function's body for branches.
    func whileScanning() -> RelocationError {
        var error = self
        error.phase = .scanningForBranches
        return error
    }

    /// The refusal in one sentence, as the planner's error message gives it: what the bytes or
    /// the instruction are, where, and why.
    var description: String {
        switch (code, phase) {
        case (.patchTooShort, _), (.functionTooShort, _):
            return explanation
        case (.undecodable, .relocating):
            return "cannot decode the instruction at offset \(offset) (bytes \(instruction)): \(explanation)"
        case (.undecodable, .scanningForBranches):
            return
                "the function's body cannot be decoded at offset \(offset) (bytes \(instruction)) to look for branches into the patch: \(explanation)"
        case (.crossesFunctionEnd, .relocating), (.crossesMappedEnd, .relocating):
            return explanation
        case (.crossesFunctionEnd, .scanningForBranches), (.crossesMappedEnd, .scanningForBranches):
            return "the function's body cannot be decoded to look for branches into the patch: \(explanation)"
        case (.ripRelativeOutOfRange, _), (.branchIntoInstruction, _), (.unsupportedInstruction, _):
            return "cannot relocate `\(instruction)` at offset \(offset): \(explanation)"
        }
    }
}
