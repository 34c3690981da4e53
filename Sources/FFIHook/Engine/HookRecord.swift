import Synchronization

/// One installed hook: its block, position and options, and whether it is still installed.
package final class HookRecord: Sendable {
    /// A block that runs with a view of the call.
    package typealias Block = @Sendable (borrowing Invocation) -> Void

    let block: Block
    package let position: HookPosition
    let options: HookOptions
    /// The slot entry the hook belongs to.
    package let entry: SlotEntry
    /// Set once a `once` hook has run (or started to run).
    let fired = Atomic<Bool>(false)
    /// Set by the first removal.
    let removed = Atomic<Bool>(false)
    /// The next record in the registry's list of `once` hooks whose removal waits for its lock.
    let nextDeferred = Atomic<UInt>(0)

    /// Orders before and after blocks: higher runs first; equal priorities run in install order.
    let priority: Int

    init(block: @escaping Block, position: HookPosition, options: HookOptions, priority: Int, entry: SlotEntry) {
        self.block = block
        self.position = position
        self.options = options
        self.priority = priority
        self.entry = entry
    }

    /// Whether the hook is still installed.
    package var isActive: Bool { !removed.load(ordering: .acquiring) }

    /// Removes the hook; true the first time, false afterwards.
    package func remove() -> Bool {
        SlotRegistry.shared.remove(self)
    }

    /// Whether the block runs for a call that re-enters the slot from inside a block.
    var allowsReentry: Bool { options.contains(.allowsReentry) }
}

/// The hooks of one slot at one moment. Immutable: writers publish a new snapshot.
final class HookSnapshot: @unchecked Sendable {
    // Sendable: immutable after init; the buffers are only read until deinit.
    let before: [HookRecord]
    /// Newest first: the first wraps all the others.
    let instead: [HookRecord]
    let after: [HookRecord]
    /// The three lists without reference counting, for the call path: iterating a Swift
    /// array retains its buffer, a write to memory every calling thread shares. The arrays
    /// above keep the records alive for as long as the snapshot.
    let fastBefore: UnsafeBufferPointer<Unmanaged<HookRecord>>
    let fastInstead: UnsafeBufferPointer<Unmanaged<HookRecord>>
    let fastAfter: UnsafeBufferPointer<Unmanaged<HookRecord>>

    init(before: [HookRecord] = [], instead: [HookRecord] = [], after: [HookRecord] = []) {
        self.before = before
        self.instead = instead
        self.after = after
        self.fastBefore = Self.unmanaged(before)
        self.fastInstead = Self.unmanaged(instead)
        self.fastAfter = Self.unmanaged(after)
        self.isEmpty = before.isEmpty && instead.isEmpty && after.isEmpty
    }

    deinit {
        fastBefore.deallocate()
        fastInstead.deallocate()
        fastAfter.deallocate()
    }

    private static func unmanaged(_ records: [HookRecord]) -> UnsafeBufferPointer<Unmanaged<HookRecord>> {
        let buffer = UnsafeMutableBufferPointer<Unmanaged<HookRecord>>.allocate(capacity: records.count)
        _ = buffer.initialize(from: records.map { Unmanaged.passUnretained($0) })
        return UnsafeBufferPointer(buffer)
    }

    /// Whether the snapshot has no hooks at all.
    let isEmpty: Bool

    func adding(_ hook: HookRecord) -> HookSnapshot {
        switch hook.position {
        case .before: HookSnapshot(before: Self.inserting(hook, into: before), instead: instead, after: after)
        case .instead: HookSnapshot(before: before, instead: [hook] + instead, after: after)
        case .after: HookSnapshot(before: before, instead: instead, after: Self.inserting(hook, into: after))
        }
    }

    /// `list` with `hook` after every record of equal or higher priority.
    private static func inserting(_ hook: HookRecord, into list: [HookRecord]) -> [HookRecord] {
        var result = list
        let index = result.firstIndex { $0.priority < hook.priority } ?? result.endIndex
        result.insert(hook, at: index)
        return result
    }

    func removing(_ hook: HookRecord) -> HookSnapshot {
        HookSnapshot(
            before: before.filter { $0 !== hook }, instead: instead.filter { $0 !== hook },
            after: after.filter { $0 !== hook })
    }
}
