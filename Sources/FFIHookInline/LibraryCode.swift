/// The library's own functions, which an inline patch must leave alone: every hooked call
/// runs some of them (the entries, the thread records, the dispatch into Swift) before it can
/// tell a call the library makes from a caller's, so a hook on one would call itself.
enum LibraryCode {
    /// Prefixes of the C symbols: `ffh_…`, and `swift_ffi_hook_…` for the code gdb is shown.
    static let prefixes = ["ffh_", "swift_ffi_hook_"]
    /// The library's Swift modules and its C types as a mangled Swift name spells them: the
    /// name's length, then the name (`7FFIHook`; `10ffh_attach` starts with `ffh_` after its
    /// length).
    static let mangledModules = ["7FFIHook", "11FFIHookCore", "13FFIHookInline", "11FFIHookObjC"]
    private static let mangledModuleBytes = mangledModules.map { Array($0.utf8) }
    private static let cPrefix = Array("ffh_".utf8)
    /// The first two bytes of ``prefixes`` and of a mangled Swift name (`$s`), each as a
    /// little-endian 16-bit number: `sqlite3_…` begins with the `s` of `swift_ffi_hook_`.
    private static let firstPairs: [UInt16] = (prefixes + ["$s"]).map { prefix in
        let bytes = Array(prefix.utf8)
        return UInt16(bytes[0]) | UInt16(bytes[1]) << 8
    }

    /// Why the function named `name` is the library's own, or nil: a C function of the
    /// library, or a Swift function whose mangled name involves its modules or its C types
    /// (its own functions, and the specializations, thunks and value witnesses made for its
    /// types, wherever the compiler put them).
    static func reason(name: String?) -> String? {
        // Most names begin with none of the prefixes' first two bytes: they decide.
        guard let name else { return nil }
        var utf8 = name.utf8.makeIterator()
        guard let first = utf8.next(), let second = utf8.next(),
            firstPairs.contains(UInt16(first) | UInt16(second) << 8)
        else { return nil }
        let isOwn =
            prefixes.contains { name.hasPrefix($0) }
            || (name.hasPrefix("$s") && mentionsLibrary(Array(name.utf8)))
        guard isOwn else { return nil }
        return "`\(name)` is the library's own code, which every hooked call runs: a hook on it would call itself"
    }

    /// Whether a mangled name holds one of ``mangledModules`` as a whole length-and-name (the
    /// length not the end of a longer number: `17FFIHook…` is another name), or a length
    /// followed by `ffh_`.
    private static func mentionsLibrary(_ name: [UInt8]) -> Bool {
        let digits = UInt8(ascii: "0")...UInt8(ascii: "9")
        for start in name.indices
        where digits.contains(name[start]) && (start == 0 || !digits.contains(name[start - 1])) {
            var end = start
            var length = 0
            while end < name.count, digits.contains(name[end]), length < 1_000 {
                length = length * 10 + Int(name[end] - UInt8(ascii: "0"))
                end += 1
            }
            guard length > 0, end + length <= name.count else { continue }
            let whole = name[start..<(end + length)]
            if mangledModuleBytes.contains(where: { whole.elementsEqual($0) }) { return true }
            if name[end..<(end + length)].starts(with: cPrefix) { return true }
        }
        return false
    }
}
