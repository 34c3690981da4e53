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
        return try layout.installEach(in: base, readingFrom: base) { (slot, address, _) throws(HookError) in
            try SlotRegistry.shared.install(
                slot: address, signature: slot.signature, position: position, options: options
            ) { call in block(slot, call) }
        }
    }
}
