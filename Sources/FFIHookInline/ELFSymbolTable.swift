#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// The full symbol table (`.symtab`) of an ELF file, read from disk. The dynamic loader maps only
// the dynamic symbol table (`.dynsym`), which names exported functions; `static` functions and
// those hidden by a version script are in `.symtab` alone, when the file was not stripped.
//
// The file is read with `pread` into owned buffers (never mapped: a file truncated while mapped
// would raise SIGBUS), and every offset and size it gives is checked against its length, so a
// truncated or hostile file gives `nil` or no functions, never a fault. Only 64-bit
// little-endian files of the machine's architecture are read. The string table stays on disk:
// a name is read when asked for, after checking the file is still the one parsed.

/// The identity of a file on disk: a file replaced or rewritten since has another.
struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let modifiedSeconds: Int
    let modifiedNanoseconds: Int

    /// The identity `fstat` or `stat` reported.
    init(_ status: stat) {
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        size = Int64(status.st_size)
        modifiedSeconds = Int(status.st_mtim.tv_sec)
        modifiedNanoseconds = Int(status.st_mtim.tv_nsec)
    }

    /// The identity of the file at `path` (following links), nil when it cannot be stat'ed.
    init?(path: String) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        self.init(status)
    }
}

/// One `PT_LOAD` program header: a part of the file and where it lies in memory.
struct LoadSegment: Equatable, Sendable {
    let offset: UInt64
    let address: UInt64
    let fileSize: UInt64
    let memorySize: UInt64
    let flags: UInt32

    /// The `PT_LOAD` entries of `count` program headers of `entrySize` bytes at `headers`
    /// (from a file, or an object's mapped headers).
    static func loads(in headers: UnsafeRawBufferPointer, count: Int, entrySize: Int) -> [LoadSegment] {
        guard entrySize >= ELFLayout.programHeaderSize, count >= 0, count <= headers.count / entrySize else {
            return []
        }
        return (0..<count).compactMap { index in
            let base = index * entrySize
            guard headers.littleEndian(UInt32.self, at: base) == 1 else { return nil }  // PT_LOAD
            return LoadSegment(
                offset: headers.littleEndian(UInt64.self, at: base + 8),
                address: headers.littleEndian(UInt64.self, at: base + 16),
                fileSize: headers.littleEndian(UInt64.self, at: base + 32),
                memorySize: headers.littleEndian(UInt64.self, at: base + 40),
                flags: headers.littleEndian(UInt32.self, at: base + 4))
        }
    }
}

/// Sizes and codes of the ELF64 format that the reader uses (from `<elf.h>`, which Swift
/// cannot import).
enum ELFLayout {
    static let fileHeaderSize = 64
    static let programHeaderSize = 56
    static let sectionHeaderSize = 64
    static let symbolSize = 24
    static let sectionTypeSymbolTable: UInt32 = 2  // SHT_SYMTAB
    static let sectionTypeStringTable: UInt32 = 3  // SHT_STRTAB
    static let sectionTypeNoBits: UInt32 = 8  // SHT_NOBITS
    static let allocatedAndExecutable: UInt64 = 0x2 | 0x4  // SHF_ALLOC | SHF_EXECINSTR
    static let symbolTypeFunction: UInt8 = 2  // STT_FUNC
    static let symbolTypeIndirectFunction: UInt8 = 10  // STT_GNU_IFUNC
    #if arch(x86_64)
        static let machine: UInt16? = 62  // EM_X86_64
    #elseif arch(arm64)
        static let machine: UInt16? = 183  // EM_AARCH64
    #else
        static let machine: UInt16? = nil
    #endif
}

/// The function symbols of an ELF file's `.symtab`, sorted by address.
struct ELFSymbolTable: Sendable {
    /// One function symbol (`STT_FUNC` or `STT_GNU_IFUNC`, defined in a section).
    struct Function: Equatable, Sendable {
        /// `st_value`: the link-time address (add the object's load bias).
        let value: UInt64
        /// `st_size`; 0 when the assembler was not told.
        let size: UInt64
        /// Where its name starts in the string table.
        let nameOffset: UInt32
        /// Whether it is `STT_GNU_IFUNC` (its address is a resolver).
        let isIndirect: Bool
        /// Whether it is `STB_LOCAL` (a `static` function).
        let isLocal: Bool

        /// Whether `address` lies in it: in `[value, value + size)`, or at `value` for size 0.
        func contains(_ address: UInt64) -> Bool {
            address == value || (address > value && address - value < size)
        }
    }

    /// The file the table was read from.
    let path: String
    /// The file as it was when read.
    let identity: FileIdentity
    /// Its `PT_LOAD` program headers, to tell whether a loaded object was mapped from it.
    let loadSegments: [LoadSegment]
    /// Where its sections of code lie (link-time addresses of the sections that are allocated,
    /// executable and hold bytes of the file), by address; empty when the file has no section
    /// headers. Some linkers (gold) place read-only data in the executable segment, after the
    /// code: decoded as instructions, those bytes would read as branches.
    let codeSections: [Range<UInt64>]
    /// The function symbols, by `value`; at one value, size 0 before sized and local before
    /// global, so that a search from the top meets the most telling one first.
    let functions: [Function]
    /// `reach[i]`: the greatest `value + size` among `functions[0...i]`, which ends a
    /// backward search once no earlier function reaches the address.
    private let reach: [UInt64]
    /// Where the string table lies in the file.
    private let stringTable: (offset: UInt64, size: UInt64)

    /// Reads the file at `path`; nil when it cannot be read, is not a 64-bit little-endian ELF
    /// executable or shared object of this machine, or names headers or tables beyond its end.
    /// A well-formed file without `.symtab` (a stripped library) gives no functions.
    init?(path: String) {
        guard let file = ELFFileReader(path: path),
            let header = file.read(at: 0, count: UInt64(ELFLayout.fileHeaderSize))
        else { return nil }
        // The magic, then EI_CLASS 2 (64-bit) and EI_DATA 1 (little-endian).
        guard header.prefix(4).elementsEqual([0x7F, 0x45, 0x4C, 0x46]), header[4] == 2, header[5] == 1 else {
            return nil
        }
        // ET_EXEC or ET_DYN: what the loader maps (a relocatable object's values are offsets).
        let type = header.littleEndian(UInt16.self, at: 16)
        let machine = header.littleEndian(UInt16.self, at: 18)
        guard type == 2 || type == 3, ELFLayout.machine.map({ $0 == machine }) ?? true,
            let sections = Self.sectionHeaders(file, header),
            let segments = Self.loadSegments(file, header, sections)
        else { return nil }
        self.path = path
        identity = file.identity
        loadSegments = segments
        codeSections = Self.codeSections(in: sections)

        // The first SHT_SYMTAB section and the string table its sh_link names.
        let sectionCount = sections.count / ELFLayout.sectionHeaderSize
        let symbolIndex = (0..<sectionCount).first {
            sections.littleEndian(UInt32.self, at: $0 * ELFLayout.sectionHeaderSize + 4)
                == ELFLayout.sectionTypeSymbolTable
        }
        guard let symbolIndex else {
            functions = []
            reach = []
            stringTable = (0, 0)
            return
        }
        let symbols = Self.section(symbolIndex, of: sections)
        let stringIndex = Int(sections.littleEndian(UInt32.self, at: symbolIndex * ELFLayout.sectionHeaderSize + 40))
        guard stringIndex > 0, stringIndex < sectionCount,
            sections.littleEndian(UInt32.self, at: stringIndex * ELFLayout.sectionHeaderSize + 4)
                == ELFLayout.sectionTypeStringTable
        else { return nil }
        let strings = Self.section(stringIndex, of: sections)
        guard symbols.entrySize >= UInt64(ELFLayout.symbolSize), symbols.entrySize <= 4096,
            file.contains(strings.offset, strings.size),
            let table = file.read(at: symbols.offset, count: symbols.size)
        else { return nil }
        stringTable = (strings.offset, strings.size)
        functions = Self.functions(in: table, entrySize: Int(symbols.entrySize), stringTableSize: strings.size)
        var reach: [UInt64] = []
        reach.reserveCapacity(functions.count)
        var farthest: UInt64 = 0
        for function in functions {
            let (end, overflow) = function.value.addingReportingOverflow(function.size)
            farthest = max(farthest, overflow ? .max : end)
            reach.append(farthest)
        }
        self.reach = reach
    }

    /// The function that holds `address` (a link-time address: a run-time one less the load
    /// bias): of those whose range holds it, or that start there, the one of greatest value.
    func function(containing address: UInt64) -> Function? {
        // The first index whose value is above the address; the search goes down from below it.
        var low = 0
        var high = functions.count
        while low < high {
            let middle = (low + high) / 2
            if functions[middle].value <= address { low = middle + 1 } else { high = middle }
        }
        var index = low - 1
        while index >= 0 {
            let function = functions[index]
            if function.contains(address) { return function }
            if function.value < address, reach[index] <= address { return nil }
            index -= 1
        }
        return nil
    }

    /// The names of `functions`, read from the string table on disk in one read; nil for each
    /// when the file is no longer the one parsed or cannot be read.
    func names(of functions: [Function]) -> [String?] {
        let strings = stringTableBytes()
        return functions.map { function in strings.flatMap { Self.name(of: function, in: $0) } }
    }

    /// The whole string table, read from disk; nil when the file is no longer the one parsed or
    /// cannot be read. For looking up many names with ``name(of:in:)``.
    func stringTableBytes() -> [UInt8]? {
        guard let file = ELFFileReader(path: path), file.identity == identity else { return nil }
        return file.read(at: stringTable.offset, count: stringTable.size)
    }

    /// The name of `function` in `strings`, the table ``stringTableBytes()`` read.
    static func name(of function: Function, in strings: [UInt8]) -> String? {
        let start = Int(function.nameOffset)
        guard start < strings.count, let end = strings[start...].firstIndex(of: 0) else { return nil }
        return String(decoding: strings[start..<end], as: UTF8.self)
    }

    /// The function's name, read from the string table on disk; nil when the file is no
    /// longer the one parsed or cannot be read.
    func name(of function: Function) -> String? {
        guard let file = ELFFileReader(path: path), file.identity == identity else { return nil }
        var bytes: [UInt8] = []
        var offset = UInt64(function.nameOffset)
        // Mangled names run long; a name with no end within 64 KiB is not one.
        while offset < stringTable.size, bytes.count < 1 << 16 {
            let count = Int(min(256, stringTable.size - offset))
            guard let chunk = file.read(at: stringTable.offset + offset, count: UInt64(count)) else { return nil }
            if let end = chunk.firstIndex(of: 0) {
                bytes += chunk[..<end]
                return String(decoding: bytes, as: UTF8.self)
            }
            bytes += chunk
            offset += UInt64(count)
        }
        return nil
    }

    // MARK: - Parsing

    /// The section header table: e_shnum entries at e_shoff, or section 0's sh_size of them
    /// when e_shnum is 0 (a file of 0xff00 sections or more); empty when the file has none.
    private static func sectionHeaders(_ file: ELFFileReader, _ header: [UInt8]) -> [UInt8]? {
        let offset = header.littleEndian(UInt64.self, at: 40)
        let entrySize = Int(header.littleEndian(UInt16.self, at: 58))
        let count = UInt64(header.littleEndian(UInt16.self, at: 60))
        guard offset != 0 else { return [] }
        guard entrySize == ELFLayout.sectionHeaderSize,
            let first = file.read(at: offset, count: UInt64(ELFLayout.sectionHeaderSize))
        else { return nil }
        let total = count != 0 ? count : first.littleEndian(UInt64.self, at: 32)
        let (bytes, overflow) = total.multipliedReportingOverflow(by: UInt64(ELFLayout.sectionHeaderSize))
        guard total > 0, !overflow else { return nil }
        return file.read(at: offset, count: bytes)
    }

    /// The `PT_LOAD` headers: e_phnum entries at e_phoff, or section 0's sh_info of them when
    /// e_phnum is 0xffff.
    private static func loadSegments(_ file: ELFFileReader, _ header: [UInt8], _ sections: [UInt8]) -> [LoadSegment]? {
        let offset = header.littleEndian(UInt64.self, at: 32)
        let entrySize = Int(header.littleEndian(UInt16.self, at: 54))
        let count = Int(header.littleEndian(UInt16.self, at: 56))
        guard offset != 0, count != 0 else { return [] }
        let total = count != 0xFFFF ? count : Int(sections.littleEndian(UInt32.self, at: 44))
        guard entrySize >= ELFLayout.programHeaderSize,
            let table = file.read(at: offset, count: UInt64(total) * UInt64(entrySize))
        else { return nil }
        return table.withUnsafeBytes { LoadSegment.loads(in: $0, count: total, entrySize: entrySize) }
    }

    /// The address ranges of the sections with SHF_ALLOC and SHF_EXECINSTR that are not
    /// SHT_NOBITS, sorted.
    private static func codeSections(in sections: [UInt8]) -> [Range<UInt64>] {
        (0..<sections.count / ELFLayout.sectionHeaderSize).compactMap { index -> Range<UInt64>? in
            let base = index * ELFLayout.sectionHeaderSize
            let flags = sections.littleEndian(UInt64.self, at: base + 8)
            let address = sections.littleEndian(UInt64.self, at: base + 16)
            let (end, overflow) = address.addingReportingOverflow(sections.littleEndian(UInt64.self, at: base + 32))
            guard sections.littleEndian(UInt32.self, at: base + 4) != ELFLayout.sectionTypeNoBits,
                flags & ELFLayout.allocatedAndExecutable == ELFLayout.allocatedAndExecutable, !overflow,
                end > address
            else { return nil }
            return address..<end
        }.sorted { $0.lowerBound < $1.lowerBound }
    }

    /// Section `index`'s sh_offset, sh_size and sh_entsize.
    private static func section(_ index: Int, of sections: [UInt8]) -> (offset: UInt64, size: UInt64, entrySize: UInt64)
    {
        let base = index * ELFLayout.sectionHeaderSize
        return (
            sections.littleEndian(UInt64.self, at: base + 24), sections.littleEndian(UInt64.self, at: base + 32),
            sections.littleEndian(UInt64.self, at: base + 56)
        )
    }

    /// The defined function symbols of a symbol table, sorted (see ``functions``).
    private static func functions(in table: [UInt8], entrySize: Int, stringTableSize: UInt64) -> [Function] {
        var found: [Function] = []
        table.withUnsafeBytes { table in
            for base in stride(from: 0, through: table.count - ELFLayout.symbolSize, by: entrySize) {
                let info = table[base + 4]
                let type = info & 0xF
                guard type == ELFLayout.symbolTypeFunction || type == ELFLayout.symbolTypeIndirectFunction else {
                    continue
                }
                // SHN_UNDEF (an import) and the reserved indexes (SHN_ABS, SHN_COMMON) hold no
                // code of this file; SHN_XINDEX means a real index kept elsewhere.
                let sectionIndex = table.littleEndian(UInt16.self, at: base + 6)
                let nameOffset = table.littleEndian(UInt32.self, at: base)
                guard sectionIndex != 0, sectionIndex < 0xFF00 || sectionIndex == 0xFFFF,
                    UInt64(nameOffset) < stringTableSize
                else { continue }
                found.append(
                    Function(
                        value: table.littleEndian(UInt64.self, at: base + 8),
                        size: table.littleEndian(UInt64.self, at: base + 16), nameOffset: nameOffset,
                        isIndirect: type == ELFLayout.symbolTypeIndirectFunction, isLocal: info >> 4 == 0))
            }
        }
        found.sort { ($0.value, $0.rank) < ($1.value, $1.rank) }
        return found
    }
}

extension ELFSymbolTable.Function {
    /// Orders functions of one value: size 0 first, then local, so that the sized global one
    /// is at the top.
    fileprivate var rank: Int { (size != 0 ? 2 : 0) + (isLocal ? 0 : 1) }
}

// MARK: - Reading

/// An open file, read with bounds checks; closed when released.
private final class ELFFileReader {
    private let descriptor: Int32
    /// The file's identity (and length) when opened.
    let identity: FileIdentity

    /// Opens `path` read-only; nil when it cannot be opened or is not a regular file.
    init?(path: String) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            return nil
        }
        self.descriptor = descriptor
        identity = FileIdentity(status)
    }

    deinit { close(descriptor) }

    /// Whether `[offset, offset + count)` lies in the file.
    func contains(_ offset: UInt64, _ count: UInt64) -> Bool {
        let (end, overflow) = offset.addingReportingOverflow(count)
        return !overflow && end <= UInt64(identity.size)
    }

    /// `count` bytes at `offset`, nil when they pass the file's end or cannot be read.
    func read(at offset: UInt64, count: UInt64) -> [UInt8]? {
        guard contains(offset, count) else { return nil }
        let length = Int(count)
        var bytes = [UInt8](repeating: 0, count: length)
        let complete = bytes.withUnsafeMutableBytes { buffer -> Bool in
            var done = 0
            while done < length {
                let got = pread(descriptor, buffer.baseAddress! + done, length - done, off_t(offset) + off_t(done))
                if got < 0, errno == EINTR { continue }
                // A file shortened since fstat ends the read early.
                guard got > 0 else { return false }
                done += got
            }
            return true
        }
        return complete ? bytes : nil
    }
}

extension UnsafeRawBufferPointer {
    /// The little-endian integer at `offset`; 0 when it would pass the end (callers check
    /// sizes first: this only keeps a mistake from reading out of bounds).
    func littleEndian<Value: FixedWidthInteger>(_ type: Value.Type, at offset: Int) -> Value {
        guard offset >= 0, offset <= count - MemoryLayout<Value>.size, let baseAddress else { return 0 }
        return Value(littleEndian: baseAddress.loadUnaligned(fromByteOffset: offset, as: Value.self))
    }
}

extension [UInt8] {
    /// The little-endian integer at `offset`; 0 when it would pass the end.
    func littleEndian<Value: FixedWidthInteger>(_ type: Value.Type, at offset: Int) -> Value {
        withUnsafeBytes { $0.littleEndian(type, at: offset) }
    }
}
