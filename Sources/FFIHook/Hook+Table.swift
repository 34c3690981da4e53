extension Hook {
    /// Installs `block` at `position` on every slot of `layout` in the table at `table`.
    ///
    /// Slots that hold NULL (optional callbacks the C library left empty) are skipped and
    /// named in ``HookGroupToken/skippedSlots``. The hooks are installed all or none: when
    /// one cannot be installed, those already installed are removed and the error is thrown.
    /// A table in read-only memory needs ``HookOptions/liftsPageProtection``.
    ///
    /// - Parameter block: runs with the slot the call came through and a view of the call.
    public static func install<Table>(
        on table: UnsafeMutablePointer<Table>, layout: TableLayout<Table>, position: HookPosition,
        options: HookOptions = [], _ block: @escaping @Sendable (TableLayout<Table>.Slot, borrowing Invocation) -> Void
    ) throws(HookError) -> HookGroupToken {
        let base = UInt(bitPattern: table)
        var tokens: [HookToken] = []
        var skipped: [String] = []
        do throws(HookError) {
            for slot in layout.slots {
                guard let address = layout.address(of: slot, in: base) else {
                    throw HookError(slot: nil, signature: slot.signature.encoding, code: .nullSlot)
                }
                guard address.load(as: UInt.self) != 0 else {
                    skipped.append(slot.name)
                    continue
                }
                let record = try SlotRegistry.shared.install(
                    slot: address, signature: slot.signature, position: position, options: options
                ) { call in block(slot, call) }
                tokens.append(HookToken(record))
            }
        } catch {
            for token in tokens { token.remove() }
            throw error
        }
        return HookGroupToken(tokens: tokens, skippedSlots: skipped)
    }
}
