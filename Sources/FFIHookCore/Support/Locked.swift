internal import CFFIHookSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A value guarded by a `pthread_mutex_t`.
///
/// The standard library's `Synchronization.Mutex` would serve, but on Linux its lock lives in
/// the uninstrumented `libswiftSynchronization`, so ThreadSanitizer cannot see it order the
/// accesses it guards and reports every guarded access as a race. A pthread mutex is
/// intercepted by the sanitizer, which keeps `swift test --sanitize=thread` meaningful.
/// Used only off the call path.
package final class Locked<Value>: @unchecked Sendable {
    // Sendable: `value` is only touched with `mutex` held.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    // Internal, inlinable only through ``withLock(_:)``.
    @usableFromInline
    @exclusivity(unchecked) internal var value: Value
    /// The thread holding the lock (``ffh_this_thread()``), 0 when none does: a thread that
    /// asks for the lock again, from a hook block that runs for a call the library made while
    /// holding it (a hooked `malloc`), is told so rather than waiting for itself for ever.
    private let owner = Atomic<UInt>(0)

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    ///
    /// - Precondition: the calling thread does not hold the lock already (see
    ///   ``isHeldByCurrentThread``).
    @inlinable
    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        lock()
        defer { unlock() }
        return try body(&value)
    }

    /// Takes the lock (see ``withLock(_:)``): out of line, where the callers' specialized
    /// ``withLock(_:)`` runs their bodies on the value in place.
    @usableFromInline
    internal func lock() {
        precondition(
            !isHeldByCurrentThread,
            "a lock of swift-ffi-hook taken again by the thread that holds it: a hook block that runs for a call the library makes while holding it called back into the library"
        )
        pthread_mutex_lock(mutex)
        owner.store(UInt(ffh_this_thread()), ordering: .relaxed)
    }

    /// Releases the lock taken by ``lock()``.
    @usableFromInline
    internal func unlock() {
        owner.store(0, ordering: .relaxed)
        pthread_mutex_unlock(mutex)
    }

    /// Whether the calling thread holds the lock: it runs a block that the library's own
    /// work under the lock set off.
    package var isHeldByCurrentThread: Bool { owner.load(ordering: .relaxed) == UInt(ffh_this_thread()) }

    /// Runs `body` with exclusive access to the value if the lock is free now; `nil` when
    /// another thread, or this one further up its stack, holds it.
    package func withLockIfAvailable<Result>(_ body: (inout Value) -> Result) -> Result? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        owner.store(UInt(ffh_this_thread()), ordering: .relaxed)
        defer {
            owner.store(0, ordering: .relaxed)
            pthread_mutex_unlock(mutex)
        }
        return body(&value)
    }

    /// Has the lock taken before every `fork` and released on both sides after it, so that a
    /// child never finds it held by a thread it does not have. `rank` orders it among the
    /// other locks so protected: a lock taken while another is held ranks higher. For locks
    /// that live as long as the process; call once per lock.
    package func protectAcrossFork(rank: Int32) {
        _ = ffh_fork_protect(mutex, rank)
    }
}
