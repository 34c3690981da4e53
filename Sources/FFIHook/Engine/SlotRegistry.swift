internal import CFFIHookSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// All hooked slots of the process, by address; installs and removes hooks, and frees what
/// removals replaced once no call can still read it.
///
/// Writers serialise on one lock; calls through hooked slots never wait for it: a thread's
/// first hooked call claims its record without a lock (see ``ThreadState``), and a `once`
/// hook that removes itself takes the lock only if it is free, and otherwise leaves its
/// removal to the thread that holds it. No lock of the registry is held across `fork`.
package final class SlotRegistry: Sendable {
    /// The registry of the process.
    package static let shared: SlotRegistry = {
        // Looked up here, outside the registry's lock, under which entries ask about their
        // originals: the lookup calls dlopen and dlsym, which the program may have hooked.
        _ = ReadsReturnAddress.functions
        return SlotRegistry()
    }()

    /// Registers the `pthread_atfork` handlers, once, the first time a writer takes the lock.
    /// No library-wide lock is held across fork: the prepare handler takes the registry's
    /// and the interning table's (in the order in which code nests them) and both sides
    /// release them afterwards. The handlers are C and reach the locks through pointers
    /// handed over here, so a fork never runs Swift code that could wait for a lazy global's
    /// initialisation the fork cut short.
    private static let forkHandlers: Void = {
        shared.state.protectAcrossFork(rank: forkRank)
        CallInterface.protectInterningAcrossFork(rank: forkRank + 1)
    }()

    /// The rank of the registry's lock among the locks taken across fork (see
    /// `ffh_fork_protect`): a lock held while the registry's is taken must rank lower.
    package static let forkRank: Int32 = 100

    /// The replacements of one slot, in the order they were made: most slots have one, which is
    /// held without an array.
    struct SlotReplacements {
        private let first: Replacement
        private var rest: [Replacement] = []

        init(_ replacement: Replacement) {
            first = replacement
        }

        /// `list` as the replacements of a slot; nil when it is empty.
        init?(_ list: [Replacement]) {
            guard let first = list.first else { return nil }
            self.first = first
            rest = Array(list.dropFirst())
        }

        /// These with `replacement` after them.
        func appending(_ replacement: Replacement) -> SlotReplacements {
            var more = self
            more.rest.append(replacement)
            return more
        }

        /// All of them, in order.
        var all: [Replacement] { [first] + rest }

        /// The last made of those still in place: the one the slot leads to when no hook wraps them.
        var newest: Replacement { rest.last ?? first }
    }

    private struct State {
        /// The entries of the slots that have hooks, by address.
        var entries: [UInt: SlotEntry] = [:]
        /// Entries whose slot another writer took over while they had hooks; their hooks keep
        /// running for whoever chained to their closure until they are removed.
        var detached: [ObjectIdentifier: SlotEntry] = [:]
        /// The replacements in place on each slot, by address, in the order they were made.
        var replacements: [UInt: SlotReplacements] = [:]
        /// Every slot closure ever made, and which slot each serves.
        var pool: ClosurePool
        var table = SlotTable()
        /// The interfaces whose cifs closures were prepared with: a closure stays callable
        /// for the life of the process, and so must its cif.
        var interfaces: [ObjectIdentifier: CallInterface] = [:]
        /// Snapshots and entries replaced since the last grace period began, and closures
        /// released for reuse.
        var retired: [AnyObject] = []
        var retiredCells: [ClosurePool.Cell] = []
        /// What was replaced, each group with the threads (record, odd generation) that were
        /// inside a call when the group's grace period began, and its number.
        var waiting: [WaitingGroup] = []
        /// The number the next waiting group gets; numbers only grow.
        var nextGroup: UInt64 = 0
        /// What watches slots that stand for something else (inline hooks' jump cells): ranges
        /// of slot addresses, each with its observer, in address order.
        var observers: [(slots: Range<UInt>, observer: any SlotObserver)] = []
        /// The slots the writer holding the lock has written (or meant to), whose observers
        /// it tells as it releases the lock.
        var touched: [UInt] = []
        /// How many ``withBatchedReclamation(_:)`` scopes are open: while one is, writes retire
        /// what they replace without starting a grace period each.
        var reclamationDeferrals = 0
    }

    /// What was replaced or released when one grace period began.
    private struct WaitingGroup {
        /// The order in which the group's grace period began.
        let number: UInt64
        /// Snapshots and entries, freed with the group.
        let objects: [AnyObject]
        /// Closures that become free for reuse with the group.
        let cells: [ClosurePool.Cell]
        /// The threads (record, odd generation) inside a call when the grace period began.
        let threads: [(record: UnsafeMutablePointer<ffh_thread>, generation: UInt)]
        /// Whether calls without a thread record were reading entries when it began; the group
        /// then also waits for a moment when none is.
        var waitsForRecordless: Bool
    }

    private let state: Locked<State>

    /// A registry; the process's is ``shared``. `failingClosureAllocation` makes one whose
    /// closures cannot be allocated, as where writable and executable memory is forbidden
    /// and libffi has no fallback (for tests of that path, without touching ``shared``).
    package init(failingClosureAllocation: Bool = false) {
        state = Locked(State(pool: ClosurePool(failsAllocation: failingClosureAllocation)))
    }
    /// `once` hooks that removed themselves while the lock was taken, as a list linked
    /// through ``HookRecord/nextDeferred`` (unretained: each is still in its slot's current
    /// snapshot until the writer that takes the list removes it).
    private let deferred = Atomic<UInt>(0)
    /// The thread that holds the lock (`pthread_self`), 0 when none does: a block that runs
    /// for a call this thread makes while it holds the lock (an allocation, with `malloc`
    /// hooked) must not wait for the lock.
    private let lockOwner = Atomic<UInt>(0)
    /// Whether this thread holds the lock.
    private var holdsLock: Bool { lockOwner.load(ordering: .relaxed) == UInt(pthread_self()) }
    /// Whether the call path has run once (see ``warmUpCallPath()``).
    private let isWarm = Atomic<Bool>(false)

    // MARK: - Installing

    /// Installs a hook on the function pointer held at `slot`.
    ///
    /// `priority` orders before and after blocks (higher first, ties in install order);
    /// `liftsProtection` lets a slot in read-only memory be written by making its page
    /// writable for the moment of each write. `reentryByFunction` makes a slot that gets a
    /// new entry count calls through it as re-entry when the thread is inside a block of a
    /// call to the same original function through any slot marked that way (the import-table
    /// entries of one symbol in every object), not only through this slot. A `receiver` other
    /// than 0 limits the hook to calls whose first argument is that word (see
    /// ``HookRecord/receiver``). A `fallback` other than 0 is the original of a slot that
    /// holds NULL (see ``FunctionSlot/withFallback(_:)``). `limit` is the hook's caller limit,
    /// when it was taken earlier (see ``CallerLimit``); by default the one `options` ask for,
    /// taken now. `preserving` is for the slot of a function patched inline (its
    /// ``FunctionSlot/function``): its closure returns every register but the result's as the
    /// caller left them (see ``ClosurePool/make(for:preserving:)``).
    package func install(
        slot: UnsafeMutableRawPointer?, signature: Signature, position: HookPosition, options: HookOptions,
        priority: Int = 0, liftsProtection: Bool = false, reentryByFunction: Bool = false, warmsUp: Bool = true,
        receiver: UInt = 0, fallback: UInt = 0, limit: CallerLimit? = nil, owner: (any AnyObject & Sendable)? = nil,
        preserving: Bool = false, direct: TypedDirect? = nil, block: @escaping HookRecord.Block
    ) throws(HookError) -> HookRecord {
        let slot = try Self.checkedSlot(slot, signature: signature)
        let address = UInt(bitPattern: slot)
        let limit =
            if let limit { limit } else { try CallerLimit(options: options, signature: signature, slot: address) }
        func failure(_ problem: HookError.Problem) -> HookError {
            HookError(slot: address, signature: signature, problem: problem)
        }
        if fallback != 0 { try Self.checkFallback(fallback, failure: failure) }
        let interface: CallInterface
        do {
            interface = try CallInterface.shared(for: signature)
        } catch {
            throw HookError(slot: address, signature: signature, rejectedBecause: error)
        }
        // A block that runs inside this thread's own install or removal (for an allocation
        // it makes, with `malloc` hooked) would wait for the lock this thread holds.
        guard !holdsLock else { throw failure(.calledFromHookBlock) }
        if warmsUp && !isWarm.load(ordering: .acquiring) && warmUpCallPath() {
            isWarm.store(true, ordering: .releasing)
        }
        let cell = slot.assumingMemoryBound(to: Atomic<UInt>.self)
        return try write { (state: inout State) throws(HookError) -> HookRecord in
            var target: SlotEntry?
            var holdsClosure = false
            if let existing = state.entries[address] {
                // A slot hooked before may have been unmapped since (its table freed, its
                // library unloaded), even while it is read: read under the fault guard.
                guard let current = SlotMemory.load(address) else { throw failure(SlotMemory.unreadable(address)) }
                holdsClosure = current == existing.code
                if holdsClosure {
                    guard existing.signature.slotSharingKey == signature.slotSharingKey else {
                        throw failure(
                            .signatureMismatch(
                                installed: existing.signature.encoding,
                                fixedArgumentCount: existing.signature.fixedArgumentCount))
                    }
                    target = existing
                    // Hooks an instead hook installed on the empty slot wrap NULL until a
                    // fallback comes.
                    if existing.original == 0 && fallback != 0 {
                        existing.setOriginal(fallback)
                        existing.fallback = fallback
                    }
                } else {
                    // Another writer took the slot over: the old entry keeps its hooks for
                    // whoever chained to its closure, and the slot gets a closure of its own.
                    state.entries[address] = nil
                    state.detached[ObjectIdentifier(existing)] = existing
                    state.table.remove(existing.cell, in: state.pool)
                }
            }
            let isNew = target == nil
            if target == nil {
                let entry = try Self.makeEntry(
                    slot: slot, interface: interface, options: options, reentryByFunction: reentryByFunction,
                    reentryByReceiver: receiver != 0, preserving: preserving,
                    state: &state, failure: failure)
                guard let current = SlotMemory.load(address) else { throw failure(SlotMemory.unreadable(address)) }
                holdsClosure = current == entry.code
                target = entry
            }
            let entry = target!
            if !holdsClosure {
                try Self.observer(of: address, in: state)?.slotWillChange(address)
                try Self.takeOver(
                    cell, for: entry, allowEmpty: position == .instead, fallback: fallback, failure: failure)
            }
            let record = HookRecord(
                block: block, position: position, options: options, priority: priority, receiver: receiver,
                limit: limit, entry: entry, owner: owner, direct: direct)
            let replaced = entry.publish(entry.snapshot.adding(record))
            // A new entry's first snapshot was never published in the slot record, so no
            // call can have read it: it goes now, without a grace period.
            if !isNew { state.retired.append(replaced) }
            ffh_slot_set_state(entry.record, entry.publishedState)
            state.entries[address] = entry
            state.touched.append(address)
            Self.reclaim(&state)
            return record
        }
    }

    /// Runs the call path once, through every kind of block, before the first hook can
    /// reach it; returns whether it could (installing can fail, as where closures cannot be
    /// allocated), so that a later install tries again. An unoptimised build makes the Swift
    /// runtime instantiate generic metadata the first time each spot of the call path runs,
    /// under a lock the runtime holds while it allocates: were that first run a hooked
    /// `malloc` called from inside the runtime, it would wait for that lock for ever.
    private func warmUpCallPath() -> Bool {
        SlotEntry.handlerReady
        let slot = Self.warmUpSlot
        slot.initialize(to: ffh_identity)
        guard let signature = try? Signature("ii") else { return false }
        var hooks: [HookRecord] = []
        defer { for hook in hooks { _ = hook.remove() } }
        let blocks: [(HookPosition, HookOptions, HookRecord.Block)] = [
            (.before, [], { call in call.setArgument(0, to: call.argument(0, as: Int32.self)) }),
            (.before, .once, { _ in }),
            (
                .instead, [],
                { call in
                    call.callOriginal()
                    call.setReturnValue(call.returnValue(as: Int32.self))
                }
            ),
            (.after, .allowsReentry, { call in _ = call.isReentrant }),
        ]
        for (position, options, block) in blocks {
            do {
                hooks.append(
                    try install(
                        slot: UnsafeMutableRawPointer(slot), signature: signature, position: position,
                        options: options, warmsUp: false, block: block))
            } catch {
                return false
            }
        }
        let closure = slot.pointee!
        _ = closure(1)
        _ = closure(2)
        for hook in hooks { _ = hook.remove() }
        hooks = []
        // The closure of a slot without hooks passes calls through.
        _ = closure(3)
        return true
    }

    /// The slot ``warmUpCallPath()`` hooks, allocated once and kept: its closure may be
    /// called at any later time, and reads it. Unchecked: only warm-ups write it, and a
    /// warm-up that runs on two threads at once writes the same value.
    nonisolated(unsafe) private static let warmUpSlot: UnsafeMutablePointer<(@convention(c) (Int32) -> Int32)?> =
        .allocate(capacity: 1)

    /// Calls a function that does nothing through `interface`, so that the paths that call
    /// an original of its signature have run once (see ``warmUpCallPath()``).
    private static func warmUp(_ interface: CallInterface) {
        let sizes = interface.signature.argumentTypes.map { max($0.size, 16) }
        let scratch = UnsafeMutableRawPointer.allocate(
            byteCount: sizes.reduce(max(interface.returnBufferSize, 64), +), alignment: 64)
        defer { scratch.deallocate() }
        scratch.initializeMemory(
            as: UInt8.self, repeating: 0, count: sizes.reduce(max(interface.returnBufferSize, 64), +))
        let arguments = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: max(sizes.count, 1))
        defer { arguments.deallocate() }
        var offset = max(interface.returnBufferSize, 64)
        for (index, size) in sizes.enumerated() {
            arguments[index] = scratch + offset
            offset += size
        }
        let nothing: @convention(c) () -> Void = ffh_nothing
        interface.call(unsafeBitCast(nothing, to: UnsafeRawPointer.self), returnValue: scratch, argumentList: arguments)
    }

    /// A new entry for a slot without hooks, with the slot's closure when it has one for the
    /// same interface, otherwise a new closure; checks first that writing the slot cannot
    /// crash the process. Writable memory, the usual case, is recognised by exchanging the
    /// slot's word with itself under the fault guard; only a slot that is not has its
    /// protection looked up in the memory map.
    private static func makeEntry(
        slot: UnsafeMutableRawPointer, interface: CallInterface, options: HookOptions, reentryByFunction: Bool,
        reentryByReceiver: Bool, preserving: Bool,
        state: inout State, failure: (HookError.Problem) -> HookError
    ) throws(HookError) -> SlotEntry {
        let address = UInt(bitPattern: slot)
        let readOnlyProtection = try Self.protectionToLift(
            at: address, liftsProtection: options.contains(.liftsPageProtection), failure: failure)
        let cell: ClosurePool.Cell
        if let existing = state.table.cell(at: address, in: state.pool), state.pool.cif(existing) == interface.cif.cif,
            !preserving || state.pool.preserves(existing)
        {
            cell = existing
        } else {
            // A closure prepared for another signature (or one that does not preserve
            // registers, for a slot that needs it: memory an inline plan took over) stays
            // with its old cif, as a pass-through for whoever still holds it; the slot gets a
            // new one.
            do {
                cell = try state.pool.make(for: interface, preserving: preserving)
            } catch {
                let problem: HookError.Problem =
                    switch error {
                    case .allocation: .closureAllocationFailed
                    case .preparation(let status): .closurePreparationFailed(status: status)
                    }
                throw failure(problem)
            }
            state.pool.slot(cell).pointee.address = address
            state.table.insert(cell, in: state.pool)
            if state.interfaces.updateValue(interface, forKey: ObjectIdentifier(interface)) == nil {
                warmUp(interface)
            }
        }
        let entry = SlotEntry(
            slot: slot, interface: interface, cell: cell, code: state.pool.code(cell), record: state.pool.slot(cell),
            reentryByFunction: reentryByFunction, reentryByReceiver: reentryByReceiver)
        entry.readOnlyProtection = readOnlyProtection
        return entry
    }

    /// Makes `cell` point at the entry's closure, remembering what it held as the original;
    /// a slot that holds NULL gets `fallback` (when not 0) as its original.
    private static func takeOver(
        _ cell: UnsafeMutablePointer<Atomic<UInt>>, for entry: SlotEntry, allowEmpty: Bool, fallback: UInt,
        failure: (HookError.Problem) -> HookError
    ) throws(HookError) {
        try swap(cell, to: entry.code, protection: entry.readOnlyProtection, failure: failure) {
            (value: UInt) throws(HookError) in
            guard value != 0 || allowEmpty || fallback != 0 else { throw failure(.emptySlot) }
            try checkHeld(value, failure: failure)
            let original = value == 0 ? fallback : value
            // Until the entry is published, calls that reach the closure pass through to it.
            entry.setOriginal(original)
            entry.fallback = value == 0 ? fallback : 0
            ffh_slot_set_state(entry.record, original)
        }
    }

    /// Refuses what a slot holds when it cannot be a function's address: memory that cannot be
    /// read there (a small integer, a freed or unmapped block), unless it is code that can only
    /// be executed. A readable address is taken as it is: whether it lies in code would take
    /// reading the process's memory map at every install, and a slot's first call would show
    /// it anyway. NULL is the caller's to judge (an empty slot).
    private static func checkHeld(_ value: UInt, failure: (HookError.Problem) -> HookError) throws(HookError) {
        guard value != 0, SlotMemory.load(value & ~UInt(MemoryLayout<UInt>.size - 1)) == nil,
            SlotMemory.protection(of: value)?.executable != true
        else { return }
        throw failure(
            .invalidSlot(
                "it holds 0x\(String(value, radix: 16)), which is not the address of a function (no memory can be read there)"
            ))
    }

    /// Refuses a fallback that is not the address of a function, as a replacement is.
    private static func checkFallback(_ fallback: UInt, failure: (HookError.Problem) -> HookError) throws(HookError) {
        guard SlotMemory.protection(of: fallback)?.executable == true else {
            throw failure(
                .invalidSlot(
                    "the fallback 0x\(String(fallback, radix: 16)) is not the address of a function (not in executable memory)"
                ))
        }
    }

    /// Writes `desired` into `cell` by compare-and-swap, after `remember` has seen the value
    /// it replaces (and may refuse it by throwing); retries while other writers change the
    /// slot, up to a bound. The slot is read and written under the fault guard: its owner
    /// may unmap or protect it meanwhile, which is an error, not a crash.
    private static func swap(
        _ cell: UnsafeMutablePointer<Atomic<UInt>>, to desired: UInt, protection: SlotMemory.Protection?,
        failure: (HookError.Problem) -> HookError, remember: (UInt) throws(HookError) -> Void
    ) throws(HookError) {
        let address = UInt(bitPattern: cell)
        for _ in 0..<1000 {
            guard let value = SlotMemory.load(address) else { throw failure(SlotMemory.unreadable(address)) }
            try remember(value)
            switch compareExchange(cell, expected: value, desired: desired, protection: protection) {
            case .replaced: return
            case .heldOther: continue
            case .unwritable:
                throw failure(SlotMemory.isReadable(address) ? .readOnlySlot : SlotMemory.unreadable(address))
            case nil: throw failure(.protectionChangeFailed)
            }
        }
        throw failure(.slotContention)
    }

    /// The protection to lift around writes to the slot at `address`: nil when it is
    /// writable. Throws for unmapped memory, read-only memory without `liftsProtection`, and
    /// executable memory: lifting protection is for tables the loader protected, never for
    /// code, where a word written into a function's instructions would break them.
    private static func protectionToLift(
        at address: UInt, liftsProtection: Bool, failure: (HookError.Problem) -> HookError
    ) throws(HookError) -> SlotMemory.Protection? {
        // At rest: a page another thread's group keeps writable for now is read-only.
        guard !SlotMemory.isWritableAtRest(address) else { return nil }
        guard var protection = SlotMemory.protectionAtRest(of: address), protection.readable else {
            throw failure(SlotMemory.unreadable(address))
        }
        // Not writable at rest, whatever the memory map showed at the moment it was read.
        protection.writable = false
        // Code is never a slot, with or without the option: saying so first keeps the error
        // from suggesting an option that would not help.
        guard !protection.executable else {
            throw failure(.invalidSlot("the slot lies in executable code, not in a table"))
        }
        guard liftsProtection else { throw failure(.readOnlySlot) }
        return protection
    }

    /// Writes `original` back into a slot that still holds `current`, lifting the page's
    /// protection as it is now when the slot was read-only at install (`wasReadOnly`), and
    /// writing nothing to memory that is not writable (or, read-only, is executable: another
    /// object mapped there since, with code where the slot was, whose page must keep its
    /// permission to execute). Every read and write of the slot is under the fault guard: the
    /// memory may be unmapped at any moment. Returns whether it wrote.
    private static func writeBack(_ original: UInt, over current: UInt, at address: UInt, wasReadOnly: Bool) -> Bool {
        if !wasReadOnly {
            return SlotMemory.exchange(address, expected: current, desired: original) == .replaced
        }
        guard SlotMemory.load(address) == current else { return false }
        guard var protection = SlotMemory.protectionAtRest(of: address), protection.readable, !protection.executable
        else { return false }
        let cell = UnsafeMutablePointer<Atomic<UInt>>(bitPattern: address)!
        // Writable at rest (its owner made it so since): written as it is; else lifted for the
        // write and read-only again after, whatever the memory map showed when it was read.
        let isWritable = SlotMemory.isWritableAtRest(address)
        protection.writable = false
        return compareExchange(cell, expected: current, desired: original, protection: isWritable ? nil : protection)
            == .replaced
    }

    /// Compare-and-swap on a slot under the fault guard, lifting its page's protection around
    /// it when the slot is read-only; `nil` when the protection could not be lifted.
    private static func compareExchange(
        _ cell: UnsafeMutablePointer<Atomic<UInt>>, expected: UInt, desired: UInt, protection: SlotMemory.Protection?
    ) -> SlotMemory.Exchange? {
        let address = UInt(bitPattern: cell)
        // A local function, not a closure value: one would be allocated per slot.
        func exchange() -> SlotMemory.Exchange { SlotMemory.exchange(address, expected: expected, desired: desired) }
        guard let protection else { return exchange() }
        let result = SlotMemory.withWritablePage(address, restoring: protection, exchange)
        guard result == .unwritable else { return result }
        // A page the sessions kept writable was mapped again since they lifted it (a library
        // unloaded, another loaded at its address), and forgotten: what is there now, asked once.
        if SlotMemory.isWritableAtRest(address) { return exchange() }
        guard var now = SlotMemory.protectionAtRest(of: address), now.readable, !now.executable else {
            return .unwritable
        }
        now.writable = false
        return SlotMemory.withWritablePage(address, restoring: now, exchange)
    }

    // MARK: - Replacing

    /// `slot`, refused when NULL or not aligned to a pointer: what every write to a slot
    /// checks first.
    private static func checkedSlot(
        _ slot: UnsafeMutableRawPointer?, signature: Signature?
    ) throws(HookError) -> UnsafeMutableRawPointer {
        guard let slot else { throw HookError(slot: nil, signature: signature, problem: .nullSlot) }
        let address = UInt(bitPattern: slot)
        guard address % UInt(MemoryLayout<UnsafeRawPointer>.alignment) == 0 else {
            throw HookError(slot: address, signature: signature, problem: .misalignedSlot)
        }
        return slot
    }

    /// Writes `function` into `slot` in place of the function the slot leads to, with no
    /// closure: calls reach `function` directly. On a slot with hooks, `function` becomes
    /// the function the hooks wrap instead. The replacement's ``Replacement/original`` is what
    /// the slot led to before.
    package func replace(
        slot: UnsafeMutableRawPointer?, with function: UnsafeRawPointer?, signature: Signature?,
        liftsProtection: Bool, mirror: UnsafeMutablePointer<UInt>? = nil, isLibraryCode: Bool = false,
        owner: (any AnyObject & Sendable)? = nil
    ) throws(HookError) -> Replacement {
        let slot = try Self.checkedSlot(slot, signature: signature)
        let address = UInt(bitPattern: slot)
        func failure(_ problem: HookError.Problem) -> HookError {
            HookError(slot: address, signature: signature, problem: problem)
        }
        guard let function else { throw failure(.invalidSlot("the replacement function is NULL")) }
        // The library's own code (an attach stub) needs no look at the memory map.
        guard isLibraryCode || SlotMemory.protection(of: UInt(bitPattern: function))?.executable == true else {
            throw failure(.invalidSlot("the replacement is not the address of a function (not in executable memory)"))
        }
        guard !holdsLock else { throw failure(.calledFromHookBlock) }
        let protection = try Self.protectionToLift(at: address, liftsProtection: liftsProtection, failure: failure)
        let replacement = Replacement(
            slot: slot, function: UInt(bitPattern: function), protection: protection, mirror: mirror, owner: owner)
        return try write { (state: inout State) throws(HookError) -> Replacement in
            try Self.put(replacement, &state, failure: failure)
            return replacement
        }
    }

    /// Replaces each slot of `slots` with its stub, as
    /// ``replace(slot:with:signature:liftsProtection:mirror:isLibraryCode:owner:)`` does with
    /// `isLibraryCode` (the stubs of a group of attaches), under one hold of the lock: all or
    /// nothing (when one cannot be replaced, those replaced before it are taken out again, and
    /// the error names its slot).
    package func replace(
        _ slots: [(
            slot: UnsafeMutableRawPointer?, stub: UnsafeRawPointer, mirror: UnsafeMutablePointer<UInt>?,
            owner: (any AnyObject & Sendable)?
        )],
        liftsProtection: Bool
    ) throws(HookError) -> [Replacement] {
        func failure(at address: UInt) -> (HookError.Problem) -> HookError {
            { problem in HookError(slot: address, signature: nil, problem: problem) }
        }
        guard !holdsLock else { throw failure(at: UInt(bitPattern: slots.first?.slot))(.calledFromHookBlock) }
        var prepared: [Replacement] = []
        prepared.reserveCapacity(slots.count)
        // Entries of one table share pages: the protection is looked up once per page (nothing
        // is written before all are looked up).
        var known: (page: UInt, protection: SlotMemory.Protection?)?
        for item in slots {
            let slot = try Self.checkedSlot(item.slot, signature: nil)
            let address = UInt(bitPattern: slot)
            let page = address & ~(SlotMemory.pageSize - 1)
            let protection: SlotMemory.Protection?
            if let known, known.page == page {
                protection = known.protection
            } else {
                protection = try Self.protectionToLift(
                    at: address, liftsProtection: liftsProtection, failure: failure(at: address))
                known = (page, protection)
            }
            prepared.append(
                Replacement(
                    slot: slot, function: UInt(bitPattern: item.stub), protection: protection, mirror: item.mirror,
                    owner: item.owner))
        }
        return try write { (state: inout State) throws(HookError) -> [Replacement] in
            var done: [Replacement] = []
            done.reserveCapacity(prepared.count)
            state.replacements.reserveCapacity(state.replacements.count + prepared.count)
            state.touched.reserveCapacity(state.touched.count + prepared.count)
            do throws(HookError) {
                for replacement in prepared {
                    // A closure literal: one made by `failure(at:)` would be allocated per slot.
                    let address = UInt(bitPattern: replacement.slot)
                    try Self.put(replacement, &state) { problem in
                        HookError(slot: address, signature: nil, problem: problem)
                    }
                    done.append(replacement)
                }
            } catch {
                for replacement in done.reversed() {
                    replacement.removed.store(true, ordering: .releasing)
                    Self.takeOut(replacement, &state)
                }
                throw error
            }
            return done
        }
    }

    /// Puts `replacement` in its slot, under the lock: in front of the slot's hooks when it
    /// has some, else in the slot itself.
    private static func put(
        _ replacement: Replacement, _ state: inout State, failure: (HookError.Problem) -> HookError
    ) throws(HookError) {
        let address = UInt(bitPattern: replacement.slot)
        // (Most processes hook no slot with a signature: no address to hash then.)
        if !state.entries.isEmpty, let entry = state.entries[address], SlotMemory.load(address) == entry.code {
            // The hooks now wrap the replacement.
            replacement.setOriginal(entry.original)
            entry.setOriginal(replacement.function)
        } else {
            try observer(of: address, in: state)?.slotWillChange(address)
            let cell = replacement.slot.assumingMemoryBound(to: Atomic<UInt>.self)
            try swap(cell, to: replacement.function, protection: replacement.protection, failure: failure) {
                (value: UInt) throws(HookError) in
                try checkHeld(value, failure: failure)
                replacement.setOriginal(value)
            }
        }
        // One lookup for a slot's first replacement (a group puts a thousand in their slots).
        if let before = state.replacements.updateValue(SlotReplacements(replacement), forKey: address) {
            state.replacements[address] = before.appending(replacement)
        }
        state.touched.append(address)
    }

    /// Takes a replacement out: whatever called it (the slot, the hooks' closure, or a
    /// replacement made after it) calls its original again. True the first time, false
    /// afterwards. A slot someone else has written since is left as they left it.
    package func remove(_ replacement: Replacement) -> Bool {
        guard
            replacement.removed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing)
                .exchanged
        else { return false }
        write { state in Self.takeOut(replacement, &state) }
        return true
    }

    /// Takes `replacement` out under the lock, as `remove(_:)` does.
    private static func takeOut(_ replacement: Replacement, _ state: inout State) {
        let address = UInt(bitPattern: replacement.slot)
        var list = state.replacements[address]?.all ?? []
        // Only a replacement made after this one can have it as its original (the same
        // function may stand at several places in the stack).
        let later = list.firstIndex { $0 === replacement }.map { list[($0 + 1)...] } ?? []
        let above = later.first { $0.original == replacement.function }
        list.removeAll { $0 === replacement }
        state.replacements[address] = SlotReplacements(list)
        state.touched.append(address)
        let original = replacement.original
        if let above {
            above.setOriginal(original)
        } else if let entry = state.entries[address], entry.original == replacement.function {
            entry.setOriginal(original)
        } else if isUnloaded(replacement.slot, wasInObject: replacement.inObject) {
            // Its object was unloaded: nothing to write back. (The guarded write would take a
            // fault, a signal for this thread, which then takes a signal sent to the process
            // that another thread was woken for: a tracer joined to a process whose threads
            // load and unload libraries took two such faults at each dlclose.)
        } else {
            _ = writeBack(
                original, over: replacement.function, at: address, wasReadOnly: replacement.protection != nil)
        }
    }

    /// Whether `slot`, which lay in a loaded object when it was hooked (`wasInObject`), lies in an
    /// object that the loader has unloaded since, and no mapping covers it now: the loader's
    /// lock-free table asked (no lock, no system call: every removal asks), and the kernel only
    /// where the object is gone. A slot unmapped after this is still written under the fault
    /// guard; one in memory of no object (a table the program allocated) always is.
    private static func isUnloaded(_ slot: UnsafeMutableRawPointer, wasInObject: Bool) -> Bool {
        wasInObject && ffh_elf_in_object(slot) == 0 && ffh_is_mapped(slot) == 0
    }

    /// Runs `body` under the lock, then hands `object` to reclamation: it is released once no
    /// call that may have read it before `body` ran can still be inside the library's call
    /// path (an attachment whose stub `body` switched to passing calls through).
    package func retire(_ object: AnyObject, after body: () -> Void) {
        write { state in
            body()
            state.retired.append(object)
            Self.reclaim(&state)
        }
    }

    /// Runs `body`, whose installs and removals (a whole group's) retire what they replace
    /// without starting a grace period each; one starts for all of it at the end. Each grace
    /// period makes every running thread pass a memory barrier (`membarrier`), which costs tens
    /// of microseconds with threads running: a group of a thousand hooks removed pays it once.
    /// `body` is also one session of the fault guard (``SlotMemory/guardingFaults(_:)``).
    package func withBatchedReclamation<Result, Failure: Error>(
        _ body: () throws(Failure) -> Result
    ) throws(Failure) -> Result {
        guard !holdsLock else { return try body() }
        write { state in state.reclamationDeferrals += 1 }
        defer {
            write { state in
                state.reclamationDeferrals -= 1
                Self.reclaim(&state)
            }
        }
        // One session of the fault guard for the whole batch: its reads of each slot's chain
        // ask the kernel whether the guard is in place once, not at each read.
        return try SlotMemory.guardingFaults(body)
    }

    // MARK: - Observers

    /// Has `observer` told before the first write to a slot of `slots` that replaces what it
    /// holds when nothing hooks or replaces it, and after every write of the registry to one
    /// of them (see ``SlotObserver``). Ranges do not overlap; one that does replaces those it
    /// overlaps.
    package func observe(slots: Range<UInt>, with observer: any SlotObserver) {
        write { state in
            state.observers.removeAll { $0.slots.overlaps(slots) }
            let place = state.observers.firstIndex { $0.slots.lowerBound > slots.lowerBound } ?? state.observers.count
            state.observers.insert((slots, observer), at: place)
        }
    }

    /// Stops telling the observer of `slots` (its memory is gone).
    package func stopObserving(slots: Range<UInt>) {
        write { state in state.observers.removeAll { $0.slots == slots } }
    }

    /// The observer of the slot at `address`, if one watches it.
    private static func observer(of address: UInt, in state: State) -> (any SlotObserver)? {
        var low = 0
        var high = state.observers.count
        while low < high {
            let middle = (low + high) / 2
            if state.observers[middle].slots.lowerBound <= address { low = middle + 1 } else { high = middle }
        }
        guard low > 0, state.observers[low - 1].slots.contains(address) else { return nil }
        return state.observers[low - 1].observer
    }

    /// Runs `body` under the registry's lock: for an observer's own changes, which must not
    /// interleave with installs and removals.
    package func withLock<Result>(_ body: () throws(HookError) -> Result) throws(HookError) -> Result {
        guard !holdsLock else { throw HookError(slot: nil, signature: nil, problem: .calledFromHookBlock) }
        return try write { (_: inout State) throws(HookError) -> Result in try body() }
    }

    /// Tells the observers of the slots written that the registry has written them (each
    /// checks what its slot holds now).
    private static func notifyObservers(_ state: inout State) {
        guard !state.touched.isEmpty else { return }
        let touched = state.touched
        state.touched.removeAll(keepingCapacity: true)
        guard !state.observers.isEmpty else { return }
        for address in touched { observer(of: address, in: state)?.slotDidChange(address) }
    }

    // MARK: - Removing

    /// Removes `record`'s hook; true the first time, false afterwards. A `once` hook that
    /// removed itself after its run may still wait for the lock (another thread held it):
    /// its removal is finished here, so that when this returns the slot has been written
    /// back, and the memory that holds it may go.
    func remove(_ record: HookRecord) -> Bool {
        guard record.removed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else {
            if record.options.contains(.once) && !holdsLock && deferred.load(ordering: .acquiring) != 0 {
                write { _ in }  // removes the waiting ones first
            }
            return false
        }
        guard !holdsLock else {
            // From a block that runs inside this thread's own install or removal: the hook
            // is removed as the lock is released.
            deferRemoval(record)
            return true
        }
        write { state in
            Self.removeLocked(record, &state)
            Self.reclaim(&state)
        }
        return true
    }

    /// Removes a `once` hook after its run, from the call path, without waiting for the
    /// lock: the hook joins a lock-free list that whoever holds or next takes the lock
    /// empties (the hook is already marked removed and has fired, so it does not run again
    /// meanwhile).
    func removeAfterRun(_ record: HookRecord) {
        guard record.removed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        deferRemoval(record)
        removeDeferredIfLockIsFree()
    }

    /// Puts a hook marked removed on the list of removals that wait for the lock.
    private func deferRemoval(_ record: HookRecord) {
        let address = UInt(bitPattern: Unmanaged.passUnretained(record).toOpaque())
        var head = deferred.load(ordering: .relaxed)
        while true {
            record.nextDeferred.store(head, ordering: .relaxed)
            let (exchanged, original) = deferred.compareExchange(
                expected: head, desired: address, ordering: .sequentiallyConsistent)
            if exchanged { return }
            head = original
        }
    }

    /// Runs `body` under the lock, after removing the `once` hooks that wait for it, and
    /// afterwards removes any that joined the list while it ran.
    private func write<Result, Failure: Error>(
        _ body: (inout State) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        Self.forkHandlers
        defer { removeDeferredIfLockIsFree() }
        return try state.withLock { (state: inout State) throws(Failure) -> Result in
            lockOwner.store(UInt(pthread_self()), ordering: .relaxed)
            defer { lockOwner.store(0, ordering: .relaxed) }
            return try SlotMemory.guardingFaults { () throws(Failure) -> Result in
                removeDeferred(&state)
                defer { Self.notifyObservers(&state) }
                return try body(&state)
            }
        }
    }

    /// Removes the `once` hooks on the list if the lock is free now. Whoever adds to the
    /// list and whoever releases the lock both call this afterwards, so a hook added while
    /// the lock is held is removed by one of them: either this sees the lock free, or the
    /// holder, releasing it, sees the hook.
    private func removeDeferredIfLockIsFree() {
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        while deferred.load(ordering: .sequentiallyConsistent) != 0 {
            let done: Void? = state.withLockIfAvailable { state in
                lockOwner.store(UInt(pthread_self()), ordering: .relaxed)
                defer { lockOwner.store(0, ordering: .relaxed) }
                SlotMemory.guardingFaults {
                    removeDeferred(&state)
                    Self.reclaim(&state)
                    Self.notifyObservers(&state)
                }
            }
            guard done != nil else { return }
        }
    }

    /// Removes the `once` hooks left by ``removeAfterRun(_:)``.
    private func removeDeferred(_ state: inout State) {
        var next = deferred.exchange(0, ordering: .acquiring)
        while let raw = UnsafeRawPointer(bitPattern: next) {
            let record = Unmanaged<HookRecord>.fromOpaque(raw).takeUnretainedValue()
            next = record.nextDeferred.load(ordering: .relaxed)
            Self.removeLocked(record, &state)
        }
    }

    /// Publishes the slot's hooks without `record`. When none is left, the slot's entry goes
    /// (its closure then passes calls through to the original) and the original is written
    /// back if the slot is still mapped, writable and holds the closure. A slot whose memory
    /// is gone (an unloaded library, a freed and unmapped table) is not touched: the registry
    /// forgets it, and its closure is reused once no call can be inside.
    private static func removeLocked(_ record: HookRecord, _ state: inout State) {
        let entry = record.entry
        let snapshot = entry.snapshot.removing(record)
        state.retired.append(entry.publish(snapshot))
        guard snapshot.isEmpty else { return }
        ffh_slot_set_state(entry.record, entry.original)
        state.retired.append(entry)
        let address = UInt(bitPattern: entry.slot)
        state.touched.append(address)
        let isCurrent = state.entries[address] === entry
        if isCurrent {
            state.entries[address] = nil
        } else {
            state.detached[ObjectIdentifier(entry)] = nil
        }
        // Write the original back only if the slot still holds our closure. If it does not,
        // someone else wrote the slot, and may call the closure as their original: it stays
        // a pass-through for good, and a new hook on the slot gets a closure of its own (one
        // that took their pointer as its original would call itself through them). So does a
        // slot made read-only since the install, which may hold the closure still. A slot
        // whose memory is gone is not touched, and its closure is reused.
        // A slot that held NULL and got a fallback as its original gets NULL back, unless a
        // replacement has gone under the hooks since.
        let original = entry.fallback != 0 && entry.original == entry.fallback ? 0 : entry.original
        if isUnloaded(entry.slot, wasInObject: entry.inObject) {
            // Its object was unloaded and nothing is mapped there: nothing to write back, and no
            // guarded write to fault (see `isUnloaded(_:wasInObject:)`).
            if isCurrent { release(entry.cell, &state) }
            return
        }
        let restored: Bool
        if entry.readOnlyProtection == nil {
            // Under the fault guard: another thread may unmap the slot's table at any moment,
            // even during the exchange, which then reports the slot unwritable.
            let exchanged = SlotMemory.exchange(address, expected: entry.code, desired: original)
            if exchanged == .unwritable && !SlotMemory.isReadable(address) && !SlotMemory.isMapped(address) {
                if isCurrent { release(entry.cell, &state) }
                return
            }
            restored = exchanged == .replaced
        } else {
            guard SlotMemory.isReadable(address) || SlotMemory.isMapped(address) else {
                if isCurrent { release(entry.cell, &state) }
                return
            }
            restored = writeBack(original, over: entry.code, at: address, wasReadOnly: true)
        }
        if !restored && isCurrent {
            state.table.remove(entry.cell, in: state.pool)
        }
    }

    /// Takes a closure out of the table; it is reused once no call can be inside it.
    private static func release(_ cell: ClosurePool.Cell, _ state: inout State) {
        state.table.remove(cell, in: state.pool)
        state.retiredCells.append(cell)
    }

    /// Releases the closures of the slots in `first...last` that have no hooks, for reuse
    /// once no call can be inside them; returns how many. Slots with hooks are left as they are.
    package func releaseSlots(from first: UInt, to last: UInt) -> Int {
        guard !holdsLock else { return 0 }
        return write { state in
            let words = (last - first) / UInt(MemoryLayout<UInt>.stride) + 1
            let cells: [ClosurePool.Cell]
            if words <= UInt(state.table.count) {
                cells = stride(from: first, through: last, by: MemoryLayout<UInt>.stride).compactMap {
                    state.table.cell(at: $0, in: state.pool)
                }
            } else {
                cells = state.table.cells(in: first...last, in: state.pool)
            }
            var released = 0
            for cell in cells where state.entries[state.pool.slot(cell).pointee.address] == nil {
                Self.release(cell, &state)
                released += 1
            }
            Self.reclaim(&state)
            return released
        }
    }

    // MARK: - Reclamation

    /// Starts a grace period for newly replaced snapshots and frees the groups whose grace
    /// period has ended, without waiting. Returns whether nothing is left to free.
    @discardableResult
    private static func reclaim(_ state: inout State, force: Bool = false) -> Bool {
        if state.reclamationDeferrals > 0 && !force { return state.waiting.isEmpty }
        if !state.retired.isEmpty || !state.retiredCells.isEmpty {
            // Every running thread passes a full barrier: a call that entered before it is
            // seen as inside; one that enters after it reads the new snapshots.
            if ThreadState.usesMembarrier { _ = ffh_membarrier() }
            atomicMemoryFence(ordering: .sequentiallyConsistent)
            var inside: [(record: UnsafeMutablePointer<ffh_thread>, generation: UInt)] = []
            for record in ThreadState.allRecords where ffh_thread_is_claimed(record) != 0 {
                let generation = ffh_thread_generation(record)
                if generation & 1 == 1 { inside.append((record, generation)) }
            }
            if inside.isEmpty && ffh_recordless_reader_count() == 0 {
                // No call can be reading any of it: free it now, keeping the lists' storage
                // for the next writer (the group below would end at once, for more work).
                for cell in state.retiredCells { state.pool.release(cell) }
                state.retired.removeAll(keepingCapacity: true)
                state.retiredCells.removeAll(keepingCapacity: true)
                state.nextGroup += 1
                return reclaimWaiting(&state)
            }
            state.waiting.append(
                WaitingGroup(
                    number: state.nextGroup, objects: state.retired, cells: state.retiredCells, threads: inside,
                    waitsForRecordless: ffh_recordless_reader_count() != 0))
            state.nextGroup += 1
            state.retired = []
            state.retiredCells = []
        }
        return reclaimWaiting(&state)
    }

    /// Frees the waiting groups whose grace period has ended; returns whether none is left.
    private static func reclaimWaiting(_ state: inout State) -> Bool {
        guard !state.waiting.isEmpty else { return true }
        var freedCells: [ClosurePool.Cell] = []
        state.waiting.removeAll { group in
            if group.waitsForRecordless && ffh_recordless_reader_count() != 0 { return false }
            let ended = group.threads.allSatisfy { thread in
                if ffh_thread_generation(thread.record) != thread.generation { return true }
                // A thread gone without its record being freed (it exited inside a hooked
                // call made from a pthread key destructor, say) is inside nothing.
                guard ffh_thread_is_alive(thread.record) == 0 else { return false }
                // Frees nothing if the thread freed its record itself as it exited.
                _ = ffh_thread_release_vanished(thread.record, thread.generation)
                return true
            }
            if ended { freedCells += group.cells }
            return ended
        }
        for cell in freedCells { state.pool.release(cell) }
        return state.waiting.isEmpty
    }

    /// Waits until every snapshot replaced by an install or removal before this call is
    /// freed.
    ///
    /// Returns once no call that started before this method can still be inside memory of
    /// a hook removed before it. Snapshots that other threads replace while it waits are
    /// not waited for, so installs and removals going on elsewhere cannot keep it waiting.
    /// A call that stays inside a hooked function (blocked on I/O, say) delays it until it
    /// returns. Never call it from inside a hooked call: it would wait for itself.
    package func waitForReclamation() throws(HookError) {
        guard !ThreadState.isInsideHookedCall && !holdsLock else {
            throw HookError(slot: nil, signature: nil, problem: .calledFromHookBlock)
        }
        // Start the grace period of what is retired now; every group up to it must end.
        let last: UInt64? = write { state in
            Self.reclaim(&state, force: true)
            return state.waiting.isEmpty ? nil : state.nextGroup - 1
        }
        guard let last else { return }
        while write({ state in
            Self.reclaim(&state, force: true)
            return state.waiting.contains { $0.number <= last }
        }) {
            sched_yield()
        }
    }

    /// The figures of ``HookStatistics``, read under the lock at one moment; `nil` when this
    /// thread holds the lock (a block that runs for an allocation the library makes while it
    /// installs or removes), where reading them would wait for itself.
    package var statistics: HookStatistics? {
        guard !holdsLock else { return nil }
        return state.withLock { state in
            HookStatistics(
                hookedSlotCount: state.entries.count + state.detached.count,
                pendingReclamationCount: Self.pendingReclamationCount(state),
                closureCount: state.pool.count,
                idleClosureCount: state.pool.freeCount + state.retiredCells.count
                    + state.waiting.reduce(0) { $0 + $1.cells.count })
        }
    }

    /// For each slot of `slots` and the word it holds, the function its hooks wrap when the
    /// word is the closure of its entry with hooks, else the word itself; the words as given when
    /// this thread holds the lock (see ``statistics``).
    package func hookedOriginals(of slots: [(word: UInt, slot: UInt)]) -> [UInt] {
        guard !holdsLock else { return slots.map(\.word) }
        return state.withLock { state in
            slots.map { word, slot in
                guard let entry = state.entries[slot], entry.code == word else { return word }
                return entry.original
            }
        }
    }

    /// Whether the slot at `address`, which holds `value`, holds the closure of an entry with
    /// hooks, and if so the function they wrap; `nil` when this thread holds the lock (see
    /// ``statistics``).
    package func hookedFunction(at address: UInt, holding value: UInt) -> (isHooked: Bool, original: UInt)? {
        guard !holdsLock else { return nil }
        return state.withLock { state in
            guard let entry = state.entries[address], entry.code == value else { return (false, 0) }
            return (true, entry.original)
        }
    }

    /// Whether the library has written the slot at `address`: it holds a replacement, or the
    /// closure of hooks (which may wrap one); nil when this thread holds the lock (see
    /// ``statistics``). A replacement compiled into the object whose entry it fills leads into
    /// that object's code, as an entry not yet bound does: this tells them apart.
    package func isWritten(at address: UInt) -> Bool? {
        guard !holdsLock else { return nil }
        return state.withLock { state in state.replacements[address] != nil || state.entries[address] != nil }
    }

    /// Whether the slot at `address` holds what the library wrote there last: the closure of its
    /// hooks when it has some (which call its replacements), else its newest replacement (an
    /// attach's stub). False when something else wrote it since (the loader, which maps a fresh
    /// table when an object is unloaded and loaded again at the same address, or another
    /// hooking tool, even one that wrote back a function of the library's own); nil when the
    /// slot is not mapped, or this thread holds the lock (see ``statistics``).
    package func holdsWhatItWrote(at address: UInt) -> Bool? {
        guard !holdsLock else { return nil }
        return state.withLock { state in
            guard let value = SlotMemory.load(address) else { return nil }
            guard let written = state.entries[address]?.code ?? state.replacements[address]?.newest.function
            else { return false }
            return value == written
        }
    }

    /// Whether `address` is in code the engine made: a hook's closure or an attach stub.
    /// (False when this thread holds the registry's lock.)
    package func isEngineCode(_ address: UInt) -> Bool {
        guard !holdsLock else { return false }
        return state.withLock { $0.pool.contains(code: address) }
            || AttachEngine.stubs.withLock { $0.contains(code: address) }
    }

    /// How many slots have hooks (detached ones included).
    package var entryCount: Int {
        state.withLock { $0.entries.count + $0.detached.count }
    }

    /// How many slot closures exist, and how many of them serve a slot (with hooks or as a
    /// pass-through); the others wait for reuse.
    package var closureCounts: (made: Int, serving: Int) {
        state.withLock { ($0.pool.count, $0.table.count) }
    }

    /// How many replaced snapshots and entries, and released closures, wait to be freed.
    package var pendingReclamationCount: Int {
        state.withLock { Self.pendingReclamationCount($0) }
    }

    private static func pendingReclamationCount(_ state: State) -> Int {
        state.retired.count + state.retiredCells.count
            + state.waiting.reduce(0) { $0 + $1.objects.count + $1.cells.count }
    }
}
