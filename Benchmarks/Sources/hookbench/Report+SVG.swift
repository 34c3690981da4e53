import Glibc
import HookFixtures

/// The report as an SVG bar chart: nanoseconds per call on a logarithmic axis, one group of
/// bars per signature, one bar per mechanism measured on it.
extension Report {
    private static let colors: [Mechanism: String] = [
        .direct: "#7f7f7f", .closureLimit: "#8c564b", .libffi: "#bcbd22", .before: "#aec7e8", .after: "#6baed6",
        .beforeAfter: "#1f77b4", .instead: "#17becf", .eightBefore: "#9467bd", .typedBeforeAfter: "#2ca02c",
        .objcMessage: "#ff9896", .objcHookBeforeAfter: "#ff7f0e", .objcInstanceHookBeforeAfter: "#bcbd22",
        .objcPassThrough: "#ffbb78", .objcForwardingHook: "#d62728", .inlineDirect: "#c7c7c7",
        .inlinePassThrough: "#c5b0d5", .inlineBeforeAfter: "#393b79", .inlineInstead: "#5254a3",
        .inlineReplace: "#8c6d31", .attachEnterLeave: "#e377c2", .attachEnter: "#f7b6d2",
        .inlineAttachEnterLeave: "#7b4173", .attachFunctions: "#ce6dbd", .inlineAttachFunctions: "#a55194",
    ]

    /// The chart as a standalone SVG document.
    func svg() -> String {
        // Each signature's group has the bars of the mechanisms measured on it (the inline
        // rows are of one signature), so groups differ in height.
        let groups = BenchSignature.allCases.map { signature in
            (signature: signature, mechanisms: Mechanism.standard.filter { row(signature, $0) != nil })
        }.filter { !$0.mechanisms.isEmpty }
        let mechanisms = Mechanism.standard.filter { mechanism in
            groups.contains { $0.mechanisms.contains(mechanism) }
        }
        let barHeight = 11.0
        let barGap = 2.0
        let groupGap = 26.0
        let left = 200.0
        let right = 860.0
        let legendHeight = Double((mechanisms.count + 1) / 2) * 16 + 10
        let top = 56.0 + legendHeight
        func groupHeight(_ bars: Int) -> Double { Double(bars) * (barHeight + barGap) }
        let chartBottom = groups.reduce(top) { $0 + groupHeight($1.mechanisms.count) + groupGap }
        let width = 960.0
        let height = chartBottom + 40

        let medians = rows.map(\.nanosecondsPerCall.median).filter { $0 > 0 }
        let lowDecade = floor(log10(medians.min() ?? 1))
        let highDecade = ceil(log10(medians.max() ?? 10))
        func x(_ nanoseconds: Double) -> Double {
            let fraction = (log10(max(nanoseconds, 1e-3)) - lowDecade) / max(highDecade - lowDecade, 1)
            return left + fraction * (right - left)
        }

        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" \
            viewBox="0 0 \(Int(width)) \(Int(height))" font-family="Helvetica, Arial, sans-serif" font-size="11">
            <rect width="100%" height="100%" fill="#ffffff"/>
            <text x="\(Int(left))" y="22" font-size="15" font-weight="bold">swift-ffi-hook: nanoseconds per call \
            (median, log scale; lower is faster)</text>
            <text x="\(Int(left))" y="40" fill="#555555">\(Self.escaped(machine.cpu)), \
            \(machine.processors) processors, \(Self.escaped(machine.kernel))</text>

            """
        for (index, mechanism) in mechanisms.enumerated() {
            let legendX = left + Double(index % 2) * 260
            let legendY = 52 + Double(index / 2) * 16
            svg += """
                <rect x="\(Self.number(legendX))" y="\(Self.number(legendY))" width="12" height="10" \
                fill="\(Self.colors[mechanism] ?? "#000000")"/>
                <text x="\(Self.number(legendX + 17))" y="\(Self.number(legendY + 9))">\(Self.escaped(mechanism.title))</text>

                """
        }
        var decade = lowDecade
        while decade <= highDecade {
            let value = pow(10, decade)
            let lineX = Self.number(x(value))
            svg += """
                <line x1="\(lineX)" y1="\(Self.number(top - 6))" x2="\(lineX)" y2="\(Self.number(chartBottom))" \
                stroke="#dddddd"/>
                <text x="\(lineX)" y="\(Self.number(chartBottom + 16))" text-anchor="middle" \
                fill="#555555">\(Self.duration(value))</text>

                """
            decade += 1
        }
        var groupTop = top
        for (signature, barMechanisms) in groups {
            defer { groupTop += groupHeight(barMechanisms.count) + groupGap }
            svg += """
                <text x="\(Self.number(left - 8))" y="\(Self.number(groupTop - 5))" text-anchor="end" \
                font-weight="bold">\(Self.escaped(signature.title))</text>

                """
            for (barIndex, mechanism) in barMechanisms.enumerated() {
                guard let row = row(signature, mechanism) else { continue }
                let barTop = groupTop + Double(barIndex) * (barHeight + barGap)
                let median = row.nanosecondsPerCall.median
                svg += """
                    <text x="\(Self.number(left - 8))" y="\(Self.number(barTop + 9))" text-anchor="end" \
                    fill="#333333">\(Self.escaped(mechanism.title))</text>
                    <rect x="\(Self.number(left))" y="\(Self.number(barTop))" \
                    width="\(Self.number(max(x(median) - left, 1)))" height="\(Self.number(barHeight))" \
                    fill="\(Self.colors[mechanism] ?? "#000000")"/>
                    <text x="\(Self.number(max(x(median), left + 1) + 4))" y="\(Self.number(barTop + 9))" \
                    fill="#333333">\(Format.nanoseconds(median)) ns</text>

                    """
            }
        }
        svg += "</svg>\n"
        return svg
    }

    private static func number(_ value: Double) -> String {
        String(Format.fixed(value, 1).filter { $0 != "," })
    }

    private static func duration(_ nanoseconds: Double) -> String {
        switch nanoseconds {
        case ..<1: Format.fixed(nanoseconds, 1) + " ns"
        case ..<1_000: Format.fixed(nanoseconds, 0) + " ns"
        case ..<1_000_000: Format.fixed(nanoseconds / 1_000, 0) + " µs"
        default: Format.fixed(nanoseconds / 1_000_000, 0) + " ms"
        }
    }

    private static func escaped(_ text: String) -> String {
        var result = ""
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            default: result.append(character)
            }
        }
        return result
    }
}
