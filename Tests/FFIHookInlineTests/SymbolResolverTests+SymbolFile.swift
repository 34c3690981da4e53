import Testing

@testable import FFIHookInline

#if canImport(Glibc)
    import Glibc
#endif

extension SymbolResolverTests {
    /// The `.symtab` reader on files written here: a small ELF whose every field the tests know,
    /// its truncations and corruptions, and a truncated copy of a real library.
    @Suite struct SymbolFile {
        /// The symbols of the hand-written file. At 0x1000 a global function and a local alias
        /// (the global one wins); a label inside it; a static function; an IFUNC; a size-0
        /// function; a function nested in a larger one; and entries that are no function of
        /// the file (data, an import, an absolute symbol, a name past the string table).
        static let symbols: [HandWrittenELF.Symbol] = [
            .init(name: "alpha_local", value: 0x1000, size: 0x20, type: 2, binding: 0),
            .init(name: "alpha", value: 0x1000, size: 0x20, type: 2, binding: 1),
            .init(name: "alpha_label", value: 0x1010, size: 0, type: 0, binding: 0),
            .init(name: "beta_static", value: 0x1020, size: 0x10, type: 2, binding: 0),
            .init(name: "gamma_indirect", value: 0x1040, size: 0x8, type: 10, binding: 1),
            .init(name: "zero_sized", value: 0x1100, size: 0, type: 2, binding: 1),
            .init(name: "outer", value: 0x2000, size: 0x100, type: 2, binding: 1),
            .init(name: "inner", value: 0x2010, size: 0x10, type: 2, binding: 0),
            .init(name: "data", value: 0x1050, size: 0x40, type: 1, binding: 1),
            .init(name: "imported", value: 0, size: 0, type: 2, binding: 1, section: 0),
            .init(name: "absolute", value: 0x1060, size: 0x10, type: 2, binding: 1, section: 0xFFF1),
            .init(name: "", value: 0x1070, size: 0x10, type: 2, binding: 1, nameOffset: 0xFFFF),
        ]

        /// The function holding `address` in the parsed file, with its name.
        static func lookup(_ table: ELFSymbolTable, _ address: UInt64) -> String? {
            table.function(containing: address).flatMap { table.name(of: $0) }
        }

        @Test func readsFunctionsAndPicksTheBest() throws {
            let file = HandWrittenELF(symbols: Self.symbols)
            try withTemporaryFile(file.bytes) { path in
                let table = try #require(ELFSymbolTable(path: path))
                #expect(table.functions.count == 7)
                #expect(
                    table.loadSegments == [
                        LoadSegment(
                            offset: 0, address: 0, fileSize: UInt64(file.bytes.count), memorySize: 0x3000, flags: 5)
                    ])
                #expect(Self.lookup(table, 0x0FFF) == nil)
                #expect(Self.lookup(table, 0x1000) == "alpha")
                #expect(Self.lookup(table, 0x1010) == "alpha")
                #expect(Self.lookup(table, 0x101F) == "alpha")
                #expect(Self.lookup(table, 0x1020) == "beta_static")
                #expect(table.function(containing: 0x1020)?.isLocal == true)
                #expect(Self.lookup(table, 0x1030) == nil)
                #expect(Self.lookup(table, 0x1044) == "gamma_indirect")
                #expect(table.function(containing: 0x1044)?.isIndirect == true)
                #expect(Self.lookup(table, 0x1058) == nil)
                #expect(Self.lookup(table, 0x1060) == nil)
                #expect(Self.lookup(table, 0x1070) == nil)
                #expect(Self.lookup(table, 0x1100) == "zero_sized")
                #expect(table.function(containing: 0x1100)?.size == 0)
                #expect(Self.lookup(table, 0x1101) == nil)
                #expect(Self.lookup(table, 0x2000) == "outer")
                #expect(Self.lookup(table, 0x2018) == "inner")
                #expect(Self.lookup(table, 0x2050) == "outer")
                #expect(Self.lookup(table, 0x20FF) == "outer")
                #expect(Self.lookup(table, 0x2100) == nil)
                #expect(Self.lookup(table, .max) == nil)
            }
        }

        /// The section headers come last, so every truncation loses some of them.
        @Test func everyTruncationIsRefused() throws {
            let bytes = HandWrittenELF(symbols: Self.symbols).bytes
            for length in 0..<bytes.count {
                try withTemporaryFile(Array(bytes[..<length])) { path in
                    #expect(ELFSymbolTable(path: path) == nil, "\(length) bytes")
                }
            }
        }

        /// A real library (stripped: no `.symtab`) reads as no functions; cut short, as nothing.
        @Test func truncatedLibraryIsRefused() throws {
            let library = try #require(SymbolResolver.extent(of: UInt(bitPattern: dlsym(nil, "crc32")))).objectPath
            let bytes = try #require(readFile(library))
            try withTemporaryFile(bytes) { path in
                let table = try #require(ELFSymbolTable(path: path))
                #expect(table.functions.isEmpty)
                #expect(!table.loadSegments.isEmpty)
            }
            for length in [0, 1, 4, 5, 6, 16, 63, 64, 100, 4096, bytes.count / 2, bytes.count - 64, bytes.count - 1] {
                try withTemporaryFile(Array(bytes[..<length])) { path in
                    #expect(ELFSymbolTable(path: path) == nil, "\(length) bytes")
                }
            }
        }

        /// One field set to a value that would send a careless reader out of bounds.
        struct Corruption: CustomStringConvertible, Sendable {
            let description: String
            let apply: @Sendable (inout [UInt8], HandWrittenELF) -> Void

            static let all: [Corruption] = [
                .init(description: "32-bit class") { bytes, _ in bytes[4] = 1 },
                .init(description: "big-endian") { bytes, _ in bytes[5] = 2 },
                .init(description: "bad magic") { bytes, _ in bytes[1] = 0x45 + 1 },
                .init(description: "relocatable object") { bytes, _ in put(UInt16(1), at: 16, in: &bytes) },
                .init(description: "another machine") { bytes, _ in put(UInt16(40), at: 18, in: &bytes) },
                .init(description: "section headers past the end") { bytes, _ in
                    put(UInt64(1 << 40), at: 40, in: &bytes)
                },
                .init(description: "section header offset overflowing") { bytes, _ in
                    put(UInt64.max - 8, at: 40, in: &bytes)
                },
                .init(description: "section header size 40") { bytes, _ in put(UInt16(40), at: 58, in: &bytes) },
                .init(description: "65535 sections") { bytes, _ in put(UInt16(0xFFFF), at: 60, in: &bytes) },
                .init(description: "extended section count, huge") { bytes, file in
                    put(UInt16(0), at: 60, in: &bytes)
                    put(UInt64.max / 2, at: file.sectionHeader(0) + 32, in: &bytes)
                },
                .init(description: "program headers past the end") { bytes, _ in
                    put(UInt64(1 << 40), at: 32, in: &bytes)
                },
                .init(description: "program header size 8") { bytes, _ in put(UInt16(8), at: 54, in: &bytes) },
                .init(description: "extended program header count, huge") { bytes, file in
                    put(UInt16(0xFFFF), at: 56, in: &bytes)
                    put(UInt32.max, at: file.sectionHeader(0) + 44, in: &bytes)
                },
                .init(description: "symbols past the end") { bytes, file in
                    put(UInt64(1 << 40), at: file.sectionHeader(1) + 24, in: &bytes)
                },
                .init(description: "symbol table size huge") { bytes, file in
                    put(UInt64.max, at: file.sectionHeader(1) + 32, in: &bytes)
                },
                .init(description: "symbol entry size 0") { bytes, file in
                    put(UInt64(0), at: file.sectionHeader(1) + 56, in: &bytes)
                },
                .init(description: "symbol entry size huge") { bytes, file in
                    put(UInt64.max, at: file.sectionHeader(1) + 56, in: &bytes)
                },
                .init(description: "string table link out of range") { bytes, file in
                    put(UInt32(99), at: file.sectionHeader(1) + 40, in: &bytes)
                },
                .init(description: "string table link to itself") { bytes, file in
                    put(UInt32(1), at: file.sectionHeader(1) + 40, in: &bytes)
                },
                .init(description: "string table past the end") { bytes, file in
                    put(UInt64(1 << 40), at: file.sectionHeader(2) + 24, in: &bytes)
                },
                .init(description: "string table size overflowing") { bytes, file in
                    put(UInt64.max, at: file.sectionHeader(2) + 32, in: &bytes)
                },
            ]
        }

        @Test(arguments: Corruption.all) func corruptionIsRefused(_ corruption: Corruption) throws {
            let file = HandWrittenELF(symbols: Self.symbols)
            var bytes = file.bytes
            corruption.apply(&bytes, file)
            try withTemporaryFile(bytes) { path in
                #expect(ELFSymbolTable(path: path) == nil)
            }
        }

        /// Random bytes changed anywhere, over and over: the reader answers or refuses, never
        /// faults (the run would end if it did).
        @Test func randomCorruptionNeverFaults() throws {
            let file = HandWrittenELF(symbols: Self.symbols)
            var random = SplitMix(seed: 24)
            var parsed = 0
            for _ in 0..<1500 {
                var bytes = file.bytes
                for _ in 0..<(1 + random.next() % 4) {
                    let offset = Int(random.next() % UInt64(bytes.count))
                    bytes[offset] = UInt8(truncatingIfNeeded: random.next())
                }
                try withTemporaryFile(bytes) { path in
                    guard let table = ELFSymbolTable(path: path) else { return }
                    parsed += 1
                    for address: UInt64 in [0, 0x1000, 0x1044, 0x2018, random.next()] {
                        if let function = table.function(containing: address) { _ = table.name(of: function) }
                    }
                }
            }
            // Most changes hit bytes that do not matter (code, names): most files still parse.
            #expect(parsed > 100)
        }
    }
}

// MARK: - Writing ELF files

/// A minimal 64-bit little-endian x86-64 shared object: the ELF header, one `PT_LOAD`, a
/// `.symtab` and its `.strtab`, then the section headers (null, `.symtab`, `.strtab`) last.
struct HandWrittenELF {
    /// One symbol table entry.
    struct Symbol {
        let name: String
        let value: UInt64
        let size: UInt64
        /// STT_*: 0 none, 1 object, 2 function, 10 IFUNC.
        let type: UInt8
        /// STB_*: 0 local, 1 global.
        let binding: UInt8
        /// st_shndx: 1 (a section) unless said.
        var section: UInt16 = 1
        /// st_name when it should not be the real one.
        var nameOffset: UInt32? = nil
    }

    private(set) var bytes: [UInt8] = []
    /// Where the section header table starts.
    private(set) var sectionHeaders = 0

    /// Where section header `index` starts.
    func sectionHeader(_ index: Int) -> Int { sectionHeaders + index * 64 }

    init(symbols: [Symbol]) {
        var strings: [UInt8] = [0]
        var table = [UInt8](repeating: 0, count: 24)  // the null symbol
        for symbol in symbols {
            var entry = [UInt8](repeating: 0, count: 24)
            put(symbol.nameOffset ?? UInt32(strings.count), at: 0, in: &entry)
            entry[4] = symbol.binding << 4 | symbol.type
            put(symbol.section, at: 6, in: &entry)
            put(symbol.value, at: 8, in: &entry)
            put(symbol.size, at: 16, in: &entry)
            table += entry
            strings += Array(symbol.name.utf8) + [0]
        }
        let symbolsAt = 128
        let stringsAt = symbolsAt + table.count
        sectionHeaders = (stringsAt + strings.count + 7) & ~7
        let end = sectionHeaders + 3 * 64
        bytes = [UInt8](repeating: 0, count: end)
        bytes.replaceSubrange(0..<4, with: [0x7F, 0x45, 0x4C, 0x46])
        bytes[4] = 2  // ELFCLASS64
        bytes[5] = 1  // ELFDATA2LSB
        bytes[6] = 1  // EV_CURRENT
        put(UInt16(3), at: 16, in: &bytes)  // ET_DYN
        put(UInt16(62), at: 18, in: &bytes)  // EM_X86_64
        put(UInt32(1), at: 20, in: &bytes)
        put(UInt64(64), at: 32, in: &bytes)  // e_phoff
        put(UInt64(sectionHeaders), at: 40, in: &bytes)  // e_shoff
        put(UInt16(64), at: 52, in: &bytes)  // e_ehsize
        put(UInt16(56), at: 54, in: &bytes)  // e_phentsize
        put(UInt16(1), at: 56, in: &bytes)  // e_phnum
        put(UInt16(64), at: 58, in: &bytes)  // e_shentsize
        put(UInt16(3), at: 60, in: &bytes)  // e_shnum
        // PT_LOAD, R+X, the whole file at address 0, 0x3000 bytes in memory.
        put(UInt32(1), at: 64, in: &bytes)
        put(UInt32(5), at: 68, in: &bytes)
        put(UInt64(end), at: 64 + 32, in: &bytes)
        put(UInt64(0x3000), at: 64 + 40, in: &bytes)
        put(UInt64(0x1000), at: 64 + 48, in: &bytes)
        bytes.replaceSubrange(symbolsAt..<stringsAt, with: table)
        bytes.replaceSubrange(stringsAt..<stringsAt + strings.count, with: strings)
        // .symtab: SHT_SYMTAB, sh_link 2, sh_info 1 (first global), entsize 24.
        let symtab = sectionHeader(1)
        put(UInt32(2), at: symtab + 4, in: &bytes)
        put(UInt64(symbolsAt), at: symtab + 24, in: &bytes)
        put(UInt64(table.count), at: symtab + 32, in: &bytes)
        put(UInt32(2), at: symtab + 40, in: &bytes)
        put(UInt32(1), at: symtab + 44, in: &bytes)
        put(UInt64(24), at: symtab + 56, in: &bytes)
        // .strtab: SHT_STRTAB.
        let strtab = sectionHeader(2)
        put(UInt32(3), at: strtab + 4, in: &bytes)
        put(UInt64(stringsAt), at: strtab + 24, in: &bytes)
        put(UInt64(strings.count), at: strtab + 32, in: &bytes)
    }
}

/// Writes `value` little-endian at `offset`.
func put<Value: FixedWidthInteger>(_ value: Value, at offset: Int, in bytes: inout [UInt8]) {
    for index in 0..<MemoryLayout<Value>.size {
        bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (index * 8))
    }
}

/// Runs `body` with the path of a new file holding `bytes`, removed afterwards.
func withTemporaryFile(_ bytes: [UInt8], _ body: (String) throws -> Void) throws {
    var template = Array("/tmp/ffh-symbols-XXXXXX".utf8CString)
    let descriptor = mkstemp(&template)
    try #require(descriptor >= 0)
    let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    defer { unlink(path) }
    let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    close(descriptor)
    try #require(written == bytes.count)
    try body(path)
}

/// The bytes of the file at `path`.
func readFile(_ path: String) -> [UInt8]? {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let got = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard got >= 0 else { return nil }
        if got == 0 { return bytes }
        bytes += chunk[..<got]
    }
}

/// A small seeded generator (SplitMix64), so that a failing run can be repeated.
struct SplitMix {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }
}
