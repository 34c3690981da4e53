import CHookBench
import CObjCForward
import HookFixtures

/// `hookbench --check-scaling`: whether two threads calling one hooked function make at least
/// ``Report/ThreadScaling/target`` times the calls of one thread, for each kind of hook in
/// ``Mechanism/scalingTargets``. A call path that writes memory every calling thread shares (a
/// reference count, a counter, a cache line two threads' records share) makes two threads no
/// faster than one, or slower.
///
/// Each attempt makes a few runs of one thread and of two, alternated, beginning and ending
/// with one, and sets its best run of two threads against the faster of the runs of one on
/// either side of it (``scaling(of:_:)``). A kind gets up to ``attempts`` attempts, each later
/// one after a longer pause (a busy phase of the machine lasts a while), and keeps its best.
/// Right after each attempt the direct call through the slot and a loop of arithmetic
/// (`hb_alu_loop`) are measured the same way, and the lesser of their scalings is the
/// attempt's floor: a host that takes back one of the two processors, or runs both on the two
/// halves of one core, slows two threads and not one, so an attempt below the target counts
/// against the call path only when the floor reached ``quietFloor`` in the same attempt. A
/// kind fails when it never reached the target and at least one attempt had that floor; when
/// none had, the check cannot tell, and says so (exit status 2: a guard that cannot judge does
/// not pass).
struct ScalingCheck {
    /// Calls each thread makes in one run, and runs of one thread and of two per attempt.
    static let calls = 1_000_000
    static let runs = 3
    /// The floor's scaling that shows both processors were there for an attempt.
    static let quietFloor = 1.9

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

        /// One kind: its best attempt, every attempt's scaling, and the direct call's scaling
        /// measured right after each attempt.
        struct Row: Codable, Sendable {
            var best: Report.ThreadScaling
            var attempts: [Double]
            var floors: [Double]

            /// Whether the kind missed the target with both processors there in some attempt.
            var failed: Bool {
                best.isTarget && !best.meetsTarget && floors.contains { $0 >= ScalingCheck.quietFloor }
            }
            /// Whether the kind missed the target only in attempts on a busy machine.
            var undecided: Bool { best.isTarget && !best.meetsTarget && !failed }
        }

        /// Whether every kind of hook reached the target.
        var passed: Bool
        /// `passed`, `failed` (a kind below the target while the floor showed both processors
        /// there) or `undecided` (below it only on a busy machine); the exit status is 0, 1 or 2.
        var verdict: String

        init(target: Double, attempts: Int, rows: [Row]) {
            self.target = target
            self.attempts = attempts
            self.rows = rows
            passed = rows.allSatisfy { !$0.best.isTarget || $0.best.meetsTarget }
            verdict = passed ? "passed" : rows.contains(where: \.failed) ? "failed" : "undecided"
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

    /// Attempts `mechanism` until an attempt reaches the target, or the attempts run out.
    /// ``scaling(of:)`` judges an attempt.
    private func check(_ mechanism: Mechanism) throws -> Result.Row {
        var row = Result.Row(
            best: Report.ThreadScaling(mechanism: mechanism, signature: .intInt, oneThread: 0, twoThreads: 0),
            attempts: [], floors: [])
        let run = ThreadScalingRun(calls: Self.calls, runs: Self.runs)
        for index in 0..<attempts {
            // 0.25 s before the second attempt, doubling up to 2 s.
            if index > 0 { hb_sleep_ns(UInt64(250_000_000) << min(index - 1, 3)) }
            let attempt = Self.scaling(of: try run.rates(mechanism), mechanism)
            row.attempts.append(attempt.scaling)
            if mechanism != .direct {
                let direct = Self.scaling(of: try run.rates(.direct), .direct).scaling
                let arithmetic = Self.scaling(of: try run.rates(of: hb_alu_loop), .direct).scaling
                row.floors.append(min(direct, arithmetic))
            }
            if attempt.scaling > row.best.scaling { row.best = attempt }
            if attempt.meetsTarget { break }
        }
        return row
    }

    /// An attempt's scaling: its best run of two threads against the faster of the runs of one
    /// on either side of it. The host's speed changes from one moment to the next, by half at
    /// times: a run of two set against runs of one from another moment would be judged by the
    /// host, and one set against its neighbours only is slowed or sped up with them, unless the
    /// host changes speed within the run itself.
    static func scaling(of rates: ThreadScalingRun.Rates, _ mechanism: Mechanism) -> Report.ThreadScaling {
        var best = Report.ThreadScaling(mechanism: mechanism, signature: .intInt, oneThread: 0, twoThreads: 0)
        for (index, two) in rates.two.enumerated() where index + 1 < rates.one.count {
            let one = max(rates.one[index], rates.one[index + 1])
            let pair = Report.ThreadScaling(mechanism: mechanism, signature: .intInt, oneThread: one, twoThreads: two)
            if pair.scaling > best.scaling { best = pair }
        }
        return best
    }
}

extension ScalingCheck.Result {
    /// The result as lines for a terminal: each kind's best scaling and its attempts (each with
    /// the direct call's scaling right after it), then the verdict.
    func text() -> String {
        var text =
            "Two threads against one on int(int, int): the best of up to \(attempts) attempts (each the fastest of "
            + "\(ScalingCheck.runs) runs, \(Format.fixed(Double(ScalingCheck.calls), 0)) calls per thread and run); "
            + "target ≥ \(Format.ratio(target)); in parentheses, the floor right after each attempt (the lesser of "
            + "the direct call's scaling and arithmetic's)\n\n"
        let table = rows.map { row in
            [
                row.best.mechanism.title, Format.millionsPerSecond(row.best.oneThread),
                Format.millionsPerSecond(row.best.twoThreads), Format.ratio(row.best.scaling),
                row.best.isTarget ? (row.best.meetsTarget ? "met" : "NOT MET") : "floor",
                row.attempts.indices.map { index in
                    Format.ratio(row.attempts[index])
                        + (index < row.floors.count ? " (\(Format.ratio(row.floors[index])))" : "")
                }.joined(separator: " "),
            ]
        }
        text += Report.aligned(
            [["Kind", "1 thread", "2 threads", "scaling", "target", "attempts"]] + table, rightAlignedFrom: 1)
        if passed {
            text += "\npassed: every kind of hook scales to two threads\n"
            return text
        }
        let failed = rows.filter(\.failed)
        if !failed.isEmpty {
            text +=
                "\nFAILED: below \(Format.ratio(target)) in every attempt, while the floor scaled to "
                + "\(Format.ratio(ScalingCheck.quietFloor)) or more: \(failed.map(\.best.mechanism.title).joined(separator: ", "))\n"
        }
        let undecided = rows.filter(\.undecided)
        if !undecided.isEmpty {
            text +=
                "\nUNDECIDED: below \(Format.ratio(target)) only while the floor scaled below "
                + "\(Format.ratio(ScalingCheck.quietFloor)) too (the machine was busy; rerun on a quiet one): "
                + "\(undecided.map(\.best.mechanism.title).joined(separator: ", "))\n"
        }
        return text
    }
}
