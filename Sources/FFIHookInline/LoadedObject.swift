internal import CFFIHookSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One object the dynamic loader has loaded, kept loaded while the snapshot that lists it lasts.
struct LoadedObject {
    /// The object as the C walk describes it (in the snapshot's memory).
    let object: UnsafePointer<ffh_elf_object>
    /// The path the loader knows it by; the executable's real path for the main program.
    let path: String
    /// Whether it is the main program (the loader lists it first).
    let isMainProgram: Bool
    /// Its load bias (`l_addr`, `dlpi_addr`): run-time address less link-time address.
    let bias: UInt
    /// Its `PT_LOAD` program headers, as mapped.
    let loadSegments: [LoadSegment]
    /// The run-time address of its dynamic section (`PT_DYNAMIC`), nil when it has none.
    let dynamicAddress: UInt?
    /// The `dlopen(RTLD_NOLOAD)` handle that keeps it loaded; dlsym on it searches the object
    /// first, then its dependencies (the global scope, for the main program's).
    let handle: UnsafeMutableRawPointer

    /// Its DT_SONAME, when it has one.
    var soname: String? { ffh_elf_soname(object).map { String(cString: $0) } }

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

/// The loaded objects at one moment.
enum LoadedObjects {
    /// Runs `body` with the objects loaded now, in the loader's order (the main program first),
    /// each kept loaded until `body` returns; an object unloaded meanwhile is left out.
    ///
    /// The thread is marked as walking meanwhile (`ffh_elf_begin_walk`): keeping an object
    /// loaded calls `dlopen`, which a hook that follows later loads may have hooked, and that
    /// hook must not start a walk of its own.
    static func withSnapshot<Result, Failure: Error>(
        _ body: ([LoadedObject]) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        ffh_elf_begin_walk()
        defer { ffh_elf_end_walk() }
        var count = 0
        let objects = ffh_elf_objects(&count)
        defer { ffh_elf_free_objects(objects, count) }
        var handles: [UnsafeMutableRawPointer] = []
        defer {
            for handle in handles { ffh_elf_unpin(handle) }
        }
        guard let objects else { return try body([]) }
        var loaded: [LoadedObject] = []
        for index in 0..<count {
            let object = UnsafePointer(objects + index)
            // Pinned before its program headers, which lie in its own mapping, are read.
            guard let handle = ffh_elf_pin(object) else { continue }
            handles.append(handle)
            let count = Int(object.pointee.program_header_count)
            let headers = UnsafeRawBufferPointer(
                start: object.pointee.program_headers, count: count * ELFLayout.programHeaderSize)
            let bias = UInt(object.pointee.base)
            let dynamic = (0..<count).first {
                headers.littleEndian(UInt32.self, at: $0 * ELFLayout.programHeaderSize) == 2
            }
            loaded.append(
                LoadedObject(
                    object: object, path: index == 0 ? executablePath : String(cString: object.pointee.path),
                    isMainProgram: index == 0, bias: bias,
                    loadSegments: LoadSegment.loads(in: headers, count: count, entrySize: ELFLayout.programHeaderSize),
                    dynamicAddress: dynamic.map {
                        bias &+ UInt(headers.littleEndian(UInt64.self, at: $0 * ELFLayout.programHeaderSize + 16))
                    }, handle: handle))
        }
        return try body(loaded)
    }

    /// The object of `objects` that `name` names (see ``LoadedObject/isNamed(_:)``), else the
    /// one `dlopen(name, RTLD_NOLOAD)` finds (a name the loader's search resolves to a loaded
    /// file); nil when none is loaded.
    static func object(named name: String, in objects: [LoadedObject]) -> LoadedObject? {
        guard !name.isEmpty else { return nil }
        if let named = objects.first(where: { $0.isNamed(name) }) { return named }
        var base: UInt = 0
        var dynamic: UInt = 0
        guard ffh_elf_identify_loaded(name, &base, &dynamic) != 0 else { return nil }
        return objects.first { $0.bias == base && $0.dynamicAddress == dynamic }
    }

    /// The main program's file, as `/proc/self/exe` links to it.
    static let executablePath: String = {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, Int(PATH_MAX))
        guard length > 0 else { return "" }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }()
}
