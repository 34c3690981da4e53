import Testing

@testable import FFIHookInline

/// `xbegin` in the copied bytes: its abort address is relative, and the copy keeps it. (Not
/// executed: processors without RTM, most of them now, fault on `xbegin`; the bytes are
/// checked against the addresses computed here.)
@Suite struct RelocatorTransactionTests {
    /// The abort address of the `xbegin rel32` at `offset` of `bytes`, placed at `address`.
    func abortAddress(_ bytes: [UInt8], at offset: Int, placedAt address: UInt) -> UInt {
        #expect(Array(bytes[offset..<offset + 2]) == [0xC7, 0xF8])
        return address + UInt(offset + 6) &+ UInt(bitPattern: Int(int32(bytes, at: offset + 2)))
    }

    @Test func theAbortAddressIsKeptFromANearTrampoline() throws {
        // xbegin +0x10.
        try withRelocation(of: [0xC7, 0xF8, 0x10, 0, 0, 0]) { relocation, code in
            #expect(relocation.copiedLength == 6)
            #expect(abortAddress(relocation.bytes, at: 0, placedAt: code + 0x1000) == code + 6 + 0x10)
        }
    }

    @Test func theRel16FormBecomesRel32() throws {
        // xbegin rel16 +0x10 (66 C7 F8 cw): in 64-bit mode the address is not truncated.
        try withRelocation(of: [0x66, 0xC7, 0xF8, 0x10, 0x00]) { relocation, code in
            #expect(relocation.copiedLength == 5)
            #expect(relocation.bytes.count == 6 + 5)
            #expect(abortAddress(relocation.bytes, at: 0, placedAt: code + 0x1000) == code + 5 + 0x10)
        }
    }

    @Test func aFarAbortAddressGoesThroughAnAbsoluteJump() throws {
        try withRelocation(of: [0xC7, 0xF8, 0x10, 0, 0, 0], trampolineOffset: 0x2_0000_0000) { relocation, code in
            let bytes = relocation.bytes
            // xbegin +2; jmp +14; jmp [rip+0]; dq target.
            #expect(Array(bytes.prefix(14)) == [0xC7, 0xF8, 2, 0, 0, 0, 0xEB, 14, 0xFF, 0x25, 0, 0, 0, 0])
            #expect(uint64(bytes, at: 14) == UInt64(code + 6 + 0x10))
        }
    }

    @Test func anAbortAddressInTheCopiedBytesIsItsCopy() throws {
        // xbegin +3; nop; nop; nop; mov rax, rdi: the abort lands on the mov, copied too.
        let bytes: [UInt8] = [0xC7, 0xF8, 3, 0, 0, 0, 0x90, 0x90, 0x90, 0x48, 0x89, 0xF8]
        try withRelocation(of: bytes, patchLength: 12, trampolineOffset: 0x2_0000_0000) { relocation, code in
            let copy = try #require(relocation.trampolineOffset(ofOriginal: 9))
            let trampoline = code + 0x2_0000_0000
            #expect(abortAddress(relocation.bytes, at: 0, placedAt: trampoline) == trampoline + UInt(copy))
        }
    }

    @Test func anAbortAddressInTheOverwrittenBytesIsFoundByTheScan() throws {
        // mov rax, rdi; nop; nop; xbegin back to offset 2 (inside the first 5 bytes); ret.
        var bytes: [UInt8] =
            [0x48, 0x89, 0xF8, 0x90, 0x90, 0xC7, 0xF8] + Relocator.littleEndian(Int32(2 - 11)) + [0xC3]
        let found = try bytes.withUnsafeMutableBytes { buffer in
            try Relocator.branches(into: 0..<5, function: UnsafeRawPointer(buffer.baseAddress!), size: 12)
        }
        #expect(found.map(\.offset) == [5])
        #expect(found.map(\.target) == [2])
        #expect(found.first?.instruction.hasPrefix("xbegin") == true)
    }
}
