#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What the tracer traces and where it reports, read from the environment when the library
/// is loaded (`ffi-hook-tracer` sets these variables from its options).
///
/// - `FFI_HOOK_TRACER_LIBRARIES`: the libraries whose exported functions are traced,
///   separated by commas: a soname (`libsqlite3.so.0`), a file name, a path, or a shell
///   pattern matched against the soname and the file name (`libsqlite3*`). A library that
///   is not loaded yet is traced from the moment the program loads it with `dlopen`.
/// - `FFI_HOOK_TRACER_SYMBOLS`: shell patterns (`fnmatch`) separated by commas; only the
///   exported functions whose name matches one are traced. Unset or empty: all of them.
/// - `FFI_HOOK_TRACER_SCOPE`: whose calls are counted. `program` (the default): the calls
///   of every object the program itself brings (the main program, what it needs, other
///   preloaded objects, what it loads later), not those of the tracer and of the objects
///   only the tracer needs (the Swift runtime, libffi). `main`: the main program's calls
///   only. `all`: the calls of every loaded object, the tracer's and the Swift runtime's
///   included (their calls made while the tracer counts a call are still not seen).
/// - `FFI_HOOK_TRACER_INLINE`: `1` to trace the libraries' functions in their own code (inline
///   hooks on every exported function and every local one the file's `.symtab` names), which
///   sees every call, whoever makes it; the scope then does not apply.
/// - `FFI_HOOK_TRACER_JSON`: a file to write the counts to as JSON at exit; `%p` in it
///   becomes the process ID.
/// - `FFI_HOOK_TRACER_PID`: the process that writes the JSON file when its name has no
///   `%p` (`ffi-hook-tracer` sets its own, which the program it executes keeps); unset,
///   the process in which the library was loaded, not its forked children.
/// - `FFI_HOOK_TRACER_CHROME_TRACE`, `FFI_HOOK_TRACER_FOLDED`, `FFI_HOOK_TRACER_FLAMEGRAPH`,
///   `FFI_HOOK_TRACER_TIMELINE`, `FFI_HOOK_TRACER_EVENTS`: see ``EventOutputs``.
/// - `FFI_HOOK_TRACER_OUTPUT`: a file the tracer's messages and its table are appended to
///   instead of standard error (`ffi-hook-tracer --pid` reads it back and prints it).
///
/// A process joined with `ffi-hook-tracer --pid` receives the same variables as text
/// (``from(text:)``), not in its environment.
struct TracerConfiguration: Sendable {
    /// Whose calls are counted.
    enum Scope: String, Sendable {
        case program
        case main
        case all
    }

    /// Names or shell patterns of the libraries whose exports are traced.
    var libraries: [String] = []
    /// Shell patterns of the function names traced; empty for every exported function.
    var symbolPatterns: [String] = [] {
        didSet { symbolMatcher = SymbolMatcher(symbolPatterns) }
    }
    /// The patterns ready for matching many names.
    private var symbolMatcher = SymbolMatcher([])
    /// Whose calls are counted.
    var scope: Scope = .program
    /// Whether the libraries' functions are traced in their own code (inline hooks).
    var inline = false
    /// Where the JSON report goes, if anywhere.
    var jsonPath: String?
    /// The process that writes the JSON report when its path has no `%p`.
    var jsonWriter: Int32?
    /// The timeline and flame graph outputs, and the events each thread records for them.
    var events = EventOutputs()
    /// A file the messages and the table are appended to instead of standard error.
    var outputPath: String?

    /// The configuration in the environment, with a message for each value it could not use.
    static func fromEnvironment() -> (TracerConfiguration, problems: [String]) {
        parse { name in getenv(name).map { String(cString: $0) } }
    }

    /// The configuration in `text`, which holds the same variables as the environment, one
    /// `NAME=VALUE` a line (how ``ffi_hook_tracer_join`` receives it); lines without `=` are
    /// ignored, and a later line for a name replaces an earlier one.
    static func from(text: String) -> (TracerConfiguration, problems: [String]) {
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return parse { values[$0] }
    }

    /// The configuration whose variables `source` gives by name (nil for one that is unset),
    /// with a message for each value it could not use.
    static func parse(_ source: (String) -> String?) -> (TracerConfiguration, problems: [String]) {
        var configuration = TracerConfiguration()
        var problems: [String] = []
        configuration.libraries = list(source("FFI_HOOK_TRACER_LIBRARIES"))
        configuration.symbolPatterns = list(source("FFI_HOOK_TRACER_SYMBOLS"))
        if let scope = source("FFI_HOOK_TRACER_SCOPE"), !scope.isEmpty {
            if let known = Scope(rawValue: scope) {
                configuration.scope = known
            } else {
                problems.append("FFI_HOOK_TRACER_SCOPE=\(scope) is not main, program or all; tracing the program")
            }
        }
        if let path = source("FFI_HOOK_TRACER_JSON"), !path.isEmpty { configuration.jsonPath = path }
        if let inline = source("FFI_HOOK_TRACER_INLINE"), !inline.isEmpty {
            if inline == "1" || inline == "0" {
                configuration.inline = inline == "1"
            } else {
                problems.append("FFI_HOOK_TRACER_INLINE=\(inline) is not 1 or 0; tracing through import tables")
            }
        }
        if let writer = source("FFI_HOOK_TRACER_PID"), !writer.isEmpty {
            if let pid = Int32(writer) {
                configuration.jsonWriter = pid
            } else {
                problems.append("FFI_HOOK_TRACER_PID=\(writer) is not a process ID")
            }
        }
        configuration.events = EventOutputs.from(source, &problems)
        if let path = source("FFI_HOOK_TRACER_OUTPUT"), !path.isEmpty { configuration.outputPath = path }
        if configuration.libraries.isEmpty {
            problems.append("FFI_HOOK_TRACER_LIBRARIES names no library; nothing is traced")
        }
        return (configuration, problems)
    }

    /// Whether `name` (a function's) is one to trace.
    func selects(symbol name: String) -> Bool {
        symbolPatterns.isEmpty || symbolMatcher.matches(name)
    }

    /// ``selects(symbol:)`` for a name as C characters: a walk asks about each of a library's
    /// thousands of names, and makes a string only of those chosen.
    func selects(cString name: UnsafePointer<CChar>) -> Bool {
        symbolPatterns.isEmpty || symbolMatcher.matches(cString: name)
    }

    /// `--symbols` patterns as a matcher asks of thousands of names (every export of libc):
    /// the plain names (no `*`, `?`, `[` or `\\`, which match only themselves) in a set, and
    /// looked for among C strings by a ``NameFilter``; the others as C strings for `fnmatch`,
    /// converted once.
    private struct SymbolMatcher: Sendable {
        let names: Set<String>
        let filter: NameFilter
        let patterns: [[CChar]]

        init(_ patterns: [String]) {
            // (By bytes: a character-by-character look at each pattern, with grapheme breaking,
            // cost 17,000 instructions a name, 1.3M for gzip's 77 imports, at every start.)
            let special: [UInt8] = Array("*?[\\".utf8)
            let isPlain = { (pattern: String) in !pattern.utf8.contains(where: special.contains) }
            names = Set(patterns.filter(isPlain))
            filter = NameFilter(names)
            self.patterns = patterns.filter { !isPlain($0) }.map { Array($0.utf8CString) }
        }

        func matches(cString name: UnsafePointer<CChar>) -> Bool {
            if patterns.contains(where: { fnmatch($0, name, 0) == 0 }) { return true }
            return filter.contains(name)
        }

        func matches(_ name: String) -> Bool {
            if names.contains(name) { return true }
            guard !patterns.isEmpty else { return false }
            return name.withCString { name in patterns.contains { fnmatch($0, name, 0) == 0 } }
        }
    }

    /// The `--library` names that the object with this path and soname answers to: its path,
    /// file name or soname (or a shell pattern of any of them), or the file its path leads to
    /// after symbolic links (`/usr/lib/…` for the loader's `/lib/…`, `libsqlite3.so.0.8.6` for
    /// `libsqlite3.so.0`), by path, by any path to it, or by file name (or pattern). The start
    /// library applies the same rule (start.c, `fhs_names`).
    func libraries(naming path: String, soname: String?) -> [String] {
        // The main program (no path) is no library: `*` does not name it.
        guard !path.isEmpty else { return [] }
        let fileName = path.lastPathComponent
        var real: (path: String, fileName: String)??
        func resolved() -> (path: String, fileName: String)? {
            if let real { return real }
            let found = Self.realPath(path).map { ($0, $0.lastPathComponent) }
            real = .some(found)
            return found
        }
        // Where the path's last component is no symbolic link, the file it leads to has its
        // file name: a name without a slash, which did not match that, matches nothing more
        // (one lstat for each object rather than a readlink for each component of its path).
        var lastIsLink: Bool?
        func leadsElsewhere() -> Bool {
            if let lastIsLink { return lastIsLink }
            var status = stat()
            let found = lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFLNK
            lastIsLink = found
            return found
        }
        return libraries.filter { name in
            // A name with a slash is a path or a pattern of paths (/usr/lib/*/libz.so*); a
            // relative one names the end of a path (links/libz.so.1).
            let isPath = name.contains("/")
            if name == path || name == fileName || name == soname || fnmatch(name, fileName, 0) == 0
                || soname.map({ fnmatch(name, $0, 0) == 0 }) ?? false
                || (isPath && (fnmatch(name, path, 0) == 0 || Self.path(path, endsIn: name)))
            {
                return true
            }
            guard !path.isEmpty, isPath || leadsElsewhere(), let real = resolved() else { return false }
            return name == real.fileName || fnmatch(name, real.fileName, 0) == 0
                || (isPath
                    && (fnmatch(name, real.path, 0) == 0 || Self.path(real.path, endsIn: name)
                        || Self.realPath(name) == real.path))
        }
    }

    /// Whether `path` ends in the relative path `name`, whole components of it.
    private static func path(_ path: String, endsIn name: String) -> Bool {
        !name.hasPrefix("/") && path.hasSuffix("/" + name)
    }

    /// The path `path` leads to after symbolic links, or nil when it leads nowhere.
    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The non-empty items of a comma-separated list, without surrounding spaces.
    private static func list(_ value: String?) -> [String] {
        (value ?? "").split(separator: ",").map { String($0).trimmingSpaces }.filter { !$0.isEmpty }
    }
}

extension String {
    /// The string without leading and trailing spaces.
    fileprivate var trimmingSpaces: String {
        var characters = Substring(self)
        while characters.first == " " { characters.removeFirst() }
        while characters.last == " " { characters.removeLast() }
        return String(characters)
    }
}
