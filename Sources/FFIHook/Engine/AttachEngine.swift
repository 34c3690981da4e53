internal import CFFI
internal import CFFIHookSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The blocks of one attach, which an attach stub's record points at while it is installed:
/// Swift closures, which ``attachDispatch`` runs, or C functions (``AttachFunctions``), which
/// the attach path calls itself.
final class Attachment: @unchecked Sendable {
    let onEnter: EnterBlock?
    let onLeave: LeaveBlock?
    /// The C functions, when the blocks are those: what the record's state points at. Never
    /// written after init; freed with the attachment (which the registry keeps until no call
    /// can be using it), or with the last attachment of its ``table``.
    private let functions: UnsafeMutablePointer<ffh_attach_functions>?
    /// The table that holds ``functions`` for a group of attachments; nil when the attachment
    /// allocated them itself.
    private let table: AttachFunctionTable?
    /// Whether the blocks run for calls made while a block runs on the same thread
    /// (``HookOptions/allowsReentry``).
    let reenters: Bool

    init(onEnter: EnterBlock?, onLeave: LeaveBlock?, reenters: Bool = false) {
        self.onEnter = onEnter
        self.onLeave = onLeave
        self.reenters = reenters
        functions = nil
        table = nil
    }

    /// The C functions `functions`, held in the next entry of `table` when one is given (a
    /// group's attachments share one allocation), else in memory of the attachment's own.
    init(functions: AttachFunctions, reenters: Bool = false, in table: AttachFunctionTable? = nil) {
        onEnter = nil
        onLeave = nil
        self.reenters = reenters
        let made = table?.next() ?? UnsafeMutablePointer<ffh_attach_functions>.allocate(capacity: 1)
        made.initialize(
            to: ffh_attach_functions(enter: functions.onEnter, leave: functions.onLeave, context: functions.context))
        self.functions = made
        self.table = table
    }

    deinit { if table == nil { functions?.deallocate() } }

    /// Whether there is a leave block.
    var leaves: Bool { functions.map { $0.pointee.leave != nil } ?? (onLeave != nil) }

    /// The same blocks without the leave block (for a function that returns twice).
    var withoutLeave: Attachment {
        guard let functions else { return Attachment(onEnter: onEnter, onLeave: nil, reenters: reenters) }
        return Attachment(
            functions: AttachFunctions(
                onEnter: functions.pointee.enter, onLeave: nil, context: functions.pointee.context),
            reenters: reenters)
    }

    /// The record's flags for these blocks.
    var flags: UInt {
        let enters = functions.map { $0.pointee.enter != nil } ?? (onEnter != nil)
        return (enters ? UInt(FFH_ATTACH_ENTERS) : 0) | (leaves ? UInt(FFH_ATTACH_LEAVES) : 0)
            | (reenters ? UInt(FFH_ATTACH_REENTERS) : 0) | (functions == nil ? 0 : UInt(FFH_ATTACH_CALLS_FUNCTIONS))
    }

    /// What the record's state holds: the C functions, or this object (unretained: the
    /// registry holds it).
    var state: UInt {
        if let functions { return UInt(bitPattern: functions) }
        return UInt(bitPattern: Unmanaged.passUnretained(self).toOpaque())
    }
}

/// The C functions of a group of attachments (``Attachment/init(functions:reenters:in:)``), in
/// one allocation, which goes with the last attachment that holds an entry: a group of a
/// thousand attaches allocates once, not a thousand times.
final class AttachFunctionTable {
    /// The entries.
    private let entries: UnsafeMutablePointer<ffh_attach_functions>
    /// How many entries there are.
    private let capacity: Int
    /// How many entries were handed out.
    private var used = 0

    /// A table of `capacity` entries.
    init(capacity: Int) {
        self.capacity = capacity
        entries = .allocate(capacity: capacity)
    }

    deinit { entries.deallocate() }

    /// The next entry (uninitialised), or nil when all were handed out.
    func next() -> UnsafeMutablePointer<ffh_attach_functions>? {
        guard used < capacity else { return nil }
        used += 1
        return entries + (used - 1)
    }
}

/// The attach stubs of the process: code that enters the attach entry with its record, cut from
/// blocks of libffi's closure memory (writable and executable, or a code alias of writable
/// memory). A stub is never freed: a caller may have read its address from a slot and call it
/// at any later time, and then reaches the original through it. A stub whose attach was
/// removed serves the next attach of the same slot.
struct AttachStubs {
    /// One stub: its code address and its record (in writable memory).
    struct Stub {
        let code: UInt
        let record: UnsafeMutablePointer<ffh_attach>
    }

    /// The bytes of a stub and its record.
    private static let stride = 64
    /// Stubs per block of memory for code (16 KiB): a group of a thousand attaches takes a few
    /// blocks, not a mapping (and its first faults) for every 64 stubs.
    private static let perBlock = 256
    private var lastBlock: (writable: UnsafeMutableRawPointer, code: UnsafeRawPointer)?
    private var usedInLastBlock = perBlock
    /// Stubs whose attach was removed, by slot address.
    private var free: [UInt: [Stub]] = [:]
    /// How many stubs exist.
    private(set) var count = 0
    /// Each block of stubs, by where its code starts (in that order): its code and its
    /// writable view, which holds the records. A stub's record is found from its code address
    /// by arithmetic, not a table (a group of a thousand attaches would fill one).
    private var blocks: [(code: UInt, writable: UnsafeMutableRawPointer)] = []
    /// From the lowest block's code to the end of the highest's: an address outside is no
    /// stub's, known without a search.
    private var codeBounds: Range<UInt> = 0..<0
    /// The bytes of a block's code.
    private static var blockSize: UInt { UInt(stride * perBlock) }

    /// Whether `address` is in the code of a block of stubs.
    func contains(code address: UInt) -> Bool {
        block(containing: address) != nil
    }

    /// The place in ``blocks`` of the block whose code holds `address`, if any.
    private func block(containing address: UInt) -> Int? {
        guard codeBounds.contains(address) else { return nil }
        // The last block that starts at or below the address (a binary search).
        var low = 0
        var high = blocks.count
        while low < high {
            let middle = (low + high) / 2
            if blocks[middle].code <= address { low = middle + 1 } else { high = middle }
        }
        guard low > 0, address - blocks[low - 1].code < Self.blockSize else { return nil }
        return low - 1
    }

    /// The function the stub at `code` calls, or nil when `code` is not a stub's: not where a
    /// stub starts, or in a block's part that no stub was made in yet.
    func original(ofStubAt code: UInt) -> UInt? {
        guard let place = block(containing: code) else { return nil }
        let offset = Int(code - blocks[place].code)
        guard offset % Self.stride == 0 else { return nil }
        let isLast = blocks[place].writable == lastBlock?.writable
        guard !isLast || offset / Self.stride < usedInLastBlock else { return nil }
        let record = blocks[place].writable + offset + Int(FFH_ATTACH_STUB_SIZE)
        let raw = record + MemoryLayout<ffh_attach>.offset(of: \.original)!
        return raw.assumingMemoryBound(to: Atomic<UInt>.self).pointee.load(ordering: .acquiring)
    }

    /// A stub for `slot`: one that served it before, else a new one (nil when memory for code
    /// cannot be had). Its record passes calls through until an attachment is published. A
    /// preserving stub (`preserving`: an inline function's slot) keeps every register the
    /// function leaves alone (``ffh_attach_write_stub_preserving``); a stub taken again is
    /// written again for the kind asked for (nothing calls a stub given back).
    mutating func take(for slot: UInt, preserving: Bool = false) -> Stub? {
        if !free.isEmpty, let stub = free[slot]?.popLast() {
            if free[slot]?.isEmpty == true { free[slot] = nil }
            if let place = block(containing: stub.code) {
                let writable = blocks[place].writable + Int(stub.code - blocks[place].code)
                Self.write(writable, record: stub.record, preserving: preserving)
            }
            return stub
        }
        if usedInLastBlock == Self.perBlock {
            var code: UnsafeMutableRawPointer?
            guard let writable = ffi_closure_alloc(Self.stride * Self.perBlock, &code), let code else { return nil }
            lastBlock = (writable, UnsafeRawPointer(code))
            let start = UInt(bitPattern: code)
            let place = blocks.firstIndex { $0.code > start } ?? blocks.endIndex
            blocks.insert((start, writable), at: place)
            let end = start + Self.blockSize
            codeBounds =
                codeBounds.isEmpty ? start..<end : min(codeBounds.lowerBound, start)..<max(codeBounds.upperBound, end)
            usedInLastBlock = 0
        }
        let block = lastBlock!
        let offset = usedInLastBlock * Self.stride
        usedInLastBlock += 1
        count += 1
        let record = (block.writable + offset + Int(FFH_ATTACH_STUB_SIZE)).bindMemory(to: ffh_attach.self, capacity: 1)
        record.initialize(to: ffh_attach(original: 0, state: 0, epoch: 0, flags: 0))
        Self.write(block.writable + offset, record: record, preserving: preserving)
        return Stub(code: UInt(bitPattern: block.code + offset), record: record)
    }

    /// Writes a stub of the kind asked for at `writable`.
    private static func write(
        _ writable: UnsafeMutableRawPointer, record: UnsafeMutablePointer<ffh_attach>, preserving: Bool
    ) {
        if preserving {
            ffh_attach_write_stub_preserving(writable, record)
        } else {
            ffh_attach_write_stub(writable, record)
        }
    }

    /// Gives back the stub of an attach of `slot` that was removed.
    mutating func give(_ stub: Stub, for slot: UInt) {
        free[slot, default: []].append(stub)
    }
}

/// One installed attach: its stub, the replacement that put the stub in the slot, and the
/// attachment, which removal hands to reclamation.
final class AttachHandle: HookHandle, @unchecked Sendable {
    // Sendable: `stub`, `slot` and `attachment` are constants; `replacement` is set once,
    // before the handle is shared.
    let stub: AttachStubs.Stub
    let slot: UInt
    let attachment: Attachment
    var replacement: Replacement!
    /// Whether the attach was removed (an atomic, not a lock: a child after fork may remove it).
    private let removed = Atomic<Bool>(false)

    init(stub: AttachStubs.Stub, slot: UInt, attachment: Attachment) {
        self.stub = stub
        self.slot = slot
        self.attachment = attachment
    }

    func remove() -> Bool {
        guard !removed.exchange(true, ordering: .acquiringAndReleasing) else { return false }
        AttachEngine.installed.subtract(1, ordering: .relaxed)
        _ = SlotRegistry.shared.remove(replacement)
        let stub = stub
        let slot = slot
        SlotRegistry.shared.retire(attachment) {
            AttachEngine.publish(nil, in: stub.record)
            AttachEngine.stubs.withLock { $0.give(stub, for: slot) }
        }
        // The reference the installed attach held (reclamation holds one now).
        _ = AttachEngine.live.withLock { $0.removeValue(forKey: ObjectIdentifier(attachment)) }
        return true
    }

    var isActive: Bool { !removed.load(ordering: .acquiring) }

    var summary: String {
        "attach on 0x\(String(slot, radix: 16))"
    }
}

enum AttachEngine {
    /// The stubs of the process.
    static let stubs = Locked(AttachStubs())
    /// The installed attaches' blocks, held here (not only by a token, which may be dropped,
    /// nor only through the stubs' records, which a leak checker does not read) until removal.
    /// Taken across fork, last (nothing is taken inside it): a child forked while another
    /// thread held it waited for it for ever at its first attach.
    static let live: Locked<[ObjectIdentifier: Attachment]> = {
        let lock = Locked([ObjectIdentifier: Attachment]())
        lock.protectAcrossFork(rank: SlotRegistry.forkRank + 10)
        return lock
    }()
    /// How many attaches are installed.
    static let installed = Atomic<Int>(0)

    /// Points the C side at ``attachDispatch``, once.
    static let ready: Void = {
        SlotEntry.handlerReady
        // Taken inside the registry's lock (a removal gives its stub back under it).
        stubs.protectAcrossFork(rank: SlotRegistry.forkRank + 2)
        AttachContextWarmUp.run()
        ffh_attach_setup(attachDispatch)
    }()

    /// Publishes `attachment` (nil: pass calls through) in a stub's record. Under the
    /// registry's lock, or before the stub is reachable.
    static func publish(
        _ attachment: Attachment?, in record: UnsafeMutablePointer<ffh_attach>, asCaller: Bool = false
    ) {
        let raw = UnsafeMutableRawPointer(record)
        let state = (raw + MemoryLayout<ffh_attach>.offset(of: \.state)!).assumingMemoryBound(to: Atomic<UInt>.self)
        let epoch = (raw + MemoryLayout<ffh_attach>.offset(of: \.epoch)!).assumingMemoryBound(to: Atomic<UInt>.self)
        let flags = (raw + MemoryLayout<ffh_attach>.offset(of: \.flags)!).assumingMemoryBound(to: Atomic<UInt>.self)
        state.pointee.store(0, ordering: .sequentiallyConsistent)
        epoch.pointee.wrappingAdd(1, ordering: .sequentiallyConsistent)
        guard let attachment else { return }
        flags.pointee.store(
            attachment.flags | (asCaller ? UInt(FFH_ATTACH_AS_CALLER) : 0), ordering: .sequentiallyConsistent)
        state.pointee.store(attachment.state, ordering: .sequentiallyConsistent)
    }

    /// Attaches to the function `slot` leads to, through a stub written into the slot as a
    /// replacement (so attaches compose with hooks and replacements of the slot as those do).
    /// `function` (the function an inline cell stands for) or `symbol` (an import entry's)
    /// name the function when the slot's word does not; a function that returns twice is
    /// attached without its `onLeave` (``ReturnsTwice``).
    static func attach(
        slot: UnsafeMutableRawPointer?, attachment: Attachment, liftsProtection: Bool,
        owner: (any AnyObject & Sendable)? = nil, function: UInt = 0, symbol: String? = nil
    ) throws(HookError) -> AttachHandle {
        guard ffh_attach_available() != 0 else {
            throw HookError(
                code: .unsupportedPlatform, message: "attaching without a signature works on Linux x86-64",
                slot: slot.map { FunctionSlot($0) })
        }
        ready
        let address = UInt(bitPattern: slot)
        // A slot that holds NULL has no function to attach to (checked again after the write).
        if address != 0 && address % UInt(MemoryLayout<UInt>.alignment) == 0 && SlotMemory.load(address) == 0 {
            throw HookError(
                code: .emptySlot, message: "it holds NULL: there is no function to attach to",
                slot: FunctionSlot(address: address))
        }
        var attachment = attachment
        var asCaller = false
        if attachment.leaves {
            let aligned = address != 0 && address % UInt(MemoryLayout<UInt>.alignment) == 0
            let target = function != 0 ? function : aligned ? SlotMemory.load(address) ?? 0 : 0
            let lead = leads([(target, address)])[0]
            if symbol.map(ReturnsTwice.contains(name:)) == true || lead.returnsTwice {
                attachment = attachment.withoutLeave
            }
            asCaller = symbol.map(ReadsReturnAddress.functions.contains(name:)) == true || lead.readsReturnAddress
        }
        guard let stub = stubs.withLock({ $0.take(for: address, preserving: function != 0) }) else {
            throw HookError(slot: address, signature: nil, problem: .closureAllocationFailed)
        }
        let handle = AttachHandle(stub: stub, slot: address, attachment: attachment)
        let original = UnsafeMutableRawPointer(stub.record).assumingMemoryBound(to: UInt.self)
        // Published before the stub is reachable through the slot: no call through it is missed.
        publish(attachment, in: stub.record, asCaller: asCaller)
        do {
            handle.replacement = try SlotRegistry.shared.replace(
                slot: slot, with: UnsafeRawPointer(bitPattern: stub.code), signature: nil,
                liftsProtection: liftsProtection, mirror: original, isLibraryCode: true, owner: owner)
        } catch {
            publish(nil, in: stub.record)
            stubs.withLock { $0.give(stub, for: address) }
            throw error
        }
        installed.add(1, ordering: .relaxed)
        // The installed attach keeps its blocks, token or no token (a dropped token leaves the
        // attach in place, as it leaves a hook); its removal lets them go.
        live.withLock { $0[ObjectIdentifier(handle.attachment)] = handle.attachment }
        if handle.replacement.original == 0 {
            _ = handle.remove()
            throw HookError(
                code: .emptySlot, message: "it holds NULL: there is no function to attach to",
                slot: FunctionSlot(address: address))
        }
        return handle
    }
}

extension AttachEngine {
    /// One slot of a group attached at once (``attach(_:liftsProtection:)``).
    struct Item {
        /// The slot (an import-table entry, an inline function's jump cell).
        let slot: UInt
        let attachment: Attachment
        /// The function's name (the entry's symbol), which errors name; nil for none (the
        /// caller names the function of an error itself).
        let symbol: String?
        /// Whether ``symbol`` is the name the loader binds (an import entry's): then it alone
        /// may say that the function returns twice or reads its return address. An inline
        /// function's name is its own symbol's, which may be a local one of any name.
        var symbolIsBound = true
        /// The function the slot stands for (an inline function's), looked at in place of the
        /// slot's word; 0 for the word.
        var function: UInt = 0
        /// What the slot's replacement keeps alive (an inline function's code slab).
        var owner: (any AnyObject & Sendable)?
    }

    /// Attaches to each item's slot as ``attach(slot:attachment:liftsProtection:owner:function:symbol:)``
    /// does, all or nothing: the stubs are taken under one hold of their lock and the slots
    /// written under one hold of the registry's, which a group of a thousand entries would
    /// otherwise take a thousand times each. An error names the item's symbol.
    static func attach(_ items: [Item], liftsProtection: Bool) throws(HookError) -> [AttachHandle] {
        guard !items.isEmpty else { return [] }
        guard ffh_attach_available() != 0 else {
            throw HookError(
                code: .unsupportedPlatform, message: "attaching without a signature works on Linux x86-64",
                slot: FunctionSlot(address: items[0].slot))
        }
        ready
        func failure(_ error: HookError, at slot: UInt) -> HookError {
            guard let symbol = (items.first { $0.slot == slot } ?? items[0]).symbol else { return error }
            return error.naming(symbol: symbol)
        }
        // Indexed loops throughout: a group has a thousand items, and a copy of one (its
        // attachment and symbol retained and released) costs more than the work on it.
        // The items with a leave block whose name does not say they return twice, and what their
        // slots hold: their functions are looked for together (two locks for the group, not
        // two per item). Those that return twice get an attachment without the leave block.
        var unnamed: [(place: Int, slot: UInt, word: UInt)] = []
        unnamed.reserveCapacity(items.count)
        var leaveless: [Int: Attachment] = [:]
        var asCaller = Set<Int>()
        for place in items.indices {
            let address = items[place].slot
            let aligned = address != 0 && address % UInt(MemoryLayout<UInt>.alignment) == 0
            let word = aligned ? SlotMemory.load(address) : nil
            if aligned && word == 0 {
                let error = HookError(
                    code: .emptySlot, message: "it holds NULL: there is no function to attach to",
                    slot: FunctionSlot(address: address))
                throw failure(error, at: address)
            }
            guard items[place].attachment.leaves else { continue }
            let bound = items[place].symbolIsBound ? items[place].symbol : nil
            if let bound, ReturnsTwice.contains(name: bound) {
                leaveless[place] = items[place].attachment.withoutLeave
            } else {
                if let bound, ReadsReturnAddress.functions.contains(name: bound) { asCaller.insert(place) }
                let function = items[place].function
                unnamed.append((place, address, function != 0 ? function : word ?? 0))
            }
        }
        for (candidate, lead) in zip(unnamed, leads(unnamed.map { ($0.word, $0.slot) })) {
            if lead.returnsTwice { leaveless[candidate.place] = items[candidate.place].attachment.withoutLeave }
            if lead.readsReturnAddress { asCaller.insert(candidate.place) }
        }
        let taken: (stubs: [AttachStubs.Stub], failed: UInt?) = stubs.withLock { pool in
            var taken: [AttachStubs.Stub] = []
            taken.reserveCapacity(items.count)
            for place in items.indices {
                guard let stub = pool.take(for: items[place].slot, preserving: items[place].function != 0) else {
                    for given in taken.indices { pool.give(taken[given], for: items[given].slot) }
                    return ([], items[place].slot)
                }
                taken.append(stub)
            }
            return (taken, nil)
        }
        if let slot = taken.failed {
            throw failure(HookError(slot: slot, signature: nil, problem: .closureAllocationFailed), at: slot)
        }
        var handles: [AttachHandle] = []
        handles.reserveCapacity(items.count)
        for place in items.indices {
            let stub = taken.stubs[place]
            let attachment = leaveless[place] ?? items[place].attachment
            handles.append(AttachHandle(stub: stub, slot: items[place].slot, attachment: attachment))
            // Published before the stub is reachable through the slot: no call through it is missed.
            publish(attachment, in: stub.record, asCaller: asCaller.contains(place))
        }
        let replacements: [Replacement]
        do throws(HookError) {
            replacements = try SlotRegistry.shared.replace(
                taken.stubs.indices.map { place in
                    let stub = taken.stubs[place]
                    return (
                        UnsafeMutableRawPointer(bitPattern: items[place].slot),
                        UnsafeRawPointer(bitPattern: stub.code)!,
                        UnsafeMutableRawPointer(stub.record).assumingMemoryBound(to: UInt.self),
                        items[place].owner
                    )
                }, liftsProtection: liftsProtection)
        } catch {
            for stub in taken.stubs { publish(nil, in: stub.record) }
            stubs.withLock { pool in
                for place in items.indices { pool.give(taken.stubs[place], for: items[place].slot) }
            }
            let slot = error.slot?.address ?? items[0].slot
            throw failure(error, at: slot)
        }
        for place in handles.indices { handles[place].replacement = replacements[place] }
        installed.add(handles.count, ordering: .relaxed)
        // The installed attaches keep their blocks, tokens or no tokens (see the single attach).
        // Items of one symbol share their attachment: it is held once.
        live.withLock { live in
            live.reserveCapacity(live.count + handles.count)
            var last: ObjectIdentifier?
            for place in handles.indices {
                let attachment = handles[place].attachment
                let key = ObjectIdentifier(attachment)
                guard key != last else { continue }
                last = key
                live[key] = attachment
            }
        }
        if let empty = replacements.firstIndex(where: { $0.original == 0 }) {
            for handle in handles { _ = handle.remove() }
            let error = HookError(
                code: .emptySlot, message: "it holds NULL: there is no function to attach to",
                slot: FunctionSlot(address: items[empty].slot))
            throw failure(error, at: items[empty].slot)
        }
        return handles
    }

}

extension AttachEngine {
    /// Where a word that a slot holds leads, among the functions an attach treats apart.
    struct Lead {
        /// A function that returns twice (``ReturnsTwice``).
        var returnsTwice = false
        /// A function that reads its return address (``ReadsReturnAddress``).
        var readsReturnAddress = false
    }

    /// For each `word` that the slot at `slot` holds, the function it leads to, looked for
    /// through what the library put in front of it (the closure of the slot's hooks, attach
    /// stubs) and through jumps a linker puts in front of a function (a PLT entry's
    /// `jmp [rip + x]`, a `jmp rel32`), a few steps deep: with one hold of the registry's lock
    /// and one of the stubs' for all of them.
    static func leads(_ slots: [(word: UInt, slot: UInt)]) -> [Lead] {
        guard !slots.isEmpty else { return [] }
        let words = SlotRegistry.shared.hookedOriginals(of: slots)
        // Read once, not at each step of each word (each read of a global checks that it is made).
        let returnsTwice = ReturnsTwice.functions
        let readsReturnAddress = ReadsReturnAddress.functions
        return stubs.withLock { pool in
            words.map { word in
                var word = word
                for _ in 0..<8 {
                    guard word != 0 else { return Lead() }
                    if returnsTwice.contains(function: word) { return Lead(returnsTwice: true) }
                    if readsReturnAddress.contains(function: word) { return Lead(readsReturnAddress: true) }
                    if let next = pool.original(ofStubAt: word) {
                        word = next
                    } else if let next = jumpTarget(at: word) {
                        word = next
                    } else {
                        return Lead()
                    }
                }
                return Lead()
            }
        }
    }

    /// Where the code at `address` jumps straight away, when it starts (after an `endbr64`)
    /// with `jmp [rip + disp32]` (with or without a `bnd` prefix: where the word it reads
    /// points) or `jmp rel32`; nil otherwise, or when the memory cannot be read.
    private static func jumpTarget(at address: UInt) -> UInt? {
        guard var bytes = SlotMemory.load(address) else { return nil }
        var at = address
        if bytes & 0xFFFF_FFFF == 0xFA1E_0FF3 {  // endbr64
            at += 4
            guard let next = SlotMemory.load(at) else { return nil }
            bytes = next
        }
        if bytes & 0xFF == 0xF2 {  // bnd
            at += 1
            bytes >>= 8
        }
        if bytes & 0xFFFF == 0x25FF {  // jmp [rip + disp32]
            let displacement = Int32(truncatingIfNeeded: bytes >> 16)
            return SlotMemory.load(at &+ 6 &+ UInt(bitPattern: Int(displacement)))
        }
        if bytes & 0xFF == 0xE9 {  // jmp rel32
            let displacement = Int32(truncatingIfNeeded: bytes >> 8)
            return at &+ 5 &+ UInt(bitPattern: Int(displacement))
        }
        return nil
    }
}

/// What the C side calls to run an attachment's blocks. Where the call path marks its own code
/// (``ThreadState/marksCallPath``), the thread arrives marked, and the mark is lifted for the
/// block itself: the Swift runtime's calls around it are the library's, the block's are not.
let attachDispatch: ffh_attach_dispatch = { state, frame, leaving in
    let attachment = Unmanaged<Attachment>.fromOpaque(UnsafeRawPointer(bitPattern: state)!)
    attachment._withUnsafeGuaranteedRef { attachment in
        let marked = ThreadState.marksCallPath ? ffh_library_enter(0) : 0
        if leaving != 0 {
            attachment.onLeave?(LeaveContext(frame: frame!))
        } else {
            attachment.onEnter?(EnterContext(frame: frame!))
        }
        if marked != 0 { ffh_library_enter(marked) }
    }
}
