internal import CFFIHookPatch
internal import FFIHook
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Memory for the inline plans of one loaded object: one mapping of code (each plan's stub
/// and trampoline, packed one after the other) followed by one of cells (each plan's 8-byte
/// jump cell, which the hook engine hooks as a slot), mapped within ±2 GB of the object when
/// there is room there. Many plans share a slab, so a library of thousands of functions costs
/// a few mappings in all rather than two per function.
///
/// A plan's code is `jmp [rip + cell]` (the stub the function's patch jumps to; 8 bytes with
/// its padding), then the trampoline: the function's first instructions relocated, and a jump
/// back to the rest of the function. The code is written once, before the plan is published,
/// and the code mapping stays read-and-execute: new code goes in through the code writer
/// (``ffh_patch_write_code``), which never takes the execute permission away from code another
/// thread may be running.
///
/// The slab is also the observer of its cells (see ``SlotObserver``): the registry tells it
/// when a cell starts leading elsewhere than its trampoline, and it writes the function's
/// patch (see ``InlinePatching``).
final class CodeSlab: SlotObserver, @unchecked Sendable {
    // Sendable: the geometry is constant; `codeUsed`, `count` and the records below `count`
    // are written under the planner's lock, the records only before their plan is published
    // (read-only afterwards); `states` are atomics changed, and `movedThreads` changed and
    // read, under the registry's lock.

    static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
    /// A stub (`jmp [rip + disp32]`, 6 bytes) and its padding; the trampoline follows it.
    static let stubSize = 8
    /// The most code one plan can need (stub, relocated instructions, the 14-byte jump back):
    /// a plan is only placed in a slab with this much room left.
    static let largestPlan = stubSize + PlanRecord.maximumInstructions * Relocator.maximumCopyLength + 14
    /// How far a `rel32` reaches, with room for the slab itself.
    static let reach: UInt = 0x7FFF_0000

    /// The code mapping's address.
    let base: UInt
    /// Its size in bytes.
    let codeSize: Int
    /// The first cell: right after the code.
    let cellBase: UInt
    /// How many plans (and cells) the slab holds at most.
    let capacity: Int
    /// Whether the slab lies within ±2 GB of the functions it was mapped for: their patches are
    /// then the 5-byte `jmp rel32`, else the 14-byte absolute jump.
    let isNear: Bool

    /// Bytes of code in use (planner's lock).
    private(set) var codeUsed = 0
    /// Plans in use (planner's lock); published through ``publishedCount``.
    private(set) var count = 0
    /// How many ``PlanGroup``s (batches, planned functions and what their slots were given to)
    /// keep this slab: counted up under the planner's lock, down anywhere; at 0, the slab goes
    /// once no function of it is patched.
    let groups = Atomic<Int>(0)
    /// Set once the slab's memory is gone (its library unloaded, or nothing kept it).
    let isUnmapped = Atomic<Bool>(false)
    /// Whether the slab's memory is gone.
    var wasUnmapped: Bool { isUnmapped.load(ordering: .acquiring) }
    /// Whether a trampoline of the slab calls a function (a copied `call`): a thread may then
    /// be inside the callee with a return address in the slab, which therefore stays mapped.
    var hasCalls = false
    /// Plans `0..<sortedCount` are in ascending order of their functions' addresses (a batch
    /// plans in that order), found by halves; later ones are found in `unsorted` (planner's
    /// lock). No table of every plan by address: a library of thousands costs nothing more.
    private(set) var sortedCount = 0
    private var unsorted: [UInt: Int32] = [:]
    /// How many plans a reader without the planner's lock may read.
    let publishedCount = Atomic<Int>(0)
    /// The plans' records, `capacity` of them.
    let records: UnsafeMutablePointer<PlanRecord>
    /// Each plan's patch state (see ``InlinePatching``).
    let states: UnsafeMutablePointer<Atomic<UInt32>>
    /// The records and the states, in an anonymous mapping of their own (kept while the slab
    /// object lives: its code may be unmapped before, when its library is). A slab has a cell,
    /// so room for a record, for every 24 bytes of code, about 2.5 times the plans it is made
    /// for; pages no plan reaches are never touched, so never resident. Taken from the
    /// allocator, the tables could land on pages that freed memory had made resident, whole
    /// (0.9 MB for the 5,359 functions of libcrypto, where their plans use 0.36 MB): the
    /// resident memory a batch adds swung by a third with the allocator's history.
    private let tables: (address: UnsafeMutableRawPointer, size: Int)
    /// How many threads the writes of each plan have moved into its trampoline, for the plans
    /// that moved any (registry's lock).
    var movedThreads: [Int: Int] = [:]
    /// The code of the plans added since the planner began deferring its writes
    /// (``deferWrites()``), from offset `pendingStart`, not yet in the mapping; nil when each
    /// plan's code is written as it is added (planner's lock).
    private var pending: [UInt8]?
    private var pendingStart = 0
    /// The plans whose code is pending: index, offset and length of its code.
    private var pendingPlans: [(index: Int, offset: Int, length: Int)] = []
    /// Plans whose code could not be written: never found again (planner's lock).
    private var dead: Set<Int> = []

    private init(
        base: UInt, codeSize: Int, cellSize: Int, isNear: Bool,
        tables: (address: UnsafeMutableRawPointer, size: Int)
    ) {
        self.base = base
        self.codeSize = codeSize
        self.cellBase = base + UInt(codeSize)
        self.capacity = cellSize / MemoryLayout<UInt>.stride
        self.isNear = isNear
        self.tables = tables
        records = tables.address.bindMemory(to: PlanRecord.self, capacity: capacity)
        states = (tables.address + Self.statesOffset(capacity: capacity))
            .bindMemory(to: Atomic<UInt32>.self, capacity: capacity)
    }

    deinit {
        records.deinitialize(count: count)
        states.deinitialize(count: count)
        munmap(tables.address, tables.size)
    }

    /// Where the states start in the tables' mapping, after `capacity` records.
    private static func statesOffset(capacity: Int) -> Int {
        let alignment = MemoryLayout<Atomic<UInt32>>.alignment
        return (capacity * MemoryLayout<PlanRecord>.stride + alignment - 1) / alignment * alignment
    }

    /// Maps the records and states of a slab of `capacity` plans; nil when nothing can be mapped.
    private static func mapTables(capacity: Int) -> (address: UnsafeMutableRawPointer, size: Int)? {
        let bytes = statesOffset(capacity: capacity) + capacity * MemoryLayout<Atomic<UInt32>>.stride
        let size = (bytes + pageSize - 1) / pageSize * pageSize
        guard let address = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            address != MAP_FAILED
        else { return nil }
        return (address, size)
    }

    /// The geometry of a slab for about `plans` plans: 48 bytes of code for each (a stub, a
    /// few relocated instructions and the jump back take about 35) in steps of 64 KiB, and a
    /// cell for every 24 bytes of it (the least code a plan takes).
    private static func sizes(for plans: Int) -> (code: Int, cells: Int) {
        let step = 64 * 1024
        let code = (plans * 48 + largestPlan + step - 1) / step * step
        let cells = (code / 24 * MemoryLayout<UInt>.stride + pageSize - 1) / pageSize * pageSize
        return (code, cells)
    }

    /// Maps a slab for about `plans` plans of the functions in `range`, as near them as the
    /// free address space allows (see ``CodeSpace``); nil when nothing can be mapped.
    static func map(
        plans: Int, near range: ClosedRange<UInt>, mappings: [MemoryMapping]
    ) -> CodeSlab? {
        let (codeSize, cellSize) = sizes(for: plans)
        guard let (base, isNear) = CodeSpace.map(size: codeSize + cellSize, near: range, mappings: mappings) else {
            return nil
        }
        // The code part is read-and-execute from the start; the cells stay writable.
        guard mprotect(UnsafeMutableRawPointer(bitPattern: base), codeSize, PROT_READ | PROT_EXEC) == 0,
            let tables = mapTables(capacity: cellSize / MemoryLayout<UInt>.stride)
        else {
            munmap(UnsafeMutableRawPointer(bitPattern: base), codeSize + cellSize)
            return nil
        }
        return CodeSlab(base: base, codeSize: codeSize, cellSize: cellSize, isNear: isNear, tables: tables)
    }

    // MARK: - Places

    /// Plan `index`'s stub: where its function's patch jumps.
    func stub(_ index: Int) -> UInt { base + UInt(records[index].stubOffset) }
    /// Plan `index`'s trampoline, which acts as its function's original.
    func trampoline(_ index: Int) -> UInt { stub(index) + UInt(Self.stubSize) }
    /// Plan `index`'s jump cell.
    func cell(_ index: Int) -> UInt { cellBase + UInt(index * MemoryLayout<UInt>.stride) }
    /// The plan whose cell is at `address`, if it is one of this slab's published cells.
    func index(ofCell address: UInt) -> Int? {
        guard address >= cellBase, (address - cellBase) % UInt(MemoryLayout<UInt>.stride) == 0 else { return nil }
        let index = Int((address - cellBase) / UInt(MemoryLayout<UInt>.stride))
        return index < publishedCount.load(ordering: .acquiring) ? index : nil
    }
    /// The addresses of the slab's cells, for the registry's observers.
    var cellRange: Range<UInt> { cellBase..<(cellBase + UInt(capacity * MemoryLayout<UInt>.stride)) }

    /// Whether a function at `address` can be planned here: the slab has room, and lies within
    /// reach of it when it is near (a far slab serves any function, with the absolute jump).
    func canHold(_ address: UInt) -> Bool {
        guard count < capacity, codeUsed + Self.largestPlan <= codeSize else { return false }
        guard isNear else { return true }
        let end = cellBase + UInt(capacity * MemoryLayout<UInt>.stride)
        return CodeSpace.distance(base, address) < Self.reach && CodeSpace.distance(end, address) < Self.reach
    }

    /// Where the next plan's trampoline would go.
    var nextTrampoline: UInt { base + UInt(codeUsed) + UInt(Self.stubSize) }

    // MARK: - Adding plans (planner's lock)

    /// Adds a plan whose trampoline (`trampoline`, relocated for ``nextTrampoline``) and record
    /// are given: writes its stub and trampoline, points its cell at the trampoline, and
    /// publishes it (while writes are deferred, ``writePending()`` writes and publishes it).
    /// Returns its index, or nil when the code could not be written.
    func add(_ record: PlanRecord, trampoline bytes: [UInt8]) -> Int? {
        let index = count
        let stubOffset = codeUsed
        let stub = base + UInt(stubOffset)
        // jmp [rip + disp32], disp32 from the end of the 6-byte instruction to the cell.
        let displacement = UInt32(bitPattern: Int32(Int(cell(index)) - Int(stub + 6)))
        let stubBytes: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (
            0xFF, 0x25, UInt8(truncatingIfNeeded: displacement), UInt8(truncatingIfNeeded: displacement >> 8),
            UInt8(truncatingIfNeeded: displacement >> 16), UInt8(truncatingIfNeeded: displacement >> 24), 0xCC, 0xCC
        )
        let length = MemoryLayout.size(ofValue: stubBytes) + bytes.count
        if var code = pending {
            // Written with the others at the end of the planner's pass (``writePending()``),
            // the gap of alignment before it filled with int3. (Taken out while appended to, so
            // that the appends need no copy and no check of exclusive access each.)
            pending = nil
            code.append(contentsOf: repeatElement(0xCC, count: stubOffset - pendingStart - code.count))
            withUnsafeBytes(of: stubBytes) { code.append(contentsOf: $0) }
            code.append(contentsOf: bytes)
            pending = code
            pendingPlans.append((index, stubOffset, length))
        } else {
            var code: [UInt8] = []
            code.reserveCapacity(length)
            withUnsafeBytes(of: stubBytes) { code.append(contentsOf: $0) }
            code.append(contentsOf: bytes)
            guard write(code, at: stubOffset) else { return nil }
        }
        var record = record
        record.stubOffset = UInt32(stubOffset)
        record.trampolineLength = UInt16(bytes.count)
        (records + index).initialize(to: record)
        (states + index).initialize(to: Atomic(0))
        UnsafeMutablePointer<UInt>(bitPattern: cell(index))!.pointee = stub + UInt(Self.stubSize)
        codeUsed = (stubOffset + length + 7) & ~7
        if sortedCount == index && (index == 0 || records[index - 1].function < record.function) {
            sortedCount = index + 1
        } else {
            unsorted[record.function] = Int32(index)
        }
        count = index + 1
        if pending == nil { publishedCount.store(count, ordering: .releasing) }
        return index
    }

    /// Writes `code` at `offset` of the code mapping (``ffh_patch_write_code``).
    private func write(_ code: [UInt8], at offset: Int) -> Bool {
        code.withUnsafeBytes { bytes in
            ffh_patch_write_code(
                UnsafeMutableRawPointer(bitPattern: base + UInt(offset)), bytes.baseAddress, bytes.count,
                UnsafeMutableRawPointer(bitPattern: base), codeSize)
        } == 0
    }

    /// From now until ``writePending()``, the code of the plans added is kept and written at
    /// once, and the plans published then: one write for a pass's plans, not one each
    /// (planner's lock, within one pass of the planner, which calls `writePending` before its
    /// plans leave it).
    func deferWrites() {
        guard pending == nil else { return }
        pending = []
        pending!.reserveCapacity(codeSize - codeUsed)
        pendingStart = codeUsed
    }

    /// Writes the code of the plans added since ``deferWrites()`` in one write (each on its
    /// own where that one fails), and publishes them. Returns the plans whose code could not
    /// be written, which are never found again (``plan(of:)``): the planner refuses them.
    func writePending() -> [Int] {
        guard let code = pending else { return [] }
        pending = nil
        defer {
            pendingPlans = []
            publishedCount.store(count, ordering: .releasing)
        }
        guard !code.isEmpty, !write(code, at: pendingStart) else { return [] }
        var failed: [Int] = []
        for plan in pendingPlans {
            let start = plan.offset - pendingStart
            guard !write(Array(code[start..<(start + plan.length)]), at: plan.offset) else { continue }
            failed.append(plan.index)
            dead.insert(plan.index)
        }
        return failed
    }

    /// The plan of the function at `function`, if this slab has one (planner's lock).
    func plan(of function: UInt) -> Int? {
        var low = 0
        var high = sortedCount
        while low < high {
            let middle = (low + high) / 2
            if records[middle].function < function { low = middle + 1 } else { high = middle }
        }
        let found =
            low < sortedCount && records[low].function == function
            ? low : unsorted.isEmpty ? nil : unsorted[function].map(Int.init)
        return found.flatMap { dead.isEmpty || !dead.contains($0) ? $0 : nil }
    }

    // MARK: - Observing the cells (registry's lock)

    func slotWillChange(_ slot: UInt) throws(HookError) {
        guard let index = index(ofCell: slot) else { return }
        try InlinePatching.patchBeforeCellChanges(self, index)
    }

    func slotDidChange(_ slot: UInt) {
        guard let index = index(ofCell: slot) else { return }
        InlinePatching.cellDidChange(self, index)
    }
}

/// Finding room for slabs in the address space.
enum CodeSpace {
    static func distance(_ a: UInt, _ b: UInt) -> UInt { a > b ? a - b : b - a }

    /// Maps `size` bytes, readable and writable, as close to `range` as the free address space
    /// allows: within ±2 GB of all of it when there is room (`isNear`), else anywhere. Nil
    /// when nothing can be mapped at all.
    static func map(size: Int, near range: ClosedRange<UInt>, mappings: [MemoryMapping]) -> (UInt, isNear: Bool)? {
        let page = UInt(CodeSlab.pageSize)
        let size = UInt(size)
        let reach = CodeSlab.reach
        // Where the whole mapping is within reach of both ends of the range.
        let low = ((range.upperBound > reach ? range.upperBound - reach : page) + page - 1) & ~(page - 1)
        let high =
            (range.lowerBound < UInt.max - reach ? range.lowerBound + reach - size : UInt.max - size) & ~(page - 1)
        var candidates: [UInt] = []
        if low <= high {
            var previousEnd = page * 16
            let top = MemoryMapping(
                start: 0x7FFF_FFFF_F000, end: 0x7FFF_FFFF_F000, readable: false, writable: false, executable: false)
            for mapping in mappings + [top] {
                if mapping.start >= previousEnd + size {
                    let first = max(previousEnd, low)
                    let last = min(mapping.start - size, high)
                    if first <= last {
                        // The place in the gap nearest the range (the gap's ends are page-aligned).
                        candidates.append(min(max(range.lowerBound & ~(page - 1), first), last))
                    }
                }
                previousEnd = max(previousEnd, mapping.end)
            }
        }
        candidates.sort { distance($0, range.lowerBound) < distance($1, range.lowerBound) }
        // MAP_FIXED_NOREPLACE (Linux 4.17): the hint or nothing, never over a mapping.
        let fixedNoReplace: Int32 = 0x10_0000
        for hint in candidates.prefix(16) {
            let mapped = mmap(
                UnsafeMutableRawPointer(bitPattern: hint), Int(size), PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | fixedNoReplace, -1, 0)
            guard let mapped, mapped != MAP_FAILED else { continue }
            let base = UInt(bitPattern: mapped)
            if base == hint && distance(base, range.upperBound) < reach
                && distance(base + size, range.lowerBound) < reach
            {
                return (base, true)
            }
            munmap(mapped, Int(size))
        }
        let mapped = mmap(nil, Int(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        guard let mapped, mapped != MAP_FAILED else { return nil }
        return (UInt(bitPattern: mapped), false)
    }
}
