/// Installs hooks on function-pointer slots.
///
/// ```swift
/// let token = try Hook.before(on: slot, signature: Signature("iii")) { call in
///     print("called with", call.argument(0, as: Int32.self), call.argument(1, as: Int32.self))
/// }
/// defer { token.remove() }
/// ```
///
/// All entry points are safe to call from any thread while other threads call through the
/// slot. Each slot gets one libffi closure, shared by all of its hooks.
public enum Hook {
    /// Installs `block` at `position` around the function held in `slot`.
    ///
    /// - Parameters:
    ///   - slot: an aligned, pointer-sized slot holding a C function of `signature`; it may
    ///     hold NULL for an instead hook, which then provides the function, and for any hook
    ///     when the slot has a fallback (see ``FunctionSlot/withFallback(_:)``).
    ///   - signature: the C signature of the function in the slot; for a variadic function,
    ///     that of one call shape (see ``/FFIHookCore/Signature/fixedArgumentCount``).
    ///   - position: before, instead of, or after the original.
    ///   - options: ``HookOptions/once``, ``HookOptions/allowsReentry``,
    ///     ``HookOptions/liftsPageProtection``, and the limits to the installing thread's
    ///     or the current task's calls, ``HookOptions/onInstallingThreadOnly`` and
    ///     ``HookOptions/inCurrentTaskOnly``.
    ///   - block: runs with a view of each call, on the calling thread, possibly on several
    ///     threads at once; see ``Invocation``.
    /// - Returns: the token that removes the hook.
    /// - Throws: ``HookError`` for a null or misaligned slot, a slot made from a
    ///   key path or pointer that names no function pointer, a slot in unmapped or read-only
    ///   memory, a NULL slot for a before or after hook without a fallback, a fallback that
    ///   is not a function, a slot that holds an address where no memory can be read, a slot
    ///   already hooked with a
    ///   different signature, a signature the platform cannot pass, a closure libffi
    ///   cannot allocate, or ``HookOptions/inCurrentTaskOnly`` outside
    ///   ``scoped(_:during:)``. Nothing is installed then.
    public static func install(
        on slot: FunctionSlot, signature: Signature, position: HookPosition, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(HookError) -> HookToken {
        if let problem = slot.problem {
            throw HookError(slot: slot.address, signature: signature, problem: .invalidSlot(problem))
        }
        let record = try SlotRegistry.shared.install(
            slot: slot.pointer, signature: signature, position: position, options: options,
            fallback: slot.fallbackAddress, owner: slot.owner, preserving: slot.function != 0, block: block)
        return HookToken(record)
    }

    /// ``install(on:signature:position:options:_:)`` for a typed block, which the C call path
    /// may call itself (see ``TypedDirect``).
    @usableFromInline
    static func install(
        on slot: FunctionSlot, signature: Signature, position: HookPosition, options: HookOptions,
        typed: TypedHookBlock
    ) throws(HookError) -> HookToken {
        if let problem = slot.problem {
            throw HookError(slot: slot.address, signature: signature, problem: .invalidSlot(problem))
        }
        let record = try SlotRegistry.shared.install(
            slot: slot.pointer, signature: signature, position: position, options: options,
            fallback: slot.fallbackAddress, owner: slot.owner, preserving: slot.function != 0, direct: typed.direct,
            block: typed.block)
        return HookToken(record)
    }

    /// Installs a block that runs before the original (see ``install(on:signature:position:options:_:)``).
    public static func before(
        on slot: FunctionSlot, signature: Signature, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(HookError) -> HookToken {
        try install(on: slot, signature: signature, position: .before, options: options, block)
    }

    /// Installs a block that runs instead of the original (see ``install(on:signature:position:options:_:)``).
    public static func instead(
        on slot: FunctionSlot, signature: Signature, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(HookError) -> HookToken {
        try install(on: slot, signature: signature, position: .instead, options: options, block)
    }

    /// Installs a block that runs after the original (see ``install(on:signature:position:options:_:)``).
    public static func after(
        on slot: FunctionSlot, signature: Signature, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(HookError) -> HookToken {
        try install(on: slot, signature: signature, position: .after, options: options, block)
    }

    /// Releases what the library keeps for the slots in `memory` whose hooks are all removed,
    /// before the program frees that memory itself (a table of callbacks it allocated).
    ///
    /// When a slot's last hook is removed, the slot gets its original function back, but the
    /// library keeps the slot's closure (80 bytes on x86-64) for the life of the process: a
    /// caller may have read the closure's address from the slot just before and call it
    /// later, and it still passes such calls to the original. Hooking the same address again
    /// reuses it, so the memory kept is bounded by the number of distinct addresses ever
    /// hooked. A program that hooks slots in memory it frees and allocates again at other
    /// addresses, call after call, releases them here: each released closure is reused for
    /// another slot once no call can still be inside it (see ``waitForReclamation()``).
    /// A closure must not be called after its slot is released, so release only memory that
    /// nothing calls through any more. Slots in `memory` that still have hooks are left as
    /// they are: remove their hooks first.
    ///
    /// A slot whose memory was unmapped when its last hook was removed (an unloaded library,
    /// a table freed with `munmap`) is released by the removal itself.
    ///
    /// - Parameter memory: the memory the program is about to free or reuse.
    /// - Returns: how many slots were released.
    @discardableResult
    public static func releaseSlots(in memory: UnsafeRawBufferPointer) -> Int {
        guard let start = memory.baseAddress, memory.count > 0 else { return 0 }
        let first = UInt(bitPattern: start)
        let alignment = UInt(MemoryLayout<UnsafeRawPointer>.alignment)
        let firstSlot = (first + alignment - 1) & ~(alignment - 1)
        // (A count past the end of the address space ends there, rather than trap.)
        let (sum, overflow) = first.addingReportingOverflow(UInt(memory.count))
        let end = overflow ? UInt.max : sum
        guard end >= firstSlot + UInt(MemoryLayout<UnsafeRawPointer>.size) else { return 0 }
        return SlotRegistry.shared.releaseSlots(from: firstSlot, to: end - UInt(MemoryLayout<UnsafeRawPointer>.size))
    }

    /// Waits until the memory of every hook removed before this call is freed.
    ///
    /// Removal never blocks: a removed hook's block and the hook list it belonged to are
    /// freed as soon as no call can still be inside them, checked at every later install or
    /// removal. This method waits for the calls in flight that could still be inside them
    /// to leave, and frees everything removed so far. Hooks that other threads remove while
    /// it waits are not waited for, so their installs and removals cannot keep it waiting;
    /// a call blocked inside a hooked function (on I/O, say) does, until it returns.
    ///
    /// - Throws: ``HookError/Code-swift.struct/calledFromHookBlock`` when called
    ///   from inside a hook block, which would wait for itself.
    public static func waitForReclamation() throws(HookError) {
        try SlotRegistry.shared.waitForReclamation()
    }

    /// The library's figures now: slots with hooks, memory of removed hooks not yet freed,
    /// slot closures; see ``HookStatistics``.
    ///
    /// Safe to read from any thread and from inside a hook block.
    ///
    /// - Throws: ``HookError/Code-swift.struct/calledFromHookBlock`` when read from a block
    ///   that runs within the library's own install or removal on the same thread (for an
    ///   allocation it makes, with `malloc` hooked), where the read would wait for itself.
    public static var statistics: HookStatistics {
        get throws(HookError) {
            guard let statistics = SlotRegistry.shared.statistics else {
                throw HookError(slot: nil, signature: nil, problem: .calledFromHookBlock)
            }
            return statistics
        }
    }
}
