extension ImportTable {
    /// Writes `function` into every import-table entry of `symbol` in the objects of `scope`,
    /// in place of the function each leads to: calls from those objects reach `function`
    /// directly, with no closure and no cost per call. This is what fishhook and plthook do.
    ///
    /// ```swift
    /// let counting: @convention(c) (UnsafePointer<CChar>?) -> Int = { string in
    ///     // ... count, then call the original
    /// }
    /// let group = try ImportTable.replace(symbol: "strlen", in: .object("libz.so.1"), with: counting)
    /// let strlen = group.original(as: (@convention(c) (UnsafePointer<CChar>?) -> Int).self)
    /// ```
    ///
    /// Each entry's replacement is a ``ReplacementToken`` of its own, in ``ReplacementGroupToken/replacements``,
    /// and composes with hooks and other replacements of that entry as
    /// ``Hook/replace(on:with:options:)`` describes. The entries are bound first as for
    /// hooks, so a lazily bound entry's original is the real function, not the object's PLT
    /// stub. Page protection (full RELRO) is lifted for the moment of each write. Safe to
    /// call from any thread, also while other threads call the symbol or load and unload
    /// objects.
    ///
    /// - Parameters:
    ///   - symbol: the function's name as the objects import it, such as `"strlen"`.
    ///   - scope: the objects whose calls are redirected. ``ImportScope/allIncludingLaterLoads``
    ///     is refused with ``HookError/Code-swift.struct/unsupportedScope``: a replacement
    ///     does not follow later loads (replace again after loading, with ``ImportScope/all``).
    ///   - function: a `@convention(c)` function of the symbol's C type.
    /// - Returns: the token that takes every replacement out.
    /// - Throws: ``HookError`` with ``HookError/Code-swift.struct/objectNotFound`` or
    ///   ``HookError/Code-swift.struct/symbolNotImported`` as
    ///   ``hook(symbol:in:signature:position:options:_:)`` does, or the errors of
    ///   ``Hook/replace(on:with:options:)``; the replacement is all or nothing.
    public static func replace<Function>(
        symbol: String, in scope: ImportScope, with function: Function
    ) throws(HookError) -> ReplacementGroupToken {
        guard scope != .allIncludingLaterLoads else {
            throw HookError(slot: nil, signature: nil, problem: .unsupportedScope)
                .naming(symbol: symbol)
        }
        guard MemoryLayout<Function>.size == MemoryLayout<UnsafeRawPointer>.size else {
            throw HookError(
                slot: nil, signature: nil,
                problem: .invalidSlot("the replacement \(Function.self) is not a @convention(c) function pointer")
            ).naming(symbol: symbol)
        }
        let pointer = unsafeBitCast(function, to: UnsafeRawPointer?.self)
        let replacements: [Replacement]
        do {
            replacements = try ImportWalk.withLoadedObjects(in: scope) { objects throws(HookError) in
                let chosen = try ImportWalk.chosen(from: objects, in: scope, signature: nil)
                return try ImportWalk.forEachEntry(of: symbol, in: chosen) { entry, _ throws(HookError) in
                    try SlotRegistry.shared.replace(
                        slot: UnsafeMutableRawPointer(bitPattern: entry.slot), with: pointer, signature: nil,
                        liftsProtection: true)
                } undo: { replacement in
                    _ = SlotRegistry.shared.remove(replacement)
                }
            }
        } catch {
            throw error.naming(symbol: symbol)
        }
        guard !replacements.isEmpty else {
            throw ImportTable.notImported(symbol, in: scope, signature: nil)
        }
        return ReplacementGroupToken(replacements.map(ReplacementToken.init))
    }
}

extension HookError {
    /// The error with `symbol` as the import-table symbol it concerns, unless it names one
    /// already (an error about `dlopen`'s entries met while hooking another symbol).
    package func naming(symbol: String) -> HookError {
        var error = self
        if error.symbol == nil { error.symbol = symbol }
        return error
    }
}

/// The handle of the replacements made by ``ImportTable/replace(symbol:in:with:)``: one per
/// import-table entry.
///
/// Dropping the token does not remove the replacements. The token may be used from any
/// thread.
public final class ReplacementGroupToken: Sendable, Hashable, CustomStringConvertible {
    /// The replacement of each entry, in the order the objects and their entries were walked.
    public let replacements: [ReplacementToken]

    init(_ replacements: [ReplacementToken]) {
        self.replacements = replacements
    }

    /// The function the first entry led to, for the replacement to call as its original.
    ///
    /// Every entry of a symbol is bound to the same function unless an object was given its
    /// own (a hook or a replacement already there, `-Bsymbolic`, `dlmopen`): each
    /// ``ReplacementToken/original`` in ``replacements`` is its entry's.
    public var original: UnsafeRawPointer? { replacements.first?.original }

    /// ``original`` as a function type, such as `@convention(c) (UnsafePointer<CChar>?) -> Int`.
    public func original<Function>(as type: Function.Type) -> Function? {
        replacements.first?.original(as: type)
    }

    /// Takes every replacement out (see ``ReplacementToken/remove()``); true if this took
    /// at least one out, false when all were out already. Safe to call from any thread.
    @discardableResult
    public func remove() -> Bool {
        var removed = false
        for replacement in replacements where replacement.remove() { removed = true }
        return removed
    }

    /// Whether any of the replacements is still in place.
    public var isActive: Bool { replacements.contains { $0.isActive } }

    /// Tokens are equal when they are the same token.
    public static func == (lhs: ReplacementGroupToken, rhs: ReplacementGroupToken) -> Bool { lhs === rhs }

    /// Hashes the token's identity.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }

    /// The number of replacements and how many are in place.
    public var description: String {
        "ReplacementGroupToken(\(replacements.count) entries, \(replacements.filter(\.isActive).count) active)"
    }
}
