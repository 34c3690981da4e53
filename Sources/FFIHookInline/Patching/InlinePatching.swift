internal import CFFIHookPatch
internal import FFIHook
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// When planned functions are patched and unpatched, and the writes that do it.
///
/// A function is patched (its entry jumps to its stub, the stub through its cell) while its
/// cell leads somewhere other than its trampoline (a hook's closure, a replacement, an attach
/// stub), while ``InlineFunction/patch()`` keeps it, or while a batch holds it for the moment of
/// its install or removal. Each plan's state is an atomic word in its slab: the bits below,
/// changed only under the registry's lock.
///
/// Writing a patch stops the process's other threads (``ffh_patch_write_batch``). A batch
/// writes all its functions' patches in one stop, and its removal takes them all out in one
/// stop: while ``withDeferredRemovals(_:)`` runs, patches whose cells went back to their
/// trampolines are collected rather than taken out one by one, and taken out together at its
/// end.
enum InlinePatching {
    /// The jump is in the function.
    static let patched: UInt32 = 1
    /// ``InlineFunction/patch()`` keeps the jump while nothing is installed.
    static let pinned: UInt32 = 2
    /// One hold of a batch (the state's bits from 8 up count them).
    static let hold: UInt32 = 1 << 8

    /// Deferred removals, per thread: a thread inside ``withDeferredRemovals(_:)`` collects the
    /// patches its own removals free, and takes them out as it leaves; other threads' removals
    /// are not held up by it (registry's lock).
    private final class Deferral: @unchecked Sendable {
        // Sendable: only touched under the registry's lock.
        var scopes: [UInt: (depth: Int, pending: [(slab: CodeSlab, index: Int)])] = [:]
    }
    private static let deferral = Deferral()

    private static var thread: UInt { UInt(pthread_self()) }

    static func state(_ slab: CodeSlab, _ index: Int) -> UInt32 {
        slab.states[index].load(ordering: .acquiring)
    }

    private static func update(_ slab: CodeSlab, _ index: Int, _ change: (UInt32) -> UInt32) {
        let state = slab.states[index].load(ordering: .acquiring)
        slab.states[index].store(change(state), ordering: .releasing)
    }

    static func setPatched(_ slab: CodeSlab, _ index: Int, _ isPatched: Bool) {
        update(slab, index) { isPatched ? $0 | patched : $0 & ~patched }
    }

    static func setPinned(_ slab: CodeSlab, _ index: Int, _ isPinned: Bool) {
        update(slab, index) { isPinned ? $0 | pinned : $0 & ~pinned }
    }

    static func addHold(_ slab: CodeSlab, _ index: Int) { update(slab, index) { $0 + hold } }
    static func dropHold(_ slab: CodeSlab, _ index: Int) { update(slab, index) { $0 - hold } }

    // MARK: - What the registry calls (its lock held)

    /// Writes the patch before the cell first leads elsewhere than the trampoline.
    static func patchBeforeCellChanges(_ slab: CodeSlab, _ index: Int) throws(HookError) {
        guard state(slab, index) & patched == 0 else { return }
        let write = PatchWriter.write([PatchWriter.Item(slab: slab, index: index, patching: true)])
        if let failure = write.failure ?? write.items[0].failure {
            throw HookError(code: .patchFailed, message: failure, symbol: InlineNames.name(of: slab, index))
        }
    }

    /// Takes the patch out once nothing needs it: the cell leads to the trampoline again,
    /// nothing pins or holds it. Deferred while ``withDeferredRemovals(_:)`` runs.
    static func cellDidChange(_ slab: CodeSlab, _ index: Int) {
        guard isRemovable(slab, index) else { return }
        if deferral.scopes[thread] != nil {
            deferral.scopes[thread]!.pending.append((slab, index))
        } else {
            _ = PatchWriter.write([PatchWriter.Item(slab: slab, index: index, patching: false)])
        }
    }

    /// Whether the plan is patched and nothing needs the patch any more.
    static func isRemovable(_ slab: CodeSlab, _ index: Int) -> Bool {
        guard state(slab, index) == patched else { return false }
        let cell = UnsafeMutablePointer<Atomic<UInt>>(bitPattern: slab.cell(index))!
        return cell.pointee.load(ordering: .acquiring) == slab.trampoline(index)
    }

    // MARK: - Batches

    /// Runs `body` (which takes the registry's lock as it needs) with the removals of patches it
    /// makes on this thread collected, then takes out in one stop those that are still not needed.
    static func withDeferredRemovals<Result>(_ body: () throws(HookError) -> Result) throws(HookError) -> Result {
        try SlotRegistry.shared.withLock { () throws(HookError) in
            deferral.scopes[thread, default: (0, [])].depth += 1
        }
        defer {
            try? SlotRegistry.shared.withLock { () throws(HookError) in
                deferral.scopes[thread]!.depth -= 1
                if deferral.scopes[thread]!.depth == 0 {
                    let pending = deferral.scopes.removeValue(forKey: thread)!.pending
                    flush(pending)
                }
            }
        }
        return try body()
    }

    /// Unpatches, in one stop, the collected plans that are still removable (registry's lock).
    private static func flush(_ pending: [(slab: CodeSlab, index: Int)]) {
        var seen = Set<UInt>()
        let items = pending.filter { seen.insert($0.slab.cell($0.index)).inserted && isRemovable($0.slab, $0.index) }
            .map { PatchWriter.Item(slab: $0.slab, index: $0.index, patching: false) }
        if !items.isEmpty { _ = PatchWriter.write(items) }
    }
}

/// The functions' names for errors: from the symbol tables, else the address.
enum InlineNames {
    static func name(of slab: CodeSlab, _ index: Int) -> String {
        let function = slab.records[index].function
        if let extent = SymbolResolver.extent(of: function), extent.start == function, let symbol = extent.symbol {
            return symbol
        }
        return InlinePlanner.hex(function)
    }
}
