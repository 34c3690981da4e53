extension Hook {
    /// Writes `function` into `slot` in place of the function the slot holds, as fishhook and
    /// plthook rebind a pointer: calls reach `function` directly, with no closure and no cost
    /// per call. The returned token gives the function it replaced, for `function` to call as
    /// the original, and puts it back.
    ///
    /// Replacements compose with hooks on the same slot:
    ///
    /// - on a slot with hooks, the replacement goes under them: the hooks' blocks run around
    ///   `function`, whose original is the function the hooks wrapped until then;
    /// - hooks installed on a replaced slot wrap the replacement;
    /// - replacements stack, the newest outermost, each with the previous one as its original;
    ///
    /// and whatever called a replacement calls its original again when it is removed, in any
    /// order.
    ///
    /// ```swift
    /// // int add(int, int): a C function, or a Swift closure that captures nothing.
    /// let replacement = try Hook.replace(on: slot, with: { (a: Int32, b: Int32) -> Int32 in a * b }
    ///     as @convention(c) (Int32, Int32) -> Int32)
    /// replacement.remove()
    /// ```
    ///
    /// - Parameters:
    ///   - slot: an aligned, pointer-sized slot holding a function pointer (NULL allowed).
    ///   - function: the replacing function, `@convention(c)`, of the slot's signature
    ///     (nothing checks the signature). Pass a C function by name with its type spelled
    ///     out (`c_multiply as @convention(c) (Int32, Int32) -> Int32`): otherwise Swift turns
    ///     the name into a Swift closure, which is refused.
    ///   - options: ``HookOptions/liftsPageProtection`` for a slot in read-only memory;
    ///     ``HookOptions/once`` and ``HookOptions/allowsReentry`` do not apply to a
    ///     replacement and are ignored.
    /// - Returns: the token that removes the replacement.
    /// - Throws: ``HookError`` for a null, misaligned, unmapped or read-only slot, a slot in
    ///   executable memory, a `function` that is not a single C function pointer into
    ///   executable memory, or ``HookError/Code-swift.struct/unsupportedCallerLimit`` for
    ///   ``HookOptions/onInstallingThreadOnly`` or ``HookOptions/inCurrentTaskOnly``, which a
    ///   replacement cannot honour.
    ///
    /// A replacement of a slot that held NULL, removed from under hooks installed since,
    /// leaves those hooks wrapping NULL: calls through the slot then return zero until the
    /// last hook goes and NULL is written back.
    public static func replace<Function>(
        on slot: FunctionSlot, with function: Function, options: HookOptions = []
    ) throws(HookError) -> ReplacementToken {
        if let problem = slot.problem {
            throw HookError(slot: slot.address, signature: nil, problem: .invalidSlot(problem))
        }
        guard MemoryLayout<Function>.size == MemoryLayout<UnsafeRawPointer>.size else {
            throw HookError(
                slot: slot.address, signature: nil,
                problem: .invalidSlot("the replacement \(Function.self) is not a @convention(c) function pointer"))
        }
        guard options.isDisjoint(with: HookOptions.callerLimits) else {
            throw HookError(slot: slot.address, signature: nil, problem: .limitedReplacement)
        }
        let pointer = unsafeBitCast(function, to: UnsafeRawPointer?.self)
        let replacement = try SlotRegistry.shared.replace(
            slot: slot.pointer, with: pointer, signature: nil, liftsProtection: options.contains(.liftsPageProtection),
            owner: slot.owner)
        return ReplacementToken(replacement)
    }
}

/// The handle of one replacement made by ``Hook/replace(on:with:options:)``.
///
/// Dropping the token does not remove the replacement. The token may be used from any
/// thread.
public final class ReplacementToken: Sendable, Hashable, CustomStringConvertible {
    let replacement: Replacement

    init(_ replacement: Replacement) {
        self.replacement = replacement
    }

    /// The function the replacement stands in for, for the replacement to call as its
    /// original; `nil` when the slot held NULL. It changes when a replacement made earlier
    /// on the same slot is removed (it then names that one's original), so a replacement
    /// that may outlive one below it reads it on each call.
    public var original: UnsafeRawPointer? { UnsafeRawPointer(bitPattern: replacement.original) }

    /// ``original`` as a function type, such as `@convention(c) (Int32, Int32) -> Int32`.
    public func original<Function>(as type: Function.Type) -> Function? {
        precondition(
            MemoryLayout<Function>.size == MemoryLayout<UnsafeRawPointer>.size,
            "\(Function.self) is not a @convention(c) function pointer")
        return original.map { unsafeBitCast($0, to: Function.self) }
    }

    /// Takes the replacement out; true the first time, false afterwards. Whatever called the
    /// replacement (the slot, the closure of hooks installed since, a later replacement)
    /// calls its original again. A slot that someone else has written since is left as it
    /// is, and so is one whose memory is no longer mapped or writable (unless the
    /// replacement was made with ``HookOptions/liftsPageProtection``, which lifts it again):
    /// the replacement is removed all the same. Safe to call from any thread.
    @discardableResult
    public func remove() -> Bool {
        SlotRegistry.shared.remove(replacement)
    }

    /// Whether the replacement is still in place (not removed through this token).
    public var isActive: Bool { !replacement.removed.load(ordering: .acquiring) }

    /// Whether the slot still leads to the library: true while it holds what the library
    /// wrote there last (the closure of hooks installed since, which call the replacements, or
    /// the newest replacement); false once something else has written it (the loader, for an
    /// import-table entry of an object unloaded and loaded again at the same address, or
    /// another tool, even one that wrote back a replacement's function). nil once removed, for
    /// a slot no longer mapped, and when asked from a block that runs within the library's own
    /// install or removal on this thread. See ``HookToken/holdsItsSlot``.
    public var holdsItsSlot: Bool? {
        guard isActive else { return nil }
        return SlotRegistry.shared.holdsWhatItWrote(at: UInt(bitPattern: replacement.slot))
    }

    /// Tokens are equal when they are the same token.
    public static func == (lhs: ReplacementToken, rhs: ReplacementToken) -> Bool { lhs === rhs }

    /// Hashes the token's identity.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }

    /// The slot, the replacing function and whether it is in place.
    public var description: String {
        let slot = String(UInt(bitPattern: replacement.slot), radix: 16)
        let function = String(replacement.function, radix: 16)
        return "ReplacementToken(slot 0x\(slot), function 0x\(function), \(isActive ? "active" : "removed"))"
    }
}
