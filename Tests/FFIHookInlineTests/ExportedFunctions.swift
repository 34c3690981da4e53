#if canImport(Glibc)
    import Glibc
#endif

/// The functions a loaded shared object exports, read from its file's dynamic symbol table
/// (what `readelf --dyn-syms` lists), with where each one is in this process.
///
/// Read independently of the library's own symbol resolver, so that a corpus run checks the
/// resolver too: every `FUNC` symbol with a section (not undefined), `GLOBAL` or `WEAK`, of
/// default visibility. IFUNC symbols are counted apart (their address is a resolver).
struct ExportedFunctions {
    struct Function: Sendable {
        let name: String
        /// Where the dynamic linker put it: the object's load bias plus the symbol's value.
        let address: UInt
        /// `st_size`, 0 when the symbol gives none.
        let size: Int
    }

    /// The file the process mapped (the real path, as `/proc/self/maps` shows it).
    let path: String
    /// The load bias: what the dynamic linker added to the file's addresses.
    let bias: UInt
    /// In the table's order, one per name.
    let functions: [Function]
    /// How many exported IFUNC symbols were left out.
    let indirectCount: Int

    enum Failure: Error, CustomStringConvertible {
        case notMapped(String)
        case unreadable(String)
        case malformed(String, String)

        var description: String {
            switch self {
            case .notMapped(let name): "no file whose name starts with \(name) is mapped (/proc/self/maps)"
            case .unreadable(let path): "cannot read \(path)"
            case .malformed(let path, let why): "\(path) is not a 64-bit little-endian ELF object: \(why)"
            }
        }
    }

    /// The object mapped from the file whose name starts with `prefix` (`"libsqlite3.so"`).
    init(mappedFileNamed prefix: String) throws {
        // /proc/self/maps: start-end perms offset dev inode path. The mapping of file offset
        // 0 with the lowest address holds the ELF header, at the first PT_LOAD's page.
        var path: String? = nil
        var lowest = UInt.max
        for line in try Self.read("/proc/self/maps").split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: true)
            guard fields.count >= 6 else { continue }
            let file = String(decoding: Array(fields[5...].joined(separator: [UInt8(ascii: " ")])), as: UTF8.self)
            guard file.hasPrefix("/"), file.split(separator: "/").last?.hasPrefix(prefix) == true,
                UInt(String(decoding: fields[2], as: UTF8.self), radix: 16) == 0,
                let start = UInt(
                    String(decoding: fields[0].split(separator: UInt8(ascii: "-"))[0], as: UTF8.self), radix: 16)
            else { continue }
            if start < lowest {
                lowest = start
                path = file
            }
        }
        guard let path else { throw Failure.notMapped(prefix) }
        self.path = path
        let image = try Self.read(path)
        func malformed(_ why: String) -> Failure { .malformed(path, why) }
        guard image.count >= 64, image[0..<4] == [0x7F, 0x45, 0x4C, 0x46], image[4] == 2, image[5] == 1 else {
            throw malformed("bad header")
        }
        func integer<T: FixedWidthInteger>(_ offset: Int, _: T.Type) throws -> T {
            guard offset >= 0, offset + MemoryLayout<T>.size <= image.count else {
                throw malformed("offset \(offset) is past the end")
            }
            var value: T = 0
            withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: image[offset..<offset + MemoryLayout<T>.size]) }
            return T(littleEndian: value)
        }
        // The first PT_LOAD's page is where `lowest` is.
        let programHeaders = Int(try integer(32, UInt64.self))
        let programHeaderSize = Int(try integer(54, UInt16.self))
        let programHeaderCount = Int(try integer(56, UInt16.self))
        var firstLoad: UInt? = nil
        for index in 0..<programHeaderCount {
            let header = programHeaders + index * programHeaderSize
            if try integer(header, UInt32.self) == 1 {  // PT_LOAD
                firstLoad = UInt(try integer(header + 16, UInt64.self))  // p_vaddr
                break
            }
        }
        guard let firstLoad else { throw malformed("no PT_LOAD") }
        bias = lowest - (firstLoad & ~UInt(4095))

        // SHT_DYNSYM and the string table its sh_link names.
        let sections = Int(try integer(40, UInt64.self))
        let sectionSize = Int(try integer(58, UInt16.self))
        let sectionCount = Int(try integer(60, UInt16.self))
        func section(_ index: Int) throws -> (type: UInt32, offset: Int, size: Int, link: Int, entrySize: Int) {
            let header = sections + index * sectionSize
            return (
                try integer(header + 4, UInt32.self), Int(try integer(header + 24, UInt64.self)),
                Int(try integer(header + 32, UInt64.self)), Int(try integer(header + 40, UInt32.self)),
                Int(try integer(header + 56, UInt64.self))
            )
        }
        guard let dynsym = try (0..<sectionCount).map(section).first(where: { $0.type == 11 }) else {
            throw malformed("no .dynsym")
        }
        let strings = try section(dynsym.link)
        var functions: [Function] = []
        var seen: Set<String> = []
        var indirect = 0
        for index in 1..<(dynsym.size / max(dynsym.entrySize, 24)) {
            let symbol = dynsym.offset + index * dynsym.entrySize
            let info = try integer(symbol + 4, UInt8.self)
            let other = try integer(symbol + 5, UInt8.self)
            let sectionIndex = try integer(symbol + 6, UInt16.self)
            let type = info & 0xF
            let binding = info >> 4
            // STT_FUNC or STT_GNU_IFUNC; STB_GLOBAL or STB_WEAK; STV_DEFAULT; not SHN_UNDEF.
            guard type == 2 || type == 10, binding == 1 || binding == 2, other & 3 == 0, sectionIndex != 0 else {
                continue
            }
            if type == 10 {
                indirect += 1
                continue
            }
            var end = strings.offset + Int(try integer(symbol, UInt32.self))
            let nameStart = end
            while end < image.count && image[end] != 0 { end += 1 }
            let name = String(decoding: image[nameStart..<end], as: UTF8.self)
            guard seen.insert(name).inserted else { continue }
            functions.append(
                Function(
                    name: name, address: bias + UInt(try integer(symbol + 8, UInt64.self)),
                    size: Int(try integer(symbol + 16, UInt64.self))))
        }
        self.functions = functions
        indirectCount = indirect
    }

    /// The whole file at `path`.
    private static func read(_ path: String) throws -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure.unreadable(path) }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw Failure.unreadable(path) }
            if count == 0 { break }
            bytes += buffer[0..<count]
        }
        return bytes
    }
}
