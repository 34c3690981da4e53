/// Fans the calls of a C callback table out to components, the way application-delegate
/// lifecycle frameworks forward delegate methods to modules.
///
/// A dispatcher owns a hooked table. A component registers its own table of the same type,
/// with only the slots it cares about filled, and a priority. Every call through a slot of
/// the hooked table then also calls each registered component's function at that slot, with
/// the same arguments: components of priority zero or more before the original, highest
/// first; components of negative priority after it, highest first; equal priorities in
/// registration order. A component's return value is discarded: the caller always gets the
/// original's result.
///
/// ```swift
/// let dispatcher = LifecycleDispatcher(table: callbacks, layout: layout)
/// let analytics = try dispatcher.register(analyticsCallbacks, priority: 10)
/// // ... later, from any thread:
/// analytics.remove()
/// ```
///
/// Components come and go at any time, from any thread, while calls run. A component's
/// function pointers are read once, when it registers: its table need not outlive the
/// call to ``register(_:priority:options:)-(Table,_,_)``, and later changes to it are not seen.
public final class LifecycleDispatcher<Table>: Sendable {
    private let table: UInt
    /// The slots the dispatcher covers.
    public let layout: TableLayout<Table>

    /// A dispatcher for the table at `table`; nothing is hooked until a component registers.
    ///
    /// The table must stay valid while components are registered. A layout slot that names
    /// no function-pointer field is reported when a component registers, not here.
    public init(table: UnsafeMutablePointer<Table>, layout: TableLayout<Table>) {
        self.table = UInt(bitPattern: table)
        self.layout = layout
    }

    /// Registers a component: for each slot of the layout that `component` fills, a hook on
    /// the dispatcher's table that calls the component's function.
    ///
    /// - Returns: the token that unregisters the component; its ``HookGroupToken/skippedFields``
    ///   name the slots the component left empty.
    /// - Throws: ``HookError`` as ``Hook/install(on:signature:position:options:_:)``
    ///   does; on error nothing of the component stays installed.
    public func register(
        _ component: Table, priority: Int = 0, options: HookOptions = []
    ) throws(HookError) -> HookGroupToken {
        try withUnsafePointer(to: component) { pointer throws(HookError) in
            try register(pointer, priority: priority, options: options)
        }
    }

    /// Registers the component table at `component` (see ``register(_:priority:options:)-(Table,_,_)``).
    public func register(
        _ component: UnsafePointer<Table>, priority: Int = 0, options: HookOptions = []
    ) throws(HookError) -> HookGroupToken {
        try layout.installEach(in: table, readingFrom: UInt(bitPattern: component)) {
            (slot, target, function) throws(HookError) in
            try SlotRegistry.shared.install(
                slot: target, signature: slot.signature, position: priority >= 0 ? .before : .after,
                options: options, priority: priority
            ) { call in
                call.callDiscardingResult(UnsafeRawPointer(bitPattern: function)!)
            }
        }
    }
}
