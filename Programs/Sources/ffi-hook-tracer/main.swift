// ffi-hook-tracer: runs a program with the FFIHookTracer library preloaded, which counts the
// calls and time of the functions the options select and prints a table at exit.
//
//     ffi-hook-tracer [--library NAME]... [--symbols PATTERN]... [--json FILE]
//                     [--scope program|main|all] [--inline] -- PROGRAM [ARGUMENT]...
//     ffi-hook-tracer [options] --pid PID [--duration SECONDS]
//
// With --pid it joins a running process instead (ProcessJoin.swift).
//
// The options become the environment variables the library reads (see its
// TracerConfiguration); the library is found beside this executable.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The usage lines, which a usage error prints too.
let synopsis = """
    usage: ffi-hook-tracer [--library NAME]... [--symbols PATTERN]... [--json FILE]
                           [--scope program|main|all] [--inline] [--chrome-trace FILE]
                           [--folded FILE] [--flamegraph FILE] [--timeline FILE] [--events N]
                           [--log FILE] [--signature NAME=ENCODING]... [--signatures FILE]
                           -- PROGRAM [ARGUMENT]...
           ffi-hook-tracer [the same options but --log] --pid PID [--duration SECONDS]
    """

/// What --help prints.
let usage = """
    \(synopsis)

    Runs PROGRAM with the tracer library preloaded. At exit the program prints, to standard
    error, the calls and time of each traced function, by total time: its calls, their total
    time (a recursive call's once), its self time (less the traced calls made inside it), the
    mean call (each call's whole time averaged, a recursive call's inner calls included: more
    than total / calls for a recursive function), and its share of the time spent in traced
    functions. A signal that ends the
    program (Ctrl-C, kill, a crash, a write to a closed pipe) has the report made first, its
    heading naming the signal, and the program then dies of it as it would have: where the
    program leaves a signal's action at the default, the tracer's handler stands in for it (the
    program is still told the default), with a thread of the tracer's that waits for it in each
    traced process. A handler the program installs replaces it. The exit status is the
    program's: what the tracer finds wrong in a run (a --library name that no object answers
    to, a file it cannot write) is said on standard error; 64 when the options are wrong, 127
    when PROGRAM cannot be run.

    With --pid, joins the running process PID instead: loads the tracer library into it
    (through ptrace, which stops one of its threads for a moment), traces for SECONDS or
    until the tracer is interrupted (Ctrl-C, SIGTERM) or the process exits, then removes
    every hook, leaves the process running and prints the same report for that window. The
    library stays loaded in the process, idle (a Swift library cannot be unloaded safely); only
    its import tables change while traced (with --inline, the traced functions' first bytes),
    and they hold what they held before once the tracer leaves. A process that a signal ends
    while traced (SIGTERM, SIGINT and the others whose default action ends it; not faults)
    reports the window first and then dies of it: the tracer's handler stands in for the
    default action of these signals while it traces. A tracer killed before it leaves
    (SIGKILL) is seen by the process, which then removes its hooks itself. Tracing needs the
    permission to ptrace the process: the same user and, where Yama's ptrace_scope is 1 or
    more, root (CAP_SYS_PTRACE) or the process's consent (prctl PR_SET_PTRACER); the process
    must be able to read the library and to write in TMPDIR (or /tmp), where its report
    passes. Exit status:
    0 traced, 1 failed (also: traced, but a --library name answered to no object of the
    process, or a file of the report could not be written), 2 not permitted or traced already, 3 no
    such process or it exited before reporting, 4 not a glibc x86-64 process, 64 the options
    are wrong.

      --library NAME     a library whose exported functions are traced: a soname
                         (libsqlite3.so.0), a file name, a path, or a shell pattern of any
                         of them ('libsql*', '*/libz.so.1'); repeatable.
                         The path and name of the file the loader's path leads to after
                         symbolic links count too (libsqlite3.so.0.8.6).
                         A name that no object of the process answers to is reported at exit,
                         with the loaded objects whose names are closest to it; objects loaded
                         by dlmopen in a namespace of their own are not traced (and are named
                         so when only they answer)
      --symbols PATTERN  only functions whose name matches this shell pattern (or one of
                         several given, comma-separated or repeated); default: all
      --json FILE        also write the counts as JSON to FILE (%p: the process ID); without
                         %p, only the process started writes it, and the processes it
                         starts say that their calls are not in it
      --scope SCOPE      whose calls count. A call is seen where it goes through an object's
                         import table (its PLT and GOT entries), so the scope says which
                         objects' tables are watched:
                           program  (default) every object of the program: the executable
                                    and the libraries it loads, now or later with dlopen, the
                                    traced libraries included; what only the tracer brought
                                    (its library, and libffi and Zydis unless the program
                                    needs them too) is left out
                           main     the executable only: calls the program makes itself
                           all      every object, those only the tracer brought too
                         A traced library's calls to its own functions count (under program
                         or all) only when they go through its own import table, as a call of
                         an exported function through its PLT does; calls the compiler made
                         direct, and calls of functions it does not export, are not seen
      --inline           trace the libraries' functions in their own code instead: every
                         exported function, and every local one the file's symbol table
                         (.symtab) names, patched where it starts, so that every call is seen
                         whoever makes it (the library's calls to itself and the program's,
                         through the import table or not); --scope does not apply. Functions
                         that cannot be patched safely are reported and left out (the
                         tracer's own libraries are never traced; it carries its own Swift
                         runtime, so a Swift program's runtime is traced like any library)
    \(eventUsage)
    \(logUsage)
      --pid PID          join the running process PID instead of starting a program
      --duration SECONDS with --pid: trace for this long (default: until interrupted)

    """

/// Writes `text` to a file descriptor (stdio's globals are not concurrency-safe in Swift 6).
func put(_ text: String, to descriptor: Int32) {
    var text = text
    text.withUTF8 { bytes in _ = write(descriptor, bytes.baseAddress, bytes.count) }
}

/// Prints `message` and the usage lines to standard error and exits with status 64.
func fail(_ message: String) -> Never {
    put("ffi-hook-tracer: \(message)\n\(synopsis)\nffi-hook-tracer --help describes each option.\n", to: 2)
    exit(64)
}

/// `path` from the directory the tracer was started in: each traced process writes its files
/// at its exit, from whatever directory it is in then (a shell's `cd`).
func absolute(_ path: String) -> String {
    guard !path.hasPrefix("/"), let directory = getcwd(nil, 0) else { return path }
    defer { free(directory) }
    return String(cString: directory) + "/" + path
}

/// Exits with the usage when an option's value is empty (`--library ''`, `--json=`): an empty
/// value would otherwise read as no option at all (every function, no file).
func refuseEmpty(_ value: String, of option: String) {
    if value.isEmpty { fail("\(option) needs a value: it was given an empty one") }
}

/// The options, parsed by hand (the package has no argument-parsing dependency).
struct Options {
    var libraries: [String] = []
    var symbols: [String] = []
    var json: String?
    var scope: String?
    var inline = false
    var command: [String] = []
    /// The output options' variables and values.
    var events: [(String, String)] = []
    /// The process to join (--pid).
    var pid: Int32?
    /// How long to trace a joined process, in seconds (--duration); nil until interrupted.
    var duration: Double?
    /// The log options' variables and values.
    var log: [(String, String)] = []

    init(_ arguments: ArraySlice<String>) {
        var arguments = arguments
        while let argument = arguments.popFirst() {
            if argument == "--" {
                command = Array(arguments)
                break
            }
            if argument == "-h" || argument == "--help" {
                put(usage, to: 1)
                exit(0)
            }
            if argument == "--inline" {
                inline = true
                continue
            }
            // --name VALUE and --name=VALUE.
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            let name = parts[0]
            if let event = eventOption(name, inline: parts.count == 2 ? parts[1] : nil, &arguments) {
                events.append(event)
                continue
            }
            if let entry = logOption(name, inline: parts.count == 2 ? parts[1] : nil, &arguments) {
                log.append(entry)
                continue
            }
            guard ["--library", "--symbols", "--json", "--scope", "--pid", "--duration"].contains(name) else {
                if argument.hasPrefix("-") { fail("unknown option \(argument)") }
                command = [argument] + Array(arguments)
                break
            }
            guard let value = parts.count == 2 ? parts[1] : arguments.popFirst() else {
                fail("\(name) needs a value")
            }
            refuseEmpty(value, of: name)
            switch name {
            case "--library": libraries.append(value)
            case "--symbols":
                // An empty pattern would select every function (what leaving --symbols out does).
                guard value.split(separator: ",").contains(where: { !$0.allSatisfy(\.isWhitespace) }) else {
                    fail("--symbols needs a pattern: '\(value)' holds none (leave it out to trace every function)")
                }
                symbols.append(value)
            case "--json": json = absolute(value)
            case "--pid":
                guard let number = Int32(value), number > 0 else { fail("--pid needs a process ID") }
                pid = number
            case "--duration":
                guard let seconds = Double(value), seconds > 0, seconds < 1e9 else {
                    fail("--duration needs a number of seconds above 0")
                }
                duration = seconds
            default:
                guard ["program", "main", "all"].contains(value) else { fail("--scope is program, main or all") }
                scope = value
            }
        }
        if pid != nil, !command.isEmpty { fail("--pid joins a running process: give no program to run") }
        if duration != nil, pid == nil { fail("--duration goes with --pid") }
        let logs = log.contains { $0.0 == "FFI_HOOK_TRACER_LOG" }
        if pid != nil, logs {
            fail("--log does not work with --pid yet: a joined process writes no call log")
        }
        if !logs, !log.isEmpty {
            fail("--signature and --signatures say how --log shows arguments: give --log FILE too")
        }
        if command.isEmpty, pid == nil { fail("no program to run") }
        if libraries.isEmpty { fail("no --library: name at least one library to trace") }
        if libraries.contains(where: { $0.contains(",") }) { fail("a library name cannot hold a comma") }
        // The files are written at the end of the run: a path that cannot be written is said now,
        // not after the program has run (or the process has been traced).
        let files =
            (json.map { [("--json", $0)] } ?? [])
            + events.compactMap { variable, value in
                eventOptions.first { $0.variable == variable && $0.option != "--events" }.map { ($0.option, value) }
            }
            + log.filter { $0.0 == "FFI_HOOK_TRACER_LOG" }.map { ("--log", $0.1) }
        for (option, path) in files { refuseUnwritable(path, of: option) }
    }
}

/// Exits with the usage when the file `path` (absolute) of an output option could not be
/// written: its directory is missing or not writable, or the file is a directory or not
/// writable. With `%p` in the name, only the directory is looked at.
func refuseUnwritable(_ path: String, of option: String) {
    let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
    var status = stat()
    if strstr(path, "%p") == nil, stat(path, &status) == 0 {
        if status.st_mode & S_IFMT == S_IFDIR { fail("cannot write \(option) \(path): it is a directory") }
        guard access(path, W_OK) == 0 else {
            fail("cannot write \(option) \(path): \(String(cString: strerror(errno)))")
        }
        return
    }
    guard stat(directory.isEmpty ? "/" : directory, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
        fail("cannot write \(option) \(path): its directory \(directory) does not exist")
    }
    guard access(directory.isEmpty ? "/" : directory, W_OK | X_OK) == 0 else {
        fail("cannot write \(option) \(path): \(String(cString: strerror(errno))) (in \(directory))")
    }
    // A directory whose file system may still refuse new files (/proc, /sys, a read-only
    // mount; root passes the access check anywhere): a file made in it and removed at once.
    var probe = Array("\(directory.isEmpty ? "" : directory)/.ffi-hook-tracer-XXXXXX".utf8CString)
    let descriptor = mkstemp(&probe)
    guard descriptor >= 0 else {
        fail(
            "cannot write \(option) \(path): no file can be made in \(directory) (\(String(cString: strerror(errno))))")
    }
    close(descriptor)
    unlink(probe)
}

/// The directory this executable is in.
func executableDirectory() -> String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let length = readlink("/proc/self/exe", &buffer, Int(PATH_MAX))
    guard length > 0 else { fail("cannot read /proc/self/exe") }
    let path = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
}

let options = Options(CommandLine.arguments.dropFirst())
let library = executableDirectory() + "/libFFIHookTracer.so"
guard access(library, R_OK) == 0 else { fail("\(library) is missing: build the FFIHookTracer product") }
// The small start library is what is preloaded: it loads the tracer (beside it) in the program
// at once, and in the processes the program starts only once a traced library is loaded there.
let start = executableDirectory() + "/libFFIHookTracerStart.so"
guard access(start, R_OK) == 0 else { fail("\(start) is missing: build the FFIHookTracerStart product") }

let preload = getenv("LD_PRELOAD").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
setenv("LD_PRELOAD", preload.map { start + ":" + $0 } ?? start, 1)
setenv("FFI_HOOK_TRACER_LIBRARIES", options.libraries.joined(separator: ","), 1)
setenv("FFI_HOOK_TRACER_SYMBOLS", options.symbols.joined(separator: ","), 1)
setenv("FFI_HOOK_TRACER_PID", "\(getpid())", 1)
if let json = options.json { setenv("FFI_HOOK_TRACER_JSON", json, 1) } else { unsetenv("FFI_HOOK_TRACER_JSON") }
if let scope = options.scope { setenv("FFI_HOOK_TRACER_SCOPE", scope, 1) } else { unsetenv("FFI_HOOK_TRACER_SCOPE") }
if options.inline { setenv("FFI_HOOK_TRACER_INLINE", "1", 1) } else { unsetenv("FFI_HOOK_TRACER_INLINE") }
for (_, variable) in eventOptions { unsetenv(variable) }
for (variable, value) in options.events { setenv(variable, value, 1) }
setLogEnvironment(options.log)

if let pid = options.pid { joinProcess(pid, duration: options.duration, library: library) }

/// The file `execvp` runs for `command`: itself when it holds a slash, else the first
/// executable file of that name in PATH.
func programPath(_ command: String) -> String? {
    if command.contains("/") { return command }
    let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/local/bin:/usr/bin:/bin"
    for directory in path.split(separator: ":", omittingEmptySubsequences: false) {
        let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + command
        if access(candidate, X_OK) == 0 { return candidate }
    }
    return nil
}

/// What an ELF file without a program interpreter is: no loader runs in it, so nothing can be
/// preloaded.
enum WithoutLoader {
    /// An executable linked statically.
    case staticProgram
    /// A shared library (no entry point): not a program at all.
    case sharedLibrary
}

/// What the file at `path` is when it is an ELF file without a program interpreter; nil for
/// one with an interpreter, or no ELF file.
func withoutLoader(_ path: String) -> WithoutLoader? {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var header = [UInt8](repeating: 0, count: 64)
    guard pread(descriptor, &header, 64, 0) == 64, header[0..<4] == [0x7f, 0x45, 0x4c, 0x46], header[4] == 2 else {
        return nil
    }
    func number(_ bytes: ArraySlice<UInt8>) -> Int { bytes.reversed().reduce(0) { $0 << 8 | Int($1) } }
    let table = number(header[0x20..<0x28])
    let size = number(header[0x36..<0x38])
    let count = number(header[0x38..<0x3a])
    guard size >= 4, count > 0, count < 4096 else { return nil }
    var entries = [UInt8](repeating: 0, count: size * count)
    guard pread(descriptor, &entries, entries.count, off_t(table)) == entries.count else { return nil }
    // PT_INTERP (3) names the loader.
    guard !(0..<count).contains(where: { number(entries[$0 * size..<$0 * size + 4]) == 3 }) else { return nil }
    // A shared object (ET_DYN, 3) with no entry point is a library; with one, a static PIE.
    return number(header[0x10..<0x12]) == 3 && number(header[0x18..<0x20]) == 0 ? .sharedLibrary : .staticProgram
}

if let path = programPath(options.command[0]), let kind = withoutLoader(path) {
    switch kind {
    case .staticProgram:
        put(
            "ffi-hook-tracer: \(options.command[0]) is linked statically: no loader runs in it to load the tracer, so "
                + "none of its calls are traced (the processes it starts may be)\n", to: 2)
    case .sharedLibrary:
        put(
            "ffi-hook-tracer: \(options.command[0]) is a shared library with no entry point, not a program: "
                + "run a program that loads it, and name the library with --library\n", to: 2)
    }
}

// execvp keeps this process (and its ID, which FFI_HOOK_TRACER_PID names).
nonisolated(unsafe) var arguments = options.command.map { strdup($0) } + [nil]
execvp(options.command[0], &arguments)
put("ffi-hook-tracer: cannot run \(options.command[0]): \(String(cString: strerror(errno)))\n", to: 2)
exit(127)
