// ffi-hook-tracer-join: the `--pid` of ffi-hook-tracer, which executes it once the options are
// checked and set in the environment as for a started program (the FFI_HOOK_TRACER_ variables):
// joins process PID, traces for SECONDS (`-`: until interrupted), leaves it, prints the report
// and exits with the statuses ffi-hook-tracer --help lists.
//
//     ffi-hook-tracer-join PID SECONDS|- LIBRARY
//
// LIBRARY is the tracer library's path, which the process joined loads.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Writes `text` to a file descriptor (stdio's globals are not concurrency-safe in Swift 6).
func put(_ text: String, to descriptor: Int32) {
    var text = text
    text.withUTF8 { bytes in _ = write(descriptor, bytes.baseAddress, bytes.count) }
}

/// Says `message` on standard error and exits with status 64, as ffi-hook-tracer does for
/// options that cannot be used.
func fail(_ message: String) -> Never {
    put("ffi-hook-tracer: \(message)\n", to: 2)
    exit(64)
}

let arguments = CommandLine.arguments
guard arguments.count == 4, let pid = Int32(arguments[1]), pid > 0 else {
    fail("ffi-hook-tracer-join is run by ffi-hook-tracer --pid: ffi-hook-tracer-join PID SECONDS|- LIBRARY")
}
let duration = arguments[2] == "-" ? nil : Double(arguments[2])
joinProcess(pid, duration: duration, library: arguments[3])
