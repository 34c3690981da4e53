import Synchronization

/// A counter shared between threads.
final class Counter: Sendable {
    private let cell = Atomic<Int>(0)

    init() {}

    /// Adds `amount`; returns the new value.
    @discardableResult
    func add(_ amount: Int = 1) -> Int {
        cell.add(amount, ordering: .relaxed).newValue
    }

    var value: Int { cell.load(ordering: .acquiring) }
}

/// What the hook blocks of one slot did, counted by the blocks themselves.
final class SlotTally: Sendable {
    /// Block runs by ``HookKind``.
    let runs = HookKind.allCases.map { _ in Counter() }
    /// Calls a replacing block answered without reaching the original.
    let skipped = Counter()
    /// Calls a re-entering block made through its own slot.
    let nested = Counter()
    /// Nested calls whose result was not the original's.
    let nestedWrong = Counter()
    /// Blocks that found an argument or result inconsistent.
    let blockFaults = Counter()
    /// Blocks that ran after the original and found arguments other than those the
    /// original got.
    let argumentsChanged = Counter()
    /// Runs of a `once` block beyond its first.
    let onceRepeats = Counter()

    init() {}
}

/// Blocks alive: each block holds a ``BlockState``, which counts itself here while it lives.
let liveBlocks = Counter()

/// The state one hook block holds: how often it ran. Its lifetime is the block's, so
/// ``liveBlocks`` falls back to zero only once every removed block has been freed.
final class BlockState: Sendable {
    let once: Bool
    let runCount = Counter()

    init(once: Bool) {
        self.once = once
        liveBlocks.add()
    }

    deinit {
        liveBlocks.add(-1)
    }

    /// Counts a run; for a `once` block, a second run is counted as a repeat in `tally`.
    func ran(_ tally: SlotTally) {
        if runCount.add() > 1 && once { tally.onceRepeats.add() }
    }
}

/// Failures found while running, with the first few described.
final class FailureLog: Sendable {
    private let messages = Mutex<[String]>([])
    private let total = Counter()
    private static let kept = 20

    init() {}

    /// Records a failure of `check`; `describe` runs only for the first few.
    func record(_ check: String, _ describe: () -> String) {
        if total.add() <= Self.kept {
            let message = "\(check): \(describe())"
            messages.withLock { $0.append(message) }
        }
    }

    var count: Int { total.value }
    var samples: [String] { messages.withLock { $0 } }
}

/// Whether the workers should keep going.
let running = Atomic<Bool>(true)

/// A value shared between threads behind a lock.
final class Shared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) {
        mutex = Mutex(value)
    }

    func withLock<Result: Sendable>(_ body: (inout Value) -> Result) -> Result {
        mutex.withLock { body(&$0) }
    }
}
