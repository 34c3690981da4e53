internal import CFFIHookSupport
internal import FFIHook

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// Finding functions for inline hooks: the address a symbol binds to, and the extent of the
// function that holds an address, from the loaded objects' symbol tables.
//
// The dynamic symbol table (`.dynsym`, mapped with the object) names exported functions; the
// full one (`.symtab`, read from the object's file) also names `static` ones, unless the file
// was stripped, as Debian's libraries are: then a function that no exported symbol covers has
// no known size.

/// Where a function lies, as its object's symbol tables say.
struct FunctionExtent: Equatable, Sendable {
    /// The symbol's address (the function's start; may be below the address asked about); the
    /// address asked about when no symbol covers it.
    let start: UInt
    /// The symbol's st_size; nil when no symbol table names a sized symbol there.
    let size: Int?
    /// The symbol's name, nil when none was found.
    let symbol: String?
    /// The path of the loaded object that holds the address (the main program's real path, not "").
    let objectPath: String
    /// The object's load bias (l_addr / dlpi_addr).
    let loadBias: UInt
    /// True when the symbol is STT_GNU_IFUNC (its address is a resolver, not the code that runs).
    let isIndirect: Bool
}

/// Why a symbol could not be resolved to a function.
struct SymbolLookupError: Error, Equatable, CustomStringConvertible {
    enum Code: Equatable, Sendable {
        /// No loaded object has the soname, file name or path asked for.
        case objectNotLoaded
        /// The object (or, with none given, the global scope) defines no such symbol.
        case symbolNotFound
        /// The symbol is data (`STT_OBJECT`, `STT_TLS`, `STT_COMMON`, or an untyped symbol
        /// outside the object's code), not a function.
        case notAFunction
    }

    let code: Code
    /// The symbol asked for.
    let symbol: String
    /// The object asked for; nil for the global scope.
    let object: String?

    var description: String {
        let place = object.map { "in \($0)" } ?? "in the global scope"
        // (An empty name would leave a gap in the sentence.)
        let symbol = symbol.isEmpty ? "\"\" (an empty name)" : symbol
        switch code {
        case .objectNotLoaded:
            return "no loaded object has the soname, file name or path \(object ?? "") (looking up \(symbol))"
        case .symbolNotFound: return "symbol \(symbol) is not defined \(place)"
        case .notAFunction: return "symbol \(symbol) \(place) is data, not a function"
        }
    }
}

/// Symbols to addresses and addresses to functions, in the loaded objects.
enum SymbolResolver {
    /// The address the dynamic linker would bind a call to `symbol` to: in the global scope
    /// when `object` is nil (like `dlsym(RTLD_DEFAULT)`), else the definition in the loaded
    /// object whose soname, file name or path is `object` (a definition its dependencies make
    /// does not count). Nothing is loaded.
    ///
    /// An IFUNC (`STT_GNU_IFUNC`) symbol resolves to the implementation its resolver picks:
    /// glibc's `dlsym` runs the resolver itself (`_dl_sym_post` calls `elf_ifunc_invoke` on a
    /// symbol of that type), so its answer is used. Any other function is the object's load
    /// bias plus the symbol's value.
    ///
    /// - Throws: ``SymbolLookupError`` `.objectNotLoaded`, `.symbolNotFound`, or
    ///   `.notAFunction` for data (`environ`, `stdout`).
    static func resolve(symbol: String, in object: String?) throws(SymbolLookupError) -> UInt {
        try ImportWalk.withLoadedObjects { objects throws(SymbolLookupError) -> UInt in
            try resolve(symbol: symbol, in: object, among: objects).address
        }
    }

    /// ``resolve(symbol:in:)`` among `objects` (loaded and pinned, as
    /// ``ImportWalk/withLoadedObjects(_:)`` gives them), for many symbols in one walk; also
    /// gives the symbol's size when its definition is a function of known size (0 otherwise).
    static func resolve(
        symbol: String, in object: String?, among objects: [LoadedObject]
    ) throws(SymbolLookupError) -> (address: UInt, size: UInt64) {
        func failure(_ code: SymbolLookupError.Code) -> SymbolLookupError {
            SymbolLookupError(code: code, symbol: symbol, object: object)
        }
        // C would read a name with a NUL byte only up to it: no symbol has such a name.
        guard !symbol.utf8.contains(0) else { throw failure(.symbolNotFound) }
        guard let object else {
            // RTLD_DEFAULT is a null handle.
            guard let address = bound(symbol, in: nil) else { throw failure(.symbolNotFound) }
            let holder = objects.first { $0.contains(address) }
            guard classify(symbol, boundTo: address, holder: holder) != .data else { throw failure(.notAFunction) }
            let size = holder?.definition(of: symbol).flatMap { $0.address == address ? $0.size : nil } ?? 0
            return (address, size)
        }
        guard let loaded = LoadedObjects.object(named: object, in: objects) else {
            throw failure(.objectNotLoaded)
        }
        guard let definition = loaded.definition(of: symbol) else { throw failure(.symbolNotFound) }
        guard kind(of: definition, in: loaded) != .data else { throw failure(.notAFunction) }
        guard definition.type == DynamicSymbol.typeIndirectFunction else {
            return (definition.address, definition.size)
        }
        // The object's handle searches the object first, so dlsym meets the definition
        // just found, by the same rules, and runs its resolver.
        guard let address = bound(symbol, in: loaded.handle) else { throw failure(.symbolNotFound) }
        return (address, 0)
    }

    /// The function containing `address`; nil when the address is in no loaded object.
    ///
    /// The object's dynamic symbol table answers first (`dladdr1`), when it names a function
    /// (`STT_FUNC` or `STT_GNU_IFUNC`) whose range holds the address or that starts there; then
    /// the full `.symtab` of the object's file, parsed once per file and kept (a file that no
    /// longer matches the mapped object is not used). With neither, the extent starts at
    /// `address` and has no size or name. Safe from any thread.
    static func extent(of address: UInt) -> FunctionExtent? {
        ImportWalk.withLoadedObject(containing: address) { object -> FunctionExtent? in
            guard let object else { return nil }
            var start = address
            var size: UInt64 = 0
            var name: String?
            var isIndirect = false
            if let symbol = DynamicSymbol(at: address), symbol.isFunction, symbol.contains(address),
                object.contains(symbol.address)
            {
                (start, size, name, isIndirect) = (symbol.address, symbol.size, symbol.name, symbol.isIndirect)
                // dladdr names one of a function's aliases; the batch's choice is the plainest.
                if start == address, let plainest = BatchTargets.plainestName(at: start, in: object) { name = plainest }
            }
            // The full table covers what the dynamic one does not, and gives a size to an
            // exported symbol without one when a sized symbol starts at the same place.
            if name == nil || size == 0, let table = SymbolTableCache.shared.table(for: object),
                let function = table.function(containing: UInt64(address &- object.bias))
            {
                let functionStart = object.bias &+ UInt(truncatingIfNeeded: function.value)
                if name == nil {
                    (start, size, name) = (functionStart, function.size, table.name(of: function))
                    isIndirect = function.isIndirect
                } else if functionStart == start {
                    size = function.size
                }
            }
            return FunctionExtent(
                start: start, size: size > 0 && size <= UInt64(Int.max) ? Int(size) : nil, symbol: name,
                objectPath: object.path, loadBias: object.bias, isIndirect: isIndirect)
        }
    }

    /// What `dlsym(handle, symbol)` gives; on failure, the thread's `dlerror` message is
    /// cleared, so that a caller's later `dlerror` does not report this lookup.
    static func bound(_ symbol: String, in handle: UnsafeMutableRawPointer?) -> UInt? {
        guard let address = dlsym(handle, symbol) else {
            _ = dlerror()
            return nil
        }
        return UInt(bitPattern: address)
    }

    // MARK: - Kinds of symbols

    /// What a symbol names, as far as binding it is concerned.
    enum Kind: Equatable {
        case function, indirectFunction, data
    }

    /// What `definition` names: a function or IFUNC by type, data for `STT_OBJECT`,
    /// `STT_TLS`, `STT_COMMON`; an untyped symbol (an assembly label) is a function when it
    /// lies in the object's code.
    static func kind(of definition: DynamicSymbol, in object: LoadedObject) -> Kind {
        switch definition.type {
        case DynamicSymbol.typeFunction: .function
        case DynamicSymbol.typeIndirectFunction: .indirectFunction
        case DynamicSymbol.typeNone: object.isInCode(definition.address) ? .function : .data
        default: .data
        }
    }

    /// What the global binding of `symbol` to `address` names. The object that holds the
    /// address is the one whose definition dlsym took (an IFUNC's implementation lies beside
    /// its resolver), so its own definition says; failing that (a resolver that picked code
    /// elsewhere), the dynamic symbol at the address, or whether the address is code.
    static func classify(_ symbol: String, boundTo address: UInt, holder: LoadedObject?) -> Kind {
        if let holder, let definition = holder.definition(of: symbol) { return kind(of: definition, in: holder) }
        if let found = DynamicSymbol(at: address), found.contains(address), let holder {
            return kind(of: found, in: holder)
        }
        return holder?.isInCode(address) ?? false ? .function : .data
    }
}

extension DynamicSymbol {
    /// Whether it is `STT_GNU_IFUNC`.
    var isIndirect: Bool { type == Self.typeIndirectFunction }
}

// MARK: - Cache

/// The parsed `.symtab` of each object file, by the file's identity, so that a file is read
/// once however many functions of it are asked about.
///
/// Guarded by a pthread mutex rather than `Synchronization.Mutex`: on Linux the latter lives in
/// the uninstrumented `libswiftSynchronization`, so ThreadSanitizer cannot see it order the
/// accesses it guards (see `Locked` in FFIHookCore). The lock is held only to look up or store
/// an entry, never while a file is read, and no other lock is taken under it; it is taken
/// across `fork` so that a child never finds it held.
final class SymbolTableCache: @unchecked Sendable {
    // Sendable: `tables` is only touched with `mutex` held.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Parsed tables, and nil for files that have none to give (unreadable, or not ELF).
    private var tables: [FileIdentity: ELFSymbolTable?] = [:]

    /// The process's cache, for as long as the process lives.
    static let shared = SymbolTableCache()

    private init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
        // A leaf lock: it ranks above the engine's, which may be held when it is taken.
        _ = ffh_fork_protect(mutex, 200)
    }

    /// The table of `object`'s file, nil when it has none or the file on disk is not the one
    /// mapped (its `PT_LOAD` headers differ: it was replaced since it was loaded).
    func table(for object: LoadedObject) -> ELFSymbolTable? {
        guard let path = object.filePath, let identity = FileIdentity(path: path) else { return nil }
        let table: ELFSymbolTable?
        if let cached = withLock({ tables[identity] }) {
            table = cached
        } else {
            // Parsed without the lock: two threads may both parse a file once, and one keeps it.
            let parsed = ELFSymbolTable(path: path)
            if parsed == nil || parsed?.identity == identity {
                withLock { tables[identity] = parsed }
            }
            table = parsed
        }
        guard let table, table.loadSegments == object.loadSegments else { return nil }
        return table
    }

    private func withLock<Result>(_ body: () -> Result) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }
}
