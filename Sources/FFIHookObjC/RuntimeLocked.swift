internal import CFFIHookObjC
import FFIHookCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A value guarded by a lock that is always taken inside the Objective-C runtime's own.
///
/// The runtime holds its lock (a recursive one) while it changes classes and while it sends
/// `+initialize`, and this module calls the runtime, which takes that lock, while it holds
/// its own. A `+initialize` that installs a hook while another thread installed one would
/// then wait for this module's lock while the other thread waited for the runtime's. Taking
/// the runtime's lock first, every time, gives both one order. Where the runtime does not
/// export its lock, only this module's is taken.
final class RuntimeLocked<Value>: @unchecked Sendable {
    // Sendable: the value is only touched through `lock`.
    private let lock: Locked<Value>
    /// The thread inside `withLock` (0 for none), to tell a call made from inside the lock
    /// on the same thread (a `+initialize` the runtime sends while this module holds the
    /// lock) from one that should wait.
    private let owner = Atomic<UInt>(0)

    init(_ value: Value) {
        lock = Locked(value)
    }

    /// Whether the calling thread is inside ``withLock(_:)`` now.
    var isHeldByCurrentThread: Bool { owner.load(ordering: .relaxed) == UInt(pthread_self()) }

    /// Runs `body` with exclusive access to the value, holding the runtime's lock around it.
    func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let runtime = ffh_objc_runtime_functions()
        let taken = runtime.map { ffh_objc_lock_runtime($0) } ?? 0
        defer { if let runtime { ffh_objc_unlock_runtime(runtime, taken) } }
        return try lock.withLock { (value: inout Value) throws(Failure) -> Result in
            let outer = owner.exchange(UInt(pthread_self()), ordering: .relaxed)
            defer { owner.store(outer, ordering: .relaxed) }
            return try body(&value)
        }
    }

    /// See ``Locked/protectAcrossFork(rank:)``.
    func protectAcrossFork(rank: Int32) {
        lock.protectAcrossFork(rank: rank)
    }
}
