/// The function-pointer fields of a C struct of callbacks that a table hook or a lifecycle
/// dispatcher covers, each with its name and C signature.
///
/// ```swift
/// let layout = TableLayout<io_methods>([
///     .init("read", \.xRead, try Signature("i^v^viq")),
///     .init("write", \.xWrite, try Signature("i^vr^viq")),
/// ])
/// ```
public struct TableLayout<Table>: Sendable {
    /// One function-pointer field.
    public struct Slot: Sendable, Hashable {
        /// The name the slot is reported under.
        public let name: String
        /// The field's byte offset in the table, `nil` when the key path names no stored field.
        public let offset: Int?
        /// The C signature of the function the field holds.
        public let signature: Signature

        /// A slot for the field `field` of `Table`.
        public init(_ name: String, _ field: PartialKeyPath<Table>, _ signature: Signature) {
            self.name = name
            self.offset = MemoryLayout<Table>.offset(of: field)
            self.signature = signature
        }
    }

    /// The slots, in the order given.
    public let slots: [Slot]

    /// A layout of `slots`.
    public init(_ slots: [Slot]) {
        self.slots = slots
    }

    /// The slot's address in `table`.
    func address(of slot: Slot, in table: UInt) -> UnsafeMutableRawPointer? {
        guard let offset = slot.offset else { return nil }
        return UnsafeMutableRawPointer(bitPattern: table + UInt(offset))
    }
}

/// The handle of a group of hooks installed together (a whole table, a lifecycle
/// component); removing it removes every hook of the group.
///
/// Dropping the token does not remove the hooks.
public final class HookGroupToken: Sendable, CustomStringConvertible {
    /// The tokens of the group's hooks.
    public let tokens: [HookToken]
    /// The names of the slots the group left alone because they held NULL.
    public let skippedSlots: [String]

    init(tokens: [HookToken], skippedSlots: [String]) {
        self.tokens = tokens
        self.skippedSlots = skippedSlots
    }

    /// Removes every hook of the group; true when at least one was still installed.
    @discardableResult
    public func remove() -> Bool {
        tokens.reduce(false) { removed, token in token.remove() || removed }
    }

    /// Whether any hook of the group is still installed.
    public var isActive: Bool { tokens.contains { $0.isActive } }

    /// The number of hooks and skipped slots.
    public var description: String {
        "HookGroupToken(\(tokens.count) hooks, \(skippedSlots.count) empty slots skipped)"
    }
}
