import CHookBench
import CMallocCounter
import Histogram
import HookFixtures

/// How long to measure: warm-up, number of samples, calls per sample.
struct SamplingPlan: Sendable {
    /// Warm-up lasts at least this long and at least ``warmUpCalls`` calls.
    var warmUpNanoseconds: UInt64
    var warmUpCalls: Int
    /// Samples per row; each one is a timed C loop of many calls.
    var samples: Int
    /// The duration one sample aims at; the calls per sample follow from the warm-up's speed.
    var sampleNanoseconds: UInt64
    /// Upper bound of calls per sample.
    var maximumCallsPerSample: Int
    /// Calls each thread makes in one run of the thread-scaling measurement, and the runs.
    var threadCalls: Int
    var threadRuns: Int
    /// Install-and-remove pairs per sample, and samples, of the install cost.
    var installPairs: Int
    var installSamples: Int

    /// The full run: about a third of a second per row.
    static let full = SamplingPlan(
        warmUpNanoseconds: 20_000_000, warmUpCalls: 1_000, samples: 301, sampleNanoseconds: 1_000_000,
        maximumCallsPerSample: 1_000_000, threadCalls: 2_000_000, threadRuns: 7, installPairs: 100, installSamples: 201)

    /// For CI: a few thousand calls per row.
    static let quick = SamplingPlan(
        warmUpNanoseconds: 0, warmUpCalls: 500, samples: 10, sampleNanoseconds: 1_000_000,
        maximumCallsPerSample: 300, threadCalls: 1_000_000, threadRuns: 3, installPairs: 20, installSamples: 10)
}

/// Nanoseconds per call over the samples of one row.
struct Distribution: Codable, Sendable {
    var median: Double
    var p99: Double
    var samples: Int
    var callsPerSample: Int
}

/// Measures something that makes calls in a timed loop: `timedCalls(n)` makes `n` calls and
/// returns the nanoseconds they took.
struct Sampler {
    let plan: SamplingPlan

    /// Warms up, picks the calls per sample, and records nanoseconds per call of every sample
    /// in a histogram (in picoseconds, for resolution below a nanosecond).
    func distribution(_ timedCalls: (Int) -> UInt64) -> Distribution {
        let callsPerSample = warmUp(timedCalls)
        var histogram = Histogram<UInt64>(numberOfSignificantValueDigits: .three)
        for _ in 0..<plan.samples {
            let nanoseconds = timedCalls(callsPerSample)
            let picosecondsPerCall = Double(nanoseconds) * 1_000 / Double(callsPerSample)
            _ = histogram.record(UInt64(max(1, picosecondsPerCall.rounded())))
        }
        return Distribution(
            median: Double(histogram.valueAtPercentile(50)) / 1_000,
            p99: Double(histogram.valueAtPercentile(99)) / 1_000,
            samples: plan.samples, callsPerSample: callsPerSample)
    }

    /// The row of `mechanism` on `signature`, already installed: checks that a call gives the
    /// original's result, then samples nanoseconds per call and heap allocations per call.
    func row(_ mechanism: Mechanism, _ signature: BenchSignature) throws -> Report.Row {
        guard mechanism.check(signature) else {
            throw BenchError("\(mechanism.title) on \(signature.title) changed the function's result")
        }
        let timed = { (calls: Int) in mechanism.time(signature, iterations: calls) }
        let nanoseconds = distribution(timed)
        let mallocs = mallocsPerCall(calls: max(nanoseconds.callsPerSample, 256), timed)
        return Report.Row(
            signature: signature, mechanism: mechanism, nanosecondsPerCall: nanoseconds, mallocsPerCall: mallocs)
    }

    /// Heap allocations per call, counted around `calls` calls made after warm-up.
    func mallocsPerCall(calls: Int, _ timedCalls: (Int) -> UInt64) -> Double {
        let before = hb_malloc_count()
        _ = timedCalls(calls)
        let after = hb_malloc_count()
        return Double(after - before) / Double(calls)
    }

    /// Runs calls in growing batches until the warm-up is over; returns the calls per sample.
    private func warmUp(_ timedCalls: (Int) -> UInt64) -> Int {
        var batch = 16
        var calls = 0
        var elapsed: UInt64 = 0
        var nanosecondsPerCall = 1.0
        repeat {
            let nanoseconds = timedCalls(batch)
            calls += batch
            elapsed += nanoseconds
            nanosecondsPerCall = max(Double(nanoseconds) / Double(batch), 0.1)
            batch = min(batch * 2, max(16, Int(5_000_000 / nanosecondsPerCall)))
        } while calls < plan.warmUpCalls || elapsed < plan.warmUpNanoseconds
        let wanted = Int(Double(plan.sampleNanoseconds) / nanosecondsPerCall)
        return min(max(wanted, 16), plan.maximumCallsPerSample)
    }
}
