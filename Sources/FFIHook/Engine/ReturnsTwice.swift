#if canImport(Glibc)
    import Glibc
#endif

/// A set of the C library's functions that an attach treats apart, by name and by address.
struct KnownFunctions: Sendable {
    /// The names, as the C library exports them.
    let names: Set<String>
    /// Their addresses in this process, in order (a few: a group of attaches asks about a
    /// thousand words, each answered by comparisons, not hashing): the definition each name
    /// binds to (a preloaded library's first), and the C library's own.
    private let addresses: [UInt]
    /// The lowest and highest of them: most words are outside, told at once.
    private let lowest: UInt
    private let highest: UInt
    /// The last bytes of the names, by value: a name that ends otherwise is none of them,
    /// which tells most names apart without hashing them (a group of attaches asks for each).
    private let lastBytes: [Bool]

    init(_ names: Set<String>) {
        self.names = names
        var found = Set<UInt>()
        let libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD)
        for name in names {
            if let address = dlsym(nil, name) { found.insert(UInt(bitPattern: address)) }
            if let libc, let address = dlsym(libc, name) { found.insert(UInt(bitPattern: address)) }
        }
        if let libc { dlclose(libc) }
        addresses = found.sorted()
        lowest = addresses.first ?? .max
        highest = addresses.last ?? 0
        var last = [Bool](repeating: false, count: 256)
        for name in names { last[Int(name.utf8.last!)] = true }
        lastBytes = last
    }

    /// Whether `function` is one of them: its start, or the instruction after its `endbr64`
    /// (where an inline plan of it begins).
    func contains(function: UInt) -> Bool {
        guard function != 0, function >= lowest, function <= highest &+ 4 else { return false }
        return addresses.contains(function) || addresses.contains(function &- 4)
    }

    /// Whether a symbol of this name is one of them.
    func contains(name: String) -> Bool {
        guard let last = name.utf8.last, lastBytes[Int(last)] else { return false }
        return names.contains(name)
    }
}

/// The C library's functions that return twice: once as called, and again later when a
/// `longjmp`, `setcontext` or the end of a `vfork` child resumes the context they saved. The
/// second return comes back to the return address saved with the context. An attach's
/// `onLeave` replaces that address with the thread's return thunk, whose side-stack frame the
/// first return already used, so an attach to one of these runs `onEnter` only.
enum ReturnsTwice {
    /// The functions (and `sigsetjmp`, a macro for `__sigsetjmp` in C, under its own name for
    /// tables that list it).
    static let functions = KnownFunctions([
        "setjmp", "_setjmp", "__setjmp", "sigsetjmp", "__sigsetjmp", "savectx",
        "getcontext", "swapcontext", "vfork", "__vfork",
    ])

    /// Whether `function` is one of them (see ``KnownFunctions/contains(function:)``).
    static func contains(function: UInt) -> Bool { functions.contains(function: function) }

    /// Whether a symbol of this name is one of them.
    static func contains(name: String) -> Bool { functions.contains(name: name) }
}

/// The loader's functions that read their own return address to learn which object called
/// them: `dlopen` and `dlmopen` look for a bare name in that object's `DT_RPATH` or `DT_RUNPATH`
/// and load into its namespace, `dlsym` and `dlvsym` take `RTLD_NEXT` as the objects after it.
/// An attach's `onLeave` makes the call from the thread's cell, whose address is no object's
/// (the loader would take the main program, or for `RTLD_NEXT` fail): an attach to one of these
/// with a leave block has them called through a `ret` in the real caller's object
/// (`FFH_ATTACH_AS_CALLER`), so that they see the caller they would have seen; a hook with a
/// signature, which calls its original from the library's code, has them called so through a
/// resolver (``OriginalResolvers``, `ffh_as_caller_resolver`).
enum ReadsReturnAddress {
    static let functions = KnownFunctions(["dlopen", "dlmopen", "dlsym", "dlvsym"])
}
