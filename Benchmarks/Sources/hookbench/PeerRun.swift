import CHookBench
import HookFixtures

/// frida-gum's Interceptor beside this library's hooks and the floors, on one function, in
/// one process: `hookbench --peers`.
///
/// Every row calls `hb_add_padded`, `hb_add` with room for frida's patch: the slot rows
/// through the slot of `int (int, int)` from the same C loop as the main run; the inline rows
/// and frida's directly, a `call rel32` from another C loop, since both patch the function
/// itself. frida attaches before the first row, so that every row runs with its agent loaded
/// (and the inline patches stop its threads too while they write).
struct PeerRun {
    let plan: SamplingPlan
    let command: String
    /// The program that attaches frida to this process (`Benchmarks/Peers/frida-peer.py`).
    let driver: String

    /// The floors and this library's hooks, installed as in the main run; the inline attach
    /// last, so that it sits beside frida's attach, the first of ``peerMechanisms``.
    static let ownMechanisms: [Mechanism] = [
        .direct, .closureLimit, .libffi, .beforeAfter, .instead, .typedBeforeAfter, .attachEnterLeave,
        .inlineDirect, .inlinePassThrough, .inlineBeforeAfter, .inlineInstead, .inlineReplace,
        .inlineAttachEnterLeave, .inlineAttachFunctions,
    ]

    /// What frida installs.
    static let peerMechanisms = Mechanism.allCases.filter(\.isPeer)

    /// Attaches frida, measures every row and returns the report with its ratios.
    func run() throws -> PeerReport {
        let signature = BenchSignature.intInt
        hb_use_padded_int_int()
        guard let function = UnsafeRawPointer(hb_original(signature.c)) else { throw BenchError("no function") }
        var progress = Progress(total: 1 + Self.ownMechanisms.count + Self.peerMechanisms.count)
        progress.step("attaching frida")
        let frida = try FridaPeer(driver: driver, function: function)

        var rows: [Report.Row] = []
        for mechanism in Self.ownMechanisms {
            progress.step("\(mechanism.title) · \(signature.title)")
            rows.append(try mechanism.measure(signature, plan: plan))
        }
        let entry = function.load(as: UInt8.self)
        for mechanism in Self.peerMechanisms {
            progress.step("\(mechanism.title) · \(signature.title)")
            try frida.install(mechanism)
            let row = Result {
                // frida patches the function itself: its first byte becomes a jump.
                guard function.load(as: UInt8.self) != entry else {
                    throw BenchError("\(mechanism.title) left the function's first bytes as they were")
                }
                return try Sampler(plan: plan).row(mechanism, signature)
            }
            try frida.remove()
            rows.append(try row.get())
        }
        try frida.finish()
        progress.finish()

        rows = Report.withRatios(rows)
        return PeerReport(
            machine: .current(), command: command, quick: plan.samples < SamplingPlan.full.samples,
            function: "hb_add_padded: int(int, int), an addition after 16 bytes of no-ops that frida can move; "
                + "called through its slot from a C loop (the slot rows), or directly, a call rel32 from a C loop "
                + "(the inline rows and frida's, which patch the function)",
            frida: frida.version, rows: rows, timesBeforeAfter: PeerReport.ratiosToBeforeAfter(rows),
            targets: Report.inlineCallTargets(rows))
    }
}
