public import FFIHook

/// A C function hooked in its own code: wherever it is called from (a direct `call` inside
/// its library, a `static` function, libc calling its own `malloc`), not only through a
/// pointer.
///
/// Making one plans the patch and changes nothing yet: it decodes the function's first
/// instructions, copies them into a *trampoline* near the function (which then acts as the
/// original), and sets up a *jump cell*, an 8-byte word the patch will jump through. The
/// cell is an ordinary ``/FFIHook/FunctionSlot``: every verb of ``/FFIHook/Hook`` works on
/// ``slot`` (before, instead, after, typed blocks, `replace`, `.once`, caller limits, tokens,
/// statistics, ``/FFIHook/Hook/scoped(_:during:)``).
///
/// ```swift
/// let getpid = try InlineFunction(symbol: "getpid")
/// let token = try Hook.after(on: getpid.slot, signature: Signature("i")) { call in
///     print("getpid returned", call.returnValue(as: Int32.self))
/// }
/// defer { token.remove() }
/// ```
///
/// The first hook or replacement on the slot writes the patch (a 5-byte `jmp` to a stub
/// within ±2 GB of the function, or a 14-byte absolute jump when no memory is free there);
/// removing the last one writes the function's bytes back. Each write stops the process's
/// other threads with a signal, and moves a thread stopped inside the bytes being replaced
/// to the matching instruction of the trampoline. Two `InlineFunction`s of one address share
/// one patch and one slot.
///
/// What is refused, with ``/FFIHook/HookError/Code-swift.struct/unhookableFunction`` and a
/// message that names the instruction and its offset: a function shorter than the patch
/// (unless alignment padding follows it), an instruction the relocator cannot move, a
/// RIP-relative operand the trampoline cannot reach, a `call` whose return address the patch
/// would overwrite, and a branch from elsewhere in the function into the overwritten bytes
/// (found when the symbol tables give the function's size).
public struct InlineFunction: Sendable, Hashable, CustomStringConvertible {
    // The plan's slab and place there, and the group that planned it (which keeps the slab)
    // with the function's place among its names: in this order, 24 bytes (a batch of thousands
    // keeps one each).
    private let slab: CodeSlab
    private let group: PlanGroup
    private let position: Int32
    private let nameIndex: Int32

    /// The plan: its slab and its place there.
    var plan: PlanReference { PlanReference(slab: slab, index: Int(position)) }

    init(plan: PlanReference, group: PlanGroup, index: Int) {
        self.slab = plan.slab
        self.position = Int32(plan.index)
        self.group = group
        self.nameIndex = Int32(index)
    }

    /// Plans the patch of the function at `address`.
    ///
    /// - Throws: ``/FFIHook/HookError`` with
    ///   ``/FFIHook/HookError/Code-swift.struct/unhookableFunction`` when the address is not
    ///   in executable memory, is an IFUNC resolver, or its first instructions cannot be
    ///   moved; ``/FFIHook/HookError/Code-swift.struct/unsupportedPlatform`` off Linux x86-64.
    public init(address: UnsafeRawPointer) throws(HookError) {
        let (plan, group) = try InlinePlanner.plan(UInt(bitPattern: address), name: nil)
        self.init(plan: plan, group: group, index: 0)
    }

    /// Plans the patch of the function `symbol` names, found as the dynamic linker binds a
    /// call to it: in the global scope, or in the loaded object `object` (a soname such as
    /// `"libsqlite3.so.0"`, a file name or a path; nothing is loaded). Only exported symbols
    /// are found by name (the dynamic symbol tables); a `static` function, or one the main
    /// program does not export, is given by address (``init(_:)`` or ``init(address:)``). An IFUNC symbol
    /// (`memset`, `strlen`) resolves to the implementation its resolver picks for this
    /// machine, which is the code that runs.
    ///
    /// - Throws: ``/FFIHook/HookError`` with
    ///   ``/FFIHook/HookError/Code-swift.struct/symbolNotFound`` when no loaded object (or not
    ///   `object`) defines it as a function,
    ///   ``/FFIHook/HookError/Code-swift.struct/objectNotFound`` when `object` is not loaded,
    ///   and the errors of ``init(address:)``.
    public init(symbol: String, in object: String? = nil) throws(HookError) {
        let address: UInt
        do {
            address = try SymbolResolver.resolve(symbol: symbol, in: object)
        } catch {
            throw HookError(
                code: error.code == .objectNotLoaded ? .objectNotFound : .symbolNotFound,
                message: error.description, symbol: symbol, object: object)
        }
        let (plan, group) = try InlinePlanner.plan(address, name: symbol)
        self.init(plan: plan, group: group, index: 0)
    }

    /// Plans the patch of a C function given as a `@convention(c)` function value, such as
    /// `getpid as @convention(c) () -> Int32`.
    public init<Function>(_ function: Function) throws(HookError) {
        guard MemoryLayout<Function>.size == MemoryLayout<UnsafeRawPointer>.size,
            let address = unsafeBitCast(function, to: UnsafeRawPointer?.self)
        else {
            throw HookError(
                code: .unhookableFunction, message: "\(Function.self) is not a @convention(c) function pointer")
        }
        try self.init(address: address)
    }

    /// The function's address: where the patch goes (4 bytes further after an `endbr64`).
    public var address: UnsafeRawPointer { UnsafeRawPointer(bitPattern: plan.record.function)! }

    /// The function's symbol, or its address in hexadecimal when no symbol starts there.
    public var name: String { group[Int(nameIndex)] ?? InlineNames.name(of: plan.slab, plan.index) }

    /// The jump cell as a slot: install hooks and replacements on it with ``/FFIHook/Hook``.
    public var slot: FunctionSlot {
        FunctionSlot(address: plan.slab.cell(plan.index), owner: group, function: UInt(plan.record.function))
    }

    /// The trampoline, callable as the original function whether or not the function is
    /// patched: its first instructions, moved, then a jump to the rest of it.
    public var original: UnsafeRawPointer { UnsafeRawPointer(bitPattern: plan.slab.trampoline(plan.index))! }

    /// ``original`` as a function type, such as `@convention(c) (Int32) -> Int32`.
    public func original<Function>(as type: Function.Type) -> Function {
        precondition(
            MemoryLayout<Function>.size == MemoryLayout<UnsafeRawPointer>.size,
            "\(Function.self) is not a @convention(c) function pointer")
        return unsafeBitCast(original, to: Function.self)
    }

    /// Whether the patch is in the function now (some hook or replacement is on ``slot``, it
    /// is kept with ``patch()``, or a batch is installing or removing hooks on it).
    public var isPatched: Bool { InlinePatching.state(plan.slab, plan.index) & InlinePatching.patched != 0 }

    /// Writes the jump now and keeps it while no hook or replacement is installed: calls then
    /// pass through the stub and the trampoline (a few nanoseconds), and installing and
    /// removing hooks only writes the jump cell, without stopping the other threads each
    /// time. For functions hooked and unhooked often, and to check early that the patch can
    /// be written. Does nothing when the jump is kept already. To keep many functions patched
    /// with one stop of the threads, use ``InlineBatch/patch()``.
    ///
    /// Being kept patched is the function's, not this value's: every ``InlineFunction`` and
    /// batch of the same function shares it (the function has one patch), so an ``unpatch()``
    /// through any of them ends it; two parts of a program that each keep a function patched
    /// must agree on when it stops.
    ///
    /// - Throws: ``/FFIHook/HookError`` with ``/FFIHook/HookError/Code-swift.struct/patchFailed``
    ///   when the jump cannot be written, or
    ///   ``/FFIHook/HookError/Code-swift.struct/calledFromHookBlock`` from a block that runs
    ///   within the library's own install or removal on this thread.
    public func patch() throws(HookError) {
        try SlotRegistry.shared.withLock { () throws(HookError) in
            try InlinePatching.patchBeforeCellChanges(plan.slab, plan.index)
            InlinePatching.setPinned(plan.slab, plan.index, true)
        }
    }

    /// Stops keeping the jump that ``patch()`` wrote: it is taken out now if no hook or
    /// replacement is installed, else when the last one is removed.
    ///
    /// - Throws: ``/FFIHook/HookError/Code-swift.struct/calledFromHookBlock`` from a block
    ///   that runs within the library's own install or removal on this thread.
    public func unpatch() throws(HookError) {
        try SlotRegistry.shared.withLock { () throws(HookError) in
            InlinePatching.setPinned(plan.slab, plan.index, false)
            InlinePatching.cellDidChange(plan.slab, plan.index)
        }
    }

    /// Whether the function's code still holds the bytes it was planned for (its patch, while
    /// it is patched): false once its object was unloaded, and when what was loaded at the same
    /// address since holds other bytes there (a fresh copy of a patched function holds its
    /// original bytes, not the patch; another file, other code). The bytes are what is
    /// compared: an unpatched function of a copy of the same file loaded at the same address
    /// holds the same bytes, and so its code, and a plan of it is equal to the first one's.
    public var holdsItsCode: Bool { InlinePlanner.isCurrent(plan) }

    /// Whether ``patch()`` keeps the jump.
    public var isKeptPatched: Bool { InlinePatching.state(plan.slab, plan.index) & InlinePatching.pinned != 0 }

    /// How many bytes of the function the patch overwrites (the jump and the `int3`s that
    /// fill the rest of the last instruction it touches).
    public var overwrittenLength: Int { Int(plan.record.copiedLength) - Int(plan.record.patchOffset) }

    /// Whether the patch is the 5-byte relative jump (the function's code slab lies within
    /// ±2 GB of it) rather than the 14-byte absolute one.
    public var usesNearJump: Bool { plan.slab.isNear }

    /// How many threads the writes of this function's jump have moved into its trampoline.
    var movedThreads: Int {
        (try? SlotRegistry.shared.withLock { plan.slab.movedThreads[plan.index] ?? 0 }) ?? 0
    }

    /// Equal when they patch the same function.
    public static func == (lhs: InlineFunction, rhs: InlineFunction) -> Bool { lhs.plan == rhs.plan }

    /// Hashes the patch's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(plan) }

    /// The name, address and whether it is patched.
    public var description: String {
        "InlineFunction(\(name) at \(InlinePlanner.hex(plan.record.function)), \(isPatched ? "patched" : "not patched"))"
    }
}

extension FunctionSlot {
    /// The jump cell of the function `symbol` names, to hook it inline (see
    /// ``InlineFunction``): `try Hook.before(on: .inline("getpid"), signature: Signature("i")) { … }`.
    public static func inline(_ symbol: String, in object: String? = nil) throws(HookError) -> FunctionSlot {
        try InlineFunction(symbol: symbol, in: object).slot
    }

    /// The jump cell of the function at `address`, to hook it inline (see ``InlineFunction``).
    public static func inline(at address: UnsafeRawPointer) throws(HookError) -> FunctionSlot {
        try InlineFunction(address: address).slot
    }
}

/// What a batch, or one ``InlineFunction``, planned: the names it planned its functions under
/// (packed in one buffer, so that thousands of functions need no string each), and the slabs
/// their plans are in, which it keeps. A slab that no group keeps goes, once none of its
/// functions is patched, at a later planning (see ``InlinePlanner``). Every ``InlineFunction``,
/// every slot it gives and every hook, replacement or attach installed on that slot keeps its
/// group.
final class PlanGroup: Sendable {
    private let bytes: [UInt8]
    /// Where each name ends in `bytes`; an empty name is no name.
    private let ends: [UInt32]
    /// The slabs the group keeps (each counted once in its ``CodeSlab/groups``).
    private let slabs: [CodeSlab]

    /// A group of `names` that adopts one count of each of `slabs`, taken under the planner's
    /// lock.
    init(names: [String?], adopting slabs: [CodeSlab]) {
        var bytes: [UInt8] = []
        // Their exact size: grown by appending, the buffer kept up to half as much again.
        bytes.reserveCapacity(names.reduce(0) { $0 + ($1?.utf8.count ?? 0) })
        var ends: [UInt32] = []
        ends.reserveCapacity(names.count)
        for name in names {
            bytes += name?.utf8 ?? "".utf8
            ends.append(UInt32(bytes.count))
        }
        self.bytes = bytes
        self.ends = ends
        self.slabs = slabs
    }

    /// Drops the group's counts: without a lock (a group may go anywhere, even inside the
    /// registry's lock, when a hook record that kept it is freed); the planner acts on it later.
    deinit {
        for slab in slabs { slab.groups.subtract(1, ordering: .releasing) }
    }

    /// The name at `index`, nil when none was given.
    subscript(index: Int) -> String? {
        let start = index == 0 ? 0 : Int(ends[index - 1])
        let end = Int(ends[index])
        guard end > start else { return nil }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }
}
