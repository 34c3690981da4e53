internal import CFFIHookSupport

/// Per-thread state of the call path: whether the thread is inside a hooked call, and the
/// slots whose blocks are running on it. The records are C structs (`ffh_thread`)
/// that the shim maps itself and hands out without a lock, so a thread's first hooked call
/// allocates nothing and takes no lock: it may be `malloc` itself, or a signal handler.
///
/// **Calls in flight.** A record's generation is odd while its thread is inside an
/// (outermost) hooked call and even outside. Only the thread writes it, with plain stores:
/// no shared cache line, no locked instruction. A writer that replaced hook state issues a
/// process-wide memory barrier (Linux `membarrier`), then waits until every thread whose
/// generation was odd has moved on; after that no call can still read what was replaced.
/// Where `membarrier` is unavailable, readers fence after entering instead.
///
/// **Calls that never return.** The C handler registers a cleanup for each hooked call that
/// glibc runs when `longjmp` jumps over the call's frame or the thread exits inside it; the
/// cleanup ends the call's marks, so reclamation does not wait for it. A thread that exits
/// frees its record (a pthread key destructor); one gone without that is found by its
/// kernel thread id when reclamation waits on it. In a child after `fork` the records of
/// the threads that do not exist there are freed.
///
/// **Re-entry.** A call that arrives at a slot already marked in the record comes from
/// inside one of its blocks (or from a signal handler that interrupted one); such a call
/// skips the blocks that do not allow re-entry. Import-table entries are marked by the
/// function they lead to, so a block's call to the symbol through another object's entry
/// is re-entry as well.
package enum ThreadState {
    /// Whether the call path marks its own code (``ffh_thread/busy``), so that a call it
    /// makes itself through a function the program hooked goes straight to the original. An
    /// unoptimised build's Swift calls the runtime (`swift_retain`, `swift_beginAccess`…) and
    /// `memset` all along the call path, and needs it. An optimised build's call path calls
    /// no function a program can hook, which `LibraryFunctionHookTests` checks in release
    /// with every such function hooked, and is spared the mark's stores.
    #if DEBUG
        static let marksCallPath = true
    #else
        static let marksCallPath = false
    #endif

    /// For tests: has hooked calls register glibc's cleanup for their frames inline (`true`),
    /// or through glibc's functions (`false`); returns whether inline registration is
    /// available, which needs the place of the thread's cleanup list, found when the library
    /// loads. Call only while no hooked call runs.
    @discardableResult
    package static func registersCleanupInline(_ inline: Bool) -> Bool {
        ffh_cleanup_set_inline(inline ? 1 : 0) != 0
    }

    /// Whether hooked calls can register glibc's cleanup inline (see
    /// ``registersCleanupInline(_:)``), asked without changing anything.
    package static var canRegisterCleanupInline: Bool { ffh_cleanup_set_inline(-1) != 0 }

    /// Whether writers can make readers' memory barriers for them.
    static let usesMembarrier: Bool = ffh_membarrier_register() == 0

    /// Whether this thread is inside a hooked call (in a block, or in an original a hook called).
    static var isInsideHookedCall: Bool { ffh_thread_is_inside() != 0 }

    /// For tests: the address of every record of the process, claimed or free, and the
    /// boundary records start at (no two share a cache line).
    package static var recordAddresses: [UInt] { allRecords.map { UInt(bitPattern: $0) } }
    package static let recordAlignment = UInt(FFH_THREAD_ALIGNMENT)
    package static let recordSize = UInt(MemoryLayout<ffh_thread>.size)

    /// Every record of the process, claimed or free.
    static var allRecords: some Sequence<UnsafeMutablePointer<ffh_thread>> {
        let first: UnsafeMutablePointer<ffh_thread>? = ffh_thread_first()
        return sequence(state: first) { next in
            defer { next = next?.pointee.next }
            return next
        }
    }
}
