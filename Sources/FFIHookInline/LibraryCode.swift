/// The library's own functions, which an inline patch must leave alone: every hooked call
/// runs some of them (the entries, the thread records, the dispatch into Swift) before it can
/// tell a call the library makes from a caller's, so a hook on one would call itself.
enum LibraryCode {
    /// Prefixes of the C symbols (`ffh_…`, and `swift_ffi_hook_…` for the code gdb is shown)
    /// and of the mangled Swift symbols of the library's modules (`$s`, the length of the
    /// module's name, the name).
    static let prefixes = [
        "ffh_", "swift_ffi_hook_", "$s7FFIHook", "$s11FFIHookCore", "$s13FFIHookInline", "$s11FFIHookObjC",
    ]

    /// Why the function named `name` is the library's own, or nil.
    static func reason(name: String?) -> String? {
        // The length before a module's name keeps `$s7FFIHook` from matching another module
        // (`FFIHookTests` is `$s12FFIHookTests`).
        guard let name, prefixes.contains(where: { name.hasPrefix($0) }) else { return nil }
        return "`\(name)` is the library's own code, which every hooked call runs: a hook on it would call itself"
    }
}
