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
    /// Calls counted without their time because they were nested deeper on their thread than
    /// the attach path keeps calls (``deepestTimed``): their returns run no block, and the
    /// calls around them count their time as their own.
    let tooDeepCalls: Int

    /// How many nested traced calls a thread's calls are timed to (the attach path's side
    /// stack of each thread).
    static let deepestTimed = 512

    /// Rows from the counters, converting ticks with `nanosecondsPerTick`.
    init(counts: [(String, fht_counter)], nanosecondsPerTick: Double, missedCalls: Int = 0, tooDeepCalls: Int = 0) {
        self.missedCalls = missedCalls
        self.tooDeepCalls = tooDeepCalls
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
        if tooDeepCalls > 0 {
            lines.append(
                "ffi-hook-tracer: \(EventFormatting.counted(UInt64(tooDeepCalls), "call")) nested more than "
                    + "\(Self.deepestTimed) traced calls deep on their thread counted without their time (the calls "
                    + "around them count it as their own)")
        }
        // Every cell's bytes in one array, each row's five figures formatted straight into it
        // (a string for each cell, made by interpolation and joined, cost 15,000 instructions a
        // row, most of a short run's report).
        var cells: [UInt8] = []
        var ends: [Int] = []
        ends.reserveCapacity((rows.count + 1) * 6)
        for name in ["function", "calls", "total", "self", "mean", "share"] {
            cells.append(contentsOf: name.utf8)
            ends.append(cells.count)
        }
        for row in rows {
            // (A control character in a name, a newline say, as `?`: one row a line.)
            for byte in row.name.utf8 { cells.append(EventFormatting.isControl(byte) ? UInt8(ascii: "?") : byte) }
            ends.append(cells.count)
            EventFormatting.appendGrouped(row.calls, to: &cells)
            ends.append(cells.count)
            EventFormatting.appendDuration(row.total, to: &cells)
            ends.append(cells.count)
            EventFormatting.appendDuration(row.selfTime, to: &cells)
            ends.append(cells.count)
            EventFormatting.appendDuration(row.mean, to: &cells)
            ends.append(cells.count)
            if total > 0 {
                EventFormatting.appendPercent(row.selfTime / total, to: &cells)
            } else {
                cells.append(UInt8(ascii: "-"))
            }
            ends.append(cells.count)
        }
        let columns = 6
        let cellWidths = ends.indices.map { index in
            Self.width(of: cells[(index == 0 ? 0 : ends[index - 1])..<ends[index]])
        }
        // A name longer than `widestName` (a C++ or Swift symbol runs to a thousand characters)
        // pushes its own row's figures right, not every row's.
        let widths = (0..<columns).map { column in
            stride(from: column, to: cellWidths.count, by: columns).lazy.map { cellWidths[$0] }
                .filter { column != 0 || $0 <= Self.widestName }.max() ?? 0
        }
        var text: [UInt8] = []
        text.reserveCapacity(
            lines.reduce(0) { $0 + $1.utf8.count + 1 } + cells.count + (rows.count + 1) * (widths.reduce(0, +) + 12))
        let space = UInt8(ascii: " ")
        for line in lines {
            text.append(contentsOf: line.utf8)
            text.append(UInt8(ascii: "\n"))
        }
        for index in ends.indices {
            let column = index % columns
            let cell = cells[(index == 0 ? 0 : ends[index - 1])..<ends[index]]
            let padding = max(0, widths[column] - cellWidths[index])
            if column == 0 {
                text.append(contentsOf: cell)
                text.append(contentsOf: repeatElement(space, count: padding))
            } else {
                text.append(contentsOf: repeatElement(space, count: padding + 2))
                text.append(contentsOf: cell)
            }
            if column == columns - 1 { text.append(UInt8(ascii: "\n")) }
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// How many columns `text` (UTF-8) takes in the table: its bytes when they are all ASCII
    /// (names of C functions, figures), else its characters: counted by the bytes that begin a
    /// scalar while every scalar is below U+0300 and none is a carriage return (none of them
    /// then joins the next into one character: the µ of µs), as a string otherwise.
    private static func width(of text: ArraySlice<UInt8>) -> Int {
        if text.allSatisfy({ $0 < 0x80 }) { return text.count }
        var scalars = 0
        for byte in text {
            if byte >= 0xCC || byte == UInt8(ascii: "\r") {
                return String(decoding: text, as: UTF8.self).count
            }
            if byte & 0xC0 != 0x80 { scalars += 1 }
        }
        return scalars
    }

    /// The counts as a JSON object: the process, the scope (`program`, `main` or `all`; `inline`
    /// for functions traced in their own code, where no scope applies), the signal that ended
    /// it (or null), then one object per function (times in nanoseconds, rounded as the table's
    /// are).
    func json(program: String, pid: Int32, scope: String, endedBy signal: String? = nil) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(256 + rows.reduce(0) { $0 + $1.name.utf8.count + 190 })
        text.append(contentsOf: "{\n  \"program\": ".utf8)
        EventFormatting.appendJSON(program, to: &text)
        text.append(contentsOf: ",\n  \"pid\": ".utf8)
        EventFormatting.appendDecimal(Int(pid), to: &text)
        text.append(contentsOf: ",\n  \"scope\": ".utf8)
        EventFormatting.appendJSON(scope, to: &text)
        text.append(contentsOf: ",\n  \"ended_by\": ".utf8)
        if let signal {
            EventFormatting.appendJSON(signal, to: &text)
        } else {
            text.append(contentsOf: "null".utf8)
        }
        text.append(contentsOf: ",\n  \"total_ns\": ".utf8)
        EventFormatting.appendDecimal(Int(total.rounded()), to: &text)
        text.append(contentsOf: ",\n  \"missed_calls\": ".utf8)
        EventFormatting.appendDecimal(missedCalls, to: &text)
        text.append(contentsOf: ",\n  \"too_deep_calls\": ".utf8)
        EventFormatting.appendDecimal(tooDeepCalls, to: &text)
        text.append(contentsOf: ",\n  \"functions\": [\n".utf8)
        for (index, row) in rows.enumerated() {
            text.append(contentsOf: "    {\"name\": ".utf8)
            EventFormatting.appendJSON(row.name, to: &text)
            text.append(contentsOf: ", \"calls\": ".utf8)
            EventFormatting.appendDecimal(row.calls, to: &text)
            text.append(contentsOf: ", \"completed\": ".utf8)
            EventFormatting.appendDecimal(row.completed, to: &text)
            text.append(contentsOf: ", \"total_ns\": ".utf8)
            EventFormatting.appendDecimal(Int(row.total.rounded()), to: &text)
            text.append(contentsOf: ", \"self_ns\": ".utf8)
            EventFormatting.appendDecimal(Int(row.selfTime.rounded()), to: &text)
            text.append(contentsOf: ", \"mean_ns\": ".utf8)
            EventFormatting.appendDecimal(Int(row.mean.rounded()), to: &text)
            text.append(contentsOf: ", \"min_ns\": ".utf8)
            EventFormatting.appendDecimal(Int(row.shortest.rounded()), to: &text)
            text.append(contentsOf: ", \"max_ns\": ".utf8)
            EventFormatting.appendDecimal(Int(row.longest.rounded()), to: &text)
            text.append(contentsOf: (index == rows.count - 1 ? "}\n" : "},\n").utf8)
        }
        // (No function: an empty line between the brackets, as the report always had.)
        if rows.isEmpty { text.append(UInt8(ascii: "\n")) }
        text.append(contentsOf: "  ]\n}\n".utf8)
        return String(decoding: text, as: UTF8.self)
    }
}
