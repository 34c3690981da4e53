internal import CFFIHookSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The import-table hooks of one symbol in every object, kept up to date as `dlopen` loads
/// more and unloads: an instead hook on each object's `dlopen` entries walks the loaded
/// objects as a call that loaded something returns, hooks the entries not yet covered, and
/// drops the hooks of objects unloaded since.
///
/// Walks run on the threads that load, several at once when threads load at the same time;
/// an entry is claimed before it is hooked, so that one walk hooks it. A load whose walk
/// finds an entry another walk is hooking waits for that hook before `dlopen` returns, so
/// the object it loaded is hooked by then; only the outermost `dlopen` of a thread waits
/// (a nested one, from a library's constructor, runs with the loader's lock held, which the
/// other walk may need), and only for a while (a thread may hold the loader's lock for
/// reasons of its own). No lock is held across a walk, which calls `dlopen` and `dlsym`.
final class LoadFollower: Sendable {
    private struct State {
        /// The entries the group hooked, for the symbol and for `dlopen`, each with the value
        /// it held right after the hook went in (the hook's closure).
        var symbolEntries: [UInt: UInt] = [:]
        var loaderEntries: [UInt: UInt] = [:]
        /// The entries a walk is hooking right now, with the process whose walk claimed them:
        /// in a child after fork a claim of the parent's belongs to a thread that is not
        /// there, and counts as no claim.
        var claimed: [UInt: pid_t] = [:]
        /// How deep each thread is in `dlopen` calls that reached this group's hooks.
        var loadDepths: [UInt: Int] = [:]
    }

    private let request: ImportRequest
    private let group = HookGroupToken(tokens: [], skippedSlots: [])
    private let state = Locked(State())
    /// The signature of `void *dlopen(const char *, int)`.
    private static let dlopenSignature = try! Signature("^v*i")
    /// How long a load waits for entries that another thread's walk is hooking.
    private static let patienceNanoseconds: UInt64 = 2_000_000_000

    private init(_ request: ImportRequest) {
        self.request = request
    }

    /// Hooks the symbol and `dlopen` in every loaded object, all or nothing, and returns the
    /// group that later loads add to.
    static func start(_ request: ImportRequest) throws(HookError) -> HookGroupToken {
        let follower = LoadFollower(request)
        do throws(HookError) {
            try follower.walk(waits: true)
        } catch {
            follower.group.remove()
            throw error
        }
        // After the walk's installs, which registered the registry's fork handlers.
        ffh_elf_guard_walks_across_fork()
        return follower.group
    }

    /// The block of the `dlopen` hooks: calls `dlopen`, then, when the call loaded something,
    /// walks (waiting for other walks' hooks when it is this thread's outermost `dlopen`).
    private func followLoad(_ call: borrowing Invocation) {
        let thread = UInt(pthread_self())
        state.withLock { $0.loadDepths[thread, default: 0] += 1 }
        call.callOriginal()
        let outermost = state.withLock { state in
            let depth = state.loadDepths[thread, default: 1] - 1
            state.loadDepths[thread] = depth > 0 ? depth : nil
            return depth <= 0
        }
        // The walk's own calls of dlopen (it pins each object) do not set off another walk.
        guard ffh_elf_is_walking() == 0, call.returnValue(as: UInt.self) != 0,
            call.argument(1, as: Int32.self) & RTLD_NOLOAD == 0
        else { return }
        // Nowhere to report an entry of a new object that cannot be hooked: it is skipped.
        try? walk(waits: outermost)
    }

    /// Hooks the symbol's and `dlopen`'s entries not covered yet in every loaded object,
    /// adds the hooks to the group and drops those of entries whose object is gone.
    private func walk(waits: Bool) throws(HookError) {
        let process = getpid()
        let loaderRequest = ImportRequest(
            symbol: "dlopen", signature: Self.dlopenSignature, position: .instead, options: .liftsPageProtection
        ) { call in
            // The hook keeps the follower alive until the group is removed.
            self.followLoad(call)
        }
        // Entries covered before the objects are listed: any of them not met in the walk
        // belongs to an object unloaded since.
        let coveredBefore = state.withLock { Set($0.symbolEntries.keys).union($0.loaderEntries.keys) }
        var seen = Set<UInt>()
        var mine: [UInt] = []
        var awaited: [UInt] = []
        var stale: Set<UInt> = []
        /// Whether this walk hooks `entry`: claims it when no walk has and it is not hooked
        /// by the group (or holds another value than the group's hook left there: its object
        /// was unloaded and another mapped at its address).
        func claims(_ entry: ImportEntry, _ covered: WritableKeyPath<State, [UInt: UInt]>) -> Bool {
            seen.insert(entry.slot)
            return state.withLock { state in
                if state.claimed[entry.slot] == process {
                    awaited.append(entry.slot)
                    return false
                }
                if let hooked = state[keyPath: covered][entry.slot] {
                    if ImportWalk.value(at: entry.slot) == hooked { return false }
                    stale.insert(entry.slot)
                }
                state.claimed[entry.slot] = process
                mine.append(entry.slot)
                return true
            }
        }
        func releaseClaims() {
            state.withLock { state in
                for slot in mine { state.claimed[slot] = nil }
            }
        }
        // What the new hooks left in their entries, read while the objects are pinned.
        func values(_ tokens: [HookToken]) -> [UInt: UInt] {
            var values: [UInt: UInt] = [:]
            for token in tokens {
                let slot = UInt(bitPattern: token.record.entry.slot)
                values[slot] = ImportWalk.value(at: slot)
            }
            return values
        }
        let tokens: [HookToken]
        let companions: [HookToken]
        let newSymbolValues: [UInt: UInt]
        let newLoaderValues: [UInt: UInt]
        do throws(HookError) {
            (tokens, companions, newSymbolValues, newLoaderValues) = try ImportWalk.withLoadedObjects {
                objects throws(HookError) in
                let tokens = try ImportWalk.install(request, in: objects) { claims($0, \.symbolEntries) }
                let companions: [HookToken]
                do throws(HookError) {
                    companions = try ImportWalk.install(loaderRequest, in: objects) { claims($0, \.loaderEntries) }
                } catch {
                    for token in tokens { token.remove() }
                    throw error
                }
                return (tokens, companions, values(tokens), values(companions))
            }
        } catch {
            releaseClaims()
            throw error
        }
        let gone = coveredBefore.subtracting(seen)
        state.withLock { state in
            for slot in gone {
                state.symbolEntries[slot] = nil
                state.loaderEntries[slot] = nil
            }
            state.symbolEntries.merge(newSymbolValues) { $1 }
            state.loaderEntries.merge(newLoaderValues) { $1 }
            for slot in mine { state.claimed[slot] = nil }
        }
        guard let taken = group.replace(slots: gone.union(stale), with: tokens, companions: companions) else {
            for token in tokens + companions { token.remove() }
            return
        }
        for token in taken { token.remove() }
        if waits && !awaited.isEmpty { waitForClaims(awaited, of: process) }
    }

    /// Waits, for a while at most, until other walks of this process finished hooking `slots`.
    private func waitForClaims(_ slots: [UInt], of process: pid_t) {
        let start = MonotonicClock.now
        while state.withLock({ state in slots.contains { state.claimed[$0] == process } }) {
            guard MonotonicClock.now - start < Self.patienceNanoseconds else { return }
            usleep(50)
        }
    }
}

/// A monotonic clock in nanoseconds.
private enum MonotonicClock {
    static var now: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
