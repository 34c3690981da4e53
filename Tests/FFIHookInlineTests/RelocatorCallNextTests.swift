import CTestSupport
import Testing

@testable import FFIHookInline

/// `call $+5` (a call to the next instruction), alone or as the `call $+5; pop reg` position
/// thunk: the copy pushes the original's return address and goes on.
@Suite struct RelocatorCallNextTests {
    typealias Nullary = @convention(c) () -> Int64

    /// A fixture returning 0 when the address its call pushed is the original's.
    struct Fixture: CustomStringConvertible, Sendable {
        let name: String
        let function: Nullary
        let size: Int
        var description: String { name }
    }

    static let fixtures: [Fixture] = [
        Fixture(name: "call $+5; pop rax", function: ct_inline_thunk, size: Int(ct_inline_thunk_size)),
        Fixture(name: "call $+5; mov rax, [rsp]", function: ct_inline_callnext, size: Int(ct_inline_callnext_size)),
    ]

    /// The copy of the call alone (5), with what reads the address (14), and of the whole
    /// function (0), near and far.
    @Test(arguments: fixtures, [5, 14, 0])
    func theCopyPushesTheOriginalReturnAddress(fixture: Fixture, patchLength: Int) throws {
        for placement in Placement.allCases {
            try check(fixture, patchLength: patchLength, placement: placement)
        }
    }

    func check(_ fixture: Fixture, patchLength: Int, placement: Placement) throws {
        #expect(fixture.function() == 0)
        let code = unsafeBitCast(fixture.function, to: UnsafeRawPointer.self)
        let page = try placement.page(for: code)
        let relocation = try Relocator.relocate(
            code: code, patchLength: patchLength == 0 ? fixture.size : patchLength, trampoline: page.address,
            functionSize: fixture.size)
        // push imm32 (the low half); mov dword [rsp+4], imm32 (the high half).
        let returnAddress = UInt64(UInt(bitPattern: code) + 5)
        let bytes = relocation.bytes
        #expect(bytes[0] == 0x68 && int32(bytes, at: 1) == Int32(truncatingIfNeeded: returnAddress))
        #expect(Array(bytes[5..<9]) == [0xC7, 0x44, 0x24, 0x04])
        #expect(int32(bytes, at: 9) == Int32(truncatingIfNeeded: returnAddress >> 32))
        #expect(relocation.trampolineOffset(ofOriginal: 5) == (relocation.copiedLength > 5 ? 13 : nil))
        // The call's return address is its own end: nothing returns into the patched bytes.
        #expect(relocation.innerCalls.isEmpty)

        page.install(bytes)
        #expect(unsafeBitCast(page.base, to: Nullary.self)() == 0)
    }
}
