internal import CFFIHookSupport
import Synchronization

/// A function written into a slot in place of the one it led to: no closure, no per-call
/// cost. Made and taken out by ``SlotRegistry``, under its lock.
package final class Replacement: @unchecked Sendable {
    // Sendable: the stored properties are constants or atomics; `slot` is an address the
    // registry only writes under its lock.

    /// The slot's address.
    let slot: UnsafeMutableRawPointer
    /// The replacing function's address.
    let function: UInt
    /// The protection to lift around writes when the slot was read-only at the time.
    let protection: SlotMemory.Protection?
    /// Whether the replacement was taken out.
    let removed = Atomic<Bool>(false)
    /// What the replacement calls as the original: what the slot led to when the replacement
    /// went in, or, after a replacement made before this one came out, what that one's was.
    private let originalFunction = Atomic<UInt>(0)

    /// A word that gets every value ``original`` takes, for code that reads its original
    /// outside Swift (an attach stub's record), or nil.
    let mirror: UnsafeMutablePointer<UInt>?
    /// What the slot's memory needs kept while the replacement lives (see ``FunctionSlot/owner``).
    let owner: (any AnyObject & Sendable)?
    /// Whether the slot lay in a loaded object as the replacement went in (``ffh_elf_in_object``):
    /// where it no longer does, the object was unloaded (see ``SlotRegistry``'s removal).
    let inObject: Bool

    init(
        slot: UnsafeMutableRawPointer, function: UInt, protection: SlotMemory.Protection?,
        mirror: UnsafeMutablePointer<UInt>? = nil, owner: (any AnyObject & Sendable)? = nil
    ) {
        self.inObject = ffh_elf_in_object(slot) == 1
        self.owner = owner
        self.slot = slot
        self.function = function
        self.protection = protection
        self.mirror = mirror
    }

    /// The function the replacement stands in for (0 when the slot held NULL).
    package var original: UInt { originalFunction.load(ordering: .acquiring) }

    /// Sets what ``original`` returns, under the registry's lock.
    func setOriginal(_ function: UInt) {
        originalFunction.store(function, ordering: .releasing)
        if let mirror {
            UnsafeMutableRawPointer(mirror).assumingMemoryBound(to: Atomic<UInt>.self).pointee.store(
                function, ordering: .releasing)
        }
    }
}
