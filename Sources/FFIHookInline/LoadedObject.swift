internal import CFFIHookSupport
internal import FFIHook

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What symbol lookups need of a loaded object of FFIHook's walk
/// (``ImportWalk/withLoadedObjects(_:)``), read from its program headers.
extension LoadedObject {
    /// Its load bias (`l_addr`, `dlpi_addr`): run-time address less link-time address.
    var bias: UInt { UInt(object.pointee.base) }

    /// Its program headers, as mapped.
    private var programHeaders: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(
            start: object.pointee.program_headers,
            count: Int(object.pointee.program_header_count) * ELFLayout.programHeaderSize)
    }

    /// Its `PT_LOAD` program headers, as mapped.
    var loadSegments: [LoadSegment] {
        LoadSegment.loads(
            in: programHeaders, count: Int(object.pointee.program_header_count),
            entrySize: ELFLayout.programHeaderSize)
    }

    /// The run-time address of its dynamic section (`PT_DYNAMIC`), nil when it has none.
    var dynamicAddress: UInt? {
        let headers = programHeaders
        let dynamic = (0..<Int(object.pointee.program_header_count)).first {
            headers.littleEndian(UInt32.self, at: $0 * ELFLayout.programHeaderSize) == 2
        }
        return dynamic.map {
            bias &+ UInt(headers.littleEndian(UInt64.self, at: $0 * ELFLayout.programHeaderSize + 16))
        }
    }

    /// The file to read its full symbol table from: `/proc/self/exe` for the main program
    /// (which names the running file even when its path was replaced), its path when that has
    /// a slash; nil for the vDSO, whose name is no file.
    var filePath: String? {
        if isMainProgram { return "/proc/self/exe" }
        return path.contains("/") ? path : nil
    }

    /// Whether `address` lies in one of its `PT_LOAD` segments.
    func contains(_ address: UInt) -> Bool {
        loadSegments.contains { segment in
            let start = bias &+ UInt(truncatingIfNeeded: segment.address)
            return address >= start && UInt64(address - start) < segment.memorySize
        }
    }

    /// Whether `address` lies in one of its executable segments.
    func isInCode(_ address: UInt) -> Bool { ffh_elf_is_in_code(object, address) != 0 }

    /// Whether `name` names it: its soname, its path, its file name (the last component of
    /// its path), or a path to the same file.
    func isNamed(_ name: String) -> Bool {
        guard !name.isEmpty else { return false }
        if name == path || name == soname { return true }
        if !name.contains("/") { return path.split(separator: "/").last.map { $0 == name } ?? false }
        return Self.realPath(name).map { $0 == Self.realPath(path) } ?? false
    }

    /// Its definition of `symbol` in its dynamic symbol table, as dlsym would match it.
    func definition(of symbol: String) -> DynamicSymbol? {
        var found = ffh_elf_symbol()
        guard ffh_elf_find_definition(object, symbol, &found) != 0 else { return nil }
        return DynamicSymbol(found)
    }

    /// `path` with every link resolved, nil when it names no file.
    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

/// An entry of a loaded object's dynamic symbol table.
struct DynamicSymbol {
    /// Its name.
    let name: String
    /// Its run-time address.
    let address: UInt
    /// `st_size`.
    let size: UInt64
    /// `ELF64_ST_TYPE(st_info)`.
    let type: UInt8

    static let typeNone: UInt8 = 0  // STT_NOTYPE
    static let typeFunction: UInt8 = 2  // STT_FUNC
    static let typeIndirectFunction: UInt8 = 10  // STT_GNU_IFUNC

    /// Whether it is a function: `STT_FUNC` or `STT_GNU_IFUNC`.
    var isFunction: Bool { type == Self.typeFunction || type == Self.typeIndirectFunction }

    /// Whether `address` lies in `[address, address + size)`, or at its start when its size is 0.
    func contains(_ other: UInt) -> Bool {
        other == address || (other > address && UInt64(other - address) < size)
    }

    /// The dynamic symbol that `dladdr1` finds for `address` (see `ffh_elf_symbol_at`).
    init?(at address: UInt) {
        var found = ffh_elf_symbol()
        guard ffh_elf_symbol_at(address, &found) != 0 else { return nil }
        self.init(found)
    }

    fileprivate init(_ symbol: ffh_elf_symbol) {
        name = String(cString: symbol.name)
        address = UInt(symbol.address)
        size = symbol.size
        type = symbol.type
    }
}

/// Loaded objects found by name.
enum LoadedObjects {
    /// The object of `objects` that `name` names (see ``LoadedObject/isNamed(_:)``), else the
    /// one `dlopen(name, RTLD_NOLOAD)` finds (a name the loader's search resolves to a loaded
    /// file); nil when none is loaded.
    static func object(named name: String, in objects: [LoadedObject]) -> LoadedObject? {
        guard !name.isEmpty else { return nil }
        // Named exactly, as nearly always (a path or soname the loader gave): no other object's
        // path resolved, each of which took several system calls.
        if let named = objects.first(where: { name == $0.path || name == $0.soname }) { return named }
        if let named = objects.first(where: { $0.isNamed(name) }) { return named }
        var base: UInt = 0
        var dynamic: UInt = 0
        guard ffh_elf_identify_loaded(name, &base, &dynamic) != 0 else { return nil }
        return objects.first { $0.bias == base && $0.dynamicAddress == dynamic }
    }
}
