internal import CTracerSupport

/// Time by call stack: the recorded calls of every thread merged into one tree of traced
/// functions, written as folded stacks or drawn as an SVG flame graph.
///
/// A node is a stack of traced functions (`a;b;c`: `c` called while `b` ran, called while `a`
/// ran; functions that are not traced do not appear). Its total time is the time of the calls
/// that ended it; its self time, that total less the time of the traced calls made in them.
struct FlameGraph {
    /// One stack.
    struct Node {
        /// The function, an index into ``Recording/functions`` (-1 for the root).
        let function: Int32
        /// How many functions the stack holds (0 for the root).
        let depth: Int
        /// The time of its calls, in nanoseconds.
        var total = 0.0
        /// Its self time, in nanoseconds.
        var selfTime = 0.0
        /// Its calls.
        var calls = 0
        /// The stacks one function longer, by function.
        var children: [Int32: Int] = [:]
    }

    /// The functions' names.
    let functions: [String]
    /// The stacks; the root (every thread's top-level calls) first.
    private(set) var nodes = [Node(function: -1, depth: 0)]
    /// The number of threads merged.
    let threadCount: Int

    /// The tree of the calls of `recording`.
    init(recording: Recording) {
        functions = recording.functions
        threadCount = recording.threads.count
        for thread in recording.threads {
            var nodeOfCall = [Int](repeating: 0, count: thread.calls.count)
            for (index, call) in thread.calls.enumerated() {
                // A step of the report, for a signal's handler that waits for it.
                if index & 0xFFFF == 0 { fht_report_progress() }
                let parent = call.parent < 0 ? 0 : nodeOfCall[Int(call.parent)]
                let node = child(of: parent, call.function)
                nodeOfCall[index] = node
                nodes[node].total += call.duration
                nodes[node].selfTime += call.selfTime
                nodes[node].calls += 1
                if call.parent < 0 { nodes[0].total += call.duration }
            }
        }
    }

    /// The node for `function` called in `parent`, made when new.
    private mutating func child(of parent: Int, _ function: Int32) -> Int {
        if let existing = nodes[parent].children[function] { return existing }
        nodes.append(Node(function: function, depth: nodes[parent].depth + 1))
        nodes[parent].children[function] = nodes.count - 1
        return nodes.count - 1
    }

    /// The children of `node`, by function name.
    private func sortedChildren(_ node: Int) -> [Int] {
        nodes[node].children.values.sorted { functions[Int(nodes[$0].function)] < functions[Int(nodes[$1].function)] }
    }

    // MARK: - Folded stacks

    /// Writes one line per stack with self time: `a;b;c NANOSECONDS`, the format of
    /// `flamegraph.pl` and speedscope (stacks sorted, self time rounded to whole nanoseconds,
    /// stacks of no self time left out).
    /// A name with `;` (which would split it into two frames) or a control character (a
    /// newline would split the line) has those written as `?`.
    func writeFolded(to output: inout FileOutput) {
        var path: [String] = []
        let frames = functions.map(Self.foldedFrame)
        // The line of each stack, then those of the stacks above it: depth first, by a list of
        // what is left to visit rather than by recursion (a recursion tens of thousands of
        // calls deep, traced, overflowed the thread's stack here). Negative: a stack left.
        var left = Array(sortedChildren(0).reversed())
        while let node = left.popLast() {
            guard node >= 0 else {
                path.removeLast()
                continue
            }
            path.append(frames[Int(nodes[node].function)])
            let value = Int(nodes[node].selfTime.rounded())
            if value > 0 { output.append(path.joined(separator: ";") + " \(value)\n") }
            left.append(-1)
            left.append(contentsOf: sortedChildren(node).reversed())
        }
    }

    /// `name` as a frame of a folded stack: `;` and control characters as `?`.
    private static func foldedFrame(_ name: String) -> String {
        let replaced = { (byte: UInt8) in byte == UInt8(ascii: ";") || EventFormatting.isControl(byte) }
        guard name.utf8.contains(where: replaced) else { return name }
        let bytes = name.utf8.map { replaced($0) ? UInt8(ascii: "?") : $0 }
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: - SVG

    /// The picture's width in pixels.
    static let width = 1200.0
    /// A frame's height in pixels.
    static let frameHeight = 17.0
    /// Frames narrower than this (in pixels) are left out, with the stacks above them.
    static let narrowest = 0.1

    /// Writes an SVG flame graph: a frame per stack, as wide as its total time, on top of the
    /// frame of the function that called it; the root at the bottom spans all the time in
    /// traced calls. Each frame's `<title>` (its tooltip) gives the function, its time and
    /// share, its self time and its calls; names are written where they fit.
    func writeSVG(to output: inout FileOutput, program: String, pid: Int32) {
        let margin = 10.0
        let top = 56.0
        let bottom = 24.0
        let scale = nodes[0].total > 0 ? (Self.width - 2 * margin) / nodes[0].total : 0
        // The deepest level drawn, found by visiting the frames wide enough.
        // (Depth first by a list of what is left, as `writeFolded` goes.)
        var deepest = 0
        var measured = [0]
        while let node = measured.popLast() {
            guard nodes[node].total * scale >= Self.narrowest else { continue }
            deepest = max(deepest, nodes[node].depth)
            measured.append(contentsOf: nodes[node].children.values)
        }
        let height = top + Double(deepest + 1) * Self.frameHeight + bottom
        let all = nodes[0].total
        let calls = nodes.dropFirst().reduce(0) { $0 + $1.calls }
        output.append(
            """
            <?xml version="1.0" encoding="UTF-8" standalone="no"?>
            <svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="\(Int(Self.width))" height="\(Int(height))" \
            viewBox="0 0 \(Int(Self.width)) \(Int(height))" font-family="monospace" font-size="12">
            <rect x="0" y="0" width="100%" height="100%" fill="#fdfbf3"/>
            <text x="\(Int(Self.width / 2))" y="24" text-anchor="middle" font-size="17">\
            Flame graph: \(EventFormatting.xml(program)) (pid \(pid))</text>
            <text x="\(Int(Self.width / 2))" y="44" text-anchor="middle" fill="#555">\
            \(EventFormatting.duration(all)) in \(calls) traced calls on \(threadCount) \
            thread\(threadCount == 1 ? "" : "s"); width: time, a frame above the one it was called in</text>

            """)
        // Draws a frame at `x` and, left to right above it, the frames of the calls made in it
        // (depth first, by a list of what is left to draw, in order).
        var drawn: [(node: Int, x: Double)] = [(0, margin)]
        while let (node, x) = drawn.popLast() {
            let width = nodes[node].total * scale
            guard width >= Self.narrowest else { continue }
            let depth = nodes[node].depth
            let y = height - bottom - Double(depth + 1) * Self.frameHeight
            let name = node == 0 ? "all" : functions[Int(nodes[node].function)]
            let share = all > 0 ? nodes[node].total / all : 0
            let title =
                node == 0
                ? "all: \(EventFormatting.duration(all)) in traced calls, \(calls) calls"
                : "\(name): \(EventFormatting.duration(nodes[node].total)) (\(EventFormatting.percent(share))), "
                    + "self \(EventFormatting.duration(nodes[node].selfTime)), \(nodes[node].calls) "
                    + "call\(nodes[node].calls == 1 ? "" : "s")"
            let label = EventFormatting.label(name, width: width)
            output.append(
                "<g class=\"frame\"><title>\(EventFormatting.xml(title))</title>"
                    + "<rect x=\"\(Self.coordinate(x))\" y=\"\(Self.coordinate(y))\" "
                    + "width=\"\(Self.coordinate(width))\" height=\"\(Self.coordinate(Self.frameHeight - 1))\" "
                    + "fill=\"\(node == 0 ? "rgb(190,190,190)" : EventFormatting.color(name))\" rx=\"2\"/>"
                    + (label.isEmpty
                        ? ""
                        : "<text x=\"\(Self.coordinate(x + 3))\" y=\"\(Self.coordinate(y + 12))\">"
                            + "\(EventFormatting.xml(label))</text>")
                    + "</g>\n")
            var childX = x
            var above: [(node: Int, x: Double)] = []
            for child in sortedChildren(node) {
                above.append((child, childX))
                childX += nodes[child].total * scale
            }
            drawn.append(contentsOf: above.reversed())
        }
        output.append("</svg>\n")
    }

    /// A coordinate with two decimals.
    static func coordinate(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        let fraction = String(abs(hundredths) % 100)
        return (hundredths < 0 ? "-" : "") + "\(abs(hundredths) / 100)."
            + String(repeating: "0", count: 2 - fraction.count) + fraction
    }
}
