import FFIHook

/// What callers saw on one slot, summed from the results they decoded (see ``Marks``).
struct SlotCalls {
    var calls = 0
    var before = 0
    var passthrough = 0
    var after = 0
    var replaced = 0
    var bad = 0

    static func + (lhs: SlotCalls, rhs: SlotCalls) -> SlotCalls {
        SlotCalls(
            calls: lhs.calls + rhs.calls, before: lhs.before + rhs.before,
            passthrough: lhs.passthrough + rhs.passthrough, after: lhs.after + rhs.after,
            replaced: lhs.replaced + rhs.replaced, bad: lhs.bad + rhs.bad)
    }
}

/// A thread that calls random slots of the table through C with random arguments, until
/// told to stop, and checks each result against the marks hooks may leave.
struct Caller: Sendable {
    let id: Int
    let seed: UInt64
    let failures: FailureLog
    /// Calls made so far, updated now and then for progress lines.
    let progress: Counter
    /// Where the caller leaves its totals when it stops.
    let totals: Shared<[SlotCalls]>

    func run() {
        var random = SoakRandom(seed: seed &+ UInt64(id))
        var seen = Array(repeating: SlotCalls(), count: SlotShape.allCases.count)
        var sinceReport = 0
        while running.load(ordering: .relaxed) {
            let shape = SlotShape(rawValue: random.below(SlotShape.allCases.count)) ?? .add
            let input = CallInput(&random)
            seen[shape.rawValue].calls += 1
            let result = shape.call(input)
            if let result, let decoded = Marks.decode(result, a: input.a, b: input.b, rest: shape.rest(input)) {
                seen[shape.rawValue].before += decoded.before
                seen[shape.rawValue].passthrough += decoded.passthrough
                seen[shape.rawValue].after += decoded.after
                seen[shape.rawValue].replaced += decoded.replaced ? 1 : 0
            } else {
                seen[shape.rawValue].bad += 1
                failures.record("results") {
                    let shown = result.map { "0x" + String($0, radix: 16) } ?? "an inconsistent value"
                    return "\(shape) with a=\(input.a) b=\(input.b) returned \(shown)"
                }
            }
            sinceReport += 1
            if sinceReport == 4096 {
                progress.add(sinceReport)
                sinceReport = 0
            }
        }
        progress.add(sinceReport)
        totals.withLock { totals in
            for index in totals.indices { totals[index] = totals[index] + seen[index] }
        }
    }
}

/// A thread that waits for reclamation every few milliseconds until told to stop.
struct Reclaimer: Sendable {
    let failures: FailureLog
    let rounds: Counter
    /// The longest wait, in microseconds.
    let longest: Shared<Double>
    /// Waits longer than 10 ms and longer than 100 ms.
    let slow: Counter
    let verySlow: Counter

    func run() {
        while running.load(ordering: .relaxed) {
            sleep(seconds: 0.005)
            let start = monotonicSeconds()
            do {
                try Hook.waitForReclamation()
            } catch {
                failures.record("reclamation") { "waitForReclamation() threw \(error)" }
            }
            let waited = (monotonicSeconds() - start) * 1e6
            rounds.add()
            if waited > 10_000 { slow.add() }
            if waited > 100_000 { verySlow.add() }
            longest.withLock { $0 = max($0, waited) }
        }
    }
}
