/// The handle of one installed hook; removing it is the one way to take the hook out.
///
/// Dropping a token does not remove its hook: the hook stays installed for the life of the
/// process. Tokens may be removed in any order and from any thread, including from inside a
/// hook block.
public final class HookToken: Sendable, Hashable, CustomStringConvertible {
    let record: HookRecord
    /// Runs after the removal that took the hook out, outside the library's lock (a module
    /// built on the engine puts back what it changed beside the slot).
    private let afterRemoval: (@Sendable () -> Void)?

    init(_ record: HookRecord) {
        self.record = record
        self.afterRemoval = nil
    }

    /// A token for `record` whose first removal runs `afterRemoval` once the hook is out.
    package init(_ record: HookRecord, afterRemoval: @escaping @Sendable () -> Void) {
        self.record = record
        self.afterRemoval = afterRemoval
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
        guard record.remove() else { return false }
        afterRemoval?()
        return true
    }

    /// Whether the hook is still installed (a `once` hook removes itself after its run).
    public var isActive: Bool { record.isActive }

    /// Tokens are equal when they are the same token.
    public static func == (lhs: HookToken, rhs: HookToken) -> Bool { lhs === rhs }

    /// Hashes the token's identity.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }

    /// The hook's position, slot and whether it is active.
    public var description: String {
        "HookToken(\(record.position) on 0x\(String(UInt(bitPattern: record.entry.slot), radix: 16))"
            + (isActive ? ")" : ", removed)")
    }
}
