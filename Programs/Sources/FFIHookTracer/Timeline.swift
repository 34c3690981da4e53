internal import CTracerSupport

/// The recorded calls as an SVG timeline: a lane per thread, time from left to right, a call
/// as a bar under the call it was made in.
///
/// Each level of a lane is drawn a pixel column at a time: a column shows the function that
/// took most of its time at that level, and neighbouring columns of the same function make
/// one bar, whose tooltip says how many calls it stands for and how long they took (so calls
/// shorter than a pixel stay visible, and the picture's size does not grow with the calls).
/// Lanes show at most ``deepest`` levels of calls; at most ``mostLanes`` threads are drawn.
struct Timeline {
    /// The calls.
    let recording: Recording

    /// The picture's width in pixels.
    static let width = 1200.0
    /// The width of the thread names on the left.
    static let gutter = 150.0
    /// A level's height in pixels.
    static let rowHeight = 14.0
    /// The most levels of calls a lane shows.
    static let deepest = 24
    /// The most lanes drawn: the threads with the most calls, in thread ID order.
    static let mostLanes = 64

    /// One function's part of a pixel column at one level.
    private struct Share {
        /// The time of its calls in the column, in nanoseconds.
        var time = 0.0
        /// Its calls that begin in the column.
        var calls = 0
    }

    /// A bar: neighbouring columns whose most time went to one function.
    private struct Bar {
        /// Its first column.
        var first: Int
        /// Its last column.
        var last: Int
        /// The function.
        var function: Int32
        /// The function's calls that begin in it.
        var calls = 0
        /// The function's time in it, in nanoseconds.
        var time = 0.0
        /// Whether other functions took time in its columns too.
        var mixed = false
    }

    /// Writes the SVG.
    func writeSVG(to output: inout FileOutput, program: String, pid: Int32) {
        let busy = recording.threads.filter { !$0.calls.isEmpty }
        let threads =
            busy.count <= Self.mostLanes
            ? busy
            : Array(busy.sorted { ($0.calls.count, $1.id) > ($1.calls.count, $0.id) }.prefix(Self.mostLanes))
                .sorted { $0.id < $1.id }
        let begin = threads.compactMap { $0.calls.first?.begin }.min() ?? 0
        let end = threads.flatMap { $0.calls.map(\.end) }.max() ?? begin
        let span = max(end - begin, 1)
        let columns = Int(Self.width - Self.gutter - 20)
        let scale = Double(columns) / span
        let top = 70.0
        let levels = threads.map { thread in min(Self.deepest, Int(thread.calls.map(\.depth).max() ?? 0) + 1) }
        let height = top + levels.reduce(0) { $0 + Double($1) * Self.rowHeight + 22 } + 10
        output.append(
            """
            <?xml version="1.0" encoding="UTF-8" standalone="no"?>
            <svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="\(Int(Self.width))" height="\(Int(height))" \
            viewBox="0 0 \(Int(Self.width)) \(Int(height))" font-family="monospace" font-size="11">
            <rect x="0" y="0" width="100%" height="100%" fill="#fdfbf3"/>
            <text x="\(Int(Self.width / 2))" y="22" text-anchor="middle" font-size="16">\
            Timeline: \(EventFormatting.xml(program)) (pid \(pid)), \(recording.callCount) traced calls\
            \(busy.count > threads.count ? "; the \(threads.count) busiest of \(busy.count) threads" : "")</text>

            """)
        axis(&output, begin: begin, span: span, scale: scale, top: top, bottom: height - 10)
        var y = top
        for (thread, levels) in zip(threads, levels) {
            output.append(
                "<text x=\"4\" y=\"\(FlameGraph.coordinate(y + 12))\" font-size=\"12\">"
                    + "\(EventFormatting.xml(EventFormatting.label("\(thread.name) \(thread.id)", width: Self.gutter)))"
                    + "</text>\n"
                    + "<line x1=\"0\" x2=\"\(Int(Self.width))\" y1=\"\(FlameGraph.coordinate(y))\" "
                    + "y2=\"\(FlameGraph.coordinate(y))\" stroke=\"#ccc\"/>\n")
            var cells = [[[Int32: Share]]](
                repeating: [[Int32: Share]](repeating: [:], count: columns), count: levels)
            for (index, call) in thread.calls.enumerated() where Int(call.depth) < levels {
                // A step of the report, for a signal's handler that waits for it.
                if index & 0xFFFF == 0 { fht_report_progress() }
                let left = (call.begin - begin) * scale
                let right = max((call.end - begin) * scale, left)
                let firstColumn = min(Int(left), columns - 1)
                cells[Int(call.depth)][firstColumn][call.function, default: Share()].calls += 1
                for column in firstColumn...min(Int(right), columns - 1) {
                    let covered = min(right, Double(column + 1)) - max(left, Double(column))
                    cells[Int(call.depth)][column][call.function, default: Share()].time += max(covered, 0) / scale
                }
            }
            for (level, row) in cells.enumerated() {
                for bar in bars(row) { draw(bar, &output, y: y + 4 + Double(level) * Self.rowHeight) }
            }
            y += Double(levels) * Self.rowHeight + 22
        }
        output.append("</svg>\n")
    }

    /// The bars of one level's columns.
    private func bars(_ row: [[Int32: Share]]) -> [Bar] {
        var bars: [Bar] = []
        for (column, shares) in row.enumerated() {
            guard let (function, share) = shares.max(by: { ($0.value.time, $1.key) < ($1.value.time, $0.key) }) else {
                continue
            }
            if var bar = bars.last, bar.last == column - 1, bar.function == function {
                bar.last = column
                bar.calls += share.calls
                bar.time += share.time
                bar.mixed = bar.mixed || shares.count > 1
                bars[bars.count - 1] = bar
            } else {
                bars.append(
                    Bar(
                        first: column, last: column, function: function, calls: share.calls, time: share.time,
                        mixed: shares.count > 1))
            }
        }
        return bars
    }

    /// Draws one bar at height `y`.
    private func draw(_ bar: Bar, _ output: inout FileOutput, y: Double) {
        let name = recording.functions[Int(bar.function)]
        let title =
            "\(name): \(bar.calls == 1 ? "1 call" : "\(bar.calls) calls"), \(EventFormatting.duration(bar.time))"
            + (bar.mixed ? " (other functions too)" : "")
        let x = Self.gutter + Double(bar.first)
        let width = Double(bar.last - bar.first + 1)
        let label = EventFormatting.label(name, width: width)
        output.append(
            "<g><title>\(EventFormatting.xml(title))</title><rect x=\"\(FlameGraph.coordinate(x))\" "
                + "y=\"\(FlameGraph.coordinate(y))\" width=\"\(FlameGraph.coordinate(width))\" "
                + "height=\"\(FlameGraph.coordinate(Self.rowHeight - 1))\" fill=\"\(EventFormatting.color(name))\"/>"
                + (label.isEmpty
                    ? ""
                    : "<text x=\"\(FlameGraph.coordinate(x + 3))\" y=\"\(FlameGraph.coordinate(y + 10))\">"
                        + "\(EventFormatting.xml(label))</text>")
                + "</g>\n")
    }

    /// Draws the time axis: a tick at every round step, labelled with the time since the
    /// first call.
    private func axis(
        _ output: inout FileOutput, begin: Double, span: Double, scale: Double, top: Double, bottom: Double
    ) {
        var step = 1.0
        while span / step > 10 {
            step *= step.description.hasPrefix("2") ? 2.5 : 2
        }
        var time = 0.0
        while time <= span {
            let x = FlameGraph.coordinate(Self.gutter + time * scale)
            output.append(
                "<line x1=\"\(x)\" x2=\"\(x)\" y1=\"\(FlameGraph.coordinate(top - 8))\" "
                    + "y2=\"\(FlameGraph.coordinate(bottom))\" stroke=\"#e4e0d4\"/>"
                    + "<text x=\"\(x)\" y=\"\(FlameGraph.coordinate(top - 12))\" text-anchor=\"middle\" fill=\"#555\">"
                    + "\(time == 0 ? "0" : "+" + EventFormatting.duration(time))</text>\n")
            time += step
        }
    }
}
