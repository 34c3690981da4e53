import CHookBench
import HookFixtures

/// Calls per second of one mechanism on `int (int, int)` from one thread and from two, each
/// thread running the mechanism's C loop (``Mechanism/callLoop``) on its own.
struct ThreadScalingRun {
    /// Calls each thread makes in one run.
    let calls: Int
    /// Runs of one thread and of two, alternated; the medians are reported.
    let runs: Int

    /// Calls per second of every run: one thread's, and two threads' together, alternated
    /// starting and ending with one thread (`one` has a run more than `two`).
    struct Rates {
        var one: [Double]
        var two: [Double]
    }

    /// The medians of ``rates(_:)``, as the report's thread rows give them.
    func measure(_ mechanism: Mechanism) throws -> Report.ThreadScaling {
        let rates = try rates(mechanism)
        return Report.ThreadScaling(
            mechanism: mechanism, signature: .intInt, oneThread: Self.median(rates.one),
            twoThreads: Self.median(rates.two))
    }

    /// The medians of ``rates(of:)``: one thread's calls per second, and two threads'.
    func measure(of loop: hb_call_loop) throws -> (one: Double, two: Double) {
        let rates = try rates(of: loop)
        return (Self.median(rates.one), Self.median(rates.two))
    }

    /// Installs `mechanism`, checks a call, warms up with two threads, measures, removes it.
    func rates(_ mechanism: Mechanism) throws -> Rates {
        let signature = BenchSignature.intInt
        let tokens = try mechanism.install(on: signature)
        defer { try? mechanism.remove(tokens, from: signature) }
        guard mechanism.check(signature) else {
            throw BenchError("\(mechanism.title) on \(signature.title) changed the function's result")
        }
        return try rates(of: mechanism.callLoop)
    }

    /// Calls per second of `loop` (on `int (int, int)`), warmed up with two threads.
    func rates(of loop: hb_call_loop) throws -> Rates {
        let signature = BenchSignature.intInt
        _ = hb_time_threaded_calls(loop, signature.c, 2, Int64(max(calls / 10, 1)))
        var rates = Rates(one: [], two: [])
        // Alternate, so that a slow phase of the machine affects both alike.
        for _ in 0..<runs {
            rates.one.append(try callsPerSecond(loop, signature, threads: 1))
            rates.two.append(try callsPerSecond(loop, signature, threads: 2))
        }
        // And one thread last, so that every run of two has a run of one on either side.
        rates.one.append(try callsPerSecond(loop, signature, threads: 1))
        return rates
    }

    private func callsPerSecond(_ loop: hb_call_loop, _ signature: BenchSignature, threads: Int) throws -> Double {
        let nanoseconds = hb_time_threaded_calls(loop, signature.c, Int32(threads), Int64(calls))
        guard nanoseconds > 0 else { throw BenchError("cannot start \(threads) threads") }
        return Double(threads * calls) / Double(nanoseconds) * 1e9
    }

    private static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }
}
