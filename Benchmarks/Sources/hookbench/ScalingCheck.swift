import CObjCForward
import HookFixtures

/// `hookbench --check-scaling`: whether two threads calling one hooked function make at least
/// ``Report/ThreadScaling/target`` times the calls of one thread, for each kind of hook in
/// ``Mechanism/scalingTargets``. A call path that writes memory every calling thread shares (a
/// reference count, a counter, a cache line two threads' records share) makes two threads no
/// faster than one, or slower.
///
/// Each attempt measures a kind as the thread rows of the report do: the median of a few runs
/// of one thread and of two, alternated. A shared machine slows some runs down, never speeds
/// one up beyond what the code allows, so a kind gets up to ``attempts`` attempts and keeps
/// its best; it fails only when every attempt stays below the target. The direct call through
/// the slot is measured the same way, as the floor: when it scales no better, the machine was
/// busy, not the call path.
struct ScalingCheck {
    /// Calls each thread makes in one run, and runs of one thread and of two per attempt.
    static let calls = 1_000_000
    static let runs = 3

    /// Attempts per kind at most.
    let attempts: Int

    /// What the check found.
    struct Result: Codable, Sendable {
        /// The least scaling each kind of hook must reach.
        var target: Double
        /// The most attempts a kind got.
        var attempts: Int
        /// The direct call's best attempt, then each kind of hook's.
        var rows: [Row]

        /// One kind: its best attempt and every attempt's scaling.
        struct Row: Codable, Sendable {
            var best: Report.ThreadScaling
            var attempts: [Double]
        }

        /// Whether every kind of hook reached the target.
        var passed: Bool

        init(target: Double, attempts: Int, rows: [Row]) {
            self.target = target
            self.attempts = attempts
            self.rows = rows
            passed = rows.allSatisfy { !$0.best.isTarget || $0.best.meetsTarget }
        }
    }

    /// Measures the direct call and every kind of hook.
    func run() throws -> Result {
        guard objcfwd_prepare() == 0 else {
            throw BenchError("Objective-C forwarding setup failed: \(String(cString: objcfwd_error()))")
        }
        let measurement = ThreadScalingRun(calls: Self.calls, runs: Self.runs)
        var rows: [Result.Row] = []
        for mechanism in [Mechanism.direct] + Mechanism.scalingTargets {
            var best: Report.ThreadScaling?
            var scalings: [Double] = []
            for _ in 0..<attempts {
                let attempt = try measurement.measure(mechanism)
                scalings.append(attempt.scaling)
                if best.map({ attempt.scaling > $0.scaling }) ?? true { best = attempt }
                if attempt.meetsTarget { break }
            }
            if let best { rows.append(Result.Row(best: best, attempts: scalings)) }
        }
        return Result(target: Report.ThreadScaling.target, attempts: attempts, rows: rows)
    }
}

extension ScalingCheck.Result {
    /// The result as lines for a terminal: each kind's best scaling and its attempts, then the verdict.
    func text() -> String {
        var text =
            "Two threads against one on int(int, int): calls per second, the best of up to \(attempts) attempts "
            + "(each the median of \(ScalingCheck.runs) runs of \(Format.fixed(Double(ScalingCheck.calls), 0)) "
            + "calls per thread); target ≥ \(Format.ratio(target))\n\n"
        let table = rows.map { row in
            [
                row.best.mechanism.title, Format.millionsPerSecond(row.best.oneThread),
                Format.millionsPerSecond(row.best.twoThreads), Format.ratio(row.best.scaling),
                row.best.isTarget ? (row.best.meetsTarget ? "met" : "NOT MET") : "floor",
                row.attempts.map(Format.ratio).joined(separator: " "),
            ]
        }
        text += Report.aligned(
            [["Kind", "1 thread", "2 threads", "scaling", "target", "attempts"]] + table, rightAlignedFrom: 1)
        let failed = rows.filter { $0.best.isTarget && !$0.best.meetsTarget }.map(\.best.mechanism.title)
        if failed.isEmpty {
            text += "\npassed: every kind of hook scales to two threads\n"
        } else {
            text += "\nFAILED: below \(Format.ratio(target)) in every attempt: \(failed.joined(separator: ", "))\n"
            if let floor = rows.first(where: { $0.best.mechanism == .direct }), !floor.best.meetsTarget {
                text +=
                    "the direct call made \(Format.ratio(floor.best.scaling)) too: the machine was busy; "
                    + "rerun on a quiet one\n"
            }
        }
        return text
    }
}
