/// The handle of one installed hook; removing it is the one way to take the hook out.
///
/// Dropping a token does not remove its hook: the hook stays installed for the life of the
/// process. Tokens may be removed in any order and from any thread, including from inside a
/// hook block.
public final class HookToken: Sendable, Hashable, CustomStringConvertible {
    /// The hook's record in a slot; nil for a hook managed elsewhere (``handle``).
    let record: HookRecord?
    /// Runs after the removal that took the hook out, outside the library's lock (a module
    /// built on the engine puts back what it changed beside the slot).
    private let afterRemoval: (@Sendable () -> Void)?
    /// For a hook whose record can change under it (a per-instance method hook that follows
    /// its object from class to class), what removes it and says whether it is active.
    private let handle: (any HookHandle)?

    init(_ record: HookRecord) {
        self.record = record
        self.afterRemoval = nil
        self.handle = nil
    }

    /// A token for `record` whose first removal runs `afterRemoval` once the hook is out.
    package init(_ record: HookRecord, afterRemoval: @escaping @Sendable () -> Void) {
        self.record = record
        self.afterRemoval = afterRemoval
        self.handle = nil
    }

    /// A token whose removal, state and description are `handle`'s.
    package init(handle: any HookHandle) {
        self.record = nil
        self.afterRemoval = nil
        self.handle = handle
    }

    /// Removes the hook; true the first time, false when it was already removed.
    ///
    /// After removal no new call runs the block. A call already inside the block finishes;
    /// the block's memory is freed once no call can still be inside it (see
    /// ``Hook/waitForReclamation()``). When the last hook of a slot goes, the slot gets its
    /// original function back, unless someone else has written the slot since; then their
    /// pointer stays and the library's closure remains valid as a pass-through. When the
    /// slot's memory is no longer mapped or writable (its library was unloaded, its table
    /// unmapped), nothing is written there: the hook is removed all the same and this returns
    /// `true`. Safe to call from any thread, from inside a hook block, and in a child after
    /// `fork`.
    @discardableResult
    public func remove() -> Bool {
        if let handle { return handle.remove() }
        guard let record, record.remove() else { return false }
        afterRemoval?()
        return true
    }

    /// The address of the slot the hook is on: its record's, or an attach's; nil for other
    /// handles.
    var slotAddress: UInt? {
        if let record { return UInt(bitPattern: record.entry.slot) }
        return (handle as? AttachHandle)?.slot
    }

    /// Whether the hook's slot still leads to the library: true while it holds what the
    /// library wrote there last for the slot's hooks and replacements (the closure of its hooks,
    /// or its newest replacement); false once something else has written it. That happens when
    /// the object holding an import-table entry is unloaded and loaded again at the same
    /// address (the new copy's table holds what the loader put there, and no hook is on it), or
    /// when another tool writes the slot. nil for a removed hook, for one that is not on a slot
    /// (a method hook), for a slot no longer mapped, and when asked from a block that runs
    /// within the library's own install or removal on this thread (as for ``Hook/statistics``).
    ///
    /// A hook whose slot no longer leads to it runs only for calls that reach it another way
    /// (through a tool that wrote the slot and calls what it found there); removing it writes
    /// nothing into the slot. For a hook on an inline function's slot (FFIHookInline) this
    /// speaks of that slot; whether the function's code still leads to it is the inline
    /// function's `holdsItsCode`.
    public var holdsItsSlot: Bool? {
        guard isActive, let address = slotAddress else { return nil }
        return SlotRegistry.shared.holdsWhatItWrote(at: address)
    }

    /// Whether the hook is still installed (a `once` hook removes itself after its run).
    public var isActive: Bool { handle?.isActive ?? record?.isActive ?? false }

    /// Tokens are equal when they are the same token.
    public static func == (lhs: HookToken, rhs: HookToken) -> Bool { lhs === rhs }

    /// Hashes the token's identity.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }

    /// The hook's position, slot (or what it hooks) and whether it is active.
    public var description: String {
        let summary =
            if let handle { handle.summary } else if let record {
                "\(record.position) on 0x\(String(UInt(bitPattern: record.entry.slot), radix: 16))"
            } else { "" }
        return "HookToken(\(summary)" + (isActive ? ")" : ", removed)")
    }
}

/// What removes a hook managed outside the slot registry, for ``HookToken``.
package protocol HookHandle: AnyObject, Sendable {
    /// Removes the hook; true the first time.
    func remove() -> Bool
    /// Whether the hook is still installed.
    var isActive: Bool { get }
    /// The hook's position and what it is on, for the token's description.
    var summary: String { get }
}
