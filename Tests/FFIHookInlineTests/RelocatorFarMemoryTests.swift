import CTestSupport
import Testing

@testable import FFIHookInline

#if canImport(Glibc)
    import Glibc
#endif

/// One hand-written fixture (Tests/Support/CTestSupport/inline_fixtures_x86_64.S) of signature
/// (Int64) -> Int64 with RIP-relative operands, copied whole into a trampoline.
struct RIPFixture: CustomStringConvertible, Sendable {
    let name: String
    let function: Unary
    let size: Int
    let inputs: [Int64]
    /// Whether this processor runs its instructions.
    let runsHere: Bool

    var description: String { name }

    static let all: [RIPFixture] = [
        .init(
            name: "add, lea and cmp among live registers", function: ct_inline_ripmix, size: Int(ct_inline_ripmix_size),
            inputs: [0, 1, -109, 1 << 40], runsHere: true),
        .init(
            name: "flags across a load", function: ct_inline_ripflags, size: Int(ct_inline_ripflags_size),
            inputs: [-5, -1, 0, 1, 7], runsHere: true),
        .init(
            name: "red zone across a load", function: ct_inline_ripredzone, size: Int(ct_inline_ripredzone_size),
            inputs: [0, 3, -77, 1 << 50], runsHere: true),
        .init(
            name: "store then load", function: ct_inline_ripstore, size: Int(ct_inline_ripstore_size),
            inputs: [0, 9, -1], runsHere: true),
        .init(
            name: "REX.B and VEX.B set", function: ct_inline_ripvex, size: Int(ct_inline_ripvex_size),
            inputs: [0, 5, -82], runsHere: ct_cpu_has_avx2() != 0),
        .init(
            name: "EVEX.B set", function: ct_inline_ripevex, size: Int(ct_inline_ripevex_size), inputs: [0, 5, -41],
            runsHere: ct_cpu_has_avx512vl() != 0),
        .init(
            name: "push qword [rip]", function: ct_inline_rippush, size: Int(ct_inline_rippush_size),
            inputs: [0, 2, -41], runsHere: true),
        .init(
            name: "jmp qword [rip]", function: ct_inline_ripjmp, size: Int(ct_inline_ripjmp_size),
            inputs: [0, 4, -21], runsHere: true),
        .init(
            name: "call qword [rip]", function: ct_inline_ripcall, size: Int(ct_inline_ripcall_size),
            inputs: [0, 4, -100], runsHere: true),
    ]
}

/// RIP-relative operands whose address is beyond ±2 GB of the trampoline, reached through a
/// register, executed against the original.
@Suite struct RelocatorFarMemoryTests {
    /// Copies the whole fixture, near (a new disp32) and far (through a register), and calls
    /// the copy.
    @Test(arguments: RIPFixture.all, Placement.allCases)
    func copyBehavesAsTheFunction(fixture: RIPFixture, placement: Placement) throws {
        let code = codeAddress(fixture.function)
        let page = try placement.page(for: code)
        let relocation = try Relocator.relocate(
            code: code, patchLength: fixture.size, trampoline: page.address, functionSize: fixture.size)
        #expect(relocation.copiedLength == fixture.size)
        // No copy is longer than the bound the trampoline's allocator reserves.
        let back = placement == .near ? 5 : 14
        let starts = relocation.instructionOffsets.map(\.trampoline) + [relocation.bytes.count - back]
        for (start, next) in zip(starts, starts.dropFirst()) {
            #expect(next - start <= Relocator.maximumCopyLength)
        }
        guard fixture.runsHere else { return }
        page.install(relocation.bytes)
        let trampoline = unsafeBitCast(page.base, to: Unary.self)
        for input in fixture.inputs {
            #expect(trampoline(input) == fixture.function(input), "input \(input)")
        }
    }

    @Test func aFarStoreWritesTheVariable() throws {
        let code = codeAddress(ct_inline_ripstore)
        let page = try Placement.far.page(for: code)
        let size = Int(ct_inline_ripstore_size)
        let relocation = try Relocator.relocate(
            code: code, patchLength: size, trampoline: page.address, functionSize: size)
        page.install(relocation.bytes)
        let trampoline = unsafeBitCast(page.base, to: Unary.self)
        #expect(trampoline(1234) == 1235)
        #expect(ct_inline_cell_value() == 1234)
    }

    @Test func aFarLeaBecomesAMoveOfTheAddress() throws {
        // lea r8, [rip + 0x10]; lea eax, [rip + 0x10].
        try withRelocation(
            of: [0x4C, 0x8D, 0x05, 0x10, 0, 0, 0, 0x8D, 0x05, 0x10, 0, 0, 0], patchLength: 13,
            trampolineOffset: 0x2_0000_0000
        ) { relocation, code in
            let bytes = relocation.bytes
            #expect(Array(bytes.prefix(2)) == [0x49, 0xB8])
            #expect(uint64(bytes, at: 2) == UInt64(code + 7 + 0x10))
            #expect(bytes[10] == 0xB8)
            #expect(int32(bytes, at: 11) == Int32(truncatingIfNeeded: code + 13 + 0x10))
        }
    }

    @Test func theScratchRegisterIsOneTheInstructionLeavesAlone() throws {
        // lock cmpxchg16b [rip + 0]: rax, rbx, rcx and rdx are its own, so rsi holds the address.
        try withRelocation(
            of: [0xF0, 0x48, 0x0F, 0xC7, 0x0D, 0, 0, 0, 0], trampolineOffset: 0x2_0000_0000
        ) { relocation, code in
            let bytes = relocation.bytes
            // lea rsp, [rsp-128]; push rsi; mov rsi, imm64.
            #expect(Array(bytes.prefix(8)) == [0x48, 0x8D, 0x64, 0x24, 0x80, 0x56, 0x48, 0xBE])
            #expect(uint64(bytes, at: 8) == UInt64(code + 9))
            // The instruction with [rsi + 0]; pop rsi; lea rsp, [rsp+128].
            #expect(Array(bytes[16..<25]) == [0xF0, 0x48, 0x0F, 0xC7, 0x8E, 0, 0, 0, 0])
            #expect(Array(bytes[25..<34]) == [0x5E, 0x48, 0x8D, 0xA4, 0x24, 0x80, 0, 0, 0])
        }
    }

    @Test(
        arguments: [
            // pop qword [rip]: rsp moves under it.
            ([0x8F, 0x05, 0, 0, 0, 0], "rsp"),
            // mov [rip], rsp.
            ([0x48, 0x89, 0x25, 0, 0, 0, 0], "rsp"),
            // jmp far [rip] (FF /5).
            ([0x48, 0xFF, 0x2D, 0, 0, 0, 0], "a far jump through memory"),
            // call far [rip] (FF /3).
            ([0x48, 0xFF, 0x1D, 0, 0, 0, 0], "a far call through memory"),
            // push word [rip].
            ([0x66, 0xFF, 0x35, 0, 0, 0, 0], "a push of 16 bits"),
        ] as [([UInt8], String)])
    func whatNoRegisterCanReachIsRefusedFarAndMovedNear(bytes: [UInt8], why: String) {
        let far = refusal(bytes, patchLength: 5, trampolineOffset: 0x2_0000_0000)
        #expect(far?.code == .ripRelativeOutOfRange)
        #expect(far?.offset == 0)
        #expect(far?.explanation.hasPrefix("its RIP-relative address is beyond ±2 GB of the trampoline") == true)
        #expect(far?.explanation.contains(why) == true, Comment(rawValue: far?.explanation ?? ""))
        #expect(refusal(bytes, patchLength: 5, trampolineOffset: 0x1000) == nil)
    }
}
