internal import CFFIHookSupport

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
    private var value: Value

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
    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Runs `body` with exclusive access to the value if the lock is free now; `nil` when
    /// another thread, or this one further up its stack, holds it.
    package func withLockIfAvailable<Result>(_ body: (inout Value) -> Result) -> Result? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
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
