import CHookBench
import FFIHook
import FFIHookInline
import HookFixtures

/// The function the inline rows hook in its own code: `hb_add_padded`, `int (int, int)`, the
/// slot rows' signature, called directly from a C loop (a `call rel32`, which no slot or
/// import entry can redirect). frida's rows in `--peers` patch the same function.
///
/// Its first bytes are `push rbp; mov rbp, rsp` and a long no-op, then the addition: the
/// patch moves the prologue and the no-op into the trampoline. The no-ops are there for
/// frida, which overwrites 16 bytes; the inline patch needs 5.
enum InlineTarget {
    /// The function's C name, for the report.
    static let name = "hb_add_padded"

    /// The signature whose slot rows the inline rows are set beside.
    static let benchSignature = BenchSignature.intInt

    /// The function's address.
    static var address: UnsafeRawPointer {
        guard let address = hb_direct_function() else { fatalError("hb_direct_function returned NULL") }
        return UnsafeRawPointer(address)
    }

    /// The function as an ``FFIHookInline/InlineFunction``. The planner keeps one patch per
    /// address: the first call plans it (decodes, relocates, maps the stub and trampoline),
    /// later ones return the same patch.
    static func function() throws(HookError) -> InlineFunction {
        try InlineFunction(address: address)
    }

    /// Puts the compiled replacement `hb_add_replacement` in the function's jump cell; the
    /// replacement calls the token's original, the trampoline.
    static func replace() throws -> ReplacementToken {
        let function = try function()
        // The replacement may run as soon as the cell holds it: give it the trampoline first,
        // which is what the token will name as the original of an unhooked cell.
        hb_set_replacement_original(UnsafeMutableRawPointer(mutating: function.original))
        let token = try Hook.replace(
            on: function.slot, with: hb_add_replacement as @convention(c) (Int32, Int32) -> Int32)
        guard let original = token.original else {
            token.remove()
            throw BenchError("the inline replacement has no original")
        }
        hb_set_replacement_original(UnsafeMutableRawPointer(mutating: original))
        return token
    }
}

/// Installing and removing one no-op before hook on ``InlineTarget``'s function, with and
/// without the jump kept, with and without threads calling the function.
struct InlineInstallRun {
    /// Samples and pairs per sample, as for the slot's install cost.
    let plan: SamplingPlan
    /// How many threads call the function in the runs with callers (the target
    /// speaks of four).
    static let callerThreads = 4

    /// Measures everything; call it before any other inline row, so that the first plan of
    /// the patch is timed.
    func run() throws -> Report.InlineInstallCost {
        let types = InlineTarget.benchSignature.signature
        var start = hb_now_ns()
        let function = try InlineTarget.function()
        let planned = Double(hb_now_ns() - start)
        guard !function.isPatched, !function.isKeptPatched else {
            throw BenchError("\(function.name) is patched before the install rows")
        }

        // The first hook makes the cell's closure and writes the jump; its removal takes it out.
        start = hb_now_ns()
        let first = try Hook.before(on: function.slot, signature: types) { _ in }
        let firstInstall = Double(hb_now_ns() - start)
        guard function.isPatched, hb_check_direct() != 0 else {
            throw BenchError("the first inline hook did not patch \(function.name), or changed its result")
        }
        start = hb_now_ns()
        first.remove()
        let firstRemove = Double(hb_now_ns() - start)
        guard !function.isPatched else { throw BenchError("removing the only inline hook left the jump in") }

        let cold = try pairs(on: function, types, callers: 0, plan: batchedPlan)
        let coldWithCallers = try pairs(on: function, types, callers: Self.callerThreads, plan: onePairPlan)
        try function.patch()
        let kept: (pairs: Distribution, calls: Int64)
        let keptWithCallers: (pairs: Distribution, calls: Int64)
        do {
            kept = try pairs(on: function, types, callers: 0, plan: batchedPlan)
            keptWithCallers = try pairs(on: function, types, callers: Self.callerThreads, plan: batchedPlan)
        } catch {
            try? function.unpatch()
            throw error
        }
        try function.unpatch()
        try Hook.waitForReclamation()
        guard !function.isPatched, hb_check_direct() != 0 else {
            throw BenchError("\(function.name) is still patched after the install rows, or returns a wrong sum")
        }
        return Report.InlineInstallCost(
            planNanoseconds: planned, firstInstallNanoseconds: firstInstall, firstRemoveNanoseconds: firstRemove,
            cold: cold.pairs, coldWithCallers: coldWithCallers.pairs, kept: kept.pairs,
            keptWithCallers: keptWithCallers.pairs, callerThreads: Self.callerThreads,
            callerCalls: coldWithCallers.calls + keptWithCallers.calls)
    }

    /// Samples of many pairs each, as for the slot's install cost.
    private var batchedPlan: SamplingPlan {
        SamplingPlan(
            warmUpNanoseconds: 0, warmUpCalls: plan.installPairs, samples: plan.installSamples,
            sampleNanoseconds: 1_000_000, maximumCallsPerSample: plan.installPairs, threadCalls: 0, threadRuns: 0,
            installPairs: 0, installSamples: 0)
    }

    /// One pair per sample, half as many samples (at least 10) after 16 pairs of warm-up: for
    /// the pairs that write the jump while threads call the function, which take milliseconds
    /// where the machine has fewer processors than threads.
    private var onePairPlan: SamplingPlan {
        SamplingPlan(
            warmUpNanoseconds: 0, warmUpCalls: 16, samples: max(plan.installSamples / 2, 10), sampleNanoseconds: 1,
            maximumCallsPerSample: 1, threadCalls: 0, threadRuns: 0, installPairs: 0, installSamples: 0)
    }

    /// Nanoseconds per install-and-remove pair of a no-op before hook on the function's cell,
    /// sampled as `plan` says, while `callers` threads call the function directly and check
    /// every result; and the calls they made.
    private func pairs(
        on function: InlineFunction, _ types: Signature, callers: Int, plan: SamplingPlan
    ) throws -> (pairs: Distribution, calls: Int64) {
        let cell = function.slot
        if callers > 0 {
            guard hb_direct_callers_start(Int32(callers)) == 0 else {
                throw BenchError("cannot start \(callers) threads calling \(function.name)")
            }
        }
        var failure: (any Error)?
        let distribution = Sampler(plan: plan).distribution { count in
            let start = hb_now_ns()
            for _ in 0..<count {
                do {
                    try Hook.before(on: cell, signature: types) { _ in }.remove()
                } catch {
                    failure = error
                }
            }
            return hb_now_ns() - start
        }
        var calls: Int64 = 0
        if callers > 0 {
            var wrong: Int64 = 0
            calls = hb_direct_callers_stop(&wrong)
            guard wrong == 0 else {
                throw BenchError(
                    "\(wrong) of \(calls) calls of \(function.name) returned a wrong sum while its inline hook came and went"
                )
            }
            guard calls > 0 else { throw BenchError("the threads calling \(function.name) made no call") }
        }
        if let failure { throw failure }
        return (distribution, calls)
    }
}
