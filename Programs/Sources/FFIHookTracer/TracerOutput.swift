import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Where the tracer's messages and table go: standard error, or the file that
/// `FFI_HOOK_TRACER_OUTPUT` names (a joined process writes there, for `ffi-hook-tracer --pid`
/// to print on its own standard error).
enum TracerOutput {
    /// The descriptor written to now.
    private static let current = Atomic<Int32>(2)

    /// The descriptor written to now: 2 unless ``redirect(to:)`` opened a file.
    static var descriptor: Int32 { current.load(ordering: .acquiring) }

    /// Appends from now on to the file at `path` (created when missing), closing the file
    /// opened before; stays with the descriptor used so far when the file cannot be opened,
    /// and says so there.
    static func redirect(to path: String) {
        let opened = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard opened >= 0 else {
            say("cannot write \(path): \(String(cString: strerror(errno))); writing to standard error")
            return
        }
        let previous = current.exchange(opened, ordering: .acquiringAndReleasing)
        if previous != 2 { close(previous) }
    }

    /// Goes back to standard error, closing the file opened.
    static func restore() {
        let previous = current.exchange(2, ordering: .acquiringAndReleasing)
        if previous != 2 { close(previous) }
    }
}
