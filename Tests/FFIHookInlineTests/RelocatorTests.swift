import CTestSupport
import CZlib
import Testing

@testable import FFIHookInline

#if canImport(Glibc)
    import Glibc
#endif

typealias Unary = @convention(c) (Int64) -> Int64

func codeAddress(_ function: Unary) -> UnsafeRawPointer { unsafeBitCast(function, to: UnsafeRawPointer.self) }

/// Where the trampoline goes: near the function (rel32 forms) or far from it (absolute forms).
enum Placement: String, CaseIterable, CustomStringConvertible, Sendable {
    case near, far
    var description: String { rawValue }

    func page(for code: UnsafeRawPointer) throws -> CodePage {
        try #require(self == .near ? CodePage.near(code) : CodePage.far(code))
    }
}

/// One hand-written fixture (Tests/Support/CTestSupport/inline_fixtures_x86_64.S) of
/// signature (Int64) -> Int64, with inputs and what relocation must produce.
struct UnaryFixture: CustomStringConvertible, Sendable {
    let name: String
    let function: Unary
    let size: Int
    let inputs: [Int64]
    let patchLength: Int
    let patchOffset: Int
    let copiedLength: Int
    /// The original offsets of the copied instructions.
    let originals: [Int]
    /// The trampoline's size near and far.
    let nearSize: Int
    let farSize: Int

    var description: String { name }

    static let all: [UnaryFixture] = [
        // mov rax, rdi; jmp rel8 → E9 rel32 | FF 25 + dq; then the jump back.
        .init(
            name: "jmp rel8", function: ct_inline_jmp8, size: Int(ct_inline_jmp8_size), inputs: [0, 1, -7, 1 << 40],
            patchLength: 5, patchOffset: 0, copiedLength: 5, originals: [0, 3], nearSize: 3 + 5 + 5,
            farSize: 3 + 14 + 14),
        // cmp rdi, 10; jl rel8 → 0F 8C rel32 | jge +14 over FF 25 + dq.
        .init(
            name: "jcc rel8", function: ct_inline_jcc8, size: Int(ct_inline_jcc8_size),
            inputs: [-3, 0, 9, 10, 11, 500],
            patchLength: 5, patchOffset: 0, copiedLength: 6, originals: [0, 4], nearSize: 4 + 6 + 5,
            farSize: 4 + 16 + 14),
        // call rel32, the last copied instruction → push the original's next address (push imm32;
        // mov dword [rsp+4], imm32), then E9 rel32 | FF 25 + dq to the callee: it returns into the
        // original, whose unwind information covers the address.
        .init(
            name: "call rel32", function: ct_inline_call, size: Int(ct_inline_call_size), inputs: [0, 5, -100],
            patchLength: 5, patchOffset: 0, copiedLength: 5, originals: [0], nearSize: 13 + 5 + 5,
            farSize: 13 + 14 + 14),
        // mov rcx, rdi; loop rel8 → loop +2; jmp +5|+14; jmp target.
        .init(
            name: "loop", function: ct_inline_loop, size: Int(ct_inline_loop_size), inputs: [1, 2, 3, 100],
            patchLength: 5, patchOffset: 0, copiedLength: 5, originals: [0, 3], nearSize: 3 + 9 + 5,
            farSize: 3 + 18 + 14),
        // mov rcx, rdi; jrcxz rel8 → jrcxz +2; jmp +5|+14; jmp target.
        .init(
            name: "jrcxz", function: ct_inline_jrcxz, size: Int(ct_inline_jrcxz_size), inputs: [0, 1, 3, -1],
            patchLength: 5, patchOffset: 0, copiedLength: 5, originals: [0, 3], nearSize: 3 + 9 + 5,
            farSize: 3 + 18 + 14),
        // endbr64 (copied, the patch after it); mov rax, rdi; add rax, 5.
        .init(
            name: "endbr64", function: ct_inline_endbr, size: Int(ct_inline_endbr_size), inputs: [0, 1, -5, 77],
            patchLength: 5, patchOffset: 4, copiedLength: 11, originals: [0, 4, 7], nearSize: 11 + 5,
            farSize: 11 + 14),
        // xor eax, eax; add rax, rdi; dec rdi; jnz back to offset 2, copied: it must land on the
        // copy of add (0F 85 rel32 either way).
        .init(
            name: "branch back into the copy", function: ct_inline_backward, size: Int(ct_inline_backward_size),
            inputs: [1, 2, 10, 100], patchLength: 10, patchOffset: 0, copiedLength: 10, originals: [0, 2, 5, 8],
            nearSize: 2 + 3 + 3 + 6 + 5, farSize: 2 + 3 + 3 + 6 + 14),
        // The same function patched over 5 bytes: the jnz stays behind and jumps to the
        // original's offset 2.
        .init(
            name: "branch back, not copied", function: ct_inline_backward, size: Int(ct_inline_backward_size),
            inputs: [1, 2, 10], patchLength: 5, patchOffset: 0, copiedLength: 5, originals: [0, 2],
            nearSize: 5 + 5, farSize: 5 + 14),
    ]
}

@Suite struct RelocatorTests {
    /// Relocates a fixture, installs the trampoline and calls it as the function.
    @Test(arguments: UnaryFixture.all, Placement.allCases)
    func trampolineBehavesAsTheFunction(fixture: UnaryFixture, placement: Placement) throws {
        let code = codeAddress(fixture.function)
        let page = try placement.page(for: code)
        let relocation = try Relocator.relocate(
            code: code, patchLength: fixture.patchLength, trampoline: page.address, functionSize: fixture.size)
        #expect(relocation.patchOffset == fixture.patchOffset)
        #expect(relocation.copiedLength == fixture.copiedLength)
        #expect(relocation.instructionOffsets.map(\.original) == fixture.originals)
        #expect(relocation.bytes.count == (placement == .near ? fixture.nearSize : fixture.farSize))
        // Without the size, the same bytes.
        let unsized = try Relocator.relocate(code: code, patchLength: fixture.patchLength, trampoline: page.address)
        #expect(unsized == relocation)

        page.install(relocation.bytes)
        let trampoline = unsafeBitCast(page.base, to: Unary.self)
        for input in fixture.inputs {
            #expect(trampoline(input) == fixture.function(input), "input \(input)")
        }
    }

    @Test(arguments: Placement.allCases)
    func plainPrologueIsCopiedAsIs(placement: Placement) throws {
        let function: @convention(c) (Int64, Int64) -> Int64 = ct_inline_plain
        let code = unsafeBitCast(function, to: UnsafeRawPointer.self)
        let page = try placement.page(for: code)
        let relocation = try Relocator.relocate(code: code, patchLength: 5, trampoline: page.address)
        #expect(relocation.copiedLength == 8)
        #expect(
            relocation.instructionOffsets == [
                .init(original: 0, trampoline: 0), .init(original: 1, trampoline: 1), .init(original: 4, trampoline: 4),
            ])
        #expect(Array(relocation.bytes.prefix(8)) == Array(UnsafeRawBufferPointer(start: code, count: 8)))
        page.install(relocation.bytes)
        let trampoline = unsafeBitCast(page.base, to: (@convention(c) (Int64, Int64) -> Int64).self)
        for (a, b) in [(0, 0), (1, 2), (-4, 9), (1 << 30, 1 << 31)] as [(Int64, Int64)] {
            #expect(trampoline(a, b) == function(a, b))
        }
    }

    @Test func ripRelativeLoadGetsANewDisplacement() throws {
        let code = codeAddress(ct_inline_rip)
        let page = try #require(CodePage.near(code))
        let relocation = try Relocator.relocate(code: code, patchLength: 5, trampoline: page.address)
        #expect(relocation.copiedLength == 7)
        #expect(relocation.bytes.count == 7 + 5)
        #expect(Array(relocation.bytes.prefix(3)) == [0x48, 0x8B, 0x05])
        page.install(relocation.bytes)
        let trampoline = unsafeBitCast(page.base, to: Unary.self)
        for input: Int64 in [0, 1, -41, 1000] {
            #expect(trampoline(input) == ct_inline_rip(input))
            #expect(trampoline(input) == input + 41)
        }
    }

    /// loope, loopne and jecxz (67 E3) take the shape of loop and jrcxz: the instruction with its
    /// prefixes aimed 2 bytes ahead, a short jmp over the jump to the target.
    @Test(arguments: [[0xE1], [0xE0], [0x67, 0xE3]] as [[UInt8]])
    func counterBranchesKeepTheirPrefixes(opcode: [UInt8]) throws {
        // mov rcx, rdi; <opcode> +6; int3 ...
        var bytes: [UInt8] = [0x48, 0x89, 0xF9] + opcode + [6] + [UInt8](repeating: 0xCC, count: 20)
        let relocation = try bytes.withUnsafeMutableBytes { buffer in
            let code = UnsafeRawPointer(buffer.baseAddress!)
            let trampoline = UInt(bitPattern: code) + 0x1000
            let relocation = try Relocator.relocate(code: code, patchLength: 5, trampoline: trampoline)
            // The near jump to the target lands where the original's branch went.
            let jump = 3 + opcode.count + 1 + 2
            let rel = relocation.bytes[jump + 1..<jump + 5].reversed().reduce(0) { $0 << 8 | Int($1) }
            let target = trampoline + UInt(jump + 5) &+ UInt(bitPattern: Int(Int32(truncatingIfNeeded: rel)))
            #expect(target == UInt(bitPattern: code) + UInt(3 + opcode.count + 1 + 6))
            return relocation
        }
        #expect(
            Array(relocation.bytes.prefix(3 + opcode.count + 4)) == [0x48, 0x89, 0xF9] + opcode + [2, 0xEB, 5, 0xE9])
        #expect(relocation.copiedLength == 3 + opcode.count + 1)
    }

    @Test func branchesIntoTheOverwrittenBytesAreFound() throws {
        let backward = codeAddress(ct_inline_backward)
        let found = try Relocator.branches(into: 0..<5, function: backward, size: Int(ct_inline_backward_size))
        #expect(found.map(\.offset) == [8])
        #expect(found.map(\.target) == [2])
        #expect(found.first?.instruction.hasPrefix("jnz ") == true)
        // Once the jnz is copied too, nothing outside branches in.
        #expect(try Relocator.branches(into: 0..<10, function: backward, size: Int(ct_inline_backward_size)) == [])
        // Branches to the start, or from inside the range, do not count.
        #expect(try Relocator.branches(into: 2..<8, function: backward, size: Int(ct_inline_backward_size)) == [])
        #expect(
            try Relocator.branches(into: 0..<5, function: codeAddress(ct_inline_jmp8), size: Int(ct_inline_jmp8_size))
                == [])
    }
}

/// Real functions of Debian's libc and zlib, looked up with dlsym (an IFUNC resolves to its
/// implementation).
@Suite struct RelocatorRealFunctionTests {
    func symbol(_ name: String) throws -> UnsafeRawPointer {
        try #require(UnsafeRawPointer(dlsym(UnsafeMutableRawPointer(bitPattern: 0), name)))
    }

    @Test func getpid() throws {
        let code = try symbol("getpid")
        let page = try #require(CodePage.near(code))
        let relocation = try Relocator.relocate(code: code, patchLength: 5, trampoline: page.address)
        #expect(relocation.copiedLength >= 5)
        page.install(relocation.bytes)
        let trampoline = unsafeBitCast(page.base, to: (@convention(c) () -> Int32).self)
        #expect(trampoline() == Glibc.getpid())
    }

    @Test func strlen() throws {
        let code = try symbol("strlen")
        let page = try #require(CodePage.near(code))
        let relocation = try Relocator.relocate(code: code, patchLength: 5, trampoline: page.address)
        page.install(relocation.bytes)
        let trampoline = unsafeBitCast(page.base, to: (@convention(c) (UnsafePointer<CChar>) -> Int).self)
        for text in ["", "a", "hello, trampoline", String(repeating: "x", count: 1000)] {
            #expect(trampoline(text) == Glibc.strlen(text))
        }
    }

    @Test func zlibCRC32() throws {
        let code = try symbol("crc32")
        let page = try #require(CodePage.near(code))
        let relocation = try Relocator.relocate(code: code, patchLength: 5, trampoline: page.address)
        page.install(relocation.bytes)
        typealias CRC = @convention(c) (UInt, UnsafePointer<UInt8>?, UInt32) -> UInt
        let trampoline = unsafeBitCast(page.base, to: CRC.self)
        for data in [[], [1], Array("The quick brown fox".utf8), [UInt8](repeating: 0xA5, count: 4096)] as [[UInt8]] {
            let expected = data.withUnsafeBufferPointer { CZlib.crc32(7, $0.baseAddress, UInt32($0.count)) }
            #expect(data.withUnsafeBufferPointer { trampoline(7, $0.baseAddress, UInt32($0.count)) } == expected)
        }
    }
}

/// The relocator's refusal of `bytes` (followed by 16 `int3`s), nil when it relocates them, for
/// a trampoline `trampolineOffset` bytes after them (or at `trampoline`).
func refusal(
    _ bytes: [UInt8], patchLength: Int = 5, trampoline: UInt? = nil, trampolineOffset: UInt = 0x1000,
    functionSize: Int? = nil, mappedSize: Int? = nil
) -> RelocationError? {
    var padded = bytes + [UInt8](repeating: 0xCC, count: 16)
    return padded.withUnsafeMutableBytes { buffer -> RelocationError? in
        let code = UnsafeRawPointer(buffer.baseAddress!)
        do throws(RelocationError) {
            _ = try Relocator.relocate(
                code: code, patchLength: patchLength,
                trampoline: trampoline ?? UInt(bitPattern: code) &+ trampolineOffset,
                functionSize: functionSize, mappedSize: mappedSize)
            return nil
        } catch {
            return error
        }
    }
}

/// Relocates `bytes` (followed by 16 `int3`s) for a trampoline `trampolineOffset` bytes after
/// them and gives `body` the relocation and the bytes' address.
func withRelocation(
    of bytes: [UInt8], patchLength: Int = 5, trampolineOffset: UInt = 0x1000,
    _ body: (Relocation, _ code: UInt) throws -> Void
) throws {
    var padded = bytes + [UInt8](repeating: 0xCC, count: 16)
    try padded.withUnsafeMutableBytes { buffer in
        let code = UnsafeRawPointer(buffer.baseAddress!)
        let relocation = try Relocator.relocate(
            code: code, patchLength: patchLength, trampoline: UInt(bitPattern: code) &+ trampolineOffset)
        try body(relocation, UInt(bitPattern: code))
    }
}

/// The 4 bytes at `offset` of `bytes` as a signed 32-bit integer.
func int32(_ bytes: [UInt8], at offset: Int) -> Int32 {
    Int32(bitPattern: bytes[offset..<offset + 4].reversed().reduce(0) { $0 << 8 | UInt32($1) })
}

/// The 8 bytes at `offset` of `bytes` as an unsigned 64-bit integer.
func uint64(_ bytes: [UInt8], at offset: Int) -> UInt64 {
    bytes[offset..<offset + 8].reversed().reduce(0) { $0 << 8 | UInt64($1) }
}

/// What the relocator refuses, with its error's code, offset and instruction.
@Suite struct RelocatorRefusalTests {
    @Test func threeByteFunction() throws {
        let code = unsafeBitCast(ct_inline_tiny as @convention(c) (Int32) -> Int32, to: UnsafeRawPointer.self)
        for size in [nil, Int(ct_inline_tiny_size)] {
            let error = #expect(throws: RelocationError.self) {
                try Relocator.relocate(
                    code: code, patchLength: 5, trampoline: UInt(bitPattern: code), functionSize: size)
            }
            #expect(error?.code == .functionTooShort)
            #expect(error?.offset == 2)
            #expect(error?.instruction == "ret")
        }
        #expect(ct_inline_tiny_size == 3)
    }

    @Test func patchShorterThanAJump() {
        let error = refusal([0x90, 0x90, 0x90, 0x90, 0x90], patchLength: 4)
        #expect(error?.code == .patchTooShort)
        #expect(error?.description == "a patch needs at least 5 bytes; 4 were asked")
    }

    @Test func undecodableBytes() {
        // 06 (push es) does not exist in 64-bit mode.
        let first = refusal([0x06, 0x90])
        #expect(first?.code == .undecodable && first?.offset == 0 && first?.instruction == "06 90 cc cc")
        #expect(
            first?.description
                == "cannot decode the instruction at offset 0 (bytes 06 90 cc cc): Zydis knows no valid instruction beginning with them"
        )
        let second = refusal([0x90, 0x06])
        #expect(second?.code == .undecodable && second?.offset == 1 && second?.instruction == "06 cc cc cc")
        // F0 (lock) before a mov to a register.
        #expect(refusal([0xF0, 0x48, 0x89, 0xF8])?.explanation == "it has a LOCK prefix it cannot take")
    }

    @Test func branchIntoACopiedInstruction() {
        // jz +1 lands inside mov rax, rdi (offsets 2 ..< 5).
        let error = refusal([0x74, 0x01, 0x48, 0x89, 0xF8, 0xC3])
        #expect(error?.code == .branchIntoInstruction)
        #expect(error?.offset == 0)
    }

    @Test func callIntoTheCopiedBytesOtherThanToTheNextInstruction() {
        // nop; call back to offset 0: inside the bytes the patch overwrites.
        let back = refusal([0x90, 0xE8, 0xFA, 0xFF, 0xFF, 0xFF, 0xC3])
        #expect(back?.code == .unsupportedInstruction)
        #expect(back?.offset == 1)
        #expect(back?.instruction.hasPrefix("call 0x") == true)
        #expect(back?.explanation.hasPrefix("it calls offset 0, inside the bytes the patch overwrites") == true)
    }

    /// A short function copied whole with its padding, whose call goes to the next function:
    /// an ordinary call, listed as inner (its return address is in the copied bytes).
    @Test func callToTheEndOfTheCopiedBytes() throws {
        // push rbp; call +2 (offset 8); pop rbp; ret; nop; nop (padding); the next function.
        try withRelocation(of: [0x55, 0xE8, 0x02, 0, 0, 0, 0x5D, 0xC3, 0x90, 0x90], patchLength: 8) {
            relocation, code in
            #expect(relocation.copiedLength == 8)
            #expect(relocation.bytes[1] == 0xE8)
            #expect(UInt(bitPattern: Int(int32(relocation.bytes, at: 2))) &+ code + 0x1000 + 6 == code + 8)
            #expect(relocation.innerCalls.map(\.offset) == [1])
            #expect(relocation.innerCalls.map(\.target) == [6])
        }
    }

    @Test func operandRelativeToEIP() {
        // mov eax, [eip + 0]: the 67 prefix makes the address 32 bits wide.
        let error = refusal([0x67, 0x8B, 0x05, 0, 0, 0, 0])
        #expect(error?.code == .unsupportedInstruction)
        #expect(error?.explanation.contains("relative to eip") == true)
    }

    /// A `jmp` through memory ends the flow as a `jmp` to a register does: without a size, what
    /// follows it is not taken as the function's.
    @Test func jumpThroughMemoryEndsTheFunction() {
        let error = refusal([0xFF, 0x25, 0, 0, 0, 0], patchLength: 14)
        #expect(error?.code == .functionTooShort)
        #expect(error?.offset == 0)
        #expect(error?.instruction.hasPrefix("jmp ") == true)
    }

    @Test func retBeforeTheBytesToOverwrite() {
        let ret = refusal([0x31, 0xC0, 0xC3])
        #expect(ret?.code == .functionTooShort && ret?.offset == 2 && ret?.instruction == "ret")
        #expect(
            ret?.description
                == "`ret` at offset 2 ends the function before the bytes the patch overwrites end (0 ..< 5)")
        // With a size, the size decides.
        let sized = refusal([0x31, 0xC0, 0x90, 0x90], functionSize: 4)
        #expect(sized?.code == .functionTooShort)
        #expect(
            sized?.description
                == "the function ends at offset 4 (its size), before the bytes the patch overwrites end (0 ..< 5)")
    }
}
