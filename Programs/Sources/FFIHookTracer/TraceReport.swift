internal import CTracerSupport

/// The counts of one run, as a table for people and as JSON.
struct TraceReport {
    /// One function's figures, in nanoseconds.
    struct Row {
        let name: String
        let calls: UInt64
        let completed: UInt64
        /// The time in its calls (a recursive call's once, in the outermost).
        let total: Double
        /// The time in the function itself: less the traced calls made inside it.
        let selfTime: Double
        /// The time of every call that returned, each recursive call on its own.
        let every: Double
        let shortest: Double
        let longest: Double

        /// The mean time of the calls that returned.
        var mean: Double { completed == 0 ? 0 : every / Double(completed) }
    }

    /// The functions called at least once, by total time, longest first (then by name).
    let rows: [Row]
    /// The sum of the rows' self times: the time spent in traced functions.
    let total: Double
    /// Calls of traced functions that were not counted because they were made while one of
    /// the tracer's blocks ran on their thread: by a signal handler that interrupted the
    /// block (the tracer's own blocks call no traced function).
    let missedCalls: Int

    /// Rows from the counters, converting ticks with `nanosecondsPerTick`.
    init(counts: [(String, fht_counter)], nanosecondsPerTick: Double, missedCalls: Int = 0) {
        self.missedCalls = missedCalls
        rows = counts.filter { $0.1.calls > 0 }.map { name, counter in
            Row(
                name: name, calls: counter.calls, completed: counter.completed,
                total: Double(counter.total) * nanosecondsPerTick,
                selfTime: Double(counter.own) * nanosecondsPerTick,
                every: Double(counter.every) * nanosecondsPerTick,
                shortest: counter.completed == 0 ? 0 : Double(counter.shortest) * nanosecondsPerTick,
                longest: Double(counter.longest) * nanosecondsPerTick)
        }.sorted { ($1.total, $0.name) < ($0.total, $1.name) }
        total = rows.reduce(0) { $0 + $1.selfTime }
    }

    /// The longest function name the table's first column is made wide enough for.
    static let widestName = 60

    /// The table: a heading line, then function, calls, total time, self time (less the traced
    /// calls inside), mean, and share of the time in traced functions (by self time).
    func table(process: String) -> String {
        let calls = rows.reduce(0) { $0 + $1.calls }
        var lines = [
            "ffi-hook-tracer: \(process): \(EventFormatting.counted(calls, "call")) of "
                + "\(EventFormatting.counted(UInt64(rows.count), "function")), "
                + "\(EventFormatting.duration(total)) in them"
        ]
        if missedCalls > 0 {
            lines.append(
                "ffi-hook-tracer: \(EventFormatting.counted(UInt64(missedCalls), "call")) not counted: made by signal handlers that "
                    + "interrupted the tracer's own code for another call")
        }
        let header = ["function", "calls", "total", "self", "mean", "share"]
        let cells = rows.map { row in
            [
                row.name, EventFormatting.grouped(row.calls), EventFormatting.duration(row.total),
                EventFormatting.duration(row.selfTime), EventFormatting.duration(row.mean),
                total > 0 ? EventFormatting.percent(row.selfTime / total) : "-",
            ]
        }
        let table = [header] + cells
        let cellWidths = table.map { $0.map(Self.width(of:)) }
        // A name longer than `widestName` (a C++ or Swift symbol runs to a thousand characters)
        // pushes its own row's figures right, not every row's.
        let widths = header.indices.map { column in
            cellWidths.lazy.map { $0[column] }.filter { column != 0 || $0 <= Self.widestName }.max() ?? 0
        }
        // Bytes, appended to, made a string once (a run's report is part of its end: strings
        // joined and appended cell by cell cost a third of a millisecond for thirty rows).
        var text: [UInt8] = []
        text.reserveCapacity(lines.reduce(0) { $0 + $1.utf8.count + 1 } + table.count * (widths.reduce(0, +) + 12))
        let space = UInt8(ascii: " ")
        for line in lines {
            text.append(contentsOf: line.utf8)
            text.append(UInt8(ascii: "\n"))
        }
        for (line, lineWidths) in zip(table, cellWidths) {
            for column in line.indices {
                let padding = max(0, widths[column] - lineWidths[column])
                if column == 0 {
                    text.append(contentsOf: line[column].utf8)
                    text.append(contentsOf: repeatElement(space, count: padding))
                } else {
                    text.append(contentsOf: repeatElement(space, count: padding + 2))
                    text.append(contentsOf: line[column].utf8)
                }
            }
            text.append(UInt8(ascii: "\n"))
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// How many columns `text` takes in the table: its bytes when they are all ASCII (names of
    /// C functions, figures), else its characters.
    private static func width(of text: String) -> Int {
        let bytes = text.utf8
        return bytes.allSatisfy { $0 < 0x80 } ? bytes.count : text.count
    }

    /// The counts as a JSON object: the process, the scope (`program`, `main` or `all`; `inline`
    /// for functions traced in their own code, where no scope applies), the signal that ended
    /// it (or null), then one object per function (times in nanoseconds).
    func json(program: String, pid: Int32, scope: String, endedBy signal: String? = nil) -> String {
        let functions = rows.map { row in
            "    {\"name\": \(EventFormatting.json(row.name)), \"calls\": \(row.calls), \"completed\": \(row.completed), "
                + "\"total_ns\": \(Int(row.total)), \"self_ns\": \(Int(row.selfTime)), \"mean_ns\": \(Int(row.mean)), "
                + "\"min_ns\": \(Int(row.shortest)), \"max_ns\": \(Int(row.longest))}"
        }
        return """
            {
              "program": \(EventFormatting.json(program)),
              "pid": \(pid),
              "scope": \(EventFormatting.json(scope)),
              "ended_by": \(signal.map(EventFormatting.json) ?? "null"),
              "total_ns": \(Int(total)),
              "missed_calls": \(missedCalls),
              "functions": [
            \(functions.joined(separator: ",\n"))
              ]
            }

            """
    }
}
