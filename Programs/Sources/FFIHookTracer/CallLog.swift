internal import CTracerSupport
internal import FFIHook
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A function's log description's address, handed to the blocks of every entry of the
/// function.
struct LogFunctionAddress: @unchecked Sendable {
    /// The description, in memory that is never freed.
    let pointer: UnsafePointer<fht_log_function>
}

/// The call log: a line per traced call, with its arguments and result, read from the
/// environment with the rest of the configuration.
///
/// - `FFI_HOOK_TRACER_LOG`: the file to log to; `%p` in it becomes the process ID. Without
///   `%p`, the process the wrapper started (or, without the wrapper, the first process to
///   log) creates or truncates the file and the processes it starts append to it.
/// - `FFI_HOOK_TRACER_SIGNATURES`: `name=encoding` entries separated by newlines or `;`: the
///   signatures of the functions whose arguments are decoded, besides the built-in ones
///   (``LogSignature/builtIn``); an encoding ending in `...` is a variadic function's.
///
/// A line is `THREAD SECONDS +DURATION name(arguments) = result`: the kernel's thread ID, when
/// the call began (seconds since the tracer started, to the microsecond), how long it took,
/// then the call indented by two spaces for each logged call it was made in on its thread.
/// A call's line is written when it returns, so the lines of the calls made inside it come
/// first (sort by the second column for the order calls began in); a call that never returns
/// (`exit`, or one left by `longjmp`) is written at exit, ending `<no return>`, when it was in
/// flight on the thread that exits, and not at all otherwise. A log to a pipe whose reader
/// went away stops without raising SIGPIPE in the program. `FFI_HOOK_TRACER_LOG_OPENED` holds
/// the process that opened the log, so that a program it executes appends to it.
final class CallLog: Sendable {
    /// The process's log, nil when no log is asked for or its file cannot be opened.
    static let shared: CallLog? = CallLog()

    /// The signatures given on the command line, then the built-in ones.
    private let signatures: [String: LogSignature]
    /// The description made for each function's name.
    private let descriptions = Mutex<[String: LogFunctionAddress]>([:])
    /// The log's file name, for messages.
    private let path: String

    /// Opens the file the environment names and starts logging to it.
    private init?() {
        guard let template = getenv("FFI_HOOK_TRACER_LOG").map({ String(cString: $0) }), !template.isEmpty else {
            return nil
        }
        var problems: [String] = []
        let given = LogSignature.parse(
            getenv("FFI_HOOK_TRACER_SIGNATURES").map { String(cString: $0) } ?? "", &problems)
        for problem in problems { say(problem) }
        signatures = LogSignature.builtIn.merging(given) { _, new in new }
        let pid = getpid()
        let named = OutputPathTemplate(template: template).namesProcess
        path = OutputPathTemplate(template: template).path(for: pid)
        // A program that execs another keeps its process ID and its log: the new image appends.
        let marker = "FFI_HOOK_TRACER_LOG_OPENED"
        let opener = getenv(marker).flatMap { String(cString: $0).split(separator: " ").first.flatMap { Int32($0) } }
        let writer = getenv("FFI_HOOK_TRACER_PID").flatMap { Int32(String(cString: $0)) }
        let truncates = opener != pid && (named || (writer.map { $0 == pid } ?? (opener == nil)))
        var descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncates ? O_TRUNC : 0), 0o644)
        guard descriptor >= 0 else {
            say("cannot write the log \(path): \(String(cString: strerror(errno))); calls are not logged")
            return nil
        }
        // Kept at a number out of the program's way, as the tracer's other descriptors are: at
        // 3, a program that closed it and opened a file of its own (`exec 3>file` in a shell)
        // got the log's lines in its file.
        let high = fcntl(descriptor, F_DUPFD_CLOEXEC, fht_high_descriptor_floor())
        if high >= 0 {
            close(descriptor)
            descriptor = high
        }
        // Ten characters, so that a forked child can write its own ID over it in place
        // (fht_log_forked: no allocation between fork and exec).
        let digits = "\(pid)"
        setenv(marker, digits + String(repeating: " ", count: max(0, 10 - digits.count)), 1)
        // The clock: the time-stamp counter, measured against CLOCK_MONOTONIC from here to the
        // start of logging (the attach in between usually takes longer than the 2 ms needed).
        let now = Self.clocks()
        opening = Opening(
            descriptor: descriptor, ticks: now.ticks, nanoseconds: now.nanoseconds, template: named ? template : nil)
    }

    /// Both clocks at one moment: CLOCK_MONOTONIC read between two reads of the time-stamp
    /// counter, the closest pair of five tries. A thread preempted between two plain reads
    /// would pair times milliseconds apart, and a rate measured over 2 ms from such a pair was
    /// seen ten times too large on a busy machine.
    private static func clocks() -> (ticks: UInt64, nanoseconds: UInt64) {
        var best = (ticks: UInt64(0), nanoseconds: UInt64(0), spread: UInt64.max)
        for _ in 0..<5 {
            let before = fht_ticks()
            let nanoseconds = fht_monotonic_nanoseconds()
            let after = fht_ticks()
            if after >= before, after - before < best.spread {
                best = (before + (after - before) / 2, nanoseconds, after - before)
            }
        }
        return best.spread == .max ? (fht_ticks(), fht_monotonic_nanoseconds()) : (best.ticks, best.nanoseconds)
    }

    /// What ``begin()`` hands the C side.
    private struct Opening: Sendable {
        /// The open file.
        let descriptor: Int32
        /// The time-stamp counter at time 0 of the log.
        let ticks: UInt64
        /// CLOCK_MONOTONIC then.
        let nanoseconds: UInt64
        /// The file's name with `%p`, for forked children; nil when it has none.
        let template: String?
    }

    /// The file and clock, opened when the log was made and used from ``begin()`` on.
    private let opening: Opening

    /// Starts logging, once the tracer's start is done: the calls its own start work makes
    /// (reading the loaded objects, attaching) are not the program's.
    func begin() {
        guard fht_log_enabled() == 0 else { return }
        // Nanoseconds per tick, over 2 ms at least (waiting out what the start did not take).
        var (ticks, nanoseconds) = Self.clocks()
        while nanoseconds &- opening.nanoseconds < 2_000_000 {
            (ticks, nanoseconds) = Self.clocks()
        }
        let rate =
            ticks > opening.ticks ? Double(nanoseconds &- opening.nanoseconds) / Double(ticks &- opening.ticks) : 1
        if let template = opening.template {
            fht_log_open(opening.descriptor, opening.ticks, rate, template)
        } else {
            fht_log_open(opening.descriptor, opening.ticks, rate, nil)
        }
    }

    /// The description of `name`'s calls, made on its first use and kept for the life of the
    /// process: decoded by its signature when one is known (a name made unique with its
    /// library and offset, `f (libx.so+0x1f0)`, by the plain name's), raw otherwise.
    private func description(of name: String) -> LogFunctionAddress {
        descriptions.withLock { descriptions in
            if let made = descriptions[name] { return made }
            let plain = name.split(separator: Character(" "), maxSplits: 1).first.map(String.init) ?? name
            let text = strdup(name)!
            let length = strlen(text)
            // (A control character in a name, a newline say, as `?`: one line a call.)
            for place in 0..<length where EventFormatting.isControl(UInt8(bitPattern: text[place])) {
                text[place] = CChar(UInt8(ascii: "?"))
            }
            let function = UnsafeMutablePointer<fht_log_function>.allocate(capacity: 1)
            function.initialize(
                to: signatures[plain]?.description(named: text, length: length)
                    ?? LogSignature.rawDescription(named: text, length: length))
            let kind = Tracer.kind(of: plain)
            if kind == UInt8(FHT_KIND_VFORK) || kind == UInt8(FHT_KIND_ONCE) {
                function.pointee.flags |= UInt8(FHT_LOG_RETURNS_TWICE)
            }
            let made = LogFunctionAddress(pointer: UnsafePointer(function))
            descriptions[name] = made
            return made
        }
    }

    /// `blocks` (the counting or recording blocks of the function `name`) with the logging of
    /// each call around them: its arguments formatted before the counting block runs, its line
    /// written after the counting block has read the clock.
    func blocks(
        wrapping blocks: (onEnter: EnterBlock?, onLeave: LeaveBlock?), function name: String
    ) -> (onEnter: EnterBlock?, onLeave: LeaveBlock?) {
        let function = description(of: name)
        let (enter, leave) = blocks
        let onLeave: LeaveBlock = { context in
            leave?(context)
            fht_log_leave(
                function.pointer, UInt64(context.stackPointer), context.threadID, context.returnValue,
                context.floatingReturnValue.bitPattern)
        }
        guard function.pointer.pointee.flags & UInt8(FHT_LOG_VECTORS) != 0 else {
            return (
                { context in
                    fht_log_enter(
                        function.pointer, UInt64(context.stackPointer), context.integerArgument(0),
                        context.integerArgument(1), context.integerArgument(2), context.integerArgument(3),
                        context.integerArgument(4), context.integerArgument(5), nil)
                    enter?(context)
                }, onLeave
            )
        }
        return (
            { context in
                // (Words on the stack, not a tuple: an unoptimised build would make the tuple's
                // metadata at the first call, under the runtime's lock, which a signal handler's
                // call that interrupted it would wait for: see FFIHook's AttachContextWarmUp.)
                withUnsafeTemporaryAllocation(of: UInt64.self, capacity: 8) { words in
                    for index in 0..<8 { words[index] = context.floatingArgument(index).bitPattern }
                    fht_log_enter(
                        function.pointer, UInt64(context.stackPointer), context.integerArgument(0),
                        context.integerArgument(1), context.integerArgument(2), context.integerArgument(3),
                        context.integerArgument(4), context.integerArgument(5), words.baseAddress)
                }
                enter?(context)
            }, onLeave
        )
    }

    /// At exit: writes the calls in flight on the exiting thread, and says on standard error
    /// what the log lost.
    func finish() {
        fht_log_unfinished(fht_log_thread())
        let lost = fht_log_lost()
        var losses: [String] = []
        if lost.too_deep > 0 { losses.append("\(lost.too_deep) nested more than 256 logged calls deep") }
        if lost.unmapped > 0 { losses.append("\(lost.unmapped) on threads that got no frames (past 4,096 at once)") }
        if lost.first_error == EPIPE {
            losses.append("its reader went away (\(String(cString: strerror(EPIPE)))): later calls are not logged")
        } else if lost.unwritten > 0 {
            let reason = lost.first_error == 0 ? "" : ": \(String(cString: strerror(lost.first_error)))"
            losses.append("\(lost.unwritten) lines not written or cut short\(reason)")
        }
        guard !losses.isEmpty else { return }
        say("the log \(path) misses calls: \(losses.joined(separator: ", "))")
    }
}
