import HookFixtures

/// Everything one run measured, with the ratios and targets derived from it.
struct Report: Codable, Sendable {
    var machine: Machine
    var command: String
    var quick: Bool
    var rows: [Row]
    var installRemove: InstallCost
    /// Install and removal of an inline hook; nil when the run left out `int (int, int)`.
    var inlineInstallRemove: InlineInstallCost?
    /// A batch of a thousand inline hooks installed and removed; nil when the run left out
    /// `int (int, int)`.
    var inlineBatch: InlineBatchCost?
    /// A real library planned and patched whole; nil when it was left out or is not installed.
    var library: LibraryCost?
    var threads: [ThreadScaling]
    var targets: [TargetCheck]

    /// One mechanism calling one signature.
    struct Row: Codable, Sendable {
        var signature: BenchSignature
        var mechanism: Mechanism
        var nanosecondsPerCall: Distribution
        var mallocsPerCall: Double
        /// Median over the direct call's median, same signature: the call through the slot
        /// for the rows that call through it, the direct `call` of the unpatched function
        /// (``Mechanism/inlineDirect``) for the inline rows and frida's.
        var timesDirect: Double = 0
        /// Median over the closure limit's median (a raw libffi closure calling the original
        /// through a typed pointer), same signature.
        var timesLimit: Double = 0
        /// Median over the raw libffi closure's median, same signature.
        var timesLibffi: Double = 0
        /// Median over the plain Objective-C message send's median, same signature; for the rows
        /// that send a message only (0 for the others).
        var timesMessage: Double = 0
        /// The Objective-C forwarding hook's median over this median, same signature: how many
        /// times faster.
        var forwardingOverThis: Double = 0
    }

    /// The cost of installing one before hook on an already hooked-before slot and removing it.
    struct InstallCost: Codable, Sendable {
        /// The very first install and removal on the slot, which makes its closure.
        var firstNanoseconds: Double
        /// Nanoseconds per install-and-remove pair once the slot's closure exists.
        var nanosecondsPerPair: Distribution
    }

    /// The cost of installing one no-op before hook on an inline function's jump cell and
    /// removing it: each pair writing the jump in and taking it out (the function was not
    /// patched), or with the jump kept by ``FFIHookInline/InlineFunction/patch()`` (only the
    /// cell changes); each alone, and with threads calling the function directly all along.
    struct InlineInstallCost: Codable, Sendable {
        /// Planning the patch, the first `InlineFunction` of the function in the process:
        /// decoding and relocating its first instructions, mapping the stub and trampoline.
        var planNanoseconds: Double
        /// The first hook on the cell, which makes its closure and writes the jump.
        var firstInstallNanoseconds: Double
        /// Removing that hook, which takes the jump out.
        var firstRemoveNanoseconds: Double
        /// Nanoseconds per pair; each install writes the jump and each removal takes it out,
        /// both with the process's other threads stopped.
        var cold: Distribution
        /// The same while ``callerThreads`` threads call the function directly.
        var coldWithCallers: Distribution
        /// Nanoseconds per pair with the jump kept: only the jump cell changes.
        var kept: Distribution
        /// The same while ``callerThreads`` threads call the function directly.
        var keptWithCallers: Distribution
        /// How many threads called the function in the runs with callers.
        var callerThreads: Int
        /// The calls they made, every one of which returned the right sum.
        var callerCalls: Int64
    }

    /// Calls per second of one function from one thread and from two.
    struct ThreadScaling: Codable, Sendable {
        /// The least ``scaling`` the kinds of hook in ``Mechanism/scalingTargets`` must reach: two
        /// threads calling one hooked function make at least this many times the calls of one.
        static let target = 1.6

        var mechanism: Mechanism
        var signature: BenchSignature
        var oneThread: Double
        var twoThreads: Double
        /// Calls per second of two threads over those of one.
        var scaling: Double
        /// For a kind of hook: the scaling of a loop of arithmetic (`hb_alu_loop`) measured
        /// right after the row. A host that runs the two processors on the halves of one core
        /// holds it near 1× and the hooked rows with it; two cores of their own make it 2×.
        var floor: Double?

        init(mechanism: Mechanism, signature: BenchSignature, oneThread: Double, twoThreads: Double) {
            self.mechanism = mechanism
            self.signature = signature
            self.oneThread = oneThread
            self.twoThreads = twoThreads
            scaling = oneThread > 0 ? twoThreads / oneThread : 0
        }

        /// Whether the row is one of the targets' kinds of hook.
        var isTarget: Bool { Mechanism.scalingTargets.contains(mechanism) }

        /// Whether it reaches ``target``.
        var meetsTarget: Bool { scaling >= Self.target }

        /// The target this row meets or not.
        var targetCheck: TargetCheck {
            TargetCheck(
                goal: "two threads make ≥ \(Format.ratio(Self.target)) the calls of one: \(mechanism.title)",
                measured: "\(Format.ratio(scaling)) (\(Format.millionsPerSecond(twoThreads)) vs "
                    + "\(Format.millionsPerSecond(oneThread)))" + busyNote,
                met: meetsTarget)
        }

        /// For a row below the target while the floor was below ``ScalingCheck/quietFloor``:
        /// the machine, not the call path (run `--check-scaling` to tell them apart).
        private var busyNote: String {
            guard !meetsTarget, let floor, floor < ScalingCheck.quietFloor else { return "" }
            return "; the machine was busy: arithmetic without calls made \(Format.ratio(floor)) right after"
        }
    }

    /// One of the goals the library sets itself, and whether this run meets it.
    struct TargetCheck: Codable, Sendable {
        var goal: String
        var measured: String
        var met: Bool
    }

    /// The row of `mechanism` on `signature`.
    func row(_ signature: BenchSignature, _ mechanism: Mechanism) -> Row? {
        rows.first { $0.signature == signature && $0.mechanism == mechanism }
    }

    /// Fills in each row's ratios against the rows of the same signature.
    mutating func computeRatios() {
        rows = Self.withRatios(rows)
    }

    /// `rows` with each row's ratios against the rows of the same signature filled in.
    static func withRatios(_ rows: [Row]) -> [Row] {
        func medianOf(_ signature: BenchSignature, _ mechanism: Mechanism) -> Double? {
            rows.first { $0.signature == signature && $0.mechanism == mechanism }?.nanosecondsPerCall.median
        }
        return rows.map { row in
            var row = row
            let median = row.nanosecondsPerCall.median
            if let direct = medianOf(row.signature, row.mechanism.callsDirectly ? .inlineDirect : .direct) {
                row.timesDirect = median / direct
            }
            if let limit = medianOf(row.signature, .closureLimit) {
                row.timesLimit = median / limit
            }
            if let libffi = medianOf(row.signature, .libffi) {
                row.timesLibffi = median / libffi
            }
            if row.mechanism.isObjectiveC, let message = medianOf(row.signature, .objcMessage) {
                row.timesMessage = median / message
            }
            if let forwarding = medianOf(row.signature, .objcForwardingHook) {
                row.forwardingOverThis = forwarding / median
            }
            return row
        }
    }

    /// The inline rows' goals that their calls meet or not: an inline no-op before+after hook
    /// within 1.2 × the slot's, an inline compiled replacement within 3 × the direct call,
    /// and, when frida's rows are there (`--peers`), the inline hook at least 6 × cheaper
    /// than frida's attach and this library's attach (inline and on the slot) at least 10 ×.
    static func inlineCallTargets(_ rows: [Row]) -> [TargetCheck] {
        let signature = InlineTarget.benchSignature
        func median(_ mechanism: Mechanism) -> Double? {
            rows.first { $0.signature == signature && $0.mechanism == mechanism }?.nanosecondsPerCall.median
        }
        func versus(_ mine: Double, _ other: Double) -> String {
            "\(Format.nanoseconds(mine)) vs \(Format.nanoseconds(other)) ns"
        }
        var targets: [TargetCheck] = []
        if let inline = median(.inlineBeforeAfter), let slot = median(.beforeAfter) {
            let ratio = inline / slot
            targets.append(
                TargetCheck(
                    goal: "inline no-op before+after on a directly called \(signature.title) ≤ 1.2 × the slot's "
                        + "before+after",
                    measured: "\(Format.ratio(ratio)) (\(versus(inline, slot)))", met: ratio <= 1.2))
        }
        if let replace = median(.inlineReplace), let direct = median(.inlineDirect) {
            let ratio = replace / direct
            targets.append(
                TargetCheck(
                    goal: "inline C replacement calling the original ≤ 3 × the direct call",
                    measured: "\(Format.ratio(ratio)) (\(versus(replace, direct)))", met: ratio <= 3))
        }
        if let inline = median(.inlineBeforeAfter), let frida = median(.fridaAttach) {
            let speedup = frida / inline
            targets.append(
                TargetCheck(
                    goal: "inline no-op before+after ≥ 6 × cheaper than frida's attach with empty C listeners",
                    measured: "\(Format.ratio(speedup)) cheaper (\(versus(inline, frida)))", met: speedup >= 6))
        }
        // Each attaches with empty enter and leave code and swaps the return address, as frida
        // does; the inline rows on the same function, called by the same loop, and the second
        // one with C functions, as frida's listeners are.
        for (mechanism, what) in [
            (Mechanism.inlineAttachEnterLeave, "inline attach with empty enter and leave blocks"),
            (.inlineAttachFunctions, "inline attach with empty C functions"),
            (.attachEnterLeave, "attach on the slot with empty enter and leave blocks"),
        ] {
            guard let attach = median(mechanism), let frida = median(.fridaAttach) else { continue }
            let speedup = frida / attach
            targets.append(
                TargetCheck(
                    goal: "\(what) ≥ 10 × cheaper than frida's attach with empty C listeners",
                    measured: "\(Format.ratio(speedup)) cheaper (\(versus(attach, frida)))", met: speedup >= 10))
        }
        return targets
    }

    /// Checks the run against the library's performance goals.
    mutating func checkTargets() {
        targets = []
        if let hooked = row(.intInt, .beforeAfter), let libffi = row(.intInt, .libffi) {
            let ratio = hooked.nanosecondsPerCall.median / libffi.nanosecondsPerCall.median
            targets.append(
                TargetCheck(
                    goal: "no-op before+after hook on int(int, int) ≤ 1.2 × the raw libffi closure",
                    measured: "\(Format.ratio(ratio)) (\(Format.nanoseconds(hooked.nanosecondsPerCall.median)) vs "
                        + "\(Format.nanoseconds(libffi.nanosecondsPerCall.median)) ns)",
                    met: ratio <= 1.2))
        }
        if let hooked = row(.intInt, .beforeAfter), let forwarding = row(.intInt, .objcForwardingHook) {
            let speedup = forwarding.nanosecondsPerCall.median / hooked.nanosecondsPerCall.median
            targets.append(
                TargetCheck(
                    goal: "≥ 50 × faster than Objective-C message forwarding on int(int, int)",
                    measured: "\(Format.ratio(speedup)) faster", met: speedup >= 50))
        }
        for signature in [BenchSignature.intInt, .struct40] {
            guard let hooked = row(signature, .objcHookBeforeAfter),
                let forwarding = row(signature, .objcForwardingHook)
            else { continue }
            let speedup = forwarding.nanosecondsPerCall.median / hooked.nanosecondsPerCall.median
            targets.append(
                TargetCheck(
                    goal: "Objective-C method \(signature.methodTitle): class-wide no-op before+after hook "
                        + "≥ 50 × faster than the forwarding hook",
                    measured:
                        "\(Format.ratio(speedup)) faster (\(Format.nanoseconds(hooked.nanosecondsPerCall.median)) "
                        + "vs \(Format.nanoseconds(forwarding.nanosecondsPerCall.median)) ns)",
                    met: speedup >= 50))
        }
        for signature in [BenchSignature.intInt, .struct40] {
            guard let classWide = row(signature, .objcHookBeforeAfter),
                let instance = row(signature, .objcInstanceHookBeforeAfter)
            else { continue }
            let ratio = instance.nanosecondsPerCall.median / classWide.nanosecondsPerCall.median
            targets.append(
                TargetCheck(
                    goal: "Objective-C method \(signature.methodTitle): per-instance no-op before+after hook "
                        + "≤ 1.5 × the class-wide one",
                    measured:
                        "\(Format.ratio(ratio)) (\(Format.nanoseconds(instance.nanosecondsPerCall.median)) "
                        + "vs \(Format.nanoseconds(classWide.nanosecondsPerCall.median)) ns)",
                    met: ratio <= 1.5))
        }
        targets += Self.inlineCallTargets(rows)
        let hookRows = rows.filter(\.mechanism.isHook)
        let invocationRows = hookRows.filter { $0.mechanism != .typedBeforeAfter }
        let typedRows = hookRows.filter { $0.mechanism == .typedBeforeAfter }
        let invocationMost = invocationRows.map(\.mallocsPerCall).max() ?? 0
        let typedAllocating = typedRows.filter { $0.mallocsPerCall > 0 }
        var measured =
            "Invocation and attach blocks: \(Format.mallocs(invocationMost)) at most (\(invocationRows.count) rows)"
        if typedAllocating.isEmpty {
            measured += "; typed blocks: 0"
        } else {
            let counts = typedAllocating.map(\.mallocsPerCall)
            measured +=
                "; typed blocks: \(Format.mallocs(counts.min() ?? 0))–\(Format.mallocs(counts.max() ?? 0)) "
                + "on \(typedAllocating.count) of \(typedRows.count) signatures"
        }
        targets.append(
            TargetCheck(
                goal: "zero heap allocations per hooked call, every signature", measured: measured,
                met: invocationMost == 0 && typedAllocating.isEmpty))
        let install = installRemove.nanosecondsPerPair.median
        targets.append(
            TargetCheck(
                goal: "install + remove of one hook < 10 µs",
                measured: "\(Format.microseconds(install)) µs (first on a slot: "
                    + "\(Format.microseconds(installRemove.firstNanoseconds)) µs)",
                met: install < 10_000))
        if let inline = inlineInstallRemove {
            let median = inline.coldWithCallers.median
            targets.append(
                TargetCheck(
                    goal: "install + remove of an inline hook < 1 ms with \(inline.callerThreads) threads calling "
                        + "the function",
                    measured: "\(Format.microseconds(median)) µs, each pair writing the jump in and out "
                        + "(jump kept: \(Format.microseconds(inline.keptWithCallers.median)) µs)",
                    met: median < 1_000_000))
        }
        targets += batchTargets
        targets += threads.filter(\.isTarget).map(\.targetCheck)
    }
}
