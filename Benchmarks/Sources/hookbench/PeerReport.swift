import HookFixtures

/// What `hookbench --peers` measured: frida-gum's Interceptor beside this library's hooks
/// and the floors, on one function, in one process.
struct PeerReport: Codable, Sendable {
    var machine: Machine
    var command: String
    var quick: Bool
    /// The function every row calls, and how.
    var function: String
    /// frida's version.
    var frida: String
    /// Rows as in the main report, with their ratios to the floors.
    var rows: [Report.Row]
    /// Each row's median over the median of this library's no-op before+after hook, by mechanism.
    var timesBeforeAfter: [String: Double]
    /// The inline rows' goals, frida's attach among them, and whether this run meets them.
    var targets: [Report.TargetCheck]

    /// ``timesBeforeAfter`` of `rows`.
    static func ratiosToBeforeAfter(_ rows: [Report.Row]) -> [String: Double] {
        guard let ours = rows.first(where: { $0.mechanism == .beforeAfter })?.nanosecondsPerCall.median else {
            return [:]
        }
        var ratios: [String: Double] = [:]
        for row in rows { ratios[row.mechanism.rawValue] = row.nanosecondsPerCall.median / ours }
        return ratios
    }

    private static let headers = [
        "Mechanism", "median ns", "p99 ns", "× direct", "× limit", "× libffi", "× before+after",
    ]

    private var lines: [[String]] {
        rows.map { row in
            [row.mechanism.title] + row.timingCells + [Format.ratio(timesBeforeAfter[row.mechanism.rawValue] ?? .nan)]
        }
    }

    private var aboutLines: [String] {
        let samples = rows.first?.nanosecondsPerCall.samples ?? 0
        return [
            "\(machine.cpu), \(machine.processors) processors, \(machine.kernel); frida \(frida)",
            function,
            "\(samples) samples per row, each a timed C loop of many calls; ratios are of medians, measured in this run; "
                + "× direct of the rows that call the function directly is over the direct call rel32",
        ]
    }

    /// Aligned plain text for a terminal.
    func table() -> String {
        var text = "frida-gum's Interceptor beside swift-ffi-hook: nanoseconds per call\n"
        text += aboutLines.joined(separator: "\n") + "\n\n"
        text += Report.aligned([Self.headers] + lines, rightAlignedFrom: 1)
        text += "\nTargets\n"
        for target in targets {
            text += "  \(target.met ? "met    " : "NOT MET") \(target.goal): \(target.measured)\n"
        }
        return text
    }

    /// A GitHub-flavoured Markdown table.
    func markdown() -> String {
        var text = aboutLines.joined(separator: ". ") + ". Command: `\(command)`.\n\n"
        text += Report.markdownTable(Self.headers, lines, rightAlignedFrom: 1)
        text += "\n"
        text += Report.markdownTable(
            ["Target", "Measured", "Met"], targets.map { [$0.goal, $0.measured, $0.met ? "yes" : "**no**"] },
            rightAlignedFrom: 3)
        return text
    }
}
