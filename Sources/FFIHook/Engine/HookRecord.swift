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

    /// For hooks of two receivers or more (a method hooked for several objects): the
    /// snapshot each receiver's calls run (its hooks and those for every receiver, in this
    /// snapshot's order), by receiver; empty otherwise. A call finds its receiver's with one
    /// probe of ``receiverTable`` (the C path and the Swift dispatch alike), however many
    /// objects have hooks.
    let receivers: [UInt: HookSnapshot]
    /// What the calls of a receiver with no hooks of its own run, where ``receivers`` is not
    /// empty: the hooks for every receiver (none: the calls go straight to the original); nil
    /// where ``receivers`` is empty.
    let others: HookSnapshot?
    /// ``receivers`` and ``others`` as the call paths read them (``ffh_fast_receivers``).
    let receiverTable: UnsafeMutablePointer<ffh_fast_receivers>?

    /// A snapshot of the lists. `receiver`, for a receiver's own snapshot (see ``receivers``):
    /// every hook is for it or for every receiver. `previous` and `changedReceiver`: the
    /// snapshot this one replaces, which differs from it only by hooks for `changedReceiver`
    /// (not 0), so that the other receivers' snapshots are taken over, not made again.
    init(
        before: [HookRecord] = [], instead: [HookRecord] = [], after: [HookRecord] = [], receiver only: UInt = 0,
        previous: HookSnapshot? = nil, changedReceiver: UInt = 0
    ) {
        self.before = Self.retained(before)
        self.instead = Self.retained(instead)
        self.after = Self.retained(after)
        self.isEmpty = before.isEmpty && instead.isEmpty && after.isEmpty
        let split =
            only == 0
            ? Self.split(
                before: before, instead: instead, after: after,
                previous: changedReceiver == 0 ? nil : previous, changedReceiver: changedReceiver) : nil
        receivers = split?.receivers ?? [:]
        others = split?.others
        // A hook that runs only once or for some callers needs the Swift dispatch's claim, and
        // so do hooks for different receivers; hooks all for one receiver (a method hooked for
        // one object), with those for every receiver in a receiver's own snapshot, or all for
        // every call run from C.
        let receiver = only != 0 ? only : (before.first ?? after.first)?.receiver ?? 0
        let plain = { (hook: HookRecord) in
            !hook.options.contains(.once) && !hook.isLimited
                && (hook.receiver == receiver || (only != 0 && hook.receiver == 0))
        }
        let entry = (before.first ?? instead.first ?? after.first)?.entry
        if let split, let entry {
            // Hooks for several receivers: the C path's table of them.
            let table = Self.table(split.receivers, others: split.others)
            receiverTable = table
            let fast = UnsafeMutablePointer<ffh_fast_hooks>.allocate(capacity: 1)
            fast.initialize(
                to: ffh_fast_hooks(
                    entry: UnsafeRawPointer(Unmanaged.passUnretained(entry).toOpaque()), snapshot: nil, before: nil,
                    after: nil, beforeCount: 0, afterCount: 0, marksByFunction: 0, marksByReceiver: 0, receiver: 0,
                    byReceiver: 1, state: entry.publishedState, beforeBlocks: nil, afterBlocks: nil,
                    receivers: UnsafePointer(table)))
            self.fast = fast
            self.blocks = nil
        } else if instead.isEmpty, let entry, before.allSatisfy(plain), after.allSatisfy(plain) {
            receiverTable = nil
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
                    state: entry.publishedState, beforeBlocks: nil, afterBlocks: nil, receivers: nil))
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
            receiverTable = nil
            self.fast = nil
            self.blocks = nil
        }
        fast?.pointee.snapshot = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
    }

    /// The snapshot a call whose first argument is `receiver` runs, where hooks are for
    /// several receivers (see ``receivers``): its own, or ``others``.
    @inline(__always)
    func chosen(for receiver: UInt, in table: UnsafeMutablePointer<ffh_fast_receivers>) -> Unmanaged<HookSnapshot> {
        let place = ffh_fast_receiver_find(table, receiver)
        return Unmanaged.fromOpaque((place?.pointee.snapshot ?? table.pointee.othersSnapshot).unsafelyUnwrapped)
    }

    /// The receivers' snapshots and the others' (see ``receivers``) when the lists hold hooks
    /// for two receivers or more; nil otherwise. When `previous` has them, those of every
    /// receiver but `changedReceiver` are taken over (the hooks for every receiver are the
    /// same); otherwise all are made.
    private static func split(
        before: [HookRecord], instead: [HookRecord], after: [HookRecord], previous: HookSnapshot?,
        changedReceiver: UInt
    ) -> (receivers: [UInt: HookSnapshot], others: HookSnapshot)? {
        if let previous, changedReceiver != 0, let previousOthers = previous.others {
            // Only one receiver's hooks changed: the others' snapshots stay, and so do the
            // others' (the hooks for every receiver are the same).
            var receivers = previous.receivers
            let own = (
                before: before.filter { $0.receiver == changedReceiver || $0.receiver == 0 },
                instead: instead.filter { $0.receiver == changedReceiver || $0.receiver == 0 },
                after: after.filter { $0.receiver == changedReceiver || $0.receiver == 0 }
            )
            if (own.before + own.instead + own.after).contains(where: { $0.receiver == changedReceiver }) {
                receivers[changedReceiver] = HookSnapshot(
                    before: own.before, instead: own.instead, after: own.after, receiver: changedReceiver)
            } else {
                receivers[changedReceiver] = nil
            }
            if receivers.count >= 2 { return (receivers, previousOthers) }
            // One receiver left: no table.
            return nil
        }
        // Each receiver's hooks (by their places in the lists) and those for every receiver.
        typealias Places = (before: [Int], instead: [Int], after: [Int])
        var own: [UInt: Places] = [:]
        var general: Places = ([], [], [])
        func group(_ list: [HookRecord], into places: WritableKeyPath<Places, [Int]>) {
            for (index, hook) in list.enumerated() {
                if hook.receiver == 0 {
                    general[keyPath: places].append(index)
                } else {
                    own[hook.receiver, default: ([], [], [])][keyPath: places].append(index)
                }
            }
        }
        group(before, into: \.before)
        group(instead, into: \.instead)
        group(after, into: \.after)
        guard own.count >= 2 else { return nil }
        // The hooks at the places of both, in the lists' order.
        func merged(_ list: [HookRecord], _ first: [Int], _ second: [Int]) -> [HookRecord] {
            var result: [HookRecord] = []
            result.reserveCapacity(first.count + second.count)
            var (i, j) = (0, 0)
            while i < first.count || j < second.count {
                if j == second.count || (i < first.count && first[i] < second[j]) {
                    result.append(list[first[i]])
                    i += 1
                } else {
                    result.append(list[second[j]])
                    j += 1
                }
            }
            return result
        }
        // (A loop, not Dictionary(uniqueKeysWithValues:), whose duplicate-key path throws: the
        // library imports no function of Swift's error convention that a test cannot hook.)
        var receivers: [UInt: HookSnapshot] = [:]
        receivers.reserveCapacity(own.count)
        for (receiver, places) in own {
            receivers[receiver] = HookSnapshot(
                before: merged(before, general.before, places.before),
                instead: merged(instead, general.instead, places.instead),
                after: merged(after, general.after, places.after), receiver: receiver)
        }
        let others = HookSnapshot(
            before: general.before.map { before[$0] }, instead: general.instead.map { instead[$0] },
            after: general.after.map { after[$0] })
        return (receivers, others)
    }

    /// The call paths' table of `receivers` and `others` (see ``ffh_fast_receivers``): a place
    /// for each receiver in a table at least twice their number.
    private static func table(
        _ receivers: [UInt: HookSnapshot], others: HookSnapshot
    ) -> UnsafeMutablePointer<ffh_fast_receivers> {
        var size = 8
        while size < receivers.count * 2 { size *= 2 }
        let places = UnsafeMutableBufferPointer<ffh_fast_receiver>.allocate(capacity: size)
        places.initialize(repeating: ffh_fast_receiver(receiver: 0, hooks: nil, snapshot: nil))
        let mask = UInt(size - 1)
        for (receiver, snapshot) in receivers {
            var index = UInt(ffh_fast_receiver_hash(receiver)) & mask
            while places[Int(index)].receiver != 0 { index = (index + 1) & mask }
            places[Int(index)] = ffh_fast_receiver(
                receiver: receiver, hooks: UnsafePointer(snapshot.fast),
                snapshot: UnsafeRawPointer(Unmanaged.passUnretained(snapshot).toOpaque()))
        }
        let table = UnsafeMutablePointer<ffh_fast_receivers>.allocate(capacity: 1)
        table.initialize(
            to: ffh_fast_receivers(
                places: UnsafePointer(places.baseAddress), mask: mask, others: UnsafePointer(others.fast),
                othersSnapshot: UnsafeRawPointer(Unmanaged.passUnretained(others).toOpaque()),
                othersPassThrough: others.isEmpty ? 1 : 0))
        return table
    }

    deinit {
        Self.release(before)
        Self.release(instead)
        Self.release(after)
        fast?.deallocate()
        blocks?.deallocate()
        if let receiverTable {
            UnsafeMutablePointer(mutating: receiverTable.pointee.places).deallocate()
            receiverTable.deallocate()
        }
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
        case .before:
            HookSnapshot(
                before: Self.inserting(hook, into: before), instead: instead, after: after, previous: self,
                changedReceiver: hook.receiver)
        case .instead:
            HookSnapshot(
                before: before, instead: [hook] + instead, after: after, previous: self, changedReceiver: hook.receiver)
        case .after:
            HookSnapshot(
                before: before, instead: instead, after: Self.inserting(hook, into: after), previous: self,
                changedReceiver: hook.receiver)
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
            after: Self.records(after).filter { $0 !== hook }, previous: self, changedReceiver: hook.receiver)
    }
}
