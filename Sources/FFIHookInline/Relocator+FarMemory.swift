// RIP-relative memory operands beyond ±2 GB of the trampoline (it was mapped far from the
// function, where no memory near it was free): no disp32 reaches the address from the copy,
// so the copy loads the address into a register and uses that. Every sequence below keeps
// the flags (lea, mov, push, pop and ret change none), keeps every register but the ones the
// original changes, and reads and writes the operand's memory when it runs, as the original
// does (a load from writable memory sees its current value).
//
// - `lea r64, [rip+disp]`: `mov r64, imm64` (the address itself); `lea r32`: `mov r32, imm32`.
// - anything else that leaves rsp alone: through a scratch register s (rax, rcx, rdx, rbx,
//   rsi or rdi, one the instruction neither reads nor writes), past the red zone, which a
//   leaf function may be using:
//       lea rsp, [rsp-128]; push s; mov s, imm64; <the instruction with [s] for [rip+disp]>;
//       pop s; lea rsp, [rsp+128]
// - `jmp qword [rip+disp]`: the target is read, put on the stack below the red zone and
//   jumped to with `ret 128`, which also takes rsp back:
//       lea rsp, [rsp-136]; push rax; mov rax, imm64; mov rax, [rax]; mov [rsp+8], rax;
//       pop rax; ret 128
// - `call qword [rip+disp]`: the return address (the copy's end, as for every copied call) and
//   the target go on the stack where the call would put its return address and below it,
//   which a call overwrites anyway, then `ret` jumps to the target:
//       push rax; push rax; push rax; lea rax, [rip+end]; mov [rsp+16], rax; mov rax, imm64;
//       mov rax, [rax]; mov [rsp+8], rax; pop rax; ret; end:
// - `push qword [rip+disp]`: the value goes where the push puts it, rax is saved below the
//   red zone:
//       lea rsp, [rsp-136]; push rax; mov rax, imm64; mov rax, [rax]; mov [rsp+136], rax;
//       pop rax; lea rsp, [rsp+128]
// - refused: any other instruction that uses rsp (the scratch sequence moves it: `pop
//   [rip+disp]`, `mov [rip+disp], rsp`), far jumps and calls through memory, 16-bit pushes.
// An `fs` or `gs` override stays on the instruction, or goes on the `mov rax, [rax]` load.

extension Relocator {
    /// The most bytes one copied instruction can take in the trampoline: a 15-byte
    /// instruction with a far RIP-relative operand, rewritten through a scratch register
    /// (25 bytes around it). The jump back after the last one takes 14 more at most.
    static let maximumCopyLength = 40

    /// The copy of `instruction`, whose RIP-relative `operand` is beyond ±2 GB of the copy,
    /// reaching the operand through a register.
    static func farMemoryAccess(
        _ instruction: Instruction, _ operand: RIPRelativeOperand
    ) throws(RelocationError) -> [UInt8] {
        func refuse(_ why: String) -> RelocationError {
            RelocationError(
                code: .ripRelativeOutOfRange, offset: instruction.offset, instruction: instruction.text,
                explanation: "its RIP-relative address is beyond ±2 GB of the trampoline, and \(why)")
        }
        let address = littleEndian(UInt64(operand.target))
        let load = (operand.segmentPrefix.map { [$0] } ?? []) + [0x48, 0x8B, 0x00]  // mov rax, [rax]
        let movRAX: [UInt8] = [0x48, 0xB8] + address  // mov rax, imm64
        switch operand.form {
        case .address64(let register):
            return [0x48 | UInt8(register >> 3), 0xB8 + UInt8(register & 7)] + address
        case .address32(let register):
            return (register >= 8 ? [0x41] : []) + [0xB8 + UInt8(register & 7)]
                + littleEndian(UInt32(truncatingIfNeeded: operand.target))
        case .jump:
            return [0x48, 0x8D, 0xA4, 0x24] + littleEndian(Int32(-136)) + [0x50] + movRAX + load
                + [0x48, 0x89, 0x44, 0x24, 0x08, 0x58, 0xC2, 0x80, 0x00]
        case .call:
            // lea rax, [rip+end]: from the lea's end, over the 5-byte store, to the sequence's end.
            let rest = movRAX + load + [0x48, 0x89, 0x44, 0x24, 0x08, 0x58, 0xC3]
            return [0x50, 0x50, 0x50, 0x48, 0x8D, 0x05] + littleEndian(Int32(5 + rest.count))
                + [0x48, 0x89, 0x44, 0x24, 0x10] + rest
        case .push:
            return [0x48, 0x8D, 0xA4, 0x24] + littleEndian(Int32(-136)) + [0x50] + movRAX + load
                + [0x48, 0x89, 0x84, 0x24] + littleEndian(Int32(136)) + [0x58]
                + [0x48, 0x8D, 0xA4, 0x24] + littleEndian(Int32(128))
        case .refused(let why):
            throw refuse("it cannot reach it through a scratch register either: \(why)")
        case .general:
            // rax, rcx, rdx, rbx, rsi, rdi: no SIB byte and no REX.B needed for [s].
            guard let scratch = [0, 1, 2, 3, 6, 7].first(where: { operand.registers & (1 << UInt16($0)) == 0 })
            else {
                throw refuse("it uses every register that could hold the address")
            }
            var bytes = instruction.bytes
            // mod 10 (disp32), rm = scratch: [scratch + 0].
            bytes[operand.modRMOffset] = (bytes[operand.modRMOffset] & 0x38) | 0x80 | UInt8(scratch)
            bytes.replaceSubrange(operand.displacementOffset..<operand.displacementOffset + 4, with: [0, 0, 0, 0])
            if let extensionByte = operand.baseExtension {
                if extensionByte.isInverted {
                    bytes[extensionByte.offset] |= 0x20
                } else {
                    bytes[extensionByte.offset] &= ~0x01
                }
            }
            return [0x48, 0x8D, 0x64, 0x24, 0x80, 0x50 + UInt8(scratch), 0x48, 0xB8 + UInt8(scratch)] + address
                + bytes + [0x58 + UInt8(scratch), 0x48, 0x8D, 0xA4, 0x24] + littleEndian(Int32(128))
        }
    }
}
