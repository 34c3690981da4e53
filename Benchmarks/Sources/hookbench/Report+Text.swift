import HookFixtures

extension Report.Row {
    /// The cells every table shows: median and p99 nanoseconds, then the ratios to the floors.
    var timingCells: [String] {
        [
            Format.nanoseconds(nanosecondsPerCall.median),
            Format.nanoseconds(nanosecondsPerCall.p99),
            Format.ratio(timesDirect),
            Format.ratio(timesLimit),
            Format.ratio(timesLibffi),
        ]
    }
}

/// The report as a terminal table and as Markdown.
extension Report {
    private static let headers = [
        "Signature", "Mechanism", "median ns", "p99 ns", "× direct", "× limit", "× libffi", "× ObjC send",
        "forwarding ÷",
        "mallocs/call",
    ]

    /// The cells of one row of the main table; the signature only on a group's first row.
    private func cells(_ row: Row, showingSignature: Bool) -> [String] {
        [showingSignature ? row.signature.title : "", row.mechanism.title] + row.timingCells + [
            row.mechanism.isObjectiveC ? Format.ratio(row.timesMessage) : "",
            Format.ratio(row.forwardingOverThis),
            Format.mallocs(row.mallocsPerCall),
        ]
    }

    private var mainTable: [[String]] {
        rows.enumerated().map { index, row in
            cells(row, showingSignature: index == 0 || rows[index - 1].signature != row.signature)
        }
    }

    private var threadTable: [[String]] {
        threads.map {
            [
                "\($0.mechanism.title) · \($0.signature.title)", Format.millionsPerSecond($0.oneThread),
                Format.millionsPerSecond($0.twoThreads),
                Format.ratio($0.scaling) + ($0.floor.map { " (floor \(Format.ratio($0)))" } ?? ""),
            ]
        }
    }

    private var installLine: String {
        "install + remove of one before hook: median \(Format.microseconds(installRemove.nanosecondsPerPair.median)) µs, "
            + "p99 \(Format.microseconds(installRemove.nanosecondsPerPair.p99)) µs "
            + "(\(installRemove.nanosecondsPerPair.samples) samples of \(installRemove.nanosecondsPerPair.callsPerSample)); "
            + "the first on a slot, which makes its closure: \(Format.microseconds(installRemove.firstNanoseconds)) µs"
    }

    /// The inline hook's install and removal, one sentence each, when measured.
    private var inlineInstallLines: [String] {
        guard let inline = inlineInstallRemove else { return [] }
        func figure(_ pairs: Distribution) -> String {
            "median \(Format.microseconds(pairs.median)) µs, p99 \(Format.microseconds(pairs.p99)) µs "
                + "(\(pairs.samples) samples of \(pairs.callsPerSample))"
        }
        let callers = "with \(inline.callerThreads) threads calling the function"
        return [
            "install + remove of one before hook inline (on \(InlineTarget.name)'s jump cell), each install writing "
                + "the jump and each removal taking it out: \(figure(inline.cold)); \(callers): "
                + "\(figure(inline.coldWithCallers))",
            "the same with the jump kept (InlineFunction.patch(): only the cell changes): \(figure(inline.kept)); "
                + "\(callers): \(figure(inline.keptWithCallers)); the callers made "
                + "\(Format.fixed(Double(inline.callerCalls), 0)) calls, every one with the right sum",
            "planning the patch: \(Format.microseconds(inline.planNanoseconds)) µs; the first hook, which makes the "
                + "cell's closure and writes the jump: \(Format.microseconds(inline.firstInstallNanoseconds)) µs; "
                + "its removal: \(Format.microseconds(inline.firstRemoveNanoseconds)) µs",
        ]
    }

    private var machineLine: String {
        "\(machine.cpu), \(machine.processors) processors, \(machine.kernel)"
    }

    private var samplingLine: String {
        let first = rows.first?.nanosecondsPerCall.samples ?? 0
        return "\(first) samples per row, each a timed C loop of many calls; "
            + "ratios are of medians, measured in this run"
    }

    // MARK: - Terminal

    /// Aligned plain-text tables for a terminal.
    func table() -> String {
        var text = "swift-ffi-hook: nanoseconds per call\n\(machineLine)\n\(samplingLine)\n\n"
        text += Self.aligned([Self.headers] + mainTable, rightAlignedFrom: 2, separatorsBefore: groupStarts)
        text += "\n" + installLine + "\n"
        for line in inlineInstallLines + batchLines { text += line + "\n" }
        text += "\n"
        text += Self.aligned([["Threads", "1 thread", "2 threads", "scaling"]] + threadTable, rightAlignedFrom: 1)
        text += "\nTargets\n"
        for target in targets {
            text += "  \(target.met ? "met    " : "NOT MET") \(target.goal): \(target.measured)\n"
        }
        return text
    }

    /// Line indices (in the table with its header) where a new signature starts.
    private var groupStarts: Set<Int> {
        Set(rows.indices.filter { $0 > 0 && rows[$0 - 1].signature != rows[$0].signature }.map { $0 + 1 })
    }

    static func aligned(_ lines: [[String]], rightAlignedFrom: Int, separatorsBefore: Set<Int> = []) -> String {
        let columns = lines.map(\.count).max() ?? 0
        var widths = [Int](repeating: 0, count: columns)
        for line in lines {
            for (column, cell) in line.enumerated() { widths[column] = max(widths[column], cell.count) }
        }
        func render(_ line: [String]) -> String {
            line.enumerated().map { column, cell in
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                return column >= rightAlignedFrom ? padding + cell : cell + padding
            }.joined(separator: "  ")
        }
        let rule = String(repeating: "-", count: widths.reduce(0, +) + 2 * (columns - 1))
        var text = render(lines[0]) + "\n" + rule + "\n"
        for (index, line) in lines.enumerated().dropFirst() {
            if separatorsBefore.contains(index) { text += "\n" }
            text += render(line) + "\n"
        }
        return text
    }

    // MARK: - Markdown

    /// GitHub-flavoured Markdown tables.
    func markdown() -> String {
        var text = "Machine: \(machineLine). Command: `\(command)`. \(samplingLine).\n\n"
        text += Self.markdownTable(Self.headers, mainTable, rightAlignedFrom: 2)
        for line in [installLine] + inlineInstallLines + batchLines {
            text += "\n" + line.prefix(1).uppercased() + line.dropFirst() + ".\n"
        }
        text += "\n"
        text += Self.markdownTable(["Threads", "1 thread", "2 threads", "scaling"], threadTable, rightAlignedFrom: 1)
        text += "\n"
        text += Self.markdownTable(
            ["Target", "Measured", "Met"], targets.map { [$0.goal, $0.measured, $0.met ? "yes" : "**no**"] },
            rightAlignedFrom: 3)
        return text
    }

    static func markdownTable(_ headers: [String], _ lines: [[String]], rightAlignedFrom: Int) -> String {
        var text = "| " + headers.joined(separator: " | ") + " |\n|"
        for column in headers.indices { text += column >= rightAlignedFrom ? " ---: |" : " --- |" }
        text += "\n"
        for line in lines {
            text += "| " + line.map { $0.isEmpty ? " " : $0 }.joined(separator: " | ") + " |\n"
        }
        return text
    }
}
