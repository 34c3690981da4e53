internal import CElfImports

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The import-table hooks of one symbol in every object, kept up to date as `dlopen` loads
/// more: an after hook on each object's `dlopen` entries walks the loaded objects again and
/// hooks the entries not yet covered.
final class LoadFollower: Sendable {
    private struct State {
        /// Whether a walk is running (on some thread).
        var running = true
        /// Whether a load finished while a walk was running, which must then walk again.
        var pending = false
        /// The entries hooked for the symbol, and for `dlopen`, each with the value it held
        /// right after the hook went in (the hook's closure).
        var symbolEntries: [UInt: UInt] = [:]
        var loaderEntries: [UInt: UInt] = [:]
    }

    private let request: ImportRequest
    private let group = HookGroupToken(tokens: [], skippedSlots: [])
    private let state = Locked(State())
    /// The signature of `void *dlopen(const char *, int)`.
    private static let dlopenSignature = try! Signature("^v*i")

    private init(_ request: ImportRequest) {
        self.request = request
    }

    /// Hooks the symbol and `dlopen` in every loaded object, all or nothing, and returns the
    /// group that later loads add to.
    static func start(_ request: ImportRequest) throws(HookError) -> HookGroupToken {
        let follower = LoadFollower(request)
        do throws(HookError) {
            // `running` starts true: a load that finishes during this first walk is
            // followed by the walk again below.
            try follower.walk()
        } catch {
            follower.group.remove()
            throw error
        }
        follower.walkWhilePending()
        return follower.group
    }

    /// Called after each `dlopen` that loaded something: walks unless a walk is running, in
    /// which case that walk goes round again. No lock is held across the walk, which calls
    /// `dlopen` itself: a load on another thread may hold the loader's lock and call `dlopen`
    /// (from a constructor) while this one waits for it.
    private func loaded() {
        let starts = state.withLock { state in
            if state.running {
                state.pending = true
                return false
            }
            state.running = true
            return true
        }
        guard starts else { return }
        // Nowhere to report an entry of a new object that cannot be hooked: it is skipped.
        try? walk()
        walkWhilePending()
    }

    /// Walks again while loads finished during the last walk, then marks the walk finished.
    private func walkWhilePending() {
        while state.withLock({ state in
            if state.pending {
                state.pending = false
                return true
            }
            state.running = false
            return false
        }) {
            try? walk()
        }
    }

    /// Hooks the symbol's and `dlopen`'s entries not covered yet, in every loaded object,
    /// and adds the hooks to the group.
    private func walk() throws(HookError) {
        let covered = state.withLock { ($0.symbolEntries, $0.loaderEntries) }
        let loaderRequest = ImportRequest(
            symbol: "dlopen", signature: Self.dlopenSignature, position: .after, options: .liftsPageProtection
        ) { call in
            guard celfimports_is_walking() == 0, call.returnValue(as: UInt.self) != 0,
                call.argument(1, as: Int32.self) & RTLD_NOLOAD == 0
            else { return }
            // The hook keeps the follower alive until the group is removed.
            self.loaded()
        }
        let (tokens, companions, values) = try ImportWalk.withLoadedObjects { objects throws(HookError) in
            let tokens = try ImportWalk.install(request, in: objects) { Self.isNew($0, covered.0) }
            let companions: [HookToken]
            do throws(HookError) {
                companions = try ImportWalk.install(loaderRequest, in: objects) { Self.isNew($0, covered.1) }
            } catch {
                for token in tokens { token.remove() }
                throw error
            }
            // Read while the objects are pinned: the values mark the entries as covered.
            func values(_ tokens: [HookToken]) -> [UInt: UInt] {
                var values: [UInt: UInt] = [:]
                for token in tokens {
                    let slot = UInt(bitPattern: token.record.entry.slot)
                    values[slot] = ImportWalk.value(at: slot)
                }
                return values
            }
            return (tokens, companions, (values(tokens), values(companions)))
        }
        guard group.add(tokens: tokens, companions: companions) else {
            for token in tokens + companions { token.remove() }
            return
        }
        state.withLock { state in
            state.symbolEntries.merge(values.0) { $1 }
            state.loaderEntries.merge(values.1) { $1 }
        }
    }

    /// Whether `entry` is not hooked by this group: never hooked, or no longer holding the
    /// value it held when hooked (its object was unloaded and another mapped there).
    private static func isNew(_ entry: ImportEntry, _ covered: [UInt: UInt]) -> Bool {
        guard let hooked = covered[entry.slot] else { return true }
        return ImportWalk.value(at: entry.slot) != hooked
    }
}
