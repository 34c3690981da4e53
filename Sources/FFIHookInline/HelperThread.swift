internal import CFFIHookSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Work that runs on a thread of its own while the thread that started it does other work,
/// joined by ``wait()``: a batch's sweep of its libraries' code runs beside the planning of
/// their functions, which needs it only at the end.
///
/// The work must take no lock the starting thread may hold while it waits (the planner's, the
/// registry's, the loader's): it reads memory and allocates, nothing else. The thread runs with
/// every signal blocked, on another processor than its starter's where there is one
/// (``ffh_thread_start_helper``), as the library's own work to its end (its calls of hooked
/// functions go straight to them and run no program's blocks, which could wait for a lock its
/// starter holds), and it is gone when ``wait()`` returns. When no
/// thread can be made (a limit on threads, a sandbox that refuses `clone`), ``wait()`` runs
/// the work itself: the same result, later.
final class HelperThread: @unchecked Sendable {
    // Unchecked: `work` is touched by the helper only between its start and the join, and by
    // the starting thread only before the start and after the join (or in place of the
    // thread, when none started); `thread` only by the starting thread (and the deinit).
    private var work: (() -> Void)?
    private var thread: pthread_t?
    /// The thread's stack, unmapped after the join (see ``ffh_thread_start_helper``).
    private var stack: UnsafeMutableRawPointer?

    /// Starts `work` on a new thread.
    init(_ work: @escaping () -> Void) {
        self.work = work
        var thread = pthread_t()
        var stack: UnsafeMutableRawPointer?
        let context = Unmanaged.passRetained(self)
        let status = ffh_thread_start_helper(
            &thread,
            { context in
                // Its calls of hooked functions are the library's, to its end: the C library
                // frees the thread's buffers as it ends, after the work.
                ffh_thread_become_library_own()
                Unmanaged<HelperThread>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            }, context.toOpaque(), &stack)
        if status == 0 {
            self.thread = thread
            self.stack = stack
        } else {
            context.release()
        }
    }

    private func run() {
        work?()
        work = nil
    }

    /// Waits for the work to end (runs it here when no thread could be made); once only.
    func wait() {
        if let thread {
            pthread_join(thread, nil)
            ffh_thread_unmap_helper_stack(stack)
            self.thread = nil
            stack = nil
        } else {
            run()
        }
    }

    deinit {
        // A helper never waited for: joined by its starter (its work may use what the starter
        // is about to free), or let go by itself when its own reference was the last.
        guard let thread else { return }
        if pthread_equal(thread, pthread_self()) != 0 {
            // (Its stack stays mapped: the thread runs on it to its end.)
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
            ffh_thread_unmap_helper_stack(stack)
        }
    }
}
