import FFIHook

/// The kinds of hook the mutators install; each leaves its own mark on a call's result.
enum HookKind: Int, CaseIterable, Sendable, CustomStringConvertible {
    /// A before block that adds ``Marks/beforeStep`` to argument `a`.
    case before
    /// An instead block that calls the original, then adds ``Marks/passthroughStep``.
    case passthrough
    /// An instead block that does not call the original; it returns `a ^ b` with
    /// ``Marks/replaced`` set.
    case replace
    /// An after block that adds ``Marks/afterStep`` to the result.
    case after
    /// A before block that calls its own slot again from inside the block; the nested call
    /// must skip every block and return the original's result.
    case reenter

    /// The position the kind is installed at.
    var position: HookPosition {
        switch self {
        case .before, .reenter: .before
        case .passthrough, .replace: .instead
        case .after: .after
        }
    }

    /// How many hooks of the kind one slot may hold at once; one call sees at most this many.
    var cap: Int {
        switch self {
        case .before, .after: 6
        case .passthrough: 4
        case .replace, .reenter: 2
        }
    }

    var description: String {
        switch self {
        case .before: "before"
        case .passthrough: "instead (calls original)"
        case .replace: "instead (replaces)"
        case .after: "after"
        case .reenter: "before (re-enters)"
        }
    }
}

/// How a result records the blocks that ran for its call.
///
/// A caller passes `a` and `b` below 256 (and echoed extras); the original returns `a + rest`
/// where `rest` depends only on the other arguments. The result's bits are then:
///
/// - bits 0..<16: the original's result, or `a ^ b` when a replacing block ran, where `a`
///   has grown by ``beforeStep`` for each before block that ran;
/// - bits 16..<20: how many pass-through instead blocks ran;
/// - bits 20..<24: how many after blocks ran;
/// - bit 28: set when a replacing block ran in place of the original;
/// - every other bit clear.
enum Marks {
    static let beforeStep: Int64 = 1 << 9
    static let passthroughStep: Int64 = 1 << 16
    static let afterStep: Int64 = 1 << 20
    static let replaced: Int64 = 1 << 28
    static let fieldMask: Int64 = 0xF
    static let allowedBits: Int64 = replaced | (0xFF << 16) | 0xFFFF

    /// The blocks one result says ran.
    struct Decoded {
        var before = 0
        var passthrough = 0
        var after = 0
        var replaced = false
    }

    /// Reads the blocks that ran from `result`, or `nil` when no set of installable hooks
    /// could have produced it.
    static func decode(_ result: Int64, a: Int64, b: Int64, rest: Int64) -> Decoded? {
        guard result >= 0, result & ~allowedBits == 0 else { return nil }
        var decoded = Decoded()
        decoded.replaced = result & replaced != 0
        decoded.passthrough = Int((result >> 16) & fieldMask)
        decoded.after = Int((result >> 20) & fieldMask)
        let low = result & 0xFFFF
        let shiftedA = decoded.replaced ? low ^ b : low - rest
        let growth = shiftedA - a
        guard growth >= 0, growth % beforeStep == 0 else { return nil }
        decoded.before = Int(growth / beforeStep)
        guard decoded.before <= HookKind.before.cap, decoded.passthrough <= HookKind.passthrough.cap,
            decoded.after <= HookKind.after.cap
        else { return nil }
        return decoded
    }
}
