internal import CTracerSupport

/// The calls of every thread that recorded events, rebuilt from their begins and ends.
///
/// Each thread's events are replayed in the order they were written, with a stack of the calls
/// open. An end closes the open call it belongs to (same function, same stack pointer at entry)
/// and, above it, calls that never returned (left by `longjmp`, or whose end the attach could
/// not see); a begin whose stack pointer lies above the innermost open call's closes that call
/// too (its frame is gone), and so does a begin at the same stack pointer unless it was recorded
/// as tail-called from that call (``FHT_TAIL_BEGIN``). A call closed so (left by `longjmp` or an
/// exception) ends at the event before the one that showed it gone: the last moment it is known
/// to have run. Calls still open when the events run out were running when the
/// report was written: they end then. An end that matches no open call (a call that began
/// before the events, or before a fork) is left out. So every call has a begin and an end,
/// nested within its caller, and times never run backwards on a thread.
struct Recording {
    /// How a call's end was found.
    enum Ending {
        /// Its end event: it returned.
        case returned
        /// No return was seen: a later event showed its frame gone.
        case abandoned
        /// It was running when the report was written.
        case unfinished
    }

    /// One call on one thread, times in nanoseconds since the tracer started.
    struct Call {
        /// The function, an index into ``Recording/functions``.
        let function: Int32
        /// The low 32 bits of the stack pointer at entry.
        let stack: UInt32
        /// The index of the call it was made in (on the same thread), or -1 at the top.
        let parent: Int32
        /// How many calls it was made in.
        let depth: Int32
        /// When it began.
        let begin: Double
        /// When it ended.
        var end: Double
        /// The time of the calls made in it (their whole durations).
        var inner: Double = 0
        /// How its end was found.
        var ending = Ending.returned

        /// How long it took.
        var duration: Double { end - begin }
        /// Its time outside the traced calls it made.
        var selfTime: Double { max(0, duration - inner) }
    }

    /// One thread's calls, in the order they began.
    struct Thread {
        /// The kernel's thread ID.
        let id: Int32
        /// The thread's name (now, or at its first event when it has ended).
        let name: String
        /// Its calls.
        var calls: [Call] = []
        /// Events it could not record (its buffer was full).
        var droppedEvents: UInt64 = 0
        /// The events its buffer holds: the limit when it first recorded in the process (a
        /// later join's `--events` does not change a buffer made before).
        var bufferCapacity: UInt64 = 0
        /// Ends that matched no open call.
        var unmatchedEnds = 0
    }

    /// The traced functions' names, by ``Call/function``.
    let functions: [String]
    /// The threads that recorded or dropped events, by thread ID.
    let threads: [Thread]
    /// Events not recorded: dropped on full buffers, or on threads that got no buffer.
    let droppedEvents: UInt64
    /// The events of ``droppedEvents`` dropped without a buffer: on threads past 4,096, when the
    /// memory could not be had, or by a signal handler while its thread made its buffer.
    let unbufferedEvents: UInt64
    /// The events each thread's buffer holds.
    let capacity: Int

    /// The calls of every thread's buffer that began in `window` (ticks: the start, and the
    /// report's count, of the calls the table shows); `names` gives each function's name by its
    /// counter index. A call still open at the window's end ends there, unfinished.
    static func read(
        names: [UInt32: String], clock: EventClock, capacity: Int, window: ClosedRange<UInt64>
    ) -> Recording {
        let now = clock.nanoseconds(window.upperBound)
        var functions: [String] = []
        var dense: [UInt32: Int32] = [:]
        for (index, name) in names.sorted(by: { $0.value < $1.value }) {
            dense[index] = Int32(functions.count)
            functions.append(name)
        }
        var threads: [Thread] = []
        let unbuffered = fht_unbuffered_events()
        var dropped = unbuffered
        var buffer = fht_event_buffers()
        while let current = buffer {
            // A retired buffer (of an earlier join's size) holds none of this join's events.
            guard current.pointee.capacity > 0 else {
                buffer = current.pointee.next
                continue
            }
            let written = fht_buffer_recorded(current)
            let droppedHere = fht_buffer_dropped(current)
            dropped += droppedHere
            buffer = current.pointee.next
            guard written > 0 || droppedHere > 0 else { continue }
            let id = current.pointee.thread
            var thread = Thread(id: id, name: threadName(id, recorded: current))
            thread.droppedEvents = droppedHere
            thread.bufferCapacity = current.pointee.capacity
            // A thread that ended inside calls (pthread_exit): they end with it, never returned.
            let ended = fht_buffer_ended(current)
            replay(
                fht_buffer_events(current), count: Int(written), into: &thread, functions: dense, clock: clock,
                window: window, end: now, threadEnded: ended == 0 ? nil : clock.nanoseconds(ended))
            threads.append(thread)
        }
        return Recording(
            functions: functions, threads: threads.sorted { $0.id < $1.id }, droppedEvents: dropped,
            unbufferedEvents: unbuffered, capacity: capacity)
    }

    /// Rebuilds a thread's calls from its `count` events.
    private static func replay(
        _ events: UnsafeMutablePointer<fht_event>, count: Int, into thread: inout Thread, functions: [UInt32: Int32],
        clock: EventClock, window: ClosedRange<UInt64>, end: Double, threadEnded: Double?
    ) {
        var open: [Int] = []
        var last = 0.0
        // Ends the innermost open call at `time` and adds its duration to its caller's inner time.
        func close(at time: Double, _ ending: Ending) {
            let index = open.removeLast()
            thread.calls[index].end = time
            thread.calls[index].ending = ending
            if let parent = open.last { thread.calls[parent].inner += thread.calls[index].duration }
        }
        for position in 0..<count {
            // A step of the report, for a signal's handler that waits for it (a few million
            // events take seconds in a debug build).
            if position & 0xFFFF == 0 { fht_report_progress() }
            let word = fht_event_word(events + position)
            guard word != 0, let function = functions[word >> 2] else { continue }
            // Before the window: the start's own calls. After it: calls the table did not count.
            let ticks = events[position].ticks
            if ticks < window.lowerBound { continue }
            if ticks > window.upperBound { break }
            let stack = events[position].stack
            // A call found abandoned ends at the last event before this one: the last moment it
            // is known to have run (it began then, or a call in it ended then). Ending it here
            // gave it the time up to the next call from its frame, a longjmp's sleep included,
            // which the table does not count.
            let seen = last
            last = max(last, clock.nanoseconds(events[position].ticks))
            let kind = word & 3
            if kind == UInt32(FHT_BEGIN) || kind == UInt32(FHT_TAIL_BEGIN) {
                // Calls deeper than this one's stack pointer were left; so was one at it, unless
                // this call was tail-called from it.
                let tail = kind == UInt32(FHT_TAIL_BEGIN)
                while let top = open.last, Int32(bitPattern: stack &- thread.calls[top].stack) > (tail ? 0 : -1) {
                    close(at: seen, .abandoned)
                }
                thread.calls.append(
                    Call(
                        function: function, stack: stack, parent: Int32(open.last ?? -1), depth: Int32(open.count),
                        begin: last, end: last))
                open.append(thread.calls.count - 1)
            } else {
                let match = open.lastIndex {
                    thread.calls[$0].function == function && thread.calls[$0].stack == stack
                }
                guard let match else {
                    thread.unmatchedEnds += 1
                    continue
                }
                while open.count > match + 1 { close(at: seen, .abandoned) }
                close(at: last, .returned)
            }
        }
        if let threadEnded {
            while !open.isEmpty { close(at: max(last, min(threadEnded, end)), .abandoned) }
        }
        while !open.isEmpty { close(at: max(last, end), .unfinished) }
    }

    /// The thread's name now, or the one it had at its first event when it has ended.
    private static func threadName(_ id: Int32, recorded buffer: UnsafeMutablePointer<fht_event_buffer>) -> String {
        var name = [CChar](repeating: 0, count: 64)
        if fht_thread_name(id, &name, name.count) != 0 {
            return name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        }
        return withUnsafeBytes(of: buffer.pointee.name) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    /// The number of calls recorded on every thread.
    var callCount: Int { threads.reduce(0) { $0 + $1.calls.count } }

    /// How many calls ended each way, on every thread.
    func count(_ ending: Ending) -> Int {
        threads.reduce(0) { total, thread in total + thread.calls.reduce(0) { $0 + ($1.ending == ending ? 1 : 0) } }
    }
}
