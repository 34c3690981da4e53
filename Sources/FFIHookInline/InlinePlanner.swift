internal import CFFIHookPatch
internal import CFFIHookSupport
internal import FFIHook
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A planned function: its slab and its place there.
struct PlanReference: Hashable, @unchecked Sendable {
    // Sendable: a slab is shared under its own rules (see CodeSlab).
    let slab: CodeSlab
    private let position: Int32

    init(slab: CodeSlab, index: Int) {
        self.slab = slab
        self.position = Int32(index)
    }

    var index: Int { Int(position) }

    static func == (lhs: PlanReference, rhs: PlanReference) -> Bool { lhs.slab === rhs.slab && lhs.index == rhs.index }
    func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(slab))
        hasher.combine(index)
    }

    var record: PlanRecord { slab.records[index] }
}

/// A function to plan, as a batch names it.
struct PlanTarget: Sendable {
    /// Its address.
    var address: UInt
    /// Its symbol, when known.
    var name: String?
    /// Its size as a symbol table gives it; nil when unknown.
    var size: Int?
    /// Whether a symbol table names `address` as a function's start, of a function (not an
    /// IFUNC resolver): no symbol lookup is needed.
    var isKnownStart = false
    /// The identity (`ObjectRanges.identity(of:)`) of the object it was found
    /// in, when it was found in a walk over the loaded objects: planned only if that object
    /// still holds it (another thread may unload the object between the listing and the
    /// planning, and its address then holds nothing, or another object's code).
    var object: ObjectIdentity?
}

/// Plans inline patches and keeps one per function address for the life of its object.
///
/// Planning many functions at once reads the memory map and the loaded objects once; each
/// function's code and cell come from its object's slabs (``CodeSlab``), mapped near the object
/// as they are needed.
enum InlinePlanner {
    private struct State {
        /// Each object's slabs, by ``ObjectRanges/key(of:)``.
        var slabs: [String: [CodeSlab]] = [:]
        /// During a pass that writes its plans' code at its end (``writingCode(_:state:_:)``),
        /// the slabs it added plans to; nil otherwise.
        var deferring: [CodeSlab]?
        /// The plan of the function at `address` in the object `key`, if one was made.
        func plan(of address: UInt, key: String) -> PlanReference? {
            for slab in slabs[key] ?? [] {
                if let index = slab.plan(of: address) { return PlanReference(slab: slab, index: index) }
            }
            return nil
        }
    }

    /// The planner's lock: held while planning (it may map slabs and tell the registry of
    /// them, so the registry's lock ranks above it).
    private static let state: Locked<State> = {
        let lock = Locked(State())
        lock.protectAcrossFork(rank: SlotRegistry.forkRank - 50)
        return lock
    }()

    static func hex(_ address: UInt) -> String { "0x" + String(address, radix: 16) }

    /// The plan of the function at `address` (`name` for errors), planned now or found from
    /// an earlier plan whose bytes are still in place.
    static func plan(_ address: UInt, name: String?) throws(HookError) -> (PlanReference, PlanGroup) {
        #if arch(x86_64) && os(Linux)
            let target = PlanTarget(address: address, name: name)
            let (results, group) = plan([target], sweepsObjects: false)
            switch results[0] {
            case .success(let reference): return (reference, group)
            case .failure(let refusal): throw refusal.error
            }
        #else
            throw HookError(
                code: .unsupportedPlatform, message: "inline hooks work on Linux x86-64",
                symbol: name ?? hex(address))
        #endif
    }

    /// Plans every target: the memory map and the loaded objects are read once. Each result
    /// is the plan, or why the function cannot be planned (the others are planned all the same).
    ///
    /// With `sweepsObjects`, the whole code of each object that holds targets is swept once
    /// for branches into their first bytes (``BranchSweep``), which replaces each function's
    /// scan of its own body; without, each function of known size scans its body.
    ///
    /// The group that comes back keeps the slabs of the plans made or found (see ``PlanGroup``),
    /// its names those of `targets`, in order.
    static func plan(
        _ targets: [PlanTarget], sweepsObjects: Bool = true
    ) -> ([Result<PlanReference, InlineRefusal>], PlanGroup) {
        let results = planResults(targets, sweepsObjects: sweepsObjects)
        return (results.plans, PlanGroup(names: targets.map(\.name), adopting: results.kept))
    }

    /// The plans of `targets`, and the slabs they are in, each counted once more in its
    /// ``CodeSlab/groups`` for the group that adopts them.
    private static func planResults(
        _ targets: [PlanTarget], sweepsObjects: Bool
    ) -> (plans: [Result<PlanReference, InlineRefusal>], kept: [CodeSlab]) {
        #if arch(x86_64) && os(Linux)
            let mappings = MemoryMapping.all()
            guard sweepsObjects else {
                // Functions planned one by one: each one's object from dladdr, with no walk over
                // every loaded object (which pins each with dlopen).
                return state.withLock { state in
                    retireUnused(&state)
                    let plans = writingCode(targets, state: &state) { state in
                        targets.map { target in
                            let key = ObjectRanges.key(containing: target.address)
                            return planCached(
                                target, key: key, group: (1, target.address, target.address), mappings: mappings,
                                check: branchCheck(around: target.address), state: &state)
                        }
                    }
                    return (plans, keep(plans))
                }
            }
            return ImportWalk.withLoadedObjects { loaded in
                let objects = ObjectRanges(loaded)
                // A target whose object was unloaded since it was listed is refused unread: its
                // address is now unmapped (a read faults) or another object's.
                let places = targets.map { objects.place(of: $0.address) }
                let keys = places.map(\.key)
                let gone = zip(targets, places).map { target, place in
                    target.object.map { $0 != place.identity } ?? false
                }
                let present = targets.indices.filter { !gone[$0] }
                // The sweeps are made on a thread of their own while the functions are planned
                // (a library's whole code is decoded for a sweep: as long as planning its
                // functions); each plan is checked against its object's sweep at the end.
                let inputs = sweepInputs(present.map { targets[$0] }, in: loaded, objects)
                var sweeps: [String: BranchSweep] = [:]
                let sweeping = HelperThread { sweeps = makeSweeps(inputs) }
                return state.withLock { state in
                    forgetUnloaded(&state, objects)
                    retireUnused(&state)
                    // Each object's targets, to map one slab for all of them where one is needed,
                    // by the object's place among the batch's objects (a batch's targets are in
                    // one or a few: no hashing of the key for each target).
                    var batchObjects: [(key: String, check: BranchCheck)] = []
                    var objectOf = [Int](repeating: -1, count: targets.count)
                    var remaining: [(count: Int, low: UInt, high: UInt)] = []
                    for index in present {
                        let (target, key) = (targets[index], keys[index])
                        var object = objectOf.indices.contains(index - 1) ? objectOf[index - 1] : -1
                        if object < 0 || batchObjects[object].key != key {
                            if let known = batchObjects.firstIndex(where: { $0.key == key }) {
                                object = known
                            } else {
                                object = batchObjects.count
                                let swept = inputs.contains { $0.key == key }
                                batchObjects.append((key, swept ? .later : .ownBody))
                                remaining.append((0, target.address, target.address))
                            }
                        }
                        objectOf[index] = object
                        let known = remaining[object]
                        remaining[object] = (
                            known.count + 1, min(known.low, target.address), max(known.high, target.address)
                        )
                    }
                    var plans = writingCode(targets, state: &state) { state in
                        targets.indices.map { index in
                            let target = targets[index]
                            guard !gone[index] else {
                                return .failure(elsewhere(target, now: places[index].identity, objects))
                            }
                            let object = objectOf[index]
                            defer { remaining[object].count -= 1 }
                            return planCached(
                                target, key: batchObjects[object].key, group: remaining[object], mappings: mappings,
                                check: batchObjects[object].check, state: &state)
                        }
                    }
                    sweeping.wait()
                    refuseBranchesIntoPatches(
                        &plans, targets, objectOf: objectOf, sweeps: batchObjects.map { sweeps[$0.key] })
                    return (plans, keep(plans))
                }
            }
        #else
            let plans: [Result<PlanReference, InlineRefusal>] = targets.map { target in
                .failure(
                    refusal(
                        of: target, .unsupportedPlatform, "inline hooks work on Linux x86-64",
                        code: .unsupportedPlatform))
            }
            return (plans, [])
        #endif
    }

    /// Runs `body`, which plans `targets` (a result for each, in order), writing the code of
    /// its new plans at its end: one write for each slab it added plans to
    /// (``CodeSlab/deferWrites()``), not one for each plan; a plan whose code could not be
    /// written is refused. Opening `/proc/self/mem` and writing for each plan took a quarter of
    /// the time of planning a library of 1,370 functions.
    private static func writingCode(
        _ targets: [PlanTarget], state: inout State,
        _ body: (inout State) -> [Result<PlanReference, InlineRefusal>]
    ) -> [Result<PlanReference, InlineRefusal>] {
        state.deferring = []
        var plans = body(&state)
        var failed: [ObjectIdentifier: Set<Int>] = [:]
        for slab in state.deferring ?? [] {
            let unwritten = slab.writePending()
            if !unwritten.isEmpty { failed[ObjectIdentifier(slab), default: []].formUnion(unwritten) }
        }
        state.deferring = nil
        guard !failed.isEmpty else { return plans }
        for (place, target) in zip(plans.indices, targets) {
            guard case .success(let plan) = plans[place],
                failed[ObjectIdentifier(plan.slab)]?.contains(plan.index) == true
            else { continue }
            plans[place] = .failure(
                refusal(
                    of: target, .noMemory, "the trampoline could not be written into the library's code slab",
                    code: .patchFailed))
        }
        return plans
    }

    /// The slabs of `plans`, each counted once more (under the planner's lock, so that no slab
    /// is retired between its plans being found and the count).
    private static func keep(_ plans: [Result<PlanReference, InlineRefusal>]) -> [CodeSlab] {
        var kept: [CodeSlab] = []
        for case .success(let plan) in plans where !kept.contains(where: { $0 === plan.slab }) {
            plan.slab.groups.add(1, ordering: .relaxed)
            kept.append(plan.slab)
        }
        return kept
    }

    /// Retires the slabs no group keeps whose functions are none of them patched: they are
    /// forgotten (a later plan of one of their functions makes a new plan), and unmapped once a
    /// stop of the threads finds none inside their code and no hooked call can be inside them.
    /// A slab whose trampolines call a function stays mapped (a thread may be inside the
    /// callee, with a return address in the slab). Runs at each planning, with the planner's
    /// lock held (a group is dropped without a lock, anywhere).
    private static func retireUnused(_ state: inout State) {
        for (key, slabs) in state.slabs {
            for slab in slabs where slab.groups.load(ordering: .acquiring) == 0 && !slab.hasCalls {
                guard isIdle(slab), noThreadRuns(in: slab) else { continue }
                state.slabs[key]?.removeAll { $0 === slab }
                if state.slabs[key]?.isEmpty == true { state.slabs[key] = nil }
                SlotRegistry.shared.stopObserving(slots: slab.cellRange)
                SlotRegistry.shared.retire(SlabMemory(slab)) {}
            }
        }
    }

    /// Whether none of the slab's functions is patched, pinned or held, and every cell leads to
    /// its trampoline (read under the registry's lock, at one moment).
    private static func isIdle(_ slab: CodeSlab) -> Bool {
        let idle = try? SlotRegistry.shared.withLock { () -> Bool in
            (0..<slab.publishedCount.load(ordering: .acquiring)).allSatisfy { index in
                InlinePatching.state(slab, index) == 0
                    && UnsafeMutablePointer<Atomic<UInt>>(bitPattern: slab.cell(index))!.pointee.load(
                        ordering: .acquiring) == slab.trampoline(index)
            }
        }
        return idle == true
    }

    /// Whether a stop of the other threads finds none of them in the slab's code (a thread
    /// preempted in a trampoline it entered while its function was patched).
    private static func noThreadRuns(in slab: CodeSlab) -> Bool {
        guard let places = PatchWriter.parkedInstructionPointers() else { return false }
        let code = slab.base..<(slab.base + UInt(slab.codeSize))
        return !places.contains { code.contains($0) }
    }

    /// How a plan is checked for branches into the bytes its patch overwrites.
    enum BranchCheck {
        /// A sweep of the function's object (a batch's), or of the code around the function (a
        /// function planned alone).
        case sweep(BranchSweep)
        /// The function's own body, when the symbol tables give its size (code outside every
        /// object).
        case ownBody
        /// A sweep of the function's object still being made (a batch's, on a thread of its
        /// own): the plan is checked against it once the batch's functions are planned
        /// (``planResults(_:sweepsObjects:)``).
        case later

        /// The branch into the patch of a plan of `function`, from the object's code (none yet
        /// for ``later``).
        func intoPatch(function: UInt, patchOffset: Int, copiedLength: Int) -> BranchSweep.Branch? {
            switch self {
            case .sweep(let sweep):
                sweep.intoPatch(function: function, patchOffset: patchOffset, copiedLength: copiedLength)
            case .ownBody, .later: nil
            }
        }
    }

    /// How far around a function planned alone its object's code is decoded for branches into
    /// it, on each side: hand-written code jumps between neighbouring functions of one source
    /// file (glibc's string functions), which this covers; a batch sweeps its libraries whole.
    static let neighbourhood: UInt = 16 * 1024

    /// The check for a function planned alone: its object's code within ``neighbourhood`` of
    /// it (pinning that object only), starting at a known function start, or its own body for
    /// code outside every object.
    private static func branchCheck(around address: UInt) -> BranchCheck {
        let sweep = ImportWalk.withLoadedObject(containing: address) { object -> BranchSweep? in
            guard let object else { return nil }
            let low = address > neighbourhood ? address - neighbourhood : 0
            let window = low..<(address + neighbourhood)
            let starts = Set(BatchTargets.restartPoints(of: object, around: window) + [address]).sorted()
            let ranges = codeRanges(of: object).compactMap { range -> Range<UInt>? in
                guard range.upperBound > low, range.lowerBound < window.upperBound else { return nil }
                // From the last known start at or below the window's start, where decoding is in
                // step with the instructions.
                let index = BranchSweep.firstIndex(in: starts, above: low) - 1
                let start = max(range.lowerBound, index >= 0 ? min(starts[index], low) : range.lowerBound)
                return start..<min(range.upperBound, window.upperBound)
            }
            return BranchSweep(ranges: ranges, starts: starts, functions: [address])
        }
        return sweep.map(BranchCheck.sweep) ?? .ownBody
    }

    /// The plan of `target`: an earlier one whose bytes are still in place, or a new one. An
    /// earlier plan is checked again for branches into its patch (one made alone before its
    /// object's code was decoded whole, say).
    private static func planCached(
        _ target: PlanTarget, key: String, group: (count: Int, low: UInt, high: UInt), mappings: [MemoryMapping],
        check: BranchCheck, state: inout State
    ) -> Result<PlanReference, InlineRefusal> {
        if let existing = state.plan(of: target.address, key: key), isCurrent(existing) {
            let record = existing.record
            if let branch = check.intoPatch(
                function: target.address, patchOffset: Int(record.patchOffset),
                copiedLength: Int(record.copiedLength))
            {
                return .failure(branchRefusal(target, branch))
            }
            return .success(existing)
        }
        do throws(InlineRefusal) {
            return .success(
                try planOne(target, key: key, group: group, mappings: mappings, check: check, state: &state))
        } catch {
            return .failure(error)
        }
    }

    /// What a refusal for `branch` says: the branch as Zydis formats it, where it is (in the
    /// function, or elsewhere in its object) and where it lands.
    private static func branchMessage(_ branch: BranchSweep.Branch, function: UInt, size: Int?) -> String {
        let text =
            (try? Decoder().decode(UnsafeRawPointer(bitPattern: branch.from)!, offset: 0, available: 15))
            .map { "`\($0.text)`" } ?? "a branch"
        let place =
            branch.from > function && size.map { branch.from < function + UInt($0) } == true
            ? "at offset \(branch.from - function)" : "at \(hex(branch.from)), outside the function,"
        return "\(text) \(place) branches to offset \(branch.offset), inside the bytes the patch overwrites"
    }

    // MARK: - One function

    /// The refusal of a target whose address is no longer in the object it was listed in
    /// (`now`: the identity of the object that holds it). While that object is still loaded,
    /// the address is an IFUNC's choice of another object's code (libc's `gettimeofday` and
    /// `time` choose the vDSO's): an indirect function, to be hooked in that object. Otherwise
    /// the object was unloaded after it was listed (``unloaded(_:)``).
    private static func elsewhere(_ target: PlanTarget, now: ObjectIdentity, _ objects: ObjectRanges) -> InlineRefusal {
        guard let listed = target.object, objects.holds(identity: listed), now != listed,
            let other = objects.path(of: now)
        else { return unloaded(target) }
        let shown = other.isEmpty ? "an object with no path" : other
        return refusal(
            of: target, .indirectFunction,
            "an IFUNC symbol whose implementation, at \(hex(target.address)), is in \(shown), not in the object it is listed in; hook it in that object"
        )
    }

    /// The refusal of a target whose object was unloaded after it was listed: not in code (the
    /// reason a function of an unmapped object gets).
    private static func unloaded(_ target: PlanTarget) -> InlineRefusal {
        refusal(
            of: target, .notCode,
            "its object was unloaded after its functions were listed: \(hex(target.address)) no longer holds it")
    }

    /// The refusal of the function at `address`, named `name`.
    private static func refusal(
        _ name: String, _ address: UInt, _ reason: InlineRefusal.Reason, _ message: String,
        code: HookError.Code = .unhookableFunction
    ) -> InlineRefusal {
        InlineRefusal(
            name: name, address: address, reason: reason, error: HookError(code: code, message: message, symbol: name))
    }

    /// The refusal of `target`, named by its symbol, or its address where it has none.
    private static func refusal(
        of target: PlanTarget, _ reason: InlineRefusal.Reason, _ message: String,
        code: HookError.Code = .unhookableFunction
    ) -> InlineRefusal {
        refusal(target.name ?? hex(target.address), target.address, reason, message, code: code)
    }

    /// The refusal of `target` for `branch`, which lands in the bytes its plan's patch overwrites.
    private static func branchRefusal(_ target: PlanTarget, _ branch: BranchSweep.Branch) -> InlineRefusal {
        refusal(of: target, .branchIntoPatch, branchMessage(branch, function: target.address, size: target.size))
    }

    /// Plans one function: checks the code, finds the function's extent, relocates its first
    /// instructions into a trampoline in a slab near it, and writes the stub and the
    /// trampoline. Nothing in the function changes yet.
    private static func planOne(
        _ target: PlanTarget, key: String, group: (count: Int, low: UInt, high: UInt), mappings: [MemoryMapping],
        check: BranchCheck, state: inout State
    ) throws(InlineRefusal) -> PlanReference {
        let address = target.address
        guard address != 0 else { throw refusal(of: target, .notCode, "the function's address is NULL") }
        guard let mapping = MemoryMapping.containing(address, in: mappings), mapping.executable, mapping.readable
        else {
            throw refusal(
                of: target, .notCode,
                "\(hex(address)) is not in readable, executable memory: it is not the address of a function")
        }
        // The symbol tables' view, for an address no table named as a function's start: the
        // function's size and name, and the IFUNC resolver trap.
        let extent = target.isKnownStart ? nil : SymbolResolver.extent(of: address)
        let symbol = target.name ?? extent.flatMap { $0.start == address ? $0.symbol : nil }
        let name = symbol ?? hex(address)
        func refuse(_ reason: InlineRefusal.Reason, _ message: String, code: HookError.Code = .unhookableFunction)
            -> InlineRefusal
        {
            refusal(name, address, reason, message, code: code)
        }
        var size = target.size
        if let extent {
            if extent.start == address, extent.isIndirect {
                throw refuse(
                    .indirectFunction,
                    "the symbol's address is an IFUNC resolver, which picks the code that runs; hook the implementation (InlineFunction(symbol:) resolves it)"
                )
            }
            if extent.start == address, let known = extent.size { size = known }
            if extent.start < address, let known = extent.size, address < extent.start + UInt(known) {
                // Inside a function: no function's entry (a hook there would run mid-function, and
                // the address may not even start an instruction).
                let owner = extent.symbol.map { "`\($0)`" } ?? "a function"
                throw refuse(
                    .notAFunctionStart,
                    "\(hex(address)) is inside \(owner) at offset \(address - extent.start), not at a function's start")
            }
        }
        if let reason = LibraryCode.reason(name: symbol) {
            throw refuse(.libraryCode, reason)
        }
        if symbol == nil, SlotRegistry.shared.isEngineCode(address) {
            throw refuse(
                .libraryCode, "\(hex(address)) is in the library's own code: a hook's closure or an attach's stub")
        }
        if let slab = state.slabs.values.joined().first(where: { $0.base <= address && address < $0.cellBase }) {
            throw refuse(
                .libraryCode,
                "\(hex(address)) is in the library's own code, at offset \(address - slab.base) of a slab of trampolines"
            )
        }
        let mappedAfter = MemoryMapping.executableRun(from: address, in: mappings)
        if let known = size { size = min(known, mappedAfter) }

        guard
            let slab = slab(for: address, key: key, group: group, mappings: mappings, state: &state)
        else {
            throw refuse(.noMemory, "no memory could be mapped for the function's trampoline", code: .patchFailed)
        }
        let (record, trampoline) = try relocate(
            address, size: size, mappedAfter: mappedAfter, slab: slab, protection: mapping.protection,
            check: check, refuse: refuse)
        if state.deferring != nil, !state.deferring!.contains(where: { $0 === slab }) {
            slab.deferWrites()
            state.deferring!.append(slab)
        }
        guard let index = slab.add(record, trampoline: trampoline.bytes) else {
            // (The slab keeps room for the largest trampoline: only a failed write gets here.)
            throw refuse(
                .noMemory, "the trampoline could not be written into the library's code slab", code: .patchFailed)
        }
        if trampoline.copiesCall { slab.hasCalls = true }
        return PlanReference(slab: slab, index: index)
    }

    /// A slab of the object that can hold a plan of `address`; a new one, sized for the
    /// object's functions still to plan, when none can.
    private static func slab(
        for address: UInt, key: String, group: (count: Int, low: UInt, high: UInt), mappings: [MemoryMapping],
        state: inout State
    ) -> CodeSlab? {
        if let slab = state.slabs[key]?.last(where: { $0.canHold(address) }) { return slab }
        // Near every function of the group when they fit within reach of one place, else near
        // this one.
        let spread = group.high - group.low < CodeSlab.reach / 2
        let range = spread ? min(group.low, address)...max(group.high, address) : address...address
        guard
            let slab = CodeSlab.map(
                plans: max(group.count, 1), near: range, mappings: mappings)
        else { return nil }
        state.slabs[key, default: []].append(slab)
        SlotRegistry.shared.observe(slots: slab.cellRange, with: slab)
        return slab
    }

    /// Relocates the function's first instructions for the slab's next trampoline, checks
    /// that the patch can go over them, and makes the plan's record.
    private static func relocate(
        _ address: UInt, size: Int?, mappedAfter: Int, slab: CodeSlab, protection: Int32,
        check: BranchCheck, refuse: (InlineRefusal.Reason, String, HookError.Code) -> InlineRefusal
    ) throws(InlineRefusal) -> (PlanRecord, Relocation) {
        let code = UnsafeRawPointer(bitPattern: address)!
        let patchLength = slab.isNear ? 5 : 14
        // A function shorter than the patch may still take it over the alignment padding
        // that follows it.
        var available = size
        if let known = size {
            // (Padding matters only to a function shorter than the most a relocation copies:
            // an endbr64, then instructions up to 15 bytes long until a 14-byte patch is covered.)
            let needed = known < 32 ? known + Relocator.paddingLength(after: code, size: known) : known
            available = min(needed, mappedAfter)
        } else if mappedAfter < 32 {
            available = mappedAfter
        }
        let relocation: Relocation
        do {
            relocation = try Relocator.relocate(
                code: code, patchLength: patchLength, trampoline: slab.nextTrampoline, functionSize: available,
                mappedSize: mappedAfter)
        } catch {
            throw refuse(error.reason, error.description, .unhookableFunction)
        }
        if let call = relocation.innerCalls.first {
            throw refuse(
                .callReturnsIntoPatch,
                "`\(call.instruction)` at offset \(call.offset) would be overwritten with the instruction it returns to (offset \(call.target)): a thread inside the called function would return into the patch",
                .unhookableFunction)
        }
        // Branches from the rest of the object's code or of the function into the bytes the
        // jump overwrites; the copied instructions' own branches are relocated.
        if case .ownBody = check {
            // Below.
        } else if let branch = check.intoPatch(
            function: address, patchOffset: relocation.patchOffset, copiedLength: relocation.copiedLength)
        {
            throw refuse(.branchIntoPatch, branchMessage(branch, function: address, size: size), .unhookableFunction)
        }
        if case .ownBody = check, let known = size, known > relocation.copiedLength {
            let branches: [IncomingBranch]
            do {
                branches = try Relocator.branches(
                    into: relocation.patchOffset..<relocation.copiedLength, function: code, size: known,
                    mappedSize: mappedAfter)
            } catch {
                throw refuse(error.reason, error.description, .unhookableFunction)
            }
            if let branch = branches.first {
                throw refuse(
                    .branchIntoPatch,
                    "`\(branch.instruction)` at offset \(branch.offset) branches to offset \(branch.target), inside the bytes the patch overwrites",
                    .unhookableFunction)
            }
        }
        guard relocation.copiedLength <= PlanRecord.maximumCopiedLength,
            relocation.copiedLength - relocation.patchOffset <= 28,
            relocation.instructionOffsets.count <= PlanRecord.maximumInstructions,
            relocation.instructionOffsets.allSatisfy({ $0.trampoline <= Int(UInt8.max) })
        else {
            throw refuse(
                .tooManyInstructions,
                "the patch would overwrite \(relocation.instructionOffsets.count) instructions over \(relocation.copiedLength) bytes, more than a plan keeps",
                .unhookableFunction)
        }
        var record = PlanRecord()
        record.function = address
        record.copiedLength = UInt8(relocation.copiedLength)
        record.patchOffset = UInt8(relocation.patchOffset)
        record.protection = UInt8(protection)
        for (position, instruction) in relocation.instructionOffsets.enumerated() {
            record.instructionStarts |= 1 << UInt32(instruction.original)
            record.trampolineOffsets[position] = UInt8(instruction.trampoline)
        }
        for offset in relocation.patchOffset..<relocation.copiedLength {
            record.original[offset - relocation.patchOffset] = code.load(fromByteOffset: offset, as: UInt8.self)
        }
        return (record, relocation)
    }

    /// What one object's sweep is made from: its key, its code (``codeRanges(of:)``), where
    /// decoding starts again (every function its dynamic symbol table names, every place its
    /// unwind table says code begins: ``BatchTargets/restartPoints(of:)``; unsorted) and its
    /// targets (unsorted).
    struct SweepInput: @unchecked Sendable {
        // Unchecked: addresses of code, read only.
        let key: String
        let ranges: [Range<UInt>]
        let starts: [UInt]
        let functions: [UInt]
    }

    /// The inputs of the sweeps of the objects that hold `targets`: what needs the objects'
    /// tables and files, read on the planning thread (a symbol table may be read from its file
    /// under a lock of its cache). ``makeSweeps(_:)`` does the rest.
    private static func sweepInputs(
        _ targets: [PlanTarget], in loaded: [LoadedObject], _ objects: ObjectRanges
    ) -> [SweepInput] {
        // The targets by object, in the order first met (a batch's are in one or a few: no
        // hashing of the key for each target).
        var byObject: [(key: String, addresses: [UInt])] = []
        for target in targets {
            let key = objects.key(of: target.address)
            if let last = byObject.indices.last, byObject[last].key == key {
                byObject[last].addresses.append(target.address)
            } else if let known = byObject.firstIndex(where: { $0.key == key }) {
                byObject[known].addresses.append(target.address)
            } else {
                byObject.append((key, [target.address]))
            }
        }
        return loaded.compactMap { object in
            let key = ObjectRanges.key(of: object)
            guard let targets = byObject.first(where: { $0.key == key })?.addresses else { return nil }
            return SweepInput(
                key: key, ranges: codeRanges(of: object), starts: BatchTargets.startCandidates(of: object) + targets,
                functions: targets)
        }
    }

    /// One sweep per object, by the object's key: its code decoded, starting again at every
    /// start. Reads only the objects' code (mapped while it runs: the walk that listed them pins
    /// them) and takes no lock: it runs on a thread of its own beside the planning.
    private static func makeSweeps(_ inputs: [SweepInput]) -> [String: BranchSweep] {
        var sweeps: [String: BranchSweep] = [:]
        for input in inputs {
            let functions = BatchTargets.sortedOnce(input.functions)
            sweeps[input.key] = BranchSweep(
                ranges: input.ranges, starts: BatchTargets.sortedOnce(input.starts), functions: functions,
                windows: displacedLengths(of: functions, in: input.ranges))
        }
        return sweeps
    }

    /// Refuses each plan of `plans` (one for each of `targets`) whose patch a branch of its
    /// object's code lands in, by that object's sweep (`sweeps`, by the object's place among the
    /// batch's, `objectOf`: -1 for a target not planned; nil for an object none was made for).
    /// A plan refused here keeps its place in its slab, unused (a later plan of the function
    /// finds it and checks it again).
    private static func refuseBranchesIntoPatches(
        _ plans: inout [Result<PlanReference, InlineRefusal>], _ targets: [PlanTarget], objectOf: [Int],
        sweeps: [BranchSweep?]
    ) {
        for index in plans.indices {
            guard objectOf[index] >= 0, case .success(let plan) = plans[index] else { continue }
            guard let sweep = sweeps[objectOf[index]] else { continue }
            let record = plan.slab.records + plan.index
            let (patchOffset, copiedLength) = (Int(record.pointee.patchOffset), Int(record.pointee.copiedLength))
            guard
                let branch = sweep.intoPatch(
                    function: targets[index].address, patchOffset: patchOffset, copiedLength: copiedLength)
            else { continue }
            plans[index] = .failure(branchRefusal(targets[index], branch))
        }
    }

    /// How many of each function's first bytes a patch of a near slab's length (5 bytes)
    /// displaces, where the sweep for branches into them need look (``BranchSweep/watchedLength``
    /// where the instructions are left to a full decoder): a third of the bytes a window of
    /// that length watches, and a third of the stretches decoded. A plan that displaces more
    /// (a far slab's 14-byte patch) is checked against a sweep with full windows, made then.
    private static func displacedLengths(of functions: [UInt], in ranges: [Range<UInt>]) -> [UInt8] {
        functions.map { function in
            guard let range = ranges.first(where: { $0.contains(function) }) else {
                return UInt8(BranchSweep.watchedLength)
            }
            let available = Int(min(range.upperBound - function, BranchSweep.watchedLength))
            let length = ffh_x86_displaced_length(UnsafePointer(bitPattern: function), available, 5)
            return length == 0 ? UInt8(BranchSweep.watchedLength) : UInt8(length)
        }
    }

    /// The object's code, as mapped: its executable segments, narrowed to its sections of code
    /// where its file names them.
    private static func codeRanges(of object: LoadedObject) -> [Range<UInt>] {
        let segments = object.loadSegments.filter { $0.flags & 1 != 0 }.map { segment in
            UInt(truncatingIfNeeded: segment.address)..<UInt(truncatingIfNeeded: segment.address + segment.fileSize)
        }
        // Within them, only the sections of code where the file names them: a linker that puts
        // read-only data in the executable segment (gold does) would otherwise have that data
        // decoded, and a byte pair of it read as a branch into a patch refuse the function.
        let sections = SymbolTableCache.shared.table(for: object)?.codeSections ?? []
        let code =
            sections.isEmpty
            ? segments
            : sections.flatMap { section in
                segments.compactMap { segment -> Range<UInt>? in
                    let low = max(segment.lowerBound, UInt(truncatingIfNeeded: section.lowerBound))
                    let high = min(segment.upperBound, UInt(truncatingIfNeeded: section.upperBound))
                    return low < high ? low..<high : nil
                }
            }
        return code.map { (object.bias &+ $0.lowerBound)..<(object.bias &+ $0.upperBound) }
    }

    /// Whether a plan's function still holds the bytes it was planned for (or its patch):
    /// false once its object was unloaded and something else mapped there.
    static func isCurrent(_ reference: PlanReference) -> Bool {
        // Under the registry's lock, under which every patch is written and its bit set: the
        // bytes and the bit are then of one moment (between a write and its bit, a plan would
        // look stale, and a new one be made from the jump). A thread that holds the lock already
        // (a block run by its own install) sees no write in progress.
        (try? SlotRegistry.shared.withLock { () -> Bool in holdsItsBytes(reference) }) ?? holdsItsBytes(reference)
    }

    private static func holdsItsBytes(_ reference: PlanReference) -> Bool {
        let record = reference.record
        let start = record.patchStart
        let count = Int(record.copiedLength) - Int(record.patchOffset)
        guard let now = guardedBytes(start, count) else { return false }
        let patched = InlinePatching.state(reference.slab, reference.index) & InlinePatching.patched != 0
        return now == (patched ? PatchWriter.patchBytes(reference.slab, reference.index) : record.overwritten)
    }

    /// The `count` bytes at `start`, read word by word under the fault guard (``ffh_read_word``),
    /// or nil when they cannot be read: another thread may unload the object that held them at
    /// any moment (a look at the memory map first, then a plain read, faulted in between).
    private static func guardedBytes(_ start: UInt, _ count: Int) -> [UInt8]? {
        guard count > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: max(count, 8))
        var offset = 0
        while offset < count {
            // The last word ends at the last byte (overlapping the one before), so that no byte
            // past them is read.
            let at = count >= 8 ? min(offset, count - 8) : 0
            var word: UInt = 0
            guard ffh_read_word(UnsafeRawPointer(bitPattern: start + UInt(at)), &word) == 0 else { return nil }
            withUnsafeBytes(of: word) { word in
                for index in 0..<8 where at + index < bytes.count { bytes[at + index] = word[index] }
            }
            offset = at + 8
        }
        return Array(bytes.prefix(count))
    }

    /// Forgets the plans and slabs of objects no longer loaded (a `dlclose`): their slabs are
    /// unmapped once no hooked call can be inside them.
    private static func forgetUnloaded(_ state: inout State, _ objects: ObjectRanges) {
        let loaded = objects.keys
        for (key, slabs) in state.slabs where !key.hasPrefix("@") && !loaded.contains(key) {
            state.slabs[key] = nil
            for slab in slabs {
                SlotRegistry.shared.stopObserving(slots: slab.cellRange)
                SlotRegistry.shared.retire(SlabMemory(slab)) {}
            }
        }
    }
}

/// A slab's mapping, unmapped when reclamation releases it.
final class SlabMemory: Sendable {
    let slab: CodeSlab

    init(_ slab: CodeSlab) { self.slab = slab }

    deinit {
        munmap(
            UnsafeMutableRawPointer(bitPattern: slab.base), slab.codeSize + slab.capacity * MemoryLayout<UInt>.stride)
        slab.isUnmapped.store(true, ordering: .releasing)
    }
}

/// The loaded objects' address ranges, to tell which object holds an address quickly, and each
/// object's key: its load bias and the address of its dynamic section, which tell it from any
/// other object, and from one loaded later at its place.
struct ObjectRanges {
    private var ranges: [(start: UInt, end: UInt, object: Int)] = []
    private var objectKeys: [String] = []
    private var objectIdentities: [ObjectIdentity] = []
    private var objectPaths: [String] = []

    init(_ loaded: [LoadedObject]) {
        for object in loaded {
            let position = objectKeys.count
            objectKeys.append(Self.key(of: object))
            objectIdentities.append(Self.identity(of: object))
            objectPaths.append(object.path)
            for segment in object.loadSegments {
                let start = object.bias &+ UInt(truncatingIfNeeded: segment.address)
                ranges.append((start, start &+ UInt(truncatingIfNeeded: segment.memorySize), position))
            }
        }
        ranges.sort { $0.start < $1.start }
    }

    /// The position of the object that holds `address`, nil for memory outside every object.
    private func object(holding address: UInt) -> Int? {
        var low = 0
        var high = ranges.count
        while low < high {
            let middle = (low + high) / 2
            if ranges[middle].start <= address { low = middle + 1 } else { high = middle }
        }
        guard low > 0, address < ranges[low - 1].end else { return nil }
        return ranges[low - 1].object
    }

    /// The key of the object that holds `address`; for code outside every object, a key of
    /// its 1 GiB region (starting with "@").
    func key(of address: UInt) -> String {
        guard let object = object(holding: address) else { return Self.anonymousKey(address) }
        return objectKeys[object]
    }

    /// The keys of every object.
    var keys: Set<String> { Set(objectKeys) }

    /// The key of the object that holds `address` and its path (`identity(of:)`):
    /// an object loaded later at another's place with the same layout has its key, not its path.
    func identity(of address: UInt) -> ObjectIdentity { place(of: address).identity }

    /// ``key(of:)`` and ``identity(of:)`` together, from one lookup.
    func place(of address: UInt) -> (key: String, identity: ObjectIdentity) {
        guard let object = object(holding: address) else {
            return (Self.anonymousKey(address), ObjectIdentity(region: address >> 30))
        }
        return (objectKeys[object], objectIdentities[object])
    }

    /// Whether an object of identity `identity` (``identity(of:)``) is among these.
    func holds(identity: ObjectIdentity) -> Bool { objectIdentities.contains(identity) }

    /// The path of the object of identity `identity` among these; nil for one not among them,
    /// and for memory outside every object.
    func path(of identity: ObjectIdentity) -> String? {
        objectIdentities.firstIndex(of: identity).map { objectPaths[$0] }
    }

    /// The identity of `object`, as `identity(of:)` gives it for an address in it.
    static func identity(of object: LoadedObject) -> ObjectIdentity {
        ObjectIdentity(bias: object.bias, dynamic: object.dynamicAddress ?? 0, path: object.path)
    }

    /// The key of `object`, as ``key(of:)`` gives it for an address in it.
    static func key(of object: LoadedObject) -> String { key(bias: object.bias, dynamic: object.dynamicAddress ?? 0) }

    /// The key of the object that holds `address`, found with `dladdr` (no walk over every
    /// loaded object).
    static func key(containing address: UInt) -> String {
        var bias: UInt = 0
        var dynamic: UInt = 0
        guard ffh_elf_object_at(address, &bias, &dynamic) != 0 else { return anonymousKey(address) }
        return key(bias: bias, dynamic: dynamic)
    }

    private static func key(bias: UInt, dynamic: UInt) -> String {
        String(bias, radix: 16) + ":" + String(dynamic, radix: 16)
    }

    private static func anonymousKey(_ address: UInt) -> String { "@\(address >> 30)" }
}

/// Which object an address was found in: the object's key (its load bias and the address of its
/// dynamic section) and its path, the path by a hash of it (FNV-1a): an object loaded later at
/// another's place with the same layout has its key, not its path. Memory outside every object
/// has its 1 GiB region's. Plain words, so that the targets that carry one copy it for nothing
/// (a target is copied several times as a batch is listed and planned).
struct ObjectIdentity: Hashable, Sendable {
    private let bias: UInt
    private let dynamic: UInt
    private let path: UInt64

    init(bias: UInt, dynamic: UInt, path: String) {
        self.bias = bias
        self.dynamic = dynamic
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in path.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        self.path = hash
    }

    /// The identity of memory outside every object, in the 1 GiB region `region`.
    init(region: UInt) {
        bias = region
        dynamic = .max
        path = 0
    }
}
