import CZydis

// The relocator of inline hooks (issue #24): it copies a function's first instructions into a
// trampoline that then acts as the original function. It only computes bytes: it neither
// allocates the trampoline nor patches the function.
//
// What each instruction becomes in the trampoline (t is where its copy starts):
// - an instruction without anything relative: copied as is;
// - a RIP-relative memory operand: copied with a new disp32 that reaches the same address
//   from t; refused (`.ripRelativeOutOfRange`) when that address is beyond ±2 GB of t;
// - `jmp rel8/rel32`: `jmp rel32` when the target is within ±2 GB of t, else the 14-byte
//   `jmp [rip+0]; dq target`;
// - `jcc rel8/rel32`: `jcc rel32` when in range, else the inverted `jcc` over 14 bytes
//   (`j!cc +14; jmp [rip+0]; dq target`);
// - `call rel32`: `call rel32` when in range, else `call [rip+2]; jmp +8; dq target`. Either way
//   the call returns into the trampoline (never into the original bytes, which the patch
//   overwrites), so the callee sees a return address inside the trampoline. A `call` into the
//   copied bytes or to their end (the `call $+5; pop` thunk, which reads its own address) is
//   refused;
// - `loop`, `loope`, `loopne`, `jecxz`, `jrcxz` (rel8 only): the instruction is kept, with any
//   prefix, but aimed 2 bytes ahead at a near or absolute jump to the real target, and a
//   `jmp +5`/`jmp +14` skips that jump when the branch is not taken; flags and rcx behave as in
//   the original;
// - a branch whose target lies in the copied bytes: aimed at that instruction's copy (always a
//   rel32 form); a target inside an instruction is refused;
// - a 16-bit operand-size branch or any other relative instruction (`xbegin`): refused.
// The copied bytes are followed by a jump back to the first instruction not copied: `jmp rel32`
// when in range, else `jmp [rip+0]; dq target`.
//
// `endbr64` first: it is copied too (the trampoline starts with it, as it may be called
// indirectly) but the patch goes after it: `patchOffset` is 4, and the bytes to overwrite are
// counted from there.

/// Why the relocator refused a function.
struct RelocationError: Error, Equatable, CustomStringConvertible {
    enum Code: Equatable, Sendable {
        /// Fewer than 5 bytes asked to overwrite.
        case patchTooShort
        /// Zydis cannot decode the bytes at `offset` (`instruction` is their hex), also when an
        /// instruction would cross the function's given size.
        case undecodable
        /// The function ends (its size, or a `ret`, `jmp`, `int3`, `ud2`, `hlt` when the size is
        /// unknown) before the bytes to overwrite do.
        case functionTooShort
        /// A RIP-relative memory operand whose address is beyond ±2 GB of the trampoline.
        case ripRelativeOutOfRange
        /// A branch into the middle of a copied instruction.
        case branchIntoInstruction
        /// A relative instruction the relocator cannot move (`xbegin`, 16-bit branches, a
        /// `call` into the copied bytes).
        case unsupportedInstruction
    }

    let code: Code
    /// The offset of the instruction from the function's start.
    let offset: Int
    /// The instruction as Zydis formats it (Intel syntax), or its bytes in hex when undecodable.
    let instruction: String

    var description: String {
        let reason: String
        switch code {
        case .patchTooShort: reason = "a patch needs at least 5 bytes"
        case .undecodable: reason = "cannot decode the instruction"
        case .functionTooShort: reason = "the function ends before the bytes to overwrite"
        case .ripRelativeOutOfRange: reason = "its RIP-relative address is beyond ±2 GB of the trampoline"
        case .branchIntoInstruction: reason = "it branches into the middle of a copied instruction"
        case .unsupportedInstruction: reason = "the relocator cannot move this instruction"
        }
        return "cannot relocate `\(instruction)` at offset \(offset): \(reason)"
    }
}

/// The trampoline for a function's first instructions, and where each went.
struct Relocation: Equatable {
    /// One copied instruction: its offset in the function and that of its copy in `bytes`.
    struct InstructionOffset: Equatable, Sendable {
        let original: Int
        let trampoline: Int
    }

    /// Where the patch starts in the function: 4 after an `endbr64`, else 0.
    let patchOffset: Int
    /// The bytes copied from the function's start (the `endbr64` included): the patch may
    /// overwrite `patchOffset ..< copiedLength`, and the trampoline jumps back to `copiedLength`.
    let copiedLength: Int
    /// The trampoline: the relocated instructions, then the jump back.
    let bytes: [UInt8]
    /// Each copied instruction in order.
    let instructionOffsets: [InstructionOffset]
    /// The copied calls (direct or not) whose return address lies inside the copied bytes: a
    /// thread inside the called function when the patch goes in would return into them.
    var innerCalls: [IncomingBranch] = []

    /// The trampoline offset of the copy of the instruction at `original`, if one was copied.
    func trampolineOffset(ofOriginal original: Int) -> Int? {
        instructionOffsets.first { $0.original == original }?.trampoline
    }
}

/// A branch from outside a range of a function into it (its start excluded).
struct IncomingBranch: Equatable, Sendable {
    /// The offset of the branch instruction.
    let offset: Int
    /// The offset it branches to.
    let target: Int
    /// The instruction as Zydis formats it.
    let instruction: String
}

/// Decodes and relocates x86-64 machine code with Zydis.
enum Relocator {
    /// The smallest patch: a `jmp rel32`.
    static let minimumPatchLength = 5

    /// Relocates the instructions at `code` that the patch will overwrite (whole instructions
    /// covering at least `patchLength` bytes from the patch offset) for a trampoline at
    /// `trampoline`. With `functionSize`, the function must hold them; without it, the bytes after
    /// a `ret`, `jmp`, `int3`, `ud2` or `hlt` are taken as not the function's. Reads up to 15 bytes
    /// past the last copied instruction's start when the size is unknown.
    static func relocate(
        code: UnsafeRawPointer, patchLength: Int, trampoline: UInt, functionSize: Int? = nil
    ) throws(RelocationError) -> Relocation {
        let decoder = Decoder()
        guard patchLength >= minimumPatchLength else {
            throw RelocationError(code: .patchTooShort, offset: 0, instruction: "")
        }
        // Decode whole instructions until they cover the patch.
        var instructions: [Instruction] = []
        var offset = 0
        var patchOffset = 0
        while offset < patchOffset + patchLength {
            let available = functionSize.map { $0 - offset } ?? 15
            if available <= 0 {
                let last = instructions.last
                throw RelocationError(
                    code: .functionTooShort, offset: last?.offset ?? 0, instruction: last?.text ?? "")
            }
            let instruction = try decoder.decode(code, offset: offset, available: min(available, 15))
            if offset == 0 && instruction.isEndbr64 { patchOffset = 4 }
            instructions.append(instruction)
            offset += instruction.length
            if functionSize == nil && instruction.kind.endsFlow && offset < patchOffset + patchLength {
                throw RelocationError(
                    code: .functionTooShort, offset: instruction.offset, instruction: instruction.text)
            }
        }
        let copiedLength = offset
        let base = UInt(bitPattern: code)
        let innerCalls = instructions.filter { $0.isCall && $0.offset + $0.length < copiedLength }.map {
            IncomingBranch(offset: $0.offset, target: $0.offset + $0.length, instruction: $0.text)
        }

        // Pass 1 fixes each copy's size and place: sizes only depend on where a copy starts
        // (targets inside the copied bytes always take rel32 forms). Pass 2 writes them.
        var places: [Int] = []
        var size = 0
        for instruction in instructions {
            places.append(size)
            let place = trampoline &+ UInt(size)
            size += try emit(
                instruction, at: place, base: base, copiedLength: copiedLength, inside: { _ in place }
            ).count
        }
        var bytes: [UInt8] = []
        for instruction in instructions {
            bytes += try emit(
                instruction, at: trampoline &+ UInt(bytes.count), base: base, copiedLength: copiedLength,
                inside: { target in
                    guard let index = instructions.firstIndex(where: { $0.offset == target }) else { return nil }
                    return trampoline &+ UInt(places[index])
                })
        }
        bytes += jump(from: trampoline &+ UInt(bytes.count), to: base &+ UInt(copiedLength))
        return Relocation(
            patchOffset: patchOffset, copiedLength: copiedLength, bytes: bytes,
            instructionOffsets: zip(instructions, places).map { .init(original: $0.offset, trampoline: $1) },
            innerCalls: innerCalls)
    }

    /// Decodes the `size` bytes of the function at `code` linearly and lists the relative
    /// branches from outside `range` to inside it, its start excluded. Indirect branches (jump
    /// tables) are not seen.
    static func branches(
        into range: Range<Int>, function code: UnsafeRawPointer, size: Int
    ) throws(RelocationError) -> [IncomingBranch] {
        let decoder = Decoder()
        var found: [IncomingBranch] = []
        var offset = 0
        while offset < size {
            let instruction = try decoder.decode(code, offset: offset, available: min(size - offset, 15))
            if let target = instruction.kind.target, !range.contains(offset) {
                let relative = Int(bitPattern: target &- UInt(bitPattern: code))
                if relative > range.lowerBound && relative < range.upperBound {
                    found.append(IncomingBranch(offset: offset, target: relative, instruction: instruction.text))
                }
            }
            offset += instruction.length
        }
        return found
    }

    /// How many bytes of alignment padding follow a function of `size` bytes at `code`: the
    /// `nop`s (any length) and `int3`s from its end up to the next 16-byte boundary, which is
    /// where a compiler or assembler aligning functions starts the next one. 0 when anything
    /// else is there, when the end is aligned already, or when an instruction would cross the
    /// boundary.
    static func paddingLength(after code: UnsafeRawPointer, size: Int) -> Int {
        let end = UInt(bitPattern: code) + UInt(size)
        let boundary = (end + 15) & ~15
        let length = Int(boundary - end)
        var offset = size
        let decoder = Decoder()
        while offset < size + length {
            guard let instruction = try? decoder.decode(code, offset: offset, available: size + length - offset),
                instruction.isPadding
            else { return 0 }
            offset += instruction.length
        }
        return length
    }

    // MARK: - Emitting

    private static func fitsRel32(_ target: UInt, from next: UInt) -> Int32? {
        Int32(exactly: Int(bitPattern: target &- next))
    }

    private static func littleEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.littleEndian) { Array($0) }
    }

    /// `jmp rel32` when in range, else `jmp [rip+0]; dq target`.
    private static func jump(from place: UInt, to target: UInt) -> [UInt8] {
        if let rel = fitsRel32(target, from: place &+ 5) { return [0xE9] + littleEndian(rel) }
        return absoluteJump(to: target)
    }

    /// `jmp [rip+0]; dq target` (14 bytes).
    private static func absoluteJump(to target: UInt) -> [UInt8] {
        [0xFF, 0x25, 0, 0, 0, 0] + littleEndian(UInt64(target))
    }

    /// The copy of `instruction` placed at `place`. `inside` maps a target offset in the copied
    /// bytes to its copy's address (nil: not at an instruction's start).
    private static func emit(
        _ instruction: Instruction, at place: UInt, base: UInt, copiedLength: Int,
        inside: (Int) -> UInt?
    ) throws(RelocationError) -> [UInt8] {
        func refuse(_ code: RelocationError.Code) -> RelocationError {
            RelocationError(code: code, offset: instruction.offset, instruction: instruction.text)
        }
        // A branch target: the copy's address when inside the copied bytes.
        func resolve(_ target: UInt) throws(RelocationError) -> UInt {
            let relative = Int(bitPattern: target &- base)
            guard relative >= 0 && relative < copiedLength else { return target }
            guard let copy = inside(relative) else { throw refuse(.branchIntoInstruction) }
            return copy
        }
        switch instruction.kind {
        case .plain, .endsFlow:
            return instruction.bytes
        case .ripRelative(let target, let displacementOffset):
            guard let disp = fitsRel32(target, from: place &+ UInt(instruction.length)) else {
                throw refuse(.ripRelativeOutOfRange)
            }
            var bytes = instruction.bytes
            bytes.replaceSubrange(displacementOffset..<displacementOffset + 4, with: littleEndian(disp))
            return bytes
        case .jump(let target):
            return jump(from: place, to: try resolve(target))
        case .conditional(let condition, let target):
            let target = try resolve(target)
            if let rel = fitsRel32(target, from: place &+ 6) { return [0x0F, 0x80 | condition] + littleEndian(rel) }
            return [0x70 | (condition ^ 1), 14] + absoluteJump(to: target)
        case .call(let target):
            let relative = Int(bitPattern: target &- base)
            // Into the copied bytes or to their end: the callee would read a return address
            // in the trampoline, as the `call $+5; pop` position thunk does.
            if relative >= 0 && relative <= copiedLength { throw refuse(.unsupportedInstruction) }
            if let rel = fitsRel32(target, from: place &+ 5) { return [0xE8] + littleEndian(rel) }
            return [0xFF, 0x15, 2, 0, 0, 0, 0xEB, 8] + littleEndian(UInt64(target))
        case .counterBranch(let target):
            let target = try resolve(target)
            var bytes = instruction.bytes
            bytes[bytes.count - 1] = 2
            let far = jump(from: place &+ UInt(bytes.count + 2), to: target)
            return bytes + [0xEB, UInt8(far.count)] + far
        case .unsupported:
            throw refuse(.unsupportedInstruction)
        }
    }
}

// MARK: - Decoding

/// One decoded instruction and what relocating it involves.
struct Instruction {
    enum Kind {
        case plain
        /// A `ret`, indirect `jmp`, `int3`, `ud2` or `hlt`: what follows may not be this code.
        case endsFlow
        case ripRelative(target: UInt, displacementOffset: Int)
        /// `jmp rel8/rel32` (also ends the flow).
        case jump(target: UInt)
        /// `jcc rel8/rel32` with its condition code (the low nibble of the opcode).
        case conditional(condition: UInt8, target: UInt)
        case call(target: UInt)
        /// `loop`, `loope`, `loopne`, `jecxz`, `jrcxz`.
        case counterBranch(target: UInt)
        case unsupported(target: UInt?)

        var endsFlow: Bool {
            switch self {
            case .endsFlow, .jump: true
            default: false
            }
        }

        /// The target of a relative branch.
        var target: UInt? {
            switch self {
            case .jump(let target), .conditional(_, let target), .call(let target), .counterBranch(let target):
                target
            case .unsupported(let target): target
            default: nil
            }
        }
    }

    let offset: Int
    let length: Int
    let bytes: [UInt8]
    let text: String
    let kind: Kind
    let isEndbr64: Bool
    /// Any `call`, direct or indirect.
    var isCall = false
    /// A `nop` of any length or an `int3`: what aligns functions.
    var isPadding = false
}

/// Zydis's 64-bit decoder and Intel formatter.
private struct Decoder {
    private var decoder = ZydisDecoder()
    private var formatter = ZydisFormatter()

    init() {
        ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)
        ZydisFormatterInit(&formatter, ZYDIS_FORMATTER_STYLE_INTEL)
    }

    private static func succeeded(_ status: ZyanStatus) -> Bool { status & 0x8000_0000 == 0 }

    func decode(_ code: UnsafeRawPointer, offset: Int, available: Int) throws(RelocationError) -> Instruction {
        var decoder = decoder
        var formatter = formatter
        let address = code + offset
        var instruction = ZydisDecodedInstruction()
        var operands = [ZydisDecodedOperand](repeating: ZydisDecodedOperand(), count: 10)
        let status = operands.withUnsafeMutableBufferPointer {
            ZydisDecoderDecodeFull(&decoder, address, available, &instruction, $0.baseAddress)
        }
        guard Self.succeeded(status) else {
            let shown = UnsafeRawBufferPointer(start: address, count: max(available, 0)).prefix(4)
            let hex = shown.map {
                String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16)
            }
            throw RelocationError(code: .undecodable, offset: offset, instruction: hex.joined(separator: " "))
        }
        let runtime = UInt(bitPattern: address)
        var buffer = [CChar](repeating: 0, count: 256)
        _ = operands.withUnsafeBufferPointer { operands in
            ZydisFormatterFormatInstruction(
                &formatter, &instruction, operands.baseAddress, instruction.operand_count_visible,
                &buffer, buffer.count, UInt64(runtime), nil)
        }
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let length = Int(instruction.length)
        let bytes = Array(UnsafeRawBufferPointer(start: address, count: length))

        func absolute(_ operand: ZydisDecodedOperand) -> UInt? {
            var result: UInt64 = 0
            var operand = operand
            guard Self.succeeded(ZydisCalcAbsoluteAddress(&instruction, &operand, UInt64(runtime), &result)) else {
                return nil
            }
            return UInt(result)
        }
        let visible = operands.prefix(Int(instruction.operand_count))
        let relativeImmediate = visible.first { $0.type == ZYDIS_OPERAND_TYPE_IMMEDIATE && $0.imm.is_relative != 0 }
        let ripMemory = visible.first { $0.type == ZYDIS_OPERAND_TYPE_MEMORY && $0.mem.base == ZYDIS_REGISTER_RIP }

        let kind: Instruction.Kind
        let opcode = instruction.opcode
        if let immediate = relativeImmediate {
            let target = absolute(immediate)
            let legacy = instruction.encoding == ZYDIS_INSTRUCTION_ENCODING_LEGACY
            if let target, legacy, instruction.operand_width == 64 {
                if instruction.opcode_map == ZYDIS_OPCODE_MAP_DEFAULT {
                    switch opcode {
                    case 0xEB, 0xE9: kind = .jump(target: target)
                    case 0xE8: kind = .call(target: target)
                    case 0x70...0x7F: kind = .conditional(condition: opcode & 0xF, target: target)
                    case 0xE0...0xE3: kind = .counterBranch(target: target)
                    default: kind = .unsupported(target: target)
                    }
                } else if instruction.opcode_map == ZYDIS_OPCODE_MAP_0F && (0x80...0x8F).contains(opcode) {
                    kind = .conditional(condition: opcode & 0xF, target: target)
                } else {
                    kind = .unsupported(target: target)
                }
            } else {
                kind = .unsupported(target: target)
            }
        } else if let memory = ripMemory, let target = absolute(memory), instruction.raw.disp.size == 32 {
            kind = .ripRelative(target: target, displacementOffset: Int(instruction.raw.disp.offset))
        } else if ripMemory != nil {
            kind = .unsupported(target: nil)
        } else if [ZYDIS_MNEMONIC_RET, ZYDIS_MNEMONIC_JMP, ZYDIS_MNEMONIC_INT3, ZYDIS_MNEMONIC_UD2, ZYDIS_MNEMONIC_HLT]
            .contains(instruction.mnemonic)
        {
            kind = .endsFlow
        } else {
            kind = .plain
        }
        return Instruction(
            offset: offset, length: length, bytes: bytes, text: text, kind: kind,
            isEndbr64: instruction.mnemonic == ZYDIS_MNEMONIC_ENDBR64,
            isCall: instruction.mnemonic == ZYDIS_MNEMONIC_CALL,
            isPadding: instruction.mnemonic == ZYDIS_MNEMONIC_NOP || instruction.mnemonic == ZYDIS_MNEMONIC_INT3)
    }
}
