internal import CFFIHookSupport
import CZydis

// The relocator of inline hooks (issue #24): it copies a function's first instructions into a
// trampoline that then acts as the original function. It only computes bytes: it neither
// allocates the trampoline nor patches the function.
//
// What each instruction becomes in the trampoline (t is where its copy starts):
// - an instruction without anything relative: copied as is;
// - a RIP-relative memory operand: copied with a new disp32 that reaches the same address
//   from t; when that address is beyond ±2 GB of t, reached through a register instead
//   (Relocator+FarMemory.swift);
// - `jmp rel8/rel32`: `jmp rel32` when the target is within ±2 GB of t, else the 14-byte
//   `jmp [rip+0]; dq target`;
// - `jcc rel8/rel32`: `jcc rel32` when in range, else the inverted `jcc` over 14 bytes
//   (`j!cc +14; jmp [rip+0]; dq target`);
// - `call rel32`: `call rel32` when in range, else `call [rip+2]; jmp +8; dq target`. Either way
//   the call returns into the trampoline (never into the original bytes, which the patch
//   overwrites), so the callee sees a return address inside the trampoline;
// - `call $+5` (a call to the next instruction: the position thunk `call $+5; pop reg`, which
//   reads its own address): `push imm32; mov dword [rsp+4], imm32`, which pushes the
//   original's return address, as the call does, and goes on. A `pop` after it, copied or not,
//   reads the original address. (Not `mov reg, imm64` for the pair: a thread the patch finds
//   between the call and the pop is moved to the pop's copy and must find the address pushed.)
//   Any other `call` into the copied bytes is refused: its target is in bytes the patch
//   replaces, and a call aimed at their copy would push a return address in the trampoline
//   that the code it calls may read (a call over inline data). A `call` to their end (a short
//   function, copied whole with its padding, calling the next one) is an ordinary call: its
//   target is code the patch leaves alone. (Its return address lies in the copied bytes, so
//   `innerCalls` lists it and the planner refuses it, as a thread inside the callee would
//   return into the patch; a call over inline data to a target further on is no different.)
// - `loop`, `loope`, `loopne`, `jecxz`, `jrcxz` (rel8 only): the instruction is kept, with any
//   prefix, but aimed 2 bytes ahead at a near or absolute jump to the real target, and a
//   `jmp +5`/`jmp +14` skips that jump when the branch is not taken; flags and rcx behave as in
//   the original;
// - `xbegin rel16/rel32`: `xbegin rel32` aimed at the same abort address when in range, else
//   `xbegin +2; jmp +14; jmp [rip+0]; dq target` (the abort lands on the absolute jump);
// - a branch (or an abort address) in the copied bytes: aimed at that instruction's copy
//   (always a rel32 form); a target inside an instruction is refused;
// - a 16-bit operand-size branch, an EIP-relative operand or any other relative instruction:
//   refused.
// The copied bytes are followed by a jump back to the first instruction not copied: `jmp rel32`
// when in range, else `jmp [rip+0]; dq target`. One copied instruction takes at most
// `maximumCopyLength` (40) bytes, the jump back 14.
//
// `endbr64` first: it is copied too (the trampoline starts with it, as it may be called
// indirectly) but the patch goes after it: `patchOffset` is 4, and the bytes to overwrite are
// counted from there.
//
// Reading stops at the function's size when it is given, and at `mappedSize` (how far mapped
// executable memory runs) when that is: an instruction cut by either is refused as such, not
// as bytes Zydis cannot decode.

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
    /// Whether a `call` is among the copied instructions: its copy in the trampoline returns
    /// into the trampoline, which must then stay mapped while a thread may be inside the callee.
    var copiesCall = false

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
    /// past the last copied instruction's start when the size is unknown, and never at or past
    /// `mappedSize` bytes from `code` when that is given (how far readable, executable memory
    /// runs: ``/FFIHook/MemoryMapping/executableRun(from:in:)``). With `plainByTable`, a
    /// prologue whose instructions all run as well anywhere is copied by
    /// ``plainRelocation(code:patchLength:trampoline:end:)`` without Zydis, with the same result.
    static func relocate(
        code: UnsafeRawPointer, patchLength: Int, trampoline: UInt, functionSize: Int? = nil, mappedSize: Int? = nil,
        plainByTable: Bool = true
    ) throws(RelocationError) -> Relocation {
        guard patchLength >= minimumPatchLength else {
            throw RelocationError(
                code: .patchTooShort, offset: 0, instruction: "",
                explanation: "a patch needs at least \(minimumPatchLength) bytes; \(patchLength) were asked")
        }
        let end = min(functionSize ?? .max, mappedSize ?? .max)
        if plainByTable,
            let plain = plainRelocation(code: code, patchLength: patchLength, trampoline: trampoline, end: end)
        {
            return plain
        }
        let decoder = Decoder()
        // Decode whole instructions until they cover the patch.
        var instructions: [Instruction] = []
        var offset = 0
        var patchOffset = 0
        func tooShort(_ why: String) -> RelocationError {
            let last = instructions.last
            return RelocationError(
                code: .functionTooShort, offset: last?.offset ?? 0, instruction: last?.text ?? "",
                explanation:
                    "\(why), before the bytes the patch overwrites end (\(patchOffset) ..< \(patchOffset + patchLength))"
            )
        }
        while offset < patchOffset + patchLength {
            if offset >= end {
                if let mappedSize, offset >= mappedSize {
                    throw tooShort(
                        "the function's code ends at the end of mapped executable memory (offset \(mappedSize))")
                }
                throw tooShort("the function ends at offset \(end) (its size)")
            }
            let instruction: Instruction
            do throws(DecodeFailure) {
                instruction = try decoder.decode(code, offset: offset, available: min(end - offset, 15))
            } catch {
                throw relocationError(error, functionSize: functionSize, mappedSize: mappedSize)
            }
            if offset == 0 && instruction.isEndbr64 { patchOffset = 4 }
            instructions.append(instruction)
            offset += instruction.length
            if functionSize == nil && instruction.endsFlow && offset < patchOffset + patchLength {
                throw RelocationError(
                    code: .functionTooShort, offset: instruction.offset, instruction: instruction.text,
                    explanation:
                        "`\(instruction.text)` at offset \(instruction.offset) ends the function before the bytes the patch overwrites end (\(patchOffset) ..< \(patchOffset + patchLength))"
                )
            }
        }
        let copiedLength = offset
        let base = UInt(bitPattern: code)
        // `call $+5` returns nowhere: the instruction after it runs on, whether copied or not.
        let innerCalls = instructions.filter { $0.isCall && !$0.callsNext && $0.offset + $0.length < copiedLength }
            .map { IncomingBranch(offset: $0.offset, target: $0.offset + $0.length, instruction: $0.text) }

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
            innerCalls: innerCalls, copiesCall: instructions.contains { $0.isCall })
    }

    /// The relocation of a prologue whose instructions all run as well from the trampoline
    /// (most do: pushes, moves, stack adjustments, `endbr64`, loads relative to the instruction
    /// pointer within 2 GB): the bytes copied, such loads' displacements rewritten, then the jump
    /// back. The instructions' lengths come from ``ffh_x86_plain_prefix``, a table in C,
    /// rather than from Zydis; nil when one of them needs the decoder (relative branches,
    /// calls, ends of the flow, far operands, what the table leaves out), which then relocates
    /// them all.
    static func plainRelocation(
        code: UnsafeRawPointer, patchLength: Int, trampoline: UInt, end: Int
    ) -> Relocation? {
        var patchOffset = 0
        var count = 0
        let capacity = 16
        // The offsets, then the copy and the jump back (at most 14 bytes) after it: the
        // trampoline's bytes are made once, in place.
        let room = capacity + Int(FFH_X86_PLAIN_COPY) + 14
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: room) { buffer in
            let offsets = buffer.baseAddress!
            let copy = offsets + capacity
            let copied = ffh_x86_plain_prefix(
                code.assumingMemoryBound(to: UInt8.self), end, patchLength, trampoline, copy, &patchOffset, offsets,
                capacity, &count)
            guard copied > 0 else { return nil }
            let base = UInt(bitPattern: code)
            let back = UnsafeMutableRawPointer(copy + copied)
            let length: Int
            if let rel = fitsRel32(base &+ UInt(copied), from: trampoline &+ UInt(copied) &+ 5) {
                back.storeBytes(of: 0xE9, as: UInt8.self)
                back.storeBytes(of: rel.littleEndian, toByteOffset: 1, as: Int32.self)
                length = copied + 5
            } else {
                // jmp [rip + 0], then the address.
                back.storeBytes(of: 0x25FF, toByteOffset: 0, as: UInt16.self)
                back.storeBytes(of: 0, toByteOffset: 2, as: UInt32.self)
                back.storeBytes(of: UInt64(base &+ UInt(copied)).littleEndian, toByteOffset: 6, as: UInt64.self)
                length = copied + 14
            }
            var instructionOffsets: [Relocation.InstructionOffset] = []
            instructionOffsets.reserveCapacity(count)
            for index in 0..<count {
                instructionOffsets.append(.init(original: Int(offsets[index]), trampoline: Int(offsets[index])))
            }
            return Relocation(
                patchOffset: patchOffset, copiedLength: copied,
                bytes: Array(UnsafeBufferPointer(start: copy, count: length)),
                instructionOffsets: instructionOffsets)
        }
    }

    /// Decodes the `size` bytes of the function at `code` linearly and lists the relative
    /// branches (and `xbegin` abort addresses) from outside `range` to inside it, its start
    /// excluded. Indirect branches (jump tables) are not seen. Reads nothing at or past
    /// `mappedSize` bytes from `code` when that is given. A refusal says it came from this
    /// scan (``RelocationError/Phase/scanningForBranches``).
    static func branches(
        into range: Range<Int>, function code: UnsafeRawPointer, size: Int, mappedSize: Int? = nil
    ) throws(RelocationError) -> [IncomingBranch] {
        let decoder = Decoder()
        var found: [IncomingBranch] = []
        var offset = 0
        let end = min(size, mappedSize ?? .max)
        while offset < end {
            let instruction: Instruction
            do throws(DecodeFailure) {
                instruction = try decoder.decode(code, offset: offset, available: min(end - offset, 15))
            } catch {
                throw relocationError(error, functionSize: size, mappedSize: mappedSize).whileScanning()
            }
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

    /// The refusal for bytes that decode to no instruction: cut by the function's size, cut
    /// by the end of mapped executable memory, or rejected by Zydis.
    private static func relocationError(
        _ failure: DecodeFailure, functionSize: Int?, mappedSize: Int?
    ) -> RelocationError {
        let left = failure.bytes.count
        guard failure.isCut else {
            return RelocationError(
                code: .undecodable, offset: failure.offset, instruction: failure.hex, explanation: failure.reason)
        }
        let limit = failure.offset + left
        let cut =
            "the \(left) bytes left at offset \(failure.offset) (\(failure.hex)) begin an instruction but do not hold it"
        if let mappedSize, limit >= mappedSize {
            return RelocationError(
                code: .crossesMappedEnd, offset: failure.offset, instruction: failure.hex,
                explanation:
                    "the function's code ends at the end of mapped executable memory (offset \(mappedSize)): \(cut)"
            )
        }
        return RelocationError(
            code: .crossesFunctionEnd, offset: failure.offset, instruction: failure.hex,
            explanation: "the function ends at offset \(functionSize ?? limit) (its size) inside an instruction: \(cut)"
        )
    }

    /// How many bytes of alignment padding follow a function of `size` bytes at `code`: the
    /// `nop`s (any length) and `int3`s from its end up to the next 16-byte boundary, which is
    /// where a compiler or assembler aligning functions starts the next one. 0 when anything
    /// else is there, when the end is aligned already, or when an instruction would cross the
    /// boundary. With `byTable`, the common forms of padding are measured without Zydis
    /// (``commonPadding(_:from:to:)``), with the same result.
    static func paddingLength(after code: UnsafeRawPointer, size: Int, byTable: Bool = true) -> Int {
        let end = UInt(bitPattern: code) + UInt(size)
        let boundary = (end + 15) & ~15
        let length = Int(boundary - end)
        if byTable, let padded = commonPadding(code, from: size, to: size + length) { return padded ? length : 0 }
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

    /// Whether the bytes from `start` to `end` of `code` are the padding compilers and
    /// assemblers emit (`int3`, `nop` and `0F 1F` long nops, these two with `66` and `2E`
    /// prefixes), each instruction ending by `end`, measured by the length table
    /// (``ffh_x86_length``) rather than Zydis, which then takes a hundred times as long; nil when an
    /// instruction is something else, which Zydis then decides.
    private static func commonPadding(_ code: UnsafeRawPointer, from start: Int, to end: Int) -> Bool? {
        let bytes = code.assumingMemoryBound(to: UInt8.self)
        var offset = start
        while offset < end {
            var opcode = offset
            while opcode < end, bytes[opcode] == 0x66 || bytes[opcode] == 0x2E { opcode += 1 }
            guard opcode < end else { return nil }
            let isPadding =
                (bytes[opcode] == 0xCC && opcode == offset) || bytes[opcode] == 0x90
                || (bytes[opcode] == 0x0F && opcode + 1 < end && bytes[opcode + 1] == 0x1F)
            guard isPadding else { return nil }
            var relative = Int64.min
            let length = ffh_x86_length(bytes + offset, end - offset, &relative)
            // (An instruction that would cross the boundary is not padding.)
            guard length > 0 else { return nil }
            offset += length
        }
        return true
    }

    // MARK: - Emitting

    /// The rel32 from `next` (the end of the instruction holding it) to `target`, if in range.
    static func fitsRel32(_ target: UInt, from next: UInt) -> Int32? {
        Int32(exactly: Int(bitPattern: target &- next))
    }

    /// The bytes of `value`, least significant first.
    static func littleEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
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
        func refuse(_ code: RelocationError.Code, _ explanation: String) -> RelocationError {
            RelocationError(
                code: code, offset: instruction.offset, instruction: instruction.text, explanation: explanation)
        }
        // A branch target: the copy's address when inside the copied bytes.
        func resolve(_ target: UInt) throws(RelocationError) -> UInt {
            let relative = Int(bitPattern: target &- base)
            guard relative >= 0 && relative < copiedLength else { return target }
            guard let copy = inside(relative) else {
                throw refuse(
                    .branchIntoInstruction,
                    "it branches to offset \(relative), inside a copied instruction, which the trampoline cannot aim at"
                )
            }
            return copy
        }
        switch instruction.kind {
        case .plain:
            return instruction.bytes
        case .ripRelative(let operand):
            guard let disp = fitsRel32(operand.target, from: place &+ UInt(instruction.length)) else {
                return try farMemoryAccess(instruction, operand)
            }
            var bytes = instruction.bytes
            bytes.replaceSubrange(
                operand.displacementOffset..<operand.displacementOffset + 4, with: littleEndian(disp))
            return bytes
        case .jump(let target):
            return jump(from: place, to: try resolve(target))
        case .conditional(let condition, let target):
            let target = try resolve(target)
            if let rel = fitsRel32(target, from: place &+ 6) { return [0x0F, 0x80 | condition] + littleEndian(rel) }
            return [0x70 | (condition ^ 1), 14] + absoluteJump(to: target)
        case .call(let target):
            if instruction.callsNext {
                // push imm32 (sign-extended); mov dword [rsp+4], imm32: the original's return address.
                let returnAddress = UInt64(base) + UInt64(instruction.offset + instruction.length)
                return [0x68] + littleEndian(UInt32(truncatingIfNeeded: returnAddress))
                    + [0xC7, 0x44, 0x24, 0x04] + littleEndian(UInt32(truncatingIfNeeded: returnAddress >> 32))
            }
            let relative = Int(bitPattern: target &- base)
            if relative >= 0 && relative < copiedLength {
                throw refuse(
                    .unsupportedInstruction,
                    "it calls offset \(relative), inside the bytes the patch overwrites: only `call $+5` is moved there, as a call aimed at the copy would push a return address in the trampoline that the code it calls may read"
                )
            }
            if instruction.offset + instruction.length == copiedLength {
                // The last copied instruction: the call returns to the original's next instruction,
                // as it did (push its address, then jump to the callee). A return address in the
                // trampoline, which has no unwind information, would stop an exception thrown in
                // the callee and a backtrace there; the original's own unwind information covers
                // the address it pushes, and the stack is as the original's prologue left it.
                let returnAddress = UInt64(base) + UInt64(copiedLength)
                let push =
                    [0x68] + littleEndian(UInt32(truncatingIfNeeded: returnAddress))
                    + [0xC7, 0x44, 0x24, 0x04] + littleEndian(UInt32(truncatingIfNeeded: returnAddress >> 32))
                return push + jump(from: place &+ UInt(push.count), to: target)
            }
            if let rel = fitsRel32(target, from: place &+ 5) { return [0xE8] + littleEndian(rel) }
            return [0xFF, 0x15, 2, 0, 0, 0, 0xEB, 8] + littleEndian(UInt64(target))
        case .counterBranch(let target):
            let target = try resolve(target)
            var bytes = instruction.bytes
            bytes[bytes.count - 1] = 2
            let far = jump(from: place &+ UInt(bytes.count + 2), to: target)
            return bytes + [0xEB, UInt8(far.count)] + far
        case .transactionBegin(let target):
            let target = try resolve(target)
            if let rel = fitsRel32(target, from: place &+ 6) { return [0xC7, 0xF8] + littleEndian(rel) }
            // The abort lands on the absolute jump; the transaction starts past it.
            return [0xC7, 0xF8, 2, 0, 0, 0, 0xEB, 14] + absoluteJump(to: target)
        case .unsupported(_, let reason):
            throw refuse(.unsupportedInstruction, reason)
        }
    }
}
