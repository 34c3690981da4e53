/// The recorded calls as an SVG timeline: a lane per thread, time from left to right, a call
/// as a bar under the call it was made in.
///
/// Calls too short to see at the picture's scale are drawn merged with their neighbours at
/// the same depth (the bar's tooltip says how many calls it stands for); lanes show at most
/// ``deepest`` levels of calls.
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

    /// A bar: one call, or calls merged.
    private struct Bar {
        /// Its left edge, in pixels.
        var start: Double
        /// Its right edge, in pixels.
        var end: Double
        /// The calls it stands for.
        var calls: Int
        /// The function of its first call.
        var function: Int32
        /// Whether its calls are of more than one function.
        var mixed: Bool
        /// The time of its calls, in nanoseconds.
        var busy: Double
        /// Its first call.
        var first: Recording.Call
    }

    /// Writes the SVG.
    func writeSVG(to output: inout FileOutput, program: String, pid: Int32) {
        let threads = recording.threads.filter { !$0.calls.isEmpty }
        let begin = threads.compactMap { $0.calls.first?.begin }.min() ?? 0
        let end = threads.flatMap { $0.calls.map(\.end) }.max() ?? begin
        let span = max(end - begin, 1)
        let scale = (Self.width - Self.gutter - 20) / span
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
            Timeline: \(EventFormatting.xml(program)) (pid \(pid)), \(recording.callCount) traced calls</text>

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
            var pending: [Bar?] = Array(repeating: nil, count: levels)
            for call in thread.calls where Int(call.depth) < levels {
                let level = Int(call.depth)
                let start = Self.gutter + (call.begin - begin) * scale
                let stop = Self.gutter + (call.end - begin) * scale
                if var bar = pending[level], start <= bar.end + 1, stop - start < 2 || bar.end - bar.start < 2 {
                    bar.end = max(bar.end, stop)
                    bar.calls += 1
                    bar.mixed = bar.mixed || bar.function != call.function
                    bar.busy += call.duration
                    pending[level] = bar
                    continue
                }
                if let bar = pending[level] { draw(bar, &output, y: y + 4 + Double(level) * Self.rowHeight) }
                pending[level] = Bar(
                    start: start, end: stop, calls: 1, function: call.function, mixed: false, busy: call.duration,
                    first: call)
            }
            for (level, bar) in pending.enumerated() {
                if let bar { draw(bar, &output, y: y + 4 + Double(level) * Self.rowHeight) }
            }
            y += Double(levels) * Self.rowHeight + 22
        }
        output.append("</svg>\n")
    }

    /// Draws one bar at height `y`.
    private func draw(_ bar: Bar, _ output: inout FileOutput, y: Double) {
        let name = recording.functions[Int(bar.function)]
        let title: String
        if bar.calls == 1 {
            title =
                "\(name): \(EventFormatting.duration(bar.first.duration)) from "
                + "\(EventFormatting.duration(bar.first.begin)), self \(EventFormatting.duration(bar.first.selfTime))"
                + (bar.first.ending == .returned
                    ? "" : bar.first.ending == .abandoned ? " (no return seen)" : " (running at exit)")
        } else {
            title =
                "\(bar.calls) calls (\(bar.mixed ? "\(name) and others" : name)) "
                + "taking \(EventFormatting.duration(bar.busy))"
        }
        let width = max(bar.end - bar.start, 0.5)
        let label = bar.calls == 1 || !bar.mixed ? EventFormatting.label(name, width: width) : ""
        output.append(
            "<g><title>\(EventFormatting.xml(title))</title><rect x=\"\(FlameGraph.coordinate(bar.start))\" "
                + "y=\"\(FlameGraph.coordinate(y))\" width=\"\(FlameGraph.coordinate(width))\" "
                + "height=\"\(FlameGraph.coordinate(Self.rowHeight - 1))\" "
                + "fill=\"\(bar.mixed ? "rgb(170,170,170)" : EventFormatting.color(name))\"/>"
                + (label.isEmpty
                    ? ""
                    : "<text x=\"\(FlameGraph.coordinate(bar.start + 3))\" y=\"\(FlameGraph.coordinate(y + 10))\">"
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
