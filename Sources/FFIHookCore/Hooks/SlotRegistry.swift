import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// All hooked slots of the process, by address; installs and removes hooks.
///
/// Writers serialise on one lock; calls through hooked slots never take it (except the
/// one-time self-removal of a `once` hook).
package final class SlotRegistry: Sendable {
    /// The registry of the process.
    package static let shared = SlotRegistry()

    private struct State {
        var entries: [UInt: SlotEntry] = [:]
        /// Entries whose slot another writer took over while they had hooks; they stay as
        /// pass-throughs for whoever chained to their closure.
        var detached: [SlotEntry] = []
    }

    private let state = Locked(State())

    // MARK: - Installing

    /// Installs a hook on the function pointer held at `slot`.
    package func install(
        slot: UnsafeMutableRawPointer?, signature: Signature, position: HookPosition, options: HookOptions,
        block: @escaping HookRecord.Block
    ) throws(HookError) -> HookRecord {
        guard let slot else { throw HookError(slot: 0, signature: signature.encoding, code: .nullSlot) }
        let address = UInt(bitPattern: slot)
        func failure(_ code: HookError.Code) -> HookError {
            HookError(slot: address, signature: signature.encoding, code: code)
        }
        guard address % UInt(MemoryLayout<UnsafeRawPointer>.alignment) == 0 else { throw failure(.misalignedSlot) }
        let interface: CallInterface
        do {
            interface = try CallInterface.shared(for: signature)
        } catch {
            throw failure(.unsupportedSignature(error))
        }
        let cell = slot.assumingMemoryBound(to: Atomic<UInt>.self)
        return try state.withLock { (state: inout State) throws(HookError) -> HookRecord in
            var entry = state.entries[address]
            var holdsClosure = false
            if let existing = entry {
                holdsClosure = cell.pointee.load(ordering: .acquiring) == UInt(bitPattern: existing.closure.code)
                let active = !existing.snapshot.isEmpty
                if active && holdsClosure && existing.signature.abiKey != signature.abiKey {
                    throw failure(.signatureMismatch(installed: existing.signature.encoding))
                }
                if active && !holdsClosure {
                    // Another writer took the slot over: keep the old entry as a pass-through.
                    state.detached.append(existing)
                    entry = nil
                } else if !active && existing.signature.abiKey != signature.abiKey {
                    state.detached.append(existing)
                    entry = nil
                    holdsClosure = false
                }
            }
            let target: SlotEntry
            if let entry {
                target = entry
            } else {
                target = try SlotEntry(slot: slot, interface: interface)
            }
            if !holdsClosure {
                try Self.takeOver(cell, for: target, allowEmpty: position == .instead, failure: failure)
            }
            let record = HookRecord(block: block, position: position, options: options, entry: target)
            target.publish(target.snapshot.adding(record))
            state.entries[address] = target
            target.reclaim()
            return record
        }
    }

    /// Makes `cell` point at the entry's closure, remembering what it held as the original.
    private static func takeOver(
        _ cell: UnsafeMutablePointer<Atomic<UInt>>, for entry: SlotEntry, allowEmpty: Bool,
        failure: (HookError.Code) -> HookError
    ) throws(HookError) {
        let code = UInt(bitPattern: entry.closure.code)
        for _ in 0..<1000 {
            let value = cell.pointee.load(ordering: .acquiring)
            guard value != 0 || allowEmpty else { throw failure(.emptySlot) }
            entry.original.store(value, ordering: .releasing)
            if cell.pointee.compareExchange(expected: value, desired: code, ordering: .acquiringAndReleasing).exchanged
            {
                return
            }
        }
        throw failure(.slotContention)
    }

    // MARK: - Removing

    /// Removes `record`'s hook; true the first time, false afterwards.
    func remove(_ record: HookRecord) -> Bool {
        guard record.removed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return false }
        state.withLock { _ in
            let entry = record.entry
            let snapshot = entry.snapshot.removing(record)
            entry.publish(snapshot)
            if snapshot.isEmpty {
                // Write the original back only if the slot still holds our closure.
                let cell = entry.slot.assumingMemoryBound(to: Atomic<UInt>.self)
                _ = cell.pointee.compareExchange(
                    expected: UInt(bitPattern: entry.closure.code), desired: entry.original.load(ordering: .acquiring),
                    ordering: .acquiringAndReleasing)
            }
            entry.reclaim()
        }
        return true
    }

    // MARK: - Reclamation

    /// Waits until every snapshot replaced by an install or removal is freed.
    ///
    /// Returns once no call that started before this method can still be inside memory of
    /// a removed hook. Never call it from inside a hook block: it would wait for itself.
    package func waitForReclamation() throws(HookError) {
        guard !ThreadState.isInsideBlock else { throw HookError(slot: nil, signature: nil, code: .calledFromHookBlock) }
        while true {
            let done = state.withLock { state in
                var done = true
                for entry in state.entries.values where !entry.reclaim() { done = false }
                for entry in state.detached where !entry.reclaim() { done = false }
                return done
            }
            if done { return }
            sched_yield()
        }
    }

    /// How many slots have an entry (active, dormant or detached).
    package var entryCount: Int {
        state.withLock { $0.entries.count + $0.detached.count }
    }

    /// How many replaced snapshots wait to be freed.
    package var pendingReclamationCount: Int {
        state.withLock { state in
            (Array(state.entries.values) + state.detached).reduce(0) { count, entry in
                count + entry.retired.count + (entry.draining?.snapshots.count ?? 0)
            }
        }
    }
}
