internal import CTracerSupport
internal import FFIHook
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The outputs built from each call's begin and end (a timeline, folded stacks, flame graphs),
/// read from the environment with the rest of the configuration.
///
/// - `FFI_HOOK_TRACER_CHROME_TRACE`: a file for the calls as Chrome trace event JSON.
/// - `FFI_HOOK_TRACER_FOLDED`: a file for the folded stacks (self time in nanoseconds).
/// - `FFI_HOOK_TRACER_FLAMEGRAPH`: a file for an SVG flame graph.
/// - `FFI_HOOK_TRACER_TIMELINE`: a file for an SVG timeline of the calls per thread.
/// - `FFI_HOOK_TRACER_EVENTS`: the events each thread's buffer holds (default 1,000,000: 16 MB
///   of address space per thread, touched only as events are written).
///
/// `%p` in a file name becomes the process ID. Calls are recorded only when one of the files
/// is asked for; otherwise the blocks only count.
struct EventOutputs: Sendable {
    /// The events a thread's buffer holds when `FFI_HOOK_TRACER_EVENTS` does not say.
    static let defaultCapacity = 1_000_000
    /// The most a thread's buffer may hold (4 GB of address space).
    static let maximumCapacity = 1 << 28

    /// Where the Chrome trace event JSON goes.
    var chromeTracePath: String?
    /// Where the folded stacks go.
    var foldedPath: String?
    /// Where the SVG flame graph goes.
    var flameGraphPath: String?
    /// Where the SVG timeline goes.
    var timelinePath: String?
    /// The events each thread's buffer holds.
    var capacity = defaultCapacity

    /// Whether calls are recorded: one of the outputs is asked for.
    var isEnabled: Bool { [chromeTracePath, foldedPath, flameGraphPath, timelinePath].contains { $0 != nil } }

    /// The outputs `source` (the environment's variables, or a joined process's) asks for; what
    /// it gets wrong is added to `problems`.
    static func from(_ source: (String) -> String?, _ problems: inout [String]) -> EventOutputs {
        func value(_ name: String) -> String? {
            guard let text = source(name), !text.isEmpty else { return nil }
            return text
        }
        var outputs = EventOutputs()
        outputs.chromeTracePath = value("FFI_HOOK_TRACER_CHROME_TRACE")
        outputs.foldedPath = value("FFI_HOOK_TRACER_FOLDED")
        outputs.flameGraphPath = value("FFI_HOOK_TRACER_FLAMEGRAPH")
        outputs.timelinePath = value("FFI_HOOK_TRACER_TIMELINE")
        if let text = value("FFI_HOOK_TRACER_EVENTS") {
            if let capacity = Int(text), (2...maximumCapacity).contains(capacity) {
                outputs.capacity = capacity
            } else {
                problems.append(
                    "FFI_HOOK_TRACER_EVENTS=\(text) is not a number of events from 2 to \(maximumCapacity); "
                        + "using \(defaultCapacity)")
            }
        }
        return outputs
    }

    /// Makes threads record their calls from now on, when an output is asked for: call it
    /// before attaching.
    func arm() {
        if isEnabled { fht_set_event_capacity(UInt64(capacity)) }
    }

    /// The blocks that count a call and record its begin and end in the thread's buffer.
    static func recordingBlocks(_ counter: CounterAddress) -> (onEnter: EnterBlock?, onLeave: LeaveBlock?) {
        let function = fht_counter_index(counter.pointer)
        return (
            { context in
                context.scratch = fht_enter_recording(counter.pointer, function, context.stackPointer)
            },
            { context in
                fht_leave_recording(counter.pointer, function, context.stackPointer, context.scratch)
            }
        )
    }

    // MARK: - Writing

    /// Writes the outputs asked for, from the events of every thread in `window` (ticks), and
    /// says on standard error how many events were dropped. `functions` gives each traced
    /// function's counter by name (called only when an output is asked for); `isWriter` says
    /// whether this process writes files whose name has no `%p`.
    func write(
        functions: () -> [String: CounterAddress], clock: EventClock, program: String, pid: Int32, isWriter: Bool,
        window: ClosedRange<UInt64>
    ) {
        guard isEnabled else { return }
        var names: [UInt32: String] = [:]
        for (name, counter) in functions() { names[fht_counter_index(counter.pointer)] = name }
        let recording = Recording.read(names: names, clock: clock, capacity: capacity, window: window)
        if recording.droppedEvents > 0 {
            let filled = recording.threads.filter { $0.droppedEvents > 0 }
            let full = recording.droppedEvents - recording.unbufferedEvents
            // A join retires the buffers of an earlier join's other limit (fht_set_event_capacity);
            // one made as it did so may still have the earlier limit: said when it is not this
            // run's.
            let sizes = Set(filled.map(\.bufferCapacity)).sorted().map { EventFormatting.grouped($0) }
            let older = filled.filter { $0.bufferCapacity != UInt64(capacity) }.count
            var places: [String] = []
            if full > 0 {
                places.append(
                    "\(EventFormatting.grouped(full)) on \(EventFormatting.counted(UInt64(filled.count), "thread")) whose "
                        + "\(sizes.joined(separator: " or "))-event buffer filled"
                        + (older > 0
                            ? ", \(older == filled.count ? "each" : "\(older) of them") made by an earlier join" : ""))
            }
            if recording.unbufferedEvents > 0 {
                places.append(
                    "\(EventFormatting.grouped(recording.unbufferedEvents)) without a buffer (threads past 4,096, or a signal handler's calls while its thread made its buffer)"
                )
            }
            say(
                "\(EventFormatting.counted(recording.droppedEvents, "event")) dropped (\(places.joined(separator: ", "))); the files hold the "
                    + "calls recorded"
                    + (full > 0 ? " before; --events N (FFI_HOOK_TRACER_EVENTS) raises the limit" : "")
                    + (older > 0
                        ? " of buffers made from now on (a thread keeps the buffer it first recorded in, with the "
                            + "limit of the run that made it)" : ""))
        }
        let outputs: [(String?, (inout FileOutput) -> Void)] = [
            (chromeTracePath, { ChromeTrace(recording: recording, program: program, pid: pid).write(to: &$0) }),
            (foldedPath, { FlameGraph(recording: recording).writeFolded(to: &$0) }),
            (flameGraphPath, { FlameGraph(recording: recording).writeSVG(to: &$0, program: program, pid: pid) }),
            (timelinePath, { Timeline(recording: recording).writeSVG(to: &$0, program: program, pid: pid) }),
        ]
        for case (let path?, let body) in outputs {
            let template = OutputPathTemplate(template: path)
            guard template.namesProcess || isWriter else { continue }
            let resolved = template.path(for: pid)
            guard var output = FileOutput(path: resolved) else { continue }
            body(&output)
            output.finish()
        }
    }
}

/// Converts the time-stamp counter to nanoseconds since the tracer started.
struct EventClock: Sendable {
    /// The counter when the tracer started.
    let startTicks: UInt64
    /// Nanoseconds per tick.
    let nanosecondsPerTick: Double

    /// Nanoseconds from the start to `ticks` (0 for a reading before it).
    func nanoseconds(_ ticks: UInt64) -> Double {
        ticks > startTicks ? Double(ticks - startTicks) * nanosecondsPerTick : 0
    }
}

// MARK: - Output file

/// How many of the report's files could not be written (created, or written to the end) since
/// the process started or was last joined: a joined process's leave says so to the joiner.
let unwrittenOutputs = Atomic<Int>(0)

/// A file written through a buffer: bytes collect in memory and go out a megabyte at a time.
struct FileOutput {
    /// The open file.
    private let descriptor: Int32
    /// The path, for messages.
    private let path: String
    /// Bytes not written yet.
    private var pending: [UInt8] = []
    /// Whether a write failed (reported once).
    private var failed = false

    /// Creates or truncates the file at `path`; nil (said on standard error) when it cannot.
    init?(path: String) {
        descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        self.path = path
        guard descriptor >= 0 else {
            say("cannot write \(path): \(String(cString: strerror(errno)))")
            unwrittenOutputs.add(1, ordering: .relaxed)
            return nil
        }
        pending.reserveCapacity(1 << 20)
    }

    /// Adds `text` to the file.
    mutating func append(_ text: String) {
        var text = text
        text.withUTF8 { pending.append(contentsOf: $0) }
        if pending.count >= 1 << 20 { flush() }
    }

    /// Adds `bytes` to the file.
    mutating func append(bytes: [UInt8]) {
        pending.append(contentsOf: bytes)
        if pending.count >= 1 << 20 { flush() }
    }

    /// Adds nanoseconds as microseconds with three decimals (`1234.567`), without making a
    /// string (a Chrome trace holds two of them per call).
    mutating func append(microsecondsOf nanoseconds: Double) {
        let whole = UInt64(max(0, nanoseconds).rounded())
        var value = whole / 1000
        let start = pending.count
        repeat {
            pending.append(UInt8(ascii: "0") + UInt8(value % 10))
            value /= 10
        } while value > 0
        pending[start...].reverse()
        let fraction = whole % 1000
        pending.append(UInt8(ascii: "."))
        pending.append(UInt8(ascii: "0") + UInt8(fraction / 100))
        pending.append(UInt8(ascii: "0") + UInt8(fraction / 10 % 10))
        pending.append(UInt8(ascii: "0") + UInt8(fraction % 10))
    }

    /// Writes what is pending.
    private mutating func flush() {
        var done = 0
        while done < pending.count, !failed {
            let written = pending.withUnsafeBytes { fileWrite(descriptor, $0.baseAddress! + done, $0.count - done) }
            if written < 0, errno == EINTR { continue }
            if written <= 0 {
                say("cannot write \(path): \(String(cString: strerror(errno)))")
                unwrittenOutputs.add(1, ordering: .relaxed)
                failed = true
            }
            done += max(written, 0)
        }
        pending.removeAll(keepingCapacity: true)
    }

    /// Writes what is pending and closes the file.
    mutating func finish() {
        flush()
        close(descriptor)
    }
}

/// The C library's `write`, which the module's `write(_:to:)` shadows.
private let fileWrite: @Sendable (Int32, UnsafeRawPointer?, Int) -> Int = {
    // A step of the report, for a signal's handler that waits for it.
    fht_report_progress()
    return write($0, $1, $2)
}
