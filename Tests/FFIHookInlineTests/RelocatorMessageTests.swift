import Testing

@testable import FFIHookInline

/// Each refusal names what really happened: an instruction cut by the function's size or by
/// the end of mapped executable memory is not called undecodable, and the scan for branches
/// into the patch, which relocates nothing, does not say "relocate".
@Suite struct RelocatorMessageTests {
    /// movabs rax, imm64 (10 bytes).
    static let movabs: [UInt8] = [0x48, 0xB8, 1, 2, 3, 4, 5, 6, 7, 8]

    @Test func anInstructionCutByTheFunctionsSize() {
        let error = refusal(Self.movabs, functionSize: 6)
        #expect(error?.code == .crossesFunctionEnd)
        #expect(error?.offset == 0)
        #expect(error?.instruction == "48 b8 01 02 03 04")
        #expect(
            error?.description
                == "the function ends at offset 6 (its size) inside an instruction: the 6 bytes left at offset 0 (48 b8 01 02 03 04) begin an instruction but do not hold it"
        )
    }

    @Test func anInstructionCutByTheEndOfMappedMemory() {
        // nop; movabs, of which mapped memory holds 3 bytes (the function's size says 11, or
        // is unknown).
        for size in [nil, 11, 4] as [Int?] {
            let error = refusal([0x90] + Self.movabs, functionSize: size, mappedSize: 4)
            #expect(error?.code == .crossesMappedEnd)
            #expect(error?.offset == 1)
            #expect(
                error?.description
                    == "the function's code ends at the end of mapped executable memory (offset 4): the 3 bytes left at offset 1 (48 b8 01) begin an instruction but do not hold it"
            )
        }
    }

    @Test func theFunctionEndsAtTheEndOfMappedMemory() {
        let error = refusal([0x90, 0x90, 0x90], mappedSize: 3)
        #expect(error?.code == .functionTooShort)
        #expect(
            error?.description
                == "the function's code ends at the end of mapped executable memory (offset 3), before the bytes the patch overwrites end (0 ..< 5)"
        )
    }

    /// The scan's refusals, for `bytes` (five nops first, the range it looks into) of `size`.
    func scanRefusal(_ bytes: [UInt8], size: Int, mappedSize: Int? = nil) -> RelocationError? {
        var padded = bytes + [UInt8](repeating: 0xCC, count: 16)
        return padded.withUnsafeMutableBytes { buffer -> RelocationError? in
            do throws(RelocationError) {
                _ = try Relocator.branches(
                    into: 0..<5, function: UnsafeRawPointer(buffer.baseAddress!), size: size, mappedSize: mappedSize)
                return nil
            } catch {
                return error
            }
        }
    }

    static let nops: [UInt8] = [0x90, 0x90, 0x90, 0x90, 0x90]

    @Test func theScanMeetsBytesZydisRejects() {
        let error = scanRefusal(Self.nops + [0x06], size: 8)
        #expect(error?.code == .undecodable)
        #expect(error?.phase == .scanningForBranches)
        #expect(
            error?.description
                == "the function's body cannot be decoded at offset 5 (bytes 06 cc cc) to look for branches into the patch: Zydis knows no valid instruction beginning with them"
        )
    }

    @Test func theScanMeetsAnInstructionCutByTheFunctionsSize() {
        let error = scanRefusal(Self.nops + Self.movabs, size: 9)
        #expect(error?.code == .crossesFunctionEnd)
        #expect(
            error?.description
                == "the function's body cannot be decoded to look for branches into the patch: the function ends at offset 9 (its size) inside an instruction: the 4 bytes left at offset 5 (48 b8 01 02) begin an instruction but do not hold it"
        )
    }

    @Test func theScanMeetsTheEndOfMappedMemory() {
        let error = scanRefusal(Self.nops + Self.movabs, size: 15, mappedSize: 8)
        #expect(error?.code == .crossesMappedEnd)
        #expect(
            error?.description
                == "the function's body cannot be decoded to look for branches into the patch: the function's code ends at the end of mapped executable memory (offset 8): the 3 bytes left at offset 5 (48 b8 01) begin an instruction but do not hold it"
        )
        #expect(error?.description.contains("relocate") == false)
        // Mapped memory that holds the function: nothing to refuse.
        #expect(scanRefusal(Self.nops + Self.movabs, size: 15, mappedSize: 15) == nil)
    }
}
