/// Something that stands behind a slot and must act when the slot starts or stops leading
/// somewhere else: an inline hook's jump cell, whose function is patched to jump through the
/// cell only while the cell holds a hook's closure or a replacement.
///
/// The registry calls both methods with its lock held, from the thread that writes; they
/// must not install or remove hooks.
package protocol SlotObserver: AnyObject, Sendable {
    /// Called before the registry writes a closure or a replacement into the slot in place
    /// of the function it holds; throwing refuses the write (the install or replacement
    /// then throws the error).
    func slotWillChange() throws(HookError)
    /// Called after every write of the registry, to any slot: the observer reads its slot and
    /// acts if what it holds changed.
    func slotDidChange()
}
