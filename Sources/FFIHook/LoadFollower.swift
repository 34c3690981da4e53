internal import CFFIHookSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The import-table hooks of one symbol (or of a group of symbols) in every object, kept up to date as `dlopen` loads
/// more and unloads: an attach to each object's `dlopen` entries walks the loaded
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
    /// An entry the group hooked: the value the hook left in it (its closure) and its token,
    /// which the group holds (held here, it would keep the `dlopen` hooks' blocks, and so
    /// this follower, alive after the group is removed).
    private struct Covered {
        let value: UInt
        weak var token: HookToken?
    }

    private struct State {
        /// The entries the group hooked, for the symbol and for `dlopen`.
        var symbolEntries: [UInt: Covered] = [:]
        var loaderEntries: [UInt: Covered] = [:]
        /// The entries a walk is hooking right now, for the symbol or for `dlopen` (one entry
        /// is both when `dlopen` is one of the symbols), with the process whose walk claimed
        /// them: in a child after fork a claim of the parent's belongs to a thread that is not
        /// there, and counts as no claim.
        var claimed: [Claim: pid_t] = [:]
        /// How deep each thread is in `dlopen` calls that reached this group's hooks.
        var loadDepths: [UInt: Int] = [:]
        /// The objects a walk that ended well has looked at, and the loader's count of unloads
        /// (``ffh_elf_unloads``) as it listed them: while that count stays, those objects are the
        /// same, and a later walk (at every `dlopen` in the process) looks at the others only.
        var walked: (unloads: UInt64, objects: Set<ObjectKey>)?
    }

    /// An entry hooked for the symbol, or for `dlopen` (``State/loaderEntries``).
    private struct Claim: Hashable {
        let slot: UInt
        let forLoader: Bool
    }

    /// A loaded object, by its path and load bias.
    private struct ObjectKey: Hashable {
        let path: String
        let base: UInt
    }

    /// The hooks asked for, one per symbol (their entries are distinct slots).
    private let requests: [ImportRequest]
    private let group = HookGroupToken(tokens: [], skippedFields: [])
    private let state = Locked(State())
    /// The signature of `void *dlopen(const char *, int)`.
    private static let dlopenSignature = try! Signature("^v*i")
    /// How long a load waits for entries that another thread's walk is hooking.
    private static let patienceNanoseconds: UInt64 = 2_000_000_000

    private init(_ requests: [ImportRequest]) {
        self.requests = requests
    }

    /// Hooks the symbol and `dlopen` in every loaded object, all or nothing, and returns the
    /// group that later loads add to.
    static func start(_ request: ImportRequest) throws(HookError) -> HookGroupToken {
        try start([request])
    }

    /// Hooks each request's symbol and `dlopen` in every loaded object, all or nothing, and
    /// returns the one group that later loads add to.
    static func start(_ requests: [ImportRequest]) throws(HookError) -> HookGroupToken {
        let follower = LoadFollower(requests)
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

    /// The block of the `dlopen` hooks where attach is not available: calls `dlopen`, then, when
    /// the call loaded something, walks (see ``loadReturned(_:mode:)``).
    private func followLoad(_ call: borrowing Invocation) {
        loadEntered()
        call.callOriginal()
        loadReturned(call.returnValue(as: UInt.self), mode: call.argument(1, as: Int32.self))
    }

    /// The attachment of the `dlopen` entries: counts the thread's loads in flight as one
    /// enters (its mode kept for the leave), and walks as one that loaded something returns.
    /// An attach, not a hook with a signature, so that `dlopen` is called as the program called
    /// it: it reads its return address to learn which object called it (that object's
    /// `DT_RUNPATH` and namespace decide where a bare name is found), which a hook's call from
    /// the library's code would hide; the attach calls it through a `ret` in the caller's
    /// object (``ReadsReturnAddress``).
    private func loaderAttachment() -> Attachment {
        Attachment(
            onEnter: { context in
                self.loadEntered()
                context.scratch = context.integerArgument(1)
            },
            onLeave: { context in
                self.loadReturned(UInt(context.returnValue), mode: Int32(truncatingIfNeeded: context.scratch))
            })
    }

    /// Counts a `dlopen` of this thread in flight.
    private func loadEntered() {
        let thread = UInt(pthread_self())
        state.withLock { $0.loadDepths[thread, default: 0] += 1 }
    }

    /// After a `dlopen` returned `handle`: when it loaded something, walks (waiting for other
    /// walks' hooks when it is this thread's outermost `dlopen`).
    private func loadReturned(_ handle: UInt, mode: Int32) {
        let thread = UInt(pthread_self())
        let outermost = state.withLock { state in
            let depth = state.loadDepths[thread, default: 1] - 1
            state.loadDepths[thread] = depth > 0 ? depth : nil
            return depth <= 0
        }
        // The walk's own calls of dlopen (it pins each object) do not set off another walk.
        guard ffh_elf_is_walking() == 0, handle != 0, mode & RTLD_NOLOAD == 0 else { return }
        // The walk is the library's own work, whoever's dlopen set it off: hooked or attached
        // functions it calls (dlopen to pin objects, libffi's, the allocator) go straight to
        // their code, not through the program's hooks.
        let was = ffh_library_enter(FFH_BUSY_WORK)
        defer { ffh_library_enter(was) }
        // Nowhere to report an entry of a new object that cannot be hooked: it is skipped.
        try? walk(waits: outermost)
    }

    /// Hooks the symbol's and `dlopen`'s entries not covered yet in every loaded object,
    /// adds the hooks to the group and drops those of entries whose object is gone.
    private func walk(waits: Bool) throws(HookError) {
        // A group removed while a load was in flight: its walk would hook the entries the
        // removal gave back (and take those hooks out again only as it ends), and their blocks
        // would run meanwhile for calls that came after the removal.
        guard !group.isRemoved else { return }
        let process = ffh_getpid()
        // The hook keeps the follower alive until the group is removed.
        let loaderRequest =
            ffh_attach_available() != 0
            ? ImportRequest(symbol: "dlopen", attachment: loaderAttachment())
            : ImportRequest(
                symbol: "dlopen", signature: Self.dlopenSignature, position: .instead, options: .liftsPageProtection
            ) { call in self.followLoad(call) }
        // Entries covered before the objects are listed: one of them not met in the walk
        // belongs to an object unloaded since, unless another walk hooked it anew meanwhile.
        let coveredBefore = state.withLock { state in
            state.symbolEntries.map { (Claim(slot: $0.key, forLoader: false), $0.value) }
                + state.loaderEntries.map { (Claim(slot: $0.key, forLoader: true), $0.value) }
        }
        var seen = Set<Claim>()
        var mine: [Claim] = []
        var awaited: [Claim] = []
        /// Whether this walk hooks `entry`: claims it when no walk has and it is not hooked
        /// by the group (or holds another value than the group's hook left there: its object
        /// was unloaded and another mapped at its address).
        // (A flag rather than a key path: this runs for each entry, and a key path made and
        // compared each time cost more than the rest.)
        func claims(_ entry: ImportWalk.Entry, forLoader: Bool) -> Bool {
            let claim = Claim(slot: entry.slot, forLoader: forLoader)
            seen.insert(claim)
            return state.withLock { state in
                if state.claimed[claim] == process {
                    awaited.append(claim)
                    return false
                }
                let hooked = forLoader ? state.loaderEntries[entry.slot] : state.symbolEntries[entry.slot]
                if let hooked, ImportWalk.value(at: entry.slot) == hooked.value {
                    return false
                }
                state.claimed[claim] = process
                mine.append(claim)
                return true
            }
        }
        // What the new hooks left in their entries, read while the objects are pinned.
        func covering(_ tokens: [HookToken]) -> [UInt: Covered] {
            var covered: [UInt: Covered] = [:]
            for token in tokens {
                guard let slot = token.slotAddress else { continue }
                covered[slot] = Covered(value: ImportWalk.value(at: slot), token: token)
            }
            return covered
        }
        let tokens: [HookToken]
        let companions: [HookToken]
        let newSymbolEntries: [UInt: Covered]
        let newLoaderEntries: [UInt: Covered]
        // Whether no object was unloaded since the last walk that ended well listed its objects
        // (counted before and after this walk lists them), and what this walk listed.
        var unchanged = false
        var listed: Set<ObjectKey> = []
        var unloads: UInt64 = 0
        do throws(HookError) {
            var skipping = true
            var found: ([HookToken], [HookToken], [UInt: Covered], [UInt: Covered])?
            while found == nil {
                unloads = ffh_elf_unloads()
                let walked = skipping ? state.withLock { $0.walked } : nil
                // The objects that walk looked at, when none was unloaded since: their entries are
                // covered, or have none of the symbols; only the others are looked at (and pinned).
                let skipped = walked?.unloads == unloads ? walked?.objects : nil
                listed = []
                let including = { (path: String, base: UInt) -> Bool in
                    let key = ObjectKey(path: path, base: base)
                    listed.insert(key)
                    return skipped?.contains(key) != true
                }
                found = try ImportWalk.withLoadedObjects(including: including) {
                    objects throws(HookError) -> ([HookToken], [HookToken], [UInt: Covered], [UInt: Covered])? in
                    if ffh_elf_unloads() != unloads {
                        // One was unloaded as they were listed (and another may stand in its place).
                        listed = []
                        if skipped != nil { return nil }
                    }
                    unchanged = skipped != nil
                    // (Removed while the objects were listed and pinned.)
                    if group.isRemoved { return ([], [], [:], [:]) }
                    return try SlotMemory.keepingPagesWritable { () throws(HookError) in
                        var tokens: [HookToken] = []
                        // For the requests' names and dlopen's.
                        let index = ImportWalk.EntryIndex(requests: requests, adding: ["dlopen"])
                        if requests.allSatisfy({ $0.signature == nil }) {
                            // Attaches: one batch.
                            tokens = try ImportWalk.attach(requests, in: objects, index: index) {
                                claims($0, forLoader: false)
                            }
                        } else {
                            do throws(HookError) {
                                for request in requests {
                                    do throws(HookError) {
                                        tokens += try ImportWalk.install(request, in: objects, index: index) {
                                            claims($0, forLoader: false)
                                        }
                                    } catch {
                                        throw error.naming(symbol: request.symbol)
                                    }
                                }
                            } catch {
                                for token in tokens { token.remove() }
                                throw error
                            }
                        }
                        let companions: [HookToken]
                        do throws(HookError) {
                            companions = try ImportWalk.install(loaderRequest, in: objects, index: index) {
                                claims($0, forLoader: true)
                            }
                        } catch {
                            for token in tokens { token.remove() }
                            // About dlopen's entry, not the symbol's: say so.
                            var named = error.naming(symbol: "dlopen")
                            let symbols = requests.map { "\"\($0.symbol)\"" }.joined(separator: ", ")
                            named.message +=
                                " (following later loads for \(symbols) attaches to dlopen in every object)"
                            throw named
                        }
                        return (tokens, companions, covering(tokens), covering(companions))
                    }
                }
                skipping = false
            }
            (tokens, companions, newSymbolEntries, newLoaderEntries) = found!
        } catch {
            state.withLock { state in
                for claim in mine { state.claimed[claim] = nil }
            }
            throw error
        }
        // Under the lock: the new hooks replace what they found (a hook of an object that was
        // unloaded), and the hooks of entries gone since the walk began leave, unless they
        // changed meanwhile.
        let replaced: [HookToken] = state.withLock { state in
            var replaced: [HookToken] = []
            func record(_ entries: [UInt: Covered], in covered: WritableKeyPath<State, [UInt: Covered]>) {
                for (slot, entry) in entries {
                    if let old = state[keyPath: covered].updateValue(entry, forKey: slot)?.token {
                        replaced.append(old)
                    }
                }
            }
            record(newSymbolEntries, in: \.symbolEntries)
            record(newLoaderEntries, in: \.loaderEntries)
            // Objects whose entries another walk is hooking are not counted as looked at (that
            // walk may fail): this one's list stands only when it claimed everything it met.
            if !listed.isEmpty && awaited.isEmpty {
                if let walked = state.walked, walked.unloads == unloads {
                    state.walked = (unloads, walked.objects.union(listed))
                } else if (state.walked?.unloads ?? 0) <= unloads {
                    state.walked = (unloads, listed)
                }
            }
            // An entry not met is of an object unloaded since: none was when the walk looked only
            // at new objects.
            for (claim, before) in coveredBefore
            where !unchanged && !seen.contains(claim) && state.claimed[claim] == nil {
                guard let token = before.token else { continue }
                let covered = claim.forLoader ? \State.loaderEntries : \State.symbolEntries
                if state[keyPath: covered][claim.slot]?.token === token {
                    state[keyPath: covered][claim.slot] = nil
                    replaced.append(token)
                }
            }
            for claim in mine { state.claimed[claim] = nil }
            return replaced
        }
        guard let taken = group.replace(removing: replaced, with: tokens, companions: companions) else {
            for token in tokens + companions { token.remove() }
            return
        }
        for token in taken { token.remove() }
        if waits && !awaited.isEmpty { waitForClaims(awaited, of: process) }
    }

    /// Waits, for a while at most, until other walks of this process finished hooking `claims`.
    private func waitForClaims(_ claims: [Claim], of process: pid_t) {
        let start = MonotonicClock.now
        while state.withLock({ state in claims.contains { state.claimed[$0] == process } }) {
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
