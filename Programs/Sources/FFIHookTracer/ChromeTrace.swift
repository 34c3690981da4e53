/// The recorded calls as Chrome trace event JSON (the JSON object form), which Perfetto and
/// `chrome://tracing` load.
///
/// Per thread (`pid` and `tid`), a `"B"` event as each call begins and an `"E"` as it ends,
/// named by the function, `ts` in microseconds since the tracer started; every `"B"` has its
/// `"E"`, nested within its caller's. An `"E"` for a call whose return was not seen carries
/// `args.ended`: `"no return seen"` (left by `longjmp`, or open when its thread ended: it ends
/// then) or `"running at exit"`. Metadata events name the process
/// and the threads; `otherData` holds the figures of the recording (events dropped and per
/// thread).
struct ChromeTrace {
    /// The calls.
    let recording: Recording
    /// The program's name.
    let program: String
    /// The process ID.
    let pid: Int32

    /// Writes the JSON.
    func write(to output: inout FileOutput) {
        output.append("{\"traceEvents\": [\n")
        output.append(
            "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": \(pid), \"tid\": \(pid), "
                + "\"args\": {\"name\": \(EventFormatting.json("\(program) (ffi-hook-tracer)"))}}")
        for (order, thread) in recording.threads.enumerated() {
            output.append(
                ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": \(pid), \"tid\": \(thread.id), "
                    + "\"args\": {\"name\": \(EventFormatting.json(thread.name))}}"
                    + ",\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": \(pid), \"tid\": \(thread.id), "
                    + "\"args\": {\"sort_index\": \(order)}}")
        }
        let names = recording.functions.map { Array(EventFormatting.json($0).utf8) }
        let time = Array(", \"ts\": ".utf8)
        let close = Array("}".utf8)
        let ended: [Recording.Ending: [UInt8]] = [
            .returned: close,
            .abandoned: Array(", \"args\": {\"ended\": \"no return seen\"}}".utf8),
            .unfinished: Array(", \"args\": {\"ended\": \"running at exit\"}}".utf8),
        ]
        for thread in recording.threads {
            let begin = Array(",\n{\"pid\": \(pid), \"tid\": \(thread.id), \"ph\": \"B\", \"name\": ".utf8)
            let end = Array(",\n{\"pid\": \(pid), \"tid\": \(thread.id), \"ph\": \"E\", \"name\": ".utf8)
            var open: [Int] = []
            // Writes the "E" event of call `index`.
            func finish(_ index: Int) {
                let call = thread.calls[index]
                output.append(bytes: end)
                output.append(bytes: names[Int(call.function)])
                output.append(bytes: time)
                output.append(microsecondsOf: call.end)
                output.append(bytes: ended[call.ending]!)
            }
            for (index, call) in thread.calls.enumerated() {
                while let top = open.last, thread.calls[top].depth >= call.depth {
                    finish(top)
                    open.removeLast()
                }
                output.append(bytes: begin)
                output.append(bytes: names[Int(call.function)])
                output.append(bytes: time)
                output.append(microsecondsOf: call.begin)
                output.append(bytes: close)
                open.append(index)
            }
            while let top = open.popLast() { finish(top) }
        }
        let threads = recording.threads.map { thread in
            "{\"tid\": \(thread.id), \"name\": \(EventFormatting.json(thread.name)), \"calls\": \(thread.calls.count), "
                + "\"dropped_events\": \(thread.droppedEvents), \"unmatched_ends\": \(thread.unmatchedEnds)}"
        }
        output.append(
            """

            ],
            "displayTimeUnit": "ns",
            "otherData": {
              "program": \(EventFormatting.json(program)),
              "pid": \(pid),
              "clock": "time-stamp counter; ts in microseconds since the tracer started",
              "events_per_thread": \(recording.capacity),
              "dropped_events": \(recording.droppedEvents),
              "dropped_events_without_buffer": \(recording.unbufferedEvents),
              "calls": \(recording.callCount),
              "calls_without_return": \(recording.count(.abandoned)),
              "calls_running_at_exit": \(recording.count(.unfinished)),
              "threads": [\(threads.joined(separator: ", "))]
            }
            }

            """)
    }
}
