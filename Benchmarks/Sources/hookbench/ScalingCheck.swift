import CHookBench
import CObjCForward
import HookFixtures

/// `hookbench --check-scaling`: whether two threads calling one hooked function make at least
/// ``Report/ThreadScaling/target`` times the calls of one thread, for each kind of hook in
/// ``Mechanism/scalingTargets``. A call path that writes memory every calling thread shares (a
/// reference count, a counter, a cache line two threads' records share) makes two threads no
/// faster than one, or slower.
///
/// Each attempt makes a few runs of one thread and of two, alternated, as the thread rows of
/// the report do. A shared machine slows some runs down and never speeds one up beyond what
/// the code allows, so an attempt sets its fastest run of two threads against its fastest of
/// one; a kind gets up to ``attempts`` attempts, each later one after a longer pause (a busy
/// phase of the machine lasts a while), keeps its best, and fails only when every attempt
/// stays below the target. The direct call through the slot is measured the same way, as the
/// floor, and again after a kind that fails: when it scales no better, the machine was busy,
/// not the call path.
struct ScalingCheck {
    /// Calls each thread makes in one run, and runs of one thread and of two per attempt.
    static let calls = 1_000_000
    static let runs = 3
    /// How much slower than the fastest one-thread run of a kind an attempt's fastest may be
    /// and still count.
    static let slowedOne = 0.15

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

        /// One kind: its best attempt, and every attempt's scaling.
        struct Row: Codable, Sendable {
            var best: Report.ThreadScaling
            var attempts: [Double]
            /// For a kind of hook below the target in every attempt: the direct call's scaling,
            /// measured again right after (below the target too: the machine was busy).
            var floorAfter: Double?
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
        var rows: [Result.Row] = []
        for mechanism in [Mechanism.direct] + Mechanism.scalingTargets {
            let row = try check(mechanism)
            rows.append(row)
        }
        return Result(target: Report.ThreadScaling.target, attempts: attempts, rows: rows)
    }

    /// Attempts `mechanism` until an attempt's fastest run of two threads reaches the target
    /// against its fastest run of one, or the attempts run out. An attempt whose one-thread
    /// runs were all slowed down (the fastest more than ``slowedOne`` below the fastest of
    /// every attempt so far) does not count: it would make two threads look faster than they are.
    private func check(_ mechanism: Mechanism) throws -> Result.Row {
        var fastestOne = 0.0
        var scalings: [Double] = []
        var best = Report.ThreadScaling(mechanism: mechanism, signature: .intInt, oneThread: 0, twoThreads: 0)
        for index in 0..<attempts {
            // 0.25 s before the second attempt, doubling up to 2 s.
            if index > 0 { hb_sleep_ns(UInt64(250_000_000) << min(index - 1, 3)) }
            let rates = try ThreadScalingRun(calls: Self.calls, runs: Self.runs).rates(mechanism)
            let attempt = Report.ThreadScaling(
                mechanism: mechanism, signature: .intInt, oneThread: rates.one.max() ?? 0,
                twoThreads: rates.two.max() ?? 0)
            fastestOne = max(fastestOne, attempt.oneThread)
            scalings.append(attempt.scaling)
            guard attempt.oneThread >= fastestOne * (1 - Self.slowedOne) else { continue }
            if attempt.scaling > best.scaling { best = attempt }
            if attempt.meetsTarget { break }
        }
        var row = Result.Row(best: best, attempts: scalings)
        if best.isTarget && !best.meetsTarget {
            let floor = try ThreadScalingRun(calls: Self.calls, runs: Self.runs).rates(.direct)
            row.floorAfter = (floor.two.max() ?? 0) / max(floor.one.max() ?? 0, 1)
        }
        return row
    }
}

extension ScalingCheck.Result {
    /// The result as lines for a terminal: each kind's best scaling and its attempts, then the verdict.
    func text() -> String {
        var text =
            "Two threads against one on int(int, int): the best of up to \(attempts) attempts (each the fastest of "
            + "\(ScalingCheck.runs) runs, \(Format.fixed(Double(ScalingCheck.calls), 0)) calls per thread and run); "
            + "target ≥ \(Format.ratio(target))\n\n"
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
        let failed = rows.filter { $0.best.isTarget && !$0.best.meetsTarget }
        if failed.isEmpty {
            text += "\npassed: every kind of hook scales to two threads\n"
            return text
        }
        text +=
            "\nFAILED: below \(Format.ratio(target)) in every attempt: "
            + "\(failed.map(\.best.mechanism.title).joined(separator: ", "))\n"
        for row in failed {
            guard let floor = row.floorAfter else { continue }
            text +=
                "after \(row.best.mechanism.title), the direct call made \(Format.ratio(floor))"
                + (floor < target ? ": the machine was busy, rerun on a quiet one\n" : "\n")
        }
        return text
    }
}
