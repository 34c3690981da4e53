// The options of the call log (a line per call, with arguments and result) and the
// environment variables they become.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The usage lines of the log options.
let logUsage = """
      --log FILE         write a line per traced call to FILE (%p: the process ID):
                           THREAD SECONDS +DURATION name(arguments) = result
                         the kernel's thread ID, when the call began (seconds since the
                         start), how long it took, and the call, indented two spaces per
                         logged call it was made in. A line is written when its call
                         returns (after the calls made inside it; sort by the second column
                         for the order calls began in), with one write, so lines of threads
                         and processes never mix; calls in flight on the thread that exits
                         are written at exit, ending <no return>, and calls that longjmp or
                         an exception left when the next call from their frame begins,
                         without a time, ending <left: longjmp or an exception>.
                         Arguments are decoded for functions with a known signature (built
                         in for common C library functions: open, read, write, close,
                         malloc, free, memcpy, strlen, strcmp, fopen, puts, getenv and
                         more); others show the six integer argument registers and rax in
                         hexadecimal. Strings are quoted, escaped and cut at 64 bytes; an
                         address that cannot be read shows as <unreadable>; the buffer
                         that read, pread, recv or readlink fills shows what it got as the
                         call returns (its address when the call failed). Not with --pid
      --signature NAME=ENCODING
                         the signature of function NAME for the log, as a type encoding:
                         the return type, then the arguments (i int, I unsigned, q long,
                         Q unsigned long or size_t, c char, s short, B bool, f float,
                         d double, * a C string, ^v or ^T a pointer, v void), ending in ...
                         for a variadic function: 'write=qi^vQ'; repeatable. Arguments after
                         a structure passed by value are shown as ...
      --signatures FILE  signatures from FILE, one NAME=ENCODING a line (# starts a comment)
    """

/// The variable the library reads the log's file from.
private let logVariable = "FFI_HOOK_TRACER_LOG"
/// The variable the library reads the signatures from (entries separated by newlines).
private let signaturesVariable = "FFI_HOOK_TRACER_SIGNATURES"

/// The variable and value of the log option `name`, if it is one: nil for another option;
/// exits with the usage when the value is missing, a signature has no `=`, or a signature
/// file cannot be read.
func logOption(_ name: String, inline: String?, _ arguments: inout ArraySlice<String>) -> (String, String)? {
    guard ["--log", "--signature", "--signatures"].contains(name) else { return nil }
    guard let value = inline ?? arguments.popFirst() else { fail("\(name) needs a value") }
    refuseEmpty(value, of: name)
    switch name {
    case "--log": return (logVariable, absolute(value))
    case "--signature":
        guard value.contains("="), !value.hasPrefix("="), !value.hasSuffix("=") else {
            fail("--signature takes NAME=ENCODING, with neither empty, not \(value)")
        }
        return (signaturesVariable, value)
    default:
        guard let text = contents(of: value) else {
            fail("cannot read --signatures \(value): \(String(cString: strerror(errno)))")
        }
        return (signaturesVariable, text)
    }
}

/// Sets the log's variables from the options given (the signatures of every `--signature` and
/// `--signatures`, one entry a line), and clears those not given.
func setLogEnvironment(_ options: [(String, String)]) {
    for variable in [logVariable, signaturesVariable] {
        let values = options.filter { $0.0 == variable }.map(\.1)
        if values.isEmpty {
            unsetenv(variable)
        } else {
            setenv(variable, variable == logVariable ? values.last! : values.joined(separator: "\n"), 1)
        }
    }
    unsetenv("FFI_HOOK_TRACER_LOG_OPENED")
}

/// The text of the file at `path` (a file of /proc too, whose size reads as 0), or nil when it
/// cannot be read.
func contents(of path: String) -> String? {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0, errno == EINTR { continue }
        guard count >= 0 else { return nil }
        if count == 0 { break }
        bytes.append(contentsOf: chunk[..<count])
    }
    return String(decoding: bytes, as: UTF8.self)
}
