#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Per-thread record of the slots whose blocks are running on this thread.
///
/// A call that arrives at a slot already listed here comes from inside one of its blocks
/// (directly, or through other code); such a call skips the blocks that do not allow
/// re-entry. The record is allocated once per thread, on its first hooked call, and freed
/// when the thread exits; the call path itself allocates nothing.
enum ThreadState {
    /// How many nested dispatches one thread tracks; deeper nesting is not tracked.
    static let capacity = 64

    /// The key of the per-thread record. Slot entries copy it, so the call path does not
    /// pay for the lazy global's initialisation check.
    static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { record in
            record?.deallocate()
        }
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    /// This thread's record: element 0 holds the count, then up to `capacity` entry addresses.
    @inline(__always)
    static func record(_ key: pthread_key_t) -> UnsafeMutablePointer<UInt> {
        if let existing = pthread_getspecific(key) {
            return existing.assumingMemoryBound(to: UInt.self)
        }
        let fresh = UnsafeMutablePointer<UInt>.allocate(capacity: capacity + 1)
        fresh.initialize(repeating: 0, count: capacity + 1)
        pthread_setspecific(key, fresh)
        return fresh
    }

    /// Whether blocks of the entry at `address` are running on this thread.
    @inline(__always)
    static func isActive(_ address: UInt, in record: UnsafeMutablePointer<UInt>) -> Bool {
        let count = Int(record[0])
        var index = 1
        while index <= count {
            if record[index] == address { return true }
            index += 1
        }
        return false
    }

    /// Marks the entry at `address` active; returns whether it was recorded (false when full).
    @inline(__always)
    static func push(_ address: UInt, in record: UnsafeMutablePointer<UInt>) -> Bool {
        let count = Int(record[0])
        guard count < capacity else { return false }
        record[count + 1] = address
        record[0] = UInt(count + 1)
        return true
    }

    /// Removes the most recent mark (made by a successful ``push(_:in:)``).
    @inline(__always)
    static func pop(in record: UnsafeMutablePointer<UInt>) {
        record[0] -= 1
    }

    /// Whether any hook block is running on this thread.
    static var isInsideBlock: Bool {
        guard let existing = pthread_getspecific(key) else { return false }
        return existing.assumingMemoryBound(to: UInt.self)[0] > 0
    }
}
