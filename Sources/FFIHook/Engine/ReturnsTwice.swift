#if canImport(Glibc)
    import Glibc
#endif

/// The C library's functions that return twice: once as called, and again later when a
/// `longjmp`, `setcontext` or the end of a `vfork` child resumes the context they saved. The
/// second return comes back to the return address saved with the context. An attach's
/// `onLeave` replaces that address with the thread's return thunk, whose side-stack frame the
/// first return already used, so an attach to one of these runs `onEnter` only.
enum ReturnsTwice {
    /// The names, as the C library exports them (and `sigsetjmp`, a macro for `__sigsetjmp`
    /// in C, under its own name for tables that list it).
    static let names: Set<String> = [
        "setjmp", "_setjmp", "__setjmp", "sigsetjmp", "__sigsetjmp", "savectx",
        "getcontext", "swapcontext", "vfork", "__vfork",
    ]

    /// Their addresses in this process, resolved once, in order (a few: a group of attaches
    /// asks about a thousand words, each answered by comparisons, not hashing).
    private static let addresses: [UInt] = {
        var found = Set<UInt>()
        for name in names {
            if let address = dlsym(nil, name) {
                found.insert(UInt(bitPattern: address))
            }
        }
        return found.sorted()
    }()

    /// The lowest and highest of them: most words are outside, told at once.
    private static let lowest = addresses.first ?? .max
    private static let highest = addresses.last ?? 0

    /// Whether `function` is one of them: its start, or the instruction after its `endbr64`
    /// (where an inline plan of it begins).
    static func contains(function: UInt) -> Bool {
        guard function != 0, function >= lowest, function <= highest &+ 4 else { return false }
        return addresses.contains(function) || addresses.contains(function &- 4)
    }

    /// The last bytes of the names, by value: a name that ends otherwise is none of them,
    /// which tells most names apart without hashing them (a group of attaches asks for each).
    private static let lastBytes: [Bool] = {
        var last = [Bool](repeating: false, count: 256)
        for name in names { last[Int(name.utf8.last!)] = true }
        return last
    }()

    /// Whether a symbol of this name is one of them.
    static func contains(name: String) -> Bool {
        guard let last = name.utf8.last, lastBytes[Int(last)] else { return false }
        return names.contains(name)
    }
}
