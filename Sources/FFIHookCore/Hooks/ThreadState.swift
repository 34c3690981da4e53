internal import CHookSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Per-thread state of the call path: whether the thread is inside a hooked call, and the
/// slots whose blocks are running on it.
///
/// **Calls in flight.** A thread's record holds a generation that is odd while the thread
/// is inside an (outermost) hooked call and even outside. Only the thread writes it, with
/// plain stores: no shared cache line, no locked instruction. A writer that replaced hook
/// state issues a process-wide memory barrier (Linux `membarrier`), then waits until every
/// thread whose generation was odd has moved on; after that no call can still read what was
/// replaced. Where `membarrier` is unavailable, readers fence after entering instead.
///
/// **Re-entry.** A call that arrives at a slot already listed in the record comes from
/// inside one of its blocks; such a call skips the blocks that do not allow re-entry.
///
/// A record is allocated on the thread's first hooked call and registered with the slot
/// registry; it is freed after the thread exits, once no reclamation still watches it.
/// The call path itself allocates nothing.
enum ThreadState {
    /// How many nested dispatches one thread tracks for re-entry; deeper ones are not tracked.
    static let capacity = 64

    // Record layout, in machine words.
    private static let generationIndex = 0
    private static let depthIndex = 1
    private static let markCountIndex = 2
    private static let firstMarkIndex = 3
    static let recordWords = firstMarkIndex + capacity

    /// Whether writers can make readers' memory barriers for them.
    static let usesMembarrier: Bool = chooksupport_membarrier_register() == 0

    /// The key of the per-thread record. Slot entries copy it, so the call path does not
    /// pay for the lazy global's initialisation check.
    static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { record in
            guard let record else { return }
            SlotRegistry.shared.threadExited(record.assumingMemoryBound(to: UInt.self))
        }
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    /// This thread's record, made and registered on first use.
    @inline(__always)
    static func record(_ key: pthread_key_t) -> UnsafeMutablePointer<UInt> {
        if let existing = pthread_getspecific(key) {
            return existing.assumingMemoryBound(to: UInt.self)
        }
        let fresh = UnsafeMutablePointer<UInt>.allocate(capacity: recordWords)
        fresh.initialize(repeating: 0, count: recordWords)
        SlotRegistry.shared.threadStarted(fresh)
        pthread_setspecific(key, fresh)
        return fresh
    }

    // MARK: - Calls in flight

    /// The generation word of a record, for atomic access.
    @inline(__always)
    static func generation(_ record: UnsafeMutablePointer<UInt>) -> UnsafeMutablePointer<Atomic<UInt>> {
        UnsafeMutableRawPointer(record + generationIndex).assumingMemoryBound(to: Atomic<UInt>.self)
    }

    /// Marks the thread inside a hooked call; `fence` when writers cannot supply the barrier.
    @inline(__always)
    static func enterCall(_ record: UnsafeMutablePointer<UInt>, fence: Bool) {
        let depth = record[depthIndex]
        record[depthIndex] = depth + 1
        guard depth == 0 else { return }
        let cell = generation(record)
        cell.pointee.store(cell.pointee.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
        if fence {
            atomicMemoryFence(ordering: .sequentiallyConsistent)
        } else {
            chooksupport_compiler_barrier()
        }
    }

    /// Marks the end of a call begun with ``enterCall(_:fence:)``.
    @inline(__always)
    static func leaveCall(_ record: UnsafeMutablePointer<UInt>) {
        let depth = record[depthIndex] - 1
        record[depthIndex] = depth
        guard depth == 0 else { return }
        let cell = generation(record)
        cell.pointee.store(cell.pointee.load(ordering: .relaxed) &+ 1, ordering: .releasing)
    }

    // MARK: - Re-entry marks

    /// Whether blocks of the entry at `address` are running on this thread.
    @inline(__always)
    static func isActive(_ address: UInt, in record: UnsafeMutablePointer<UInt>) -> Bool {
        let end = firstMarkIndex + Int(record[markCountIndex])
        var index = firstMarkIndex
        while index < end {
            if record[index] == address { return true }
            index += 1
        }
        return false
    }

    /// Marks the entry at `address` active; returns whether it was recorded (false when full).
    @inline(__always)
    static func push(_ address: UInt, in record: UnsafeMutablePointer<UInt>) -> Bool {
        let count = Int(record[markCountIndex])
        guard count < capacity else { return false }
        record[firstMarkIndex + count] = address
        record[markCountIndex] = UInt(count + 1)
        return true
    }

    /// Removes the most recent mark (made by a successful ``push(_:in:)``).
    @inline(__always)
    static func pop(in record: UnsafeMutablePointer<UInt>) {
        record[markCountIndex] -= 1
    }

    /// Whether this thread is inside a hooked call (in a block, or in an original a hook called).
    static var isInsideHookedCall: Bool {
        guard let existing = pthread_getspecific(key) else { return false }
        return existing.assumingMemoryBound(to: UInt.self)[depthIndex] > 0
    }
}
