import ArgumentParser
import FoundationEssentials
import Glibc
import HookFixtures

/// Times hooked calls against a direct call, two raw libffi closures (the closure limit and
/// the libffi floor) and Objective-C message forwarding, all in one process.
@main
struct HookBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hookbench",
        abstract: "Nanoseconds per call of swift-ffi-hook's hooks, side by side with the floors and with forwarding.",
        discussion: """
            Each row calls a C function through a slot from a C loop: directly, through a raw \
            libffi closure that calls the original through a typed pointer (the closure limit), \
            through one that forwards with ffi_call (the libffi floor), through this library's \
            hooks and its signature-free attach (empty enter and leave blocks), and as a message \
            to an Objective-C method: plain, hooked class-wide by this library, and hooked \
            through message forwarding. The inline rows call a C function directly (a call \
            rel32, no slot), unpatched and hooked or attached inline in its own code. After a \
            warm-up, every row takes repeated samples (each a timed loop of many calls) and \
            reports the median and p99 of nanoseconds per call, ratios, and heap allocations per \
            call.
            """)

    @Flag(help: "Measure a few thousand calls per row, for CI.")
    var quick = false

    @Flag(help: "Print the report as JSON.")
    var json = false

    @Flag(help: "Print the report as Markdown tables.")
    var markdown = false

    @Option(
        name: .customLong("svg"), help: ArgumentHelp("Also write a chart of nanoseconds per call.", valueName: "file"))
    var svgPath: String?

    @Option(help: "Samples per row (default: 301, or 10 with --quick).")
    var samples: Int?

    @Option(
        name: .customLong("transient-slots"),
        help: ArgumentHelp(
            "Instead of the call rows, hook this many heap tables that come and go, and report memory per distinct slot and the cost of a first hook.",
            valueName: "tables"))
    var transientSlots: Int?

    @Flag(help: "With --transient-slots: release each table's slot before freeing it.")
    var releaseSlots = false

    @Option(
        name: .customLong("signature"),
        help: ArgumentHelp(
            "Measure only this signature's rows (repeatable; \(BenchSignature.allCases.map { "\($0)" }.joined(separator: ", "))). "
                + "The inline rows, their install cost and the thread scaling come with intInt.",
            valueName: "name"))
    var signatureNames: [String] = []

    @Option(
        name: .customLong("count-calls"),
        help: ArgumentHelp(
            "Instead of the report, install --mechanism on the first --signature (intInt by default), make this many "
                + "calls from its C loop, remove it and exit: for instruction counts under callgrind.",
            valueName: "calls"))
    var countCalls: Int?

    @Option(
        help: ArgumentHelp(
            "With --count-calls: the mechanism to call through.",
            valueName: "name"))
    var mechanism: Mechanism?

    @Option(
        name: .customLong("peers"),
        help: ArgumentHelp(
            "Instead of the call rows, measure frida-gum's Interceptor beside this library on one function, "
                + "attached by this driver (Benchmarks/Peers/frida-peer.py, which needs Python's frida package).",
            valueName: "driver"))
    var peerDriver: String?

    @Option(
        name: .customLong("library-child"),
        help: ArgumentHelp(
            "Internal: plan and patch \(LibraryRun.library) (batch: as one batch; single: one function at a time) "
                + "and print the figures as one line of JSON.",
            valueName: "mode", visibility: .hidden))
    var libraryChild: String?

    @Option(
        help: ArgumentHelp(
            "Instead of the report, plan, patch and unpatch every function of each of these libraries (names or "
                + "paths, comma-separated) as one batch, each in a process of its own, and print the figures.",
            valueName: "libraries"))
    var libraries: String?

    @Flag(
        name: .customLong("check-scaling"),
        help: ArgumentHelp(
            "Instead of the report, check that two threads make at least \(Format.ratio(Report.ThreadScaling.target)) "
                + "the calls of one for each kind of hook (before + after on a slot, attach on a slot, before + after "
                + "inline, a class-wide Objective-C hook): exit status 1 when one stays below it in every attempt "
                + "while the floor (the direct call's and arithmetic's scaling, measured right after each attempt) "
                + "reached \(Format.ratio(ScalingCheck.quietFloor)) at least once, 2 when the floor never did (a busy "
                + "machine: undecided). A kind gets up to --attempts attempts and is judged by its fastest runs, "
                + "since a shared machine slows some runs down; the check is meant for a machine where nothing "
                + "else runs."))
    var checkScaling = false

    @Flag(
        name: .customLong("check-allocations"),
        help: ArgumentHelp(
            "After the report, exit with status 1 when a hooked call allocated on the heap on some row (the count is "
                + "exact, not a timing, so a shared machine cannot fool it); the rows that did are named."))
    var checkAllocations = false

    @Option(help: "With --check-scaling: attempts per kind at most (default: 5).")
    var attempts: Int?

    func validate() throws {
        if json && markdown { throw ValidationError("--json and --markdown exclude each other") }
        if let samples, samples < 3 { throw ValidationError("--samples must be at least 3") }
        if let transientSlots, transientSlots < 100 { throw ValidationError("--transient-slots must be at least 100") }
        if peerDriver != nil && (transientSlots != nil || svgPath != nil) {
            throw ValidationError("--peers excludes --transient-slots and --svg")
        }
        _ = try signatures()
        if checkScaling {
            if transientSlots != nil || countCalls != nil || peerDriver != nil || svgPath != nil || markdown {
                throw ValidationError(
                    "--check-scaling excludes --transient-slots, --count-calls, --peers, --svg and --markdown")
            }
            if checkAllocations {
                throw ValidationError("--check-allocations goes with the report, not with --check-scaling")
            }
            if let attempts, attempts < 1 { throw ValidationError("--attempts must be at least 1") }
        } else if attempts != nil {
            throw ValidationError("--attempts goes with --check-scaling")
        }
        if checkAllocations && (transientSlots != nil || countCalls != nil || peerDriver != nil || libraries != nil) {
            throw ValidationError("--check-allocations goes with the call rows' report only")
        }
        if let countCalls {
            guard countCalls > 0 else { throw ValidationError("--count-calls must be positive") }
            guard let mechanism, !mechanism.isPeer else {
                throw ValidationError("--count-calls needs --mechanism, one this process installs by itself")
            }
            guard mechanism.applies(to: try signatures().first ?? .intInt) else {
                throw ValidationError("\(mechanism.rawValue) has no row for that signature")
            }
        } else if mechanism != nil {
            throw ValidationError("--mechanism goes with --count-calls")
        }
    }

    /// The signatures `--signature` names, all of them when none is given.
    private func signatures() throws -> [BenchSignature] {
        guard !signatureNames.isEmpty else { return BenchSignature.allCases }
        return try signatureNames.map { name in
            guard let signature = BenchSignature.allCases.first(where: { "\($0)" == name }) else {
                throw ValidationError("unknown signature \(name)")
            }
            return signature
        }
    }

    func run() throws {
        if let libraryChild {
            try LibraryRun.childMain(mode: libraryChild)
            return
        }
        if let libraries {
            let batches = try LibraryRun.batches(of: libraries.split(separator: ",").map(String.init))
            if json {
                try printJSON(batches.map { LibraryBatchFigures(library: $0.library, batch: $0.batch) })
            } else {
                print(LibraryRun.text(batches), terminator: "")
            }
            return
        }
        if checkScaling {
            let result = try ScalingCheck(attempts: attempts ?? 5).run()
            if json {
                try printJSON(result)
            } else {
                print(result.text(), terminator: "")
            }
            if result.rows.contains(where: \.failed) { throw ExitCode.failure }
            if !result.passed { throw ExitCode(2) }
            return
        }
        if let transientSlots {
            print(try TransientSlots(tables: transientSlots, releases: releaseSlots).run(), terminator: "")
            return
        }
        if let countCalls, let mechanism {
            try CallCount(mechanism: mechanism, signature: signatures().first ?? .intInt, calls: countCalls).run()
            return
        }
        var plan = quick ? SamplingPlan.quick : SamplingPlan.full
        if let samples { plan.samples = samples }
        let command = (["hookbench"] + CommandLine.arguments.dropFirst()).joined(separator: " ")
        if let peerDriver {
            let report = try PeerRun(plan: plan, command: command, driver: peerDriver).run()
            if json {
                try printJSON(report)
            } else {
                print(markdown ? report.markdown() : report.table(), terminator: "")
            }
            return
        }
        let report = try BenchRun(plan: plan, command: command, signatures: signatures()).run()
        if json {
            try printJSON(report)
        } else if markdown {
            print(report.markdown(), terminator: "")
        } else {
            print(report.table(), terminator: "")
        }
        if let svgPath {
            try Data(report.svg().utf8).write(to: URL(filePath: svgPath))
        }
        if checkAllocations {
            let allocating = report.rows.filter { $0.mechanism.isHook && $0.mallocsPerCall > 0 }
            for row in allocating {
                var line =
                    "hookbench: \(row.mechanism.title) on \(row.signature.title) allocated "
                    + "\(Format.mallocs(row.mallocsPerCall)) times per call\n"
                line.withUTF8 { bytes in _ = Glibc.write(2, bytes.baseAddress, bytes.count) }
            }
            if !allocating.isEmpty { throw ExitCode.failure }
        }
    }

    private func printJSON(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        print(String(decoding: try encoder.encode(value), as: UTF8.self))
    }
}

/// One library's figures for `hookbench --libraries --json`.
struct LibraryBatchFigures: Encodable {
    var library: String
    var batch: Report.LibraryCost.Batch
}
