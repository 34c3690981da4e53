/// Where a hook's block runs relative to the original function.
public enum HookPosition: Sendable, Hashable, CustomStringConvertible {
    /// Before the original, in install order; the block may change the arguments.
    case before
    /// In place of the original; the newest instead block wraps the older ones, and
    /// ``Invocation/callOriginal()`` runs the next one in (the innermost runs the original).
    case instead
    /// After the original, in install order; the block sees and may replace the return value.
    case after

    /// "before", "instead" or "after".
    public var description: String {
        switch self {
        case .before: "before"
        case .instead: "instead"
        case .after: "after"
        }
    }
}

/// Options for one hook.
public struct HookOptions: OptionSet, Sendable, Hashable {
    /// The options' bits.
    public let rawValue: UInt8
    /// Creates options from their bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Run the block at most once, however many threads call at the same moment, then
    /// remove the hook.
    public static let once = HookOptions(rawValue: 1 << 0)

    /// Run the block also when the slot is called again from inside a block on the same
    /// thread. By default such a nested call goes straight to the original, which keeps a
    /// logging hook on `write` from recursing into itself. For import-table hooks a call to
    /// the symbol through any object's hooked entry counts as the same slot.
    public static let allowsReentry = HookOptions(rawValue: 1 << 1)

    /// Allow a slot in read-only memory (a `const` table the loader protected, an import
    /// table under full RELRO): its page is made writable for the moment of each write to
    /// the slot, then given its protection back. Without it such a slot is refused with
    /// ``HookError/Code-swift.struct/readOnlySlot``. Memory that is executable (a function's
    /// code) is refused either way, with ``HookError/Code-swift.struct/invalidSlot``.
    public static let liftsPageProtection = HookOptions(rawValue: 1 << 2)
}
