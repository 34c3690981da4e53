import CTestSupport
import FFIHook
import Testing

@testable import FFIHookInline

#if canImport(Glibc)
    import Glibc
#endif

/// Functions whose code runs from one line of `/proc/self/maps` into the next: a page whose
/// protection changed (as writing a patch changes it) becomes a mapping of its own, and the
/// function's code goes on in it.
extension InlineSuites {
    @Suite struct PageBoundaryTests {
        static let pageSize = UInt(sysconf(Int32(_SC_PAGESIZE)))

        /// The mapping holding `address` now.
        static func mapping(at address: UInt) -> MemoryMapping? {
            MemoryMapping.containing(address, in: MemoryMapping.all())
        }

        /// A function of known size (its symbol) whose 10-byte `movabs` straddles a page
        /// boundary, the page after it made its own mapping: the scan for branches into the
        /// patch reads on into that mapping.
        @Test func aFunctionWhoseBodyRunsIntoTheNextMappingIsHooked() throws {
            let code = UInt(bitPattern: address(of: ct_inline_straddle))
            let boundary = code + 16
            #expect(boundary % Self.pageSize == 0)
            #expect(ct_inline_straddle_size == 30)
            // Read, write and execute, then back: the page is a mapping of its own.
            let page = UnsafeMutableRawPointer(bitPattern: boundary)!
            #expect(mprotect(page, Int(Self.pageSize), PROT_READ | PROT_WRITE | PROT_EXEC) == 0)
            #expect(mprotect(page, Int(Self.pageSize), PROT_READ | PROT_EXEC) == 0)
            let before = try #require(Self.mapping(at: code))
            try #require(before.end == boundary, "the mapping is not split at the page boundary")

            let expected = ct_inline_straddle(5)
            #expect(expected == 5 + 3 + 0x1122_3344_5566_7788)
            let function = try InlineFunction(address: address(of: ct_inline_straddle))
            try function.patch()
            defer { try? function.unpatch() }
            #expect(function.isPatched)
            #expect(ct_inline_straddle(5) == expected)
            #expect(ct_inline_straddle(-9) == -9 + 3 + 0x1122_3344_5566_7788)
        }

        /// Code of unknown size (no symbol) whose first instruction straddles the boundary
        /// between two adjacent executable mappings (read-execute, then read-write-execute).
        @Test func codeWhoseFirstInstructionStraddlesTwoMappingsIsHooked() throws {
            let size = Int(2 * Self.pageSize)
            let mapped = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
            let base = try #require(mapped == MAP_FAILED ? nil : mapped)
            defer { munmap(base, size) }
            // lea rax, [rdi + 1000] (7 bytes, 4 before the boundary); ret.
            let bytes: [UInt8] = [0x48, 0x8D, 0x87, 0xE8, 0x03, 0x00, 0x00, 0xC3]
            let start = base + Int(Self.pageSize) - 4
            bytes.withUnsafeBytes { start.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            #expect(mprotect(base, Int(Self.pageSize), PROT_READ | PROT_EXEC) == 0)
            #expect(
                mprotect(base + Int(Self.pageSize), Int(Self.pageSize), PROT_READ | PROT_WRITE | PROT_EXEC) == 0)
            let first = try #require(Self.mapping(at: UInt(bitPattern: start)))
            try #require(first.end == UInt(bitPattern: base) + Self.pageSize)

            typealias Unary = @convention(c) (Int64) -> Int64
            let call = unsafeBitCast(start, to: Unary.self)
            #expect(call(5) == 1005)
            let function = try InlineFunction(address: UnsafeRawPointer(start))
            try function.patch()
            #expect(function.isPatched)
            #expect(call(5) == 1005)
            #expect(function.original(as: Unary.self)(-1) == 999)
            try function.unpatch()
            #expect(!function.isPatched)
        }
    }
}

/// ``MemoryMapping/executableRun(from:in:)`` on made-up maps.
@Suite struct ExecutableRunTests {
    static func mapping(_ start: UInt, _ end: UInt, _ permissions: String) -> MemoryMapping {
        MemoryMapping(
            start: start, end: end, readable: permissions.contains("r"), writable: permissions.contains("w"),
            executable: permissions.contains("x"))
    }

    static let maps = [
        mapping(0x1000, 0x2000, "r"),
        mapping(0x2000, 0x5000, "rx"),
        mapping(0x5000, 0x6000, "rwx"),
        mapping(0x6000, 0x8000, "rx"),
        mapping(0x8000, 0x9000, "rw"),
        mapping(0x9000, 0xA000, "rx"),
        mapping(0xB000, 0xC000, "rx"),
        mapping(0xC000, 0xD000, "x"),
    ]

    @Test func adjacentExecutableMappingsCountAsOne() {
        #expect(MemoryMapping.executableRun(from: 0x2000, in: Self.maps) == 0x6000)
        #expect(MemoryMapping.executableRun(from: 0x4FFC, in: Self.maps) == 0x3004)
        #expect(MemoryMapping.executableRun(from: 0x7FFF, in: Self.maps) == 1)
    }

    @Test func aGapOrAMappingNotBothReadableAndExecutableEndsTheRun() {
        // A gap after 0xA000; execute-only memory after 0xC000.
        #expect(MemoryMapping.executableRun(from: 0x9800, in: Self.maps) == 0x800)
        #expect(MemoryMapping.executableRun(from: 0xB000, in: Self.maps) == 0x1000)
    }

    @Test func anAddressOutsideExecutableMemoryHasNone() {
        for address: UInt in [0x0, 0x1800, 0x8000, 0xA800, 0xC000, 0xE000] {
            #expect(MemoryMapping.executableRun(from: address, in: Self.maps) == 0, "0x\(String(address, radix: 16))")
        }
        #expect(MemoryMapping.executableRun(from: 0x2000, in: []) == 0)
    }
}
