import Synchronization

/// Counts the calls in flight through one slot, so that state replaced by a writer is
/// freed only once no call can still read it.
///
/// Calls register in one of two counters chosen by the parity of an epoch. A writer that
/// wants to free what it retired advances the epoch, so new calls count in the other
/// counter, and waits until the old counter drains: every call that might have seen the
/// retired state has then left. A call re-reads the epoch after registering, so it never
/// counts in a counter that a writer has already stopped waiting for.
final class CallEpoch: Sendable {
    private let epoch = Atomic<Int>(0)
    private let even = Atomic<Int>(0)
    private let odd = Atomic<Int>(0)

    /// Registers a call; pass the result to ``leave(_:)``.
    @inline(__always)
    func enter() -> Int {
        while true {
            let current = epoch.load(ordering: .sequentiallyConsistent)
            let parity = current & 1
            add(1, to: parity)
            if epoch.load(ordering: .sequentiallyConsistent) == current { return parity }
            add(-1, to: parity)
        }
    }

    /// Ends a call registered by ``enter()``.
    @inline(__always)
    func leave(_ parity: Int) {
        add(-1, to: parity)
    }

    /// Moves new calls to the other counter; returns the parity whose calls must drain.
    /// Writers call this with their lock held, one at a time.
    func advance() -> Int {
        epoch.add(1, ordering: .sequentiallyConsistent).oldValue & 1
    }

    /// Whether every call registered under `parity` has left.
    func isDrained(_ parity: Int) -> Bool {
        let count =
            parity == 0 ? even.load(ordering: .sequentiallyConsistent) : odd.load(ordering: .sequentiallyConsistent)
        return count == 0
    }

    @inline(__always)
    private func add(_ delta: Int, to parity: Int) {
        if parity == 0 {
            even.add(delta, ordering: .sequentiallyConsistent)
        } else {
            odd.add(delta, ordering: .sequentiallyConsistent)
        }
    }
}
