/// Something that stands behind slots and must act when one starts or stops leading somewhere
/// else: inline hooks' jump cells, whose function is patched to jump through the cell only
/// while the cell holds a hook's closure or a replacement.
///
/// The registry calls both methods with its lock held, from the thread that writes; they
/// must not install or remove hooks.
package protocol SlotObserver: AnyObject, Sendable {
    /// Called before the registry writes a closure or a replacement into `slot` in place of the
    /// function it holds; throwing refuses the write (the install or replacement then throws
    /// the error).
    func slotWillChange(_ slot: UInt) throws(HookError)
    /// Called after each write of the registry to `slot` (an install, a removal, a
    /// replacement): the observer reads the slot and acts if what it holds changed.
    func slotDidChange(_ slot: UInt)
}
