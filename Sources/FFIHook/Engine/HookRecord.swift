internal import CFFIHookSupport
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
    /// The one receiver (the first argument's word) whose calls the hook takes part in, or 0
    /// for every call: a per-instance method hook, skipped for other objects' messages as
    /// if it were not installed.
    let receiver: UInt
    /// The calls the hook takes part in (thread, task); whether it has a limit at all is
    /// read first, so a hook without one pays a test of a flag.
    package let limit: CallerLimit
    let isLimited: Bool
    /// What the slot's memory needs kept while the hook lives (see ``FunctionSlot/owner``).
    let owner: (any AnyObject & Sendable)?
    /// For a typed block, the block as the C call path may call it itself; `block` is the same
    /// block made to take an `Invocation`.
    let direct: TypedDirect?

    init(
        block: @escaping Block, position: HookPosition, options: HookOptions, priority: Int, receiver: UInt = 0,
        limit: CallerLimit = .none, entry: SlotEntry, owner: (any AnyObject & Sendable)? = nil,
        direct: TypedDirect? = nil
    ) {
        self.direct = direct
        self.owner = owner
        self.limit = limit
        self.isLimited = !limit.isNone
        self.block = block
        self.position = position
        self.options = options
        self.priority = priority
        self.receiver = receiver
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
///
/// Each list is held once, as a buffer of records the snapshot retains itself: the call
/// path walks it without reference counting (iterating a Swift array would retain its
/// buffer, a write to memory every calling thread shares), and writers, under the
/// registry's lock, read it back as records to build the next snapshot.
final class HookSnapshot: @unchecked Sendable {
    // Sendable: immutable after init; the buffers are only read until deinit.
    let before: UnsafeBufferPointer<Unmanaged<HookRecord>>
    /// Newest first: the first wraps all the others.
    let instead: UnsafeBufferPointer<Unmanaged<HookRecord>>
    let after: UnsafeBufferPointer<Unmanaged<HookRecord>>
    /// Whether the snapshot has no hooks at all.
    let isEmpty: Bool
    /// What the C call path needs to run the hooks itself, when every one is a before or
    /// after block that runs on every call (see ``ffh_fast_hooks``); nil otherwise.
    let fast: UnsafeMutablePointer<ffh_fast_hooks>?
    /// The blocks of `before` then `after` as the C path calls them (``ffh_swift_block``), when
    /// it calls them itself (``SlotEntry/blocksCalledFromC``).
    private let blocks: UnsafeMutableBufferPointer<ffh_swift_block>?

    init(before: [HookRecord] = [], instead: [HookRecord] = [], after: [HookRecord] = []) {
        self.before = Self.retained(before)
        self.instead = Self.retained(instead)
        self.after = Self.retained(after)
        self.isEmpty = before.isEmpty && instead.isEmpty && after.isEmpty
        // A hook that runs only once or for some callers needs the Swift dispatch's claim, and
        // so do hooks for different receivers; hooks all for one receiver (a method hooked for
        // one object) or all for every call run from C.
        let receiver = (before.first ?? after.first)?.receiver ?? 0
        let plain = { (hook: HookRecord) in
            !hook.options.contains(.once) && !hook.isLimited && hook.receiver == receiver
        }
        if instead.isEmpty, let entry = (before.first ?? after.first)?.entry,
            before.allSatisfy(plain), after.allSatisfy(plain)
        {
            let fast = UnsafeMutablePointer<ffh_fast_hooks>.allocate(capacity: 1)
            fast.initialize(
                to: ffh_fast_hooks(
                    entry: UnsafeRawPointer(Unmanaged.passUnretained(entry).toOpaque()), snapshot: nil,
                    before: UnsafeRawPointer(self.before.baseAddress).map {
                        $0.assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
                    },
                    after: UnsafeRawPointer(self.after.baseAddress).map {
                        $0.assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
                    },
                    beforeCount: UInt32(before.count), afterCount: UInt32(after.count),
                    marksByFunction: entry.reentryByFunction ? 1 : 0,
                    marksByReceiver: entry.reentryByReceiver ? 1 : 0, receiver: receiver,
                    byReceiver: entry.reentryByReceiver || receiver != 0 ? 1 : 0,
                    state: entry.publishedState, beforeBlocks: nil, afterBlocks: nil))
            if SlotEntry.blocksCalledFromC {
                let blocks = UnsafeMutableBufferPointer<ffh_swift_block>.allocate(capacity: before.count + after.count)
                for (index, hook) in (before + after).enumerated() {
                    // A closure's two words: its function and its context (the record keeps both);
                    // a typed block's own, where C calls those too.
                    let block =
                        if SlotEntry.typedBlocksCalledFromC, let direct = hook.direct {
                            direct.block(widening: entry.returnWidening)
                        } else {
                            SlotEntry.swiftBlock(hook.block)
                        }
                    blocks.initializeElement(at: index, to: block)
                }
                fast.pointee.beforeBlocks = UnsafePointer(blocks.baseAddress)
                fast.pointee.afterBlocks = UnsafePointer(blocks.baseAddress.map { $0 + before.count })
                self.blocks = blocks
            } else {
                self.blocks = nil
            }
            self.fast = fast
        } else {
            self.fast = nil
            self.blocks = nil
        }
        fast?.pointee.snapshot = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        Self.release(before)
        Self.release(instead)
        Self.release(after)
        fast?.deallocate()
        blocks?.deallocate()
    }

    private static func release(_ list: UnsafeBufferPointer<Unmanaged<HookRecord>>) {
        guard !list.isEmpty else { return }
        for record in list { record.release() }
        list.deallocate()
    }

    /// A buffer holding `records`, each retained once on the snapshot's behalf (none for
    /// an empty list: most lists of most snapshots are empty).
    private static func retained(_ records: [HookRecord]) -> UnsafeBufferPointer<Unmanaged<HookRecord>> {
        guard !records.isEmpty else { return UnsafeBufferPointer(start: nil, count: 0) }
        let buffer = UnsafeMutableBufferPointer<Unmanaged<HookRecord>>.allocate(capacity: records.count)
        for (index, record) in records.enumerated() {
            (buffer.baseAddress! + index).initialize(to: Unmanaged.passRetained(record))
        }
        return UnsafeBufferPointer(buffer)
    }

    /// The records of one of the lists, for writers.
    private static func records(_ list: UnsafeBufferPointer<Unmanaged<HookRecord>>) -> [HookRecord] {
        list.map { $0.takeUnretainedValue() }
    }

    func adding(_ hook: HookRecord) -> HookSnapshot {
        let before = Self.records(before)
        let instead = Self.records(instead)
        let after = Self.records(after)
        return switch hook.position {
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
            before: Self.records(before).filter { $0 !== hook }, instead: Self.records(instead).filter { $0 !== hook },
            after: Self.records(after).filter { $0 !== hook })
    }
}
