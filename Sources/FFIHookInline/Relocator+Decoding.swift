import CZydis

// MARK: - Decoded instructions

/// One decoded instruction and what relocating it involves.
struct Instruction {
    enum Kind {
        /// Nothing relative: copied as is.
        case plain
        /// A RIP-relative memory operand.
        case ripRelative(RIPRelativeOperand)
        /// `jmp rel8/rel32`.
        case jump(target: UInt)
        /// `jcc rel8/rel32` with its condition code (the low nibble of the opcode).
        case conditional(condition: UInt8, target: UInt)
        /// `call rel32`.
        case call(target: UInt)
        /// `loop`, `loope`, `loopne`, `jecxz`, `jrcxz`.
        case counterBranch(target: UInt)
        /// `xbegin rel16/rel32`, with its abort target.
        case transactionBegin(target: UInt)
        /// Something relative the relocator cannot move, with its target when it has one and
        /// why, in words.
        case unsupported(target: UInt?, reason: String)

        /// The target of a relative branch (or of `xbegin`'s abort).
        var target: UInt? {
            switch self {
            case .jump(let target), .conditional(_, let target), .call(let target), .counterBranch(let target),
                .transactionBegin(let target):
                target
            case .unsupported(let target, _): target
            case .plain, .ripRelative: nil
            }
        }
    }

    /// Its offset from the start of the code decoded.
    let offset: Int
    /// Its length in bytes.
    let length: Int
    /// Its bytes.
    let bytes: [UInt8]
    /// Its run-time address when decoded.
    let address: UInt
    /// As Zydis formats it (Intel syntax, absolute targets): formatted from its bytes when asked
    /// for (messages and refusals ask; a plan decodes thousands of instructions and shows none).
    var text: String { Decoder().text(of: bytes, at: address) }
    /// What relocating it involves.
    let kind: Kind
    /// An `endbr64`.
    let isEndbr64: Bool
    /// Any `call`, direct or indirect.
    var isCall = false
    /// A direct `call` whose target is the next instruction (`call $+5`, the position thunk's
    /// first half): it pushes its own end and goes on.
    var callsNext = false
    /// A `ret`, any `jmp` (relative, through a register or through memory), `int3`, `ud2` or
    /// `hlt`: what follows may not be this code.
    var endsFlow = false
    /// A `nop` of any length or an `int3`: what aligns functions.
    var isPadding = false
}

/// What rewriting an instruction's RIP-relative memory operand takes, when its address is
/// beyond ±2 GB of the copy (see ``Relocator/farMemoryAccess(_:_:)``).
struct RIPRelativeOperand {
    /// What the instruction does with the operand, for the rewrites that depend on it.
    enum Form: Equatable {
        /// Anything else: the operand becomes `[scratch]`.
        case general
        /// `lea r64, [rip+disp]` (register 0 ... 15): the address itself.
        case address64(register: Int)
        /// `lea r32, [rip+disp]`: the address's low 32 bits, zero-extended.
        case address32(register: Int)
        /// `jmp qword [rip+disp]`.
        case jump
        /// `call qword [rip+disp]`.
        case call
        /// `push qword [rip+disp]`.
        case push
        /// An instruction no rewrite here moves, and why.
        case refused(String)
    }

    /// The address the operand reaches.
    let target: UInt
    /// Where the 4-byte displacement is in the instruction.
    let displacementOffset: Int
    /// Where the ModRM byte is.
    let modRMOffset: Int
    /// The byte whose bit extends ModRM.rm to r8 ... r15, if any: a REX prefix (bit 0, set
    /// means extended) or a 3-byte VEX, XOP or EVEX prefix's second byte (bit 5, clear means
    /// extended).
    let baseExtension: (offset: Int, isInverted: Bool)?
    /// The general-purpose registers the instruction reads or writes, explicitly or not, as
    /// bits 0 (rax) ... 15 (r15).
    let registers: UInt16
    /// The `fs` or `gs` override (0x64, 0x65), if any.
    let segmentPrefix: UInt8?
    /// What the instruction does with the operand.
    let form: Form
}

/// Why Zydis decoded no instruction: bytes it rejects, or too few bytes for the instruction
/// they begin.
struct DecodeFailure: Error {
    /// Where the bytes are, from the start of the code decoded.
    let offset: Int
    /// The bytes there: at most 4 when they are rejected, else all that were available.
    let bytes: [UInt8]
    /// The bytes begin an instruction longer than what was available.
    let isCut: Bool
    /// Zydis's reason, in words.
    let reason: String

    /// The bytes in hex, `48 8b 05`.
    var hex: String { bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(separator: " ") }
}

// MARK: - Decoder

/// Zydis's 64-bit decoder and Intel formatter.
struct Decoder {
    private var decoder = ZydisDecoder()
    private var formatter = ZydisFormatter()

    /// A decoder for 64-bit code and a formatter for Intel syntax.
    init() {
        ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)
        ZydisFormatterInit(&formatter, ZYDIS_FORMATTER_STYLE_INTEL)
    }

    private static func succeeded(_ status: ZyanStatus) -> Bool { status & 0x8000_0000 == 0 }

    /// Zydis's decoding statuses (module 2, codes 0 ... 12) in words.
    private static func reason(of status: ZyanStatus) -> String {
        guard (status >> 20) & 0x7FF == 2 else { return "Zydis fails with status 0x\(String(status, radix: 16))" }
        return switch status & 0xFFFFF {
        case 0x00: "the bytes end before the instruction does"
        case 0x02: "the instruction would be longer than 15 bytes"
        case 0x03: "it names a register that does not exist"
        case 0x04: "it has a LOCK prefix it cannot take"
        case 0x05: "it has a legacy prefix it cannot take"
        case 0x06: "it has a REX prefix it cannot take"
        case 0x07: "its VEX, EVEX or XOP prefix names an opcode map that does not exist"
        case 0x08: "its EVEX prefix is malformed"
        case 0x0A: "it has a mask register it cannot take"
        case 0x0C: "its operands cannot go together"
        default: "Zydis knows no valid instruction beginning with them"
        }
    }

    /// The instruction of `bytes`, decoded at run-time address `address`, as Zydis formats it;
    /// empty when they hold none.
    func text(of bytes: [UInt8], at address: UInt) -> String {
        var decoder = decoder
        var formatter = formatter
        var instruction = ZydisDecodedInstruction()
        return withUnsafeTemporaryAllocation(of: ZydisDecodedOperand.self, capacity: 10) { operands in
            guard
                Self.succeeded(
                    ZydisDecoderDecodeFull(&decoder, bytes, bytes.count, &instruction, operands.baseAddress))
            else { return "" }
            return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 256) { buffer in
                buffer[0] = 0
                _ = ZydisFormatterFormatInstruction(
                    &formatter, &instruction, operands.baseAddress, instruction.operand_count_visible,
                    buffer.baseAddress, buffer.count, UInt64(address), nil)
                return String(cString: buffer.baseAddress!)
            }
        }
    }

    /// Decodes the instruction at `code + offset` from at most `available` bytes.
    func decode(_ code: UnsafeRawPointer, offset: Int, available: Int) throws(DecodeFailure) -> Instruction {
        var decoder = decoder
        let address = code + offset
        var instruction = ZydisDecodedInstruction()
        // The operands in memory of the stack's, and only those the instruction's kind needs
        // taken out (a full decoding is made for every instruction a plan relocates).
        let (status, relativeImmediate, ripMemory, eipMemory, all) = withUnsafeTemporaryAllocation(
            of: ZydisDecodedOperand.self, capacity: 10
        ) { operands in
            let status = ZydisDecoderDecodeFull(&decoder, address, available, &instruction, operands.baseAddress)
            guard Self.succeeded(status) else {
                return (
                    status, ZydisDecodedOperand?.none, ZydisDecodedOperand?.none, ZydisDecodedOperand?.none,
                    [ZydisDecodedOperand]()
                )
            }
            let used = UnsafeMutableBufferPointer(rebasing: operands[..<Int(instruction.operand_count)])
            let ripMemory = used.first { $0.type == ZYDIS_OPERAND_TYPE_MEMORY && $0.mem.base == ZYDIS_REGISTER_RIP }
            return (
                status, used.first { $0.type == ZYDIS_OPERAND_TYPE_IMMEDIATE && $0.imm.is_relative != 0 }, ripMemory,
                used.first { $0.type == ZYDIS_OPERAND_TYPE_MEMORY && $0.mem.base == ZYDIS_REGISTER_EIP },
                ripMemory == nil ? [] : Array(used)
            )
        }
        guard Self.succeeded(status) else {
            // ZYDIS_STATUS_NO_MORE_DATA: the instruction needs bytes past `available`.
            let isCut = status == 0x8020_0000 && available < 15
            let shown = Array(UnsafeRawBufferPointer(start: address, count: max(available, 0)).prefix(isCut ? 15 : 4))
            throw DecodeFailure(offset: offset, bytes: shown, isCut: isCut, reason: Self.reason(of: status))
        }
        let runtime = UInt(bitPattern: address)
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
        let mnemonic = instruction.mnemonic

        let kind: Instruction.Kind
        let opcode = instruction.opcode
        if let immediate = relativeImmediate {
            let target = absolute(immediate)
            let legacy = instruction.encoding == ZYDIS_INSTRUCTION_ENCODING_LEGACY
            if let target, mnemonic == ZYDIS_MNEMONIC_XBEGIN {
                // rel16 too: in 64-bit mode its abort address is not truncated to 16 bits.
                kind = .transactionBegin(target: target)
            } else if let target, legacy, instruction.operand_width == 64 {
                if instruction.opcode_map == ZYDIS_OPCODE_MAP_DEFAULT {
                    switch opcode {
                    case 0xEB, 0xE9: kind = .jump(target: target)
                    case 0xE8: kind = .call(target: target)
                    case 0x70...0x7F: kind = .conditional(condition: opcode & 0xF, target: target)
                    case 0xE0...0xE3: kind = .counterBranch(target: target)
                    default:
                        kind = .unsupported(
                            target: target, reason: "the relocator does not know this relative instruction")
                    }
                } else if instruction.opcode_map == ZYDIS_OPCODE_MAP_0F && (0x80...0x8F).contains(opcode) {
                    kind = .conditional(condition: opcode & 0xF, target: target)
                } else {
                    kind = .unsupported(target: target, reason: "the relocator does not know this relative instruction")
                }
            } else if instruction.operand_width == 16 {
                kind = .unsupported(
                    target: target,
                    reason:
                        "a branch with a 16-bit operand size, whose target Intel and AMD processors compute differently"
                )
            } else {
                kind = .unsupported(target: target, reason: "the relocator does not know this relative instruction")
            }
        } else if let operand = ripMemory, let target = absolute(operand), instruction.raw.disp.size == 32 {
            kind = .ripRelative(Self.ripRelative(instruction, all, bytes: bytes, target: target))
        } else if ripMemory != nil {
            kind = .unsupported(target: nil, reason: "Zydis cannot compute the address of its RIP-relative operand")
        } else if eipMemory != nil {
            kind = .unsupported(
                target: nil, reason: "its memory operand is relative to eip (a 32-bit address size), which it truncates"
            )
        } else {
            kind = .plain
        }
        var callsNext = false
        if case .call(let target) = kind { callsNext = target == runtime + UInt(length) }
        return Instruction(
            offset: offset, length: length, bytes: bytes, address: runtime, kind: kind,
            isEndbr64: mnemonic == ZYDIS_MNEMONIC_ENDBR64,
            isCall: mnemonic == ZYDIS_MNEMONIC_CALL, callsNext: callsNext,
            endsFlow: [
                ZYDIS_MNEMONIC_RET, ZYDIS_MNEMONIC_JMP, ZYDIS_MNEMONIC_INT3, ZYDIS_MNEMONIC_UD2, ZYDIS_MNEMONIC_HLT,
            ]
            .contains(mnemonic),
            isPadding: mnemonic == ZYDIS_MNEMONIC_NOP || mnemonic == ZYDIS_MNEMONIC_INT3)
    }

    /// What the far rewrite of a RIP-relative operand needs of `instruction`.
    private static func ripRelative(
        _ instruction: ZydisDecodedInstruction, _ operands: [ZydisDecodedOperand], bytes: [UInt8], target: UInt
    ) -> RIPRelativeOperand {
        // The general-purpose registers it touches, its memory operands' bases and indexes
        // included (a hidden `[rsp]` for push and call).
        var registers: UInt16 = 0
        func note(_ register: ZydisRegister) {
            guard register != ZYDIS_REGISTER_NONE else { return }
            let enclosing = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, register)
            guard ZydisRegisterGetClass(enclosing) == ZYDIS_REGCLASS_GPR64 else { return }
            registers |= 1 << UInt16(ZydisRegisterGetId(enclosing))
        }
        for operand in operands {
            if operand.type == ZYDIS_OPERAND_TYPE_REGISTER { note(operand.reg.value) }
            if operand.type == ZYDIS_OPERAND_TYPE_MEMORY {
                note(operand.mem.base)
                note(operand.mem.index)
            }
        }
        let usesStack = registers & (1 << 4) != 0
        let modRMReg = instruction.raw.modrm.reg
        let form: RIPRelativeOperand.Form
        switch instruction.mnemonic {
        case ZYDIS_MNEMONIC_JMP:
            form = modRMReg == 4 ? .jump : .refused("a far jump through memory")
        case ZYDIS_MNEMONIC_CALL:
            form = modRMReg == 2 ? .call : .refused("a far call through memory")
        case ZYDIS_MNEMONIC_PUSH:
            form = instruction.operand_width == 64 ? .push : .refused("a push of 16 bits")
        case ZYDIS_MNEMONIC_LEA where operands.first?.type == ZYDIS_OPERAND_TYPE_REGISTER:
            let destination = operands[0].reg.value
            let id = Int(ZydisRegisterGetId(destination))
            switch ZydisRegisterGetClass(destination) {
            case ZYDIS_REGCLASS_GPR64: form = .address64(register: id)
            case ZYDIS_REGCLASS_GPR32: form = .address32(register: id)
            default: form = .general
            }
        default:
            form =
                usesStack
                ? .refused("it reads or writes rsp, which the rewrite through a scratch register moves") : .general
        }
        let attributes = instruction.attributes
        var baseExtension: (offset: Int, isInverted: Bool)? = nil
        switch instruction.encoding {
        case ZYDIS_INSTRUCTION_ENCODING_LEGACY, ZYDIS_INSTRUCTION_ENCODING_3DNOW:
            if attributes & UInt64(ZYDIS_ATTRIB_HAS_REX) != 0 {
                baseExtension = (Int(instruction.raw.rex.offset), false)
            }
        case ZYDIS_INSTRUCTION_ENCODING_VEX:
            if bytes[Int(instruction.raw.vex.offset)] == 0xC4 {
                baseExtension = (Int(instruction.raw.vex.offset) + 1, true)
            }
        case ZYDIS_INSTRUCTION_ENCODING_XOP:
            baseExtension = (Int(instruction.raw.xop.offset) + 1, true)
        case ZYDIS_INSTRUCTION_ENCODING_EVEX:
            baseExtension = (Int(instruction.raw.evex.offset) + 1, true)
        default:
            break
        }
        let segmentPrefix: UInt8? =
            attributes & UInt64(ZYDIS_ATTRIB_HAS_SEGMENT_FS) != 0
            ? 0x64 : attributes & UInt64(ZYDIS_ATTRIB_HAS_SEGMENT_GS) != 0 ? 0x65 : nil
        return RIPRelativeOperand(
            target: target, displacementOffset: Int(instruction.raw.disp.offset),
            modRMOffset: Int(instruction.raw.modrm.offset), baseExtension: baseExtension, registers: registers,
            segmentPrefix: segmentPrefix, form: form)
    }
}
