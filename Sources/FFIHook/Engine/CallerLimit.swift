internal import CFFIHookSupport

/// Which of its slot's calls a hook takes part in, for the options that limit a hook to a
/// thread or a task (``HookOptions/onInstallingThreadOnly``, ``HookOptions/inCurrentTaskOnly``).
///
/// Made where the hook is asked for, on the installing thread and in its task, and kept by
/// the hook's record: an install that happens later elsewhere for the same request (an
/// import-table hook following a `dlopen`) keeps the limit of the request.
package struct CallerLimit: Sendable {
    /// The installing thread's name (``ffh_this_thread``), or 0 for any thread.
    let thread: UInt
    /// The scope whose calls match, or nil for any task.
    let scope: HookScope?

    /// No limit: every call.
    package static let none = CallerLimit(thread: 0, scope: nil)

    private init(thread: UInt, scope: HookScope?) {
        self.thread = thread
        self.scope = scope
    }

    /// The limit `options` ask for, taken from the calling thread and task.
    ///
    /// - Throws: ``HookError/Code-swift.struct/unsupportedCallerLimit`` for
    ///   ``HookOptions/inCurrentTaskOnly`` outside ``Hook/scoped(_:during:)``, naming `slot`
    ///   (the slot being hooked, where there is one).
    package init(options: HookOptions, signature: Signature?, slot: UInt? = nil) throws(HookError) {
        var scope: HookScope?
        if options.contains(.inCurrentTaskOnly) {
            guard let current = HookScope.current else {
                throw HookError(slot: slot, signature: signature, problem: .taskLimitOutsideScope)
            }
            scope = current
        }
        self.init(thread: options.contains(.onInstallingThreadOnly) ? ffh_this_thread() : 0, scope: scope)
    }

    /// Whether the limit lets every call through.
    var isNone: Bool { thread == 0 && scope == nil }

    /// Whether the calling thread's call takes part. Reads a thread-local address, and for a
    /// task limit the task-local scope and its parents: no lock, no allocation.
    @inline(never)
    func matchesCaller() -> Bool {
        if thread != 0 && ffh_this_thread() != thread { return false }
        if let scope {
            var current = HookScope.current
            while let candidate = current {
                if candidate === scope { return true }
                current = candidate.parent
            }
            return false
        }
        return true
    }
}

/// One run of ``Hook/scoped(_:during:)``, named by a task-local value while its install and
/// body run, so that hooks limited to it know its calls.
package final class HookScope: Sendable {
    /// The scope this one runs in, when scopes are nested: a call in the inner one is also
    /// a call in the outer one.
    let parent: HookScope?

    init(parent: HookScope?) { self.parent = parent }

    /// The innermost scope the calling task (or thread, outside tasks) runs in.
    @TaskLocal static var current: HookScope?
}
