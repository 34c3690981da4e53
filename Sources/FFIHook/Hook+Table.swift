extension Hook {
    /// Installs `block` at `position` on every field of `layout` in the table at `table`.
    ///
    /// Fields that hold NULL (optional callbacks the C library left empty) are skipped and
    /// named in ``HookGroupToken/skippedFields``. The hooks are installed all or none: when
    /// one cannot be installed, those already installed are removed and the error is thrown.
    /// A table in read-only memory needs ``HookOptions/liftsPageProtection``.
    /// Safe to call from any thread while other threads call through the table.
    ///
    /// - Parameters:
    ///   - table: the C struct of function pointers; it must stay valid while the hooks are
    ///     installed.
    ///   - layout: the slots to hook, each with its name and signature.
    ///   - position: before, instead of, or after each original.
    ///   - options: as for ``Hook/install(on:signature:position:options:_:)``, for every slot.
    ///   - block: runs with the slot the call came through and a view of the call.
    /// - Returns: the token that removes every hook of the table.
    /// - Throws: ``HookError`` as ``Hook/install(on:signature:position:options:_:)``
    ///   does for the first slot that cannot be hooked, and
    ///   ``HookError/Code-swift.struct/invalidSlot`` for a layout slot whose key
    ///   path names no function-pointer field; nothing stays installed then.
    public static func install<Table>(
        on table: UnsafeMutablePointer<Table>, layout: TableLayout<Table>, position: HookPosition,
        options: HookOptions = [], _ block: @escaping @Sendable (TableLayout<Table>.Field, borrowing Invocation) -> Void
    ) throws(HookError) -> HookGroupToken {
        let base = UInt(bitPattern: table)
        return try layout.installEach(in: base, readingFrom: base) { (slot, address, _) throws(HookError) in
            try SlotRegistry.shared.install(
                slot: address, signature: slot.signature, position: position, options: options
            ) { call in block(slot, call) }
        }
    }

    /// Runs `block` before the function of every field of `layout` in the table at `table`
    /// (see ``install(on:layout:position:options:_:)``).
    public static func before<Table>(
        on table: UnsafeMutablePointer<Table>, layout: TableLayout<Table>, options: HookOptions = [],
        _ block: @escaping @Sendable (TableLayout<Table>.Field, borrowing Invocation) -> Void
    ) throws(HookError) -> HookGroupToken {
        try install(on: table, layout: layout, position: .before, options: options, block)
    }

    /// Runs `block` instead of the function of every field of `layout` in the table at
    /// `table`; the block calls the original with ``Invocation/callOriginal()`` (see
    /// ``install(on:layout:position:options:_:)``).
    public static func instead<Table>(
        on table: UnsafeMutablePointer<Table>, layout: TableLayout<Table>, options: HookOptions = [],
        _ block: @escaping @Sendable (TableLayout<Table>.Field, borrowing Invocation) -> Void
    ) throws(HookError) -> HookGroupToken {
        try install(on: table, layout: layout, position: .instead, options: options, block)
    }

    /// Runs `block` after the function of every field of `layout` in the table at `table`
    /// (see ``install(on:layout:position:options:_:)``).
    public static func after<Table>(
        on table: UnsafeMutablePointer<Table>, layout: TableLayout<Table>, options: HookOptions = [],
        _ block: @escaping @Sendable (TableLayout<Table>.Field, borrowing Invocation) -> Void
    ) throws(HookError) -> HookGroupToken {
        try install(on: table, layout: layout, position: .after, options: options, block)
    }
}
