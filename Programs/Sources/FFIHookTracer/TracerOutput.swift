internal import CTracerSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Where the tracer's messages and table go: standard error as it was when the tracer
/// started, or the file that `FFI_HOOK_TRACER_OUTPUT` names (a joined process writes there, for
/// `ffi-hook-tracer --pid` to print on its own standard error).
enum TracerOutput {
    /// The descriptor written to now: 2, or the file ``redirect(to:)`` opened.
    private static let current = Atomic<Int32>(2)

    /// A duplicate of standard error taken at start (``keepStandardError()``) and the file it
    /// is, by device and inode.
    private static let kept = Mutex<(descriptor: Int32, device: UInt64, inode: UInt64)?>(nil)

    /// The lowest number the duplicate takes: above those a program opens first, sets up on
    /// purpose (`dup2(…, 3)`) for a child, or a shell script names (`exec 100>file`, which bash
    /// did not do while the duplicate was at 100): halfway to the process's limit.
    private static var keptFloor: Int32 { fht_high_descriptor_floor() }

    /// The descriptor to write to now: the file ``redirect(to:)`` opened; otherwise standard
    /// error as it was at start, while the duplicate kept of it is still that file (a program
    /// may close its standard error at exit, as coreutils' do, or point it elsewhere); else 2.
    static var descriptor: Int32 {
        let descriptor = current.load(ordering: .acquiring)
        guard descriptor == 2 else { return descriptor }
        return kept.withLock { kept in
            guard let kept else { return 2 }
            // A program that closed it and opened a file that was given its number is seen
            // here: the number is then the program's, and stays so.
            var status = stat()
            guard fstat(kept.descriptor, &status) == 0, UInt64(status.st_dev) == kept.device,
                UInt64(status.st_ino) == kept.inode
            else { return 2 }
            return kept.descriptor
        }
    }

    /// Keeps a duplicate of standard error (closed on exec) for the report at exit; once.
    static func keepStandardError() {
        kept.withLock { kept in
            guard kept == nil else { return }
            var status = stat()
            guard fstat(2, &status) == 0 else { return }
            let duplicate = fcntl(2, F_DUPFD_CLOEXEC, keptFloor)
            guard duplicate >= 0 else { return }
            kept = (duplicate, UInt64(status.st_dev), UInt64(status.st_ino))
        }
    }

    /// SIGPIPE blocked on the calling thread until ``BrokenPipes/end()``: a write to a pipe whose
    /// reader has gone fails with EPIPE instead of ending the process.
    static func ignoringBrokenPipes() -> BrokenPipes { BrokenPipes() }

    /// SIGPIPE held off the calling thread (see ``ignoringBrokenPipes()``).
    struct BrokenPipes {
        private var previous = sigset_t()
        private let wasPending: Bool

        fileprivate init() {
            var pending = sigset_t()
            sigpending(&pending)
            wasPending = sigismember(&pending, SIGPIPE) == 1
            var block = sigset_t()
            sigemptyset(&block)
            sigaddset(&block, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &block, &previous)
        }

        /// Discards the SIGPIPE these writes raised (not one the program had pending), and
        /// gives the thread its signal mask back.
        func end() {
            var pending = sigset_t()
            sigpending(&pending)
            if !wasPending, sigismember(&pending, SIGPIPE) == 1 {
                var block = sigset_t()
                sigemptyset(&block)
                sigaddset(&block, SIGPIPE)
                var now = timespec()
                _ = sigtimedwait(&block, nil, &now)
            }
            var mask = previous
            pthread_sigmask(SIG_SETMASK, &mask, nil)
        }
    }

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

/// An output file's name as the user gave it, in which `%p` stands for the process's ID.
///
/// Written on the standard library's collections alone: the string-processing module's
/// `contains(_:)` and `split(separator:)` for strings would make every traced process load that
/// module (and the regular-expression parser it needs) with the tracer.
struct OutputPathTemplate {
    /// The name as given.
    let template: String

    /// Whether the name holds `%p`: each process writes its own file.
    var namesProcess: Bool {
        let bytes = Array(template.utf8)
        return bytes.indices.dropLast().contains {
            bytes[$0] == UInt8(ascii: "%") && bytes[$0 + 1] == UInt8(ascii: "p")
        }
    }

    /// The name with every `%p` replaced by `pid`.
    func path(for pid: Int32) -> String {
        let bytes = Array(template.utf8)
        let id = Array(String(pid).utf8)
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count + id.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "p") {
                result += id
                index += 2
            } else {
                result.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: result, as: UTF8.self)
    }
}
