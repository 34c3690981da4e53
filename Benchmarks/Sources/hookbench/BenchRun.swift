import CHookBench
import CObjCForward
import FFIHook
import HookFixtures

/// One run of every measurement, in one process.
struct BenchRun {
    let plan: SamplingPlan
    let command: String
    /// The signatures whose rows to measure (all of them by default). The inline rows, their
    /// install cost and the thread scaling belong to `int (int, int)`.
    var signatures = BenchSignature.allCases

    /// Measures everything and returns the report with ratios and targets.
    func run() throws -> Report {
        guard objcfwd_prepare() == 0 else {
            throw BenchError("Objective-C forwarding setup failed: \(String(cString: objcfwd_error()))")
        }
        let mechanisms = Mechanism.standard
        let rowCount = signatures.map { signature in mechanisms.filter { $0.applies(to: signature) }.count }
            .reduce(0, +)
        // The inline rows' function and the thread scaling are of int (int, int).
        let includesIntInt = signatures.contains(.intInt)
        var progress = Progress(total: 1 + (includesIntInt ? 3 + Mechanism.threadScaled.count : 0) + rowCount)

        progress.step("install + remove")
        let install = try installCost()
        var inlineInstall: Report.InlineInstallCost?
        if includesIntInt {
            // Before any inline row, so that the first plan of the patch is the one timed.
            progress.step("install + remove · inline")
            inlineInstall = try InlineInstallRun(plan: plan).run()
        }
        var inlineBatch: Report.InlineBatchCost?
        var library: Report.LibraryCost?
        if includesIntInt {
            progress.step("a batch of \(HB_BATCH_COUNT) inline hooks")
            inlineBatch = try InlineBatchRun(plan: plan).run()
            progress.step("\(LibraryRun.library), whole")
            library = try LibraryRun.run()
        }

        var rows: [Report.Row] = []
        for signature in signatures {
            for mechanism in mechanisms where mechanism.applies(to: signature) {
                progress.step("\(mechanism.title) · \(signature.title)")
                rows.append(try mechanism.measure(signature, plan: plan))
            }
        }

        var threads: [Report.ThreadScaling] = []
        let threadRun = ThreadScalingRun(calls: plan.threadCalls, runs: plan.threadRuns)
        for mechanism in Mechanism.threadScaled where includesIntInt {
            progress.step("threads · \(mechanism.title)")
            var row = try threadRun.measure(mechanism)
            if row.isTarget {
                let floor = try threadRun.measure(of: hb_alu_loop)
                row.floor = floor.two / max(floor.one, 1)
            }
            threads.append(row)
        }
        progress.finish()

        var report = Report(
            machine: .current(), command: command, quick: plan.samples < SamplingPlan.full.samples, rows: rows,
            installRemove: install, inlineInstallRemove: inlineInstall, inlineBatch: inlineBatch, library: library,
            threads: threads, targets: [])
        report.computeRatios()
        report.checkTargets()
        return report
    }

    // MARK: - Install and remove

    private func installCost() throws -> Report.InstallCost {
        let signature = BenchSignature.intInt
        let slot = signature.slot
        let types = signature.signature
        let start = hb_now_ns()
        try Hook.before(on: slot, signature: types) { _ in }.remove()
        let first = Double(hb_now_ns() - start)

        var failure: (any Error)?
        let installPlan = SamplingPlan(
            warmUpNanoseconds: 0, warmUpCalls: plan.installPairs, samples: plan.installSamples,
            sampleNanoseconds: 1_000_000, maximumCallsPerSample: plan.installPairs, threadCalls: 0, threadRuns: 0,
            installPairs: 0, installSamples: 0)
        let perPair = Sampler(plan: installPlan).distribution { pairs in
            let start = hb_now_ns()
            for _ in 0..<pairs {
                do {
                    try Hook.before(on: slot, signature: types) { _ in }.remove()
                } catch {
                    failure = error
                }
            }
            return hb_now_ns() - start
        }
        if let failure { throw failure }
        try Hook.waitForReclamation()
        return Report.InstallCost(firstNanoseconds: first, nanosecondsPerPair: perPair)
    }
}
