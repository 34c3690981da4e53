internal import CFFIHookSupport

/// What the library holds for hooks at one moment: hooked slots, memory of removed hooks not
/// yet freed, and slot closures.
///
/// Read it with ``Hook/statistics``. The figures let a program check that what it removes is
/// given back: after every hook is removed and ``Hook/waitForReclamation()`` returns,
/// ``hookedSlotCount`` counts only the slots other code still hooks, and
/// ``pendingReclamationCount`` is zero unless another thread removed a hook since.
///
/// ```swift
/// token.remove()
/// try Hook.waitForReclamation()
/// let statistics = try Hook.statistics
/// assert(statistics.pendingReclamationCount == 0)
/// ```
///
/// The first four figures are read together under the library's lock, so they agree with each
/// other; other threads may change them as soon as the value is returned.
public struct HookStatistics: Sendable, Hashable, CustomStringConvertible {
    /// How many slots have at least one hook installed.
    ///
    /// A slot counts from the install of its first hook to the removal of its last. A slot
    /// that another writer overwrote while it had hooks counts until those hooks are removed,
    /// since their blocks still run for whoever calls the library's closure. Functions written
    /// into a slot with ``Hook/replace(on:with:options:)`` are not hooks and do not count.
    public let hookedSlotCount: Int

    /// How many hook lists and slot records that installs and removals replaced, and
    /// closures given back by ``Hook/releaseSlots(in:)``, wait to be freed until no call can
    /// still be inside them.
    ///
    /// Nothing frees them in the background: each later install or removal frees what no
    /// call can reach any more, and ``Hook/waitForReclamation()`` frees everything removed
    /// before it, so the count can stay above zero while no hook changes.
    public let pendingReclamationCount: Int

    /// How many slot closures the process holds: serving a slot (with hooks, or passing calls
    /// on to its original) or idle.
    ///
    /// Closures are never freed (see ``Hook/releaseSlots(in:)``), so this only grows: by one
    /// for each address hooked for the first time while no closure waits for reuse, and by
    /// one more at the process's first install, for a slot of the library's own that it
    /// hooks once to warm up the call path. A slot's closure and the record beside it take
    /// 80 bytes on x86-64.
    public let closureCount: Int

    /// How many of the ``closureCount`` closures serve no slot: given back by
    /// ``Hook/releaseSlots(in:)``, or by the removal of the last hook of a slot whose memory
    /// was unmapped. The next addresses hooked reuse them, each once no call can still be
    /// inside it.
    public let idleClosureCount: Int

    /// How many attaches (``Hook/attach(on:options:onEnter:onLeave:)``, one per import-table
    /// entry for ``ImportTable/attach(symbol:in:onEnter:onLeave:)``) are installed. Attaches
    /// are not hooks of ``hookedSlotCount``: the slot holds the attach's stub, not a closure.
    public let attachCount: Int

    /// How many leave blocks of attaches (``Hook/attach(on:options:onEnter:onLeave:)``) were
    /// skipped because the calling thread was already 512 attached calls deep: such a call
    /// runs, with its enter block, and returns without one. Only grows.
    public let skippedLeaveCount: Int

    /// How many attached calls were found to have left without returning (a `longjmp` or an
    /// exception past them) and dropped from their thread's side stack; their leave blocks
    /// never ran. Only grows. A call found so at its thread's exit is not counted.
    public let abandonedFrameCount: Int

    /// How many attached calls went straight to their function without running their blocks
    /// because the calling thread was running an attach's block: calls a block makes itself,
    /// and calls made by a signal handler that interrupted a block (or the few instructions
    /// that call one). Also those the library's own code makes while it works on a thread
    /// (its first call's set-up, an unoptimised build's calls of the Swift runtime), and a
    /// signal handler's calls made while its thread claimed its record, before it had a side
    /// stack (no leave block could run for them). Only grows. A signal handler that interrupts
    /// the rest of an attached call, between its blocks, or the library's other work, runs the
    /// blocks of what it calls and is not counted here.
    public let passedThroughCallCount: Int

    /// Of ``passedThroughCallCount``, the calls the library's own code made: a thread's
    /// first hooked call claims a record, its first attached call sets up its side stack
    /// (which registers unwind information with libgcc), and the walk that follows a `dlopen`
    /// for a group that follows later loads pins objects with `dlopen` and prepares closures
    /// with libffi. None of them is the program's: a signal handler's call that interrupts
    /// such work is told apart by the kernel's signal frame between it and the work (or by the
    /// signal stack it runs on), and runs its blocks (or, in the claim of its thread's record,
    /// before the thread has a side stack, is counted in ``passedThroughCallCount`` alone).
    /// Only grows.
    public let libraryPassedCallCount: Int

    /// Of ``passedThroughCallCount``, the calls the library's own code did not make: the
    /// calls a block made itself, or a signal handler's. The difference of the two counts
    /// above, kept as a count of its own: read while other threads' calls pass through, the
    /// two are read one after the other and their difference can be one off for a moment
    /// (a tracer that counted what blocks missed by the difference now and then reported one
    /// call too many). Only grows.
    public let programPassedCallCount: Int

    init(hookedSlotCount: Int, pendingReclamationCount: Int, closureCount: Int, idleClosureCount: Int) {
        self.hookedSlotCount = hookedSlotCount
        self.pendingReclamationCount = pendingReclamationCount
        self.closureCount = closureCount
        self.idleClosureCount = idleClosureCount
        self.attachCount = AttachEngine.installed.load(ordering: .relaxed)
        self.skippedLeaveCount = Int(ffh_attach_skipped_leaves())
        self.abandonedFrameCount = Int(ffh_attach_abandoned_frames())
        self.passedThroughCallCount = Int(ffh_attach_passed_calls())
        self.libraryPassedCallCount = Int(ffh_attach_passed_library_calls())
        self.programPassedCallCount = Int(ffh_attach_passed_program_calls())
    }

    /// The figures on one line.
    public var description: String {
        "HookStatistics(hooked slots: \(hookedSlotCount), pending reclamation: \(pendingReclamationCount), "
            + "closures: \(closureCount), idle: \(idleClosureCount), attaches: \(attachCount), skipped leaves: \(skippedLeaveCount), "
            + "abandoned frames: \(abandonedFrameCount), passed through: \(passedThroughCallCount), "
            + "by the library: \(libraryPassedCallCount), by the program: \(programPassedCallCount))"
    }
}
