/// Where a hook's block runs relative to the original function.
public enum HookPosition: Sendable, Hashable, CustomStringConvertible {
    /// Before the original, in install order; the block may change the arguments.
    case before
    /// In place of the original; the newest instead block wraps the older ones, and
    /// ``Invocation/callOriginal()`` runs the next one in (the innermost runs the original).
    case instead
    /// After the original, in install order; the block sees and may replace the return value.
    case after

    /// "before", "instead" or "after".
    public var description: String {
        switch self {
        case .before: "before"
        case .instead: "instead"
        case .after: "after"
        }
    }
}

/// Options for one hook.
public struct HookOptions: OptionSet, Sendable, Hashable {
    /// The options' bits.
    public let rawValue: UInt8
    /// Creates options from their bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Run the block at most once, however many threads call at the same moment, then
    /// remove the hook.
    public static let once = HookOptions(rawValue: 1 << 0)

    /// Run the block also when the slot is called again from inside a block on the same
    /// thread. By default such a nested call goes straight to the original, which keeps a
    /// logging hook on `write` from recursing into itself. For import-table hooks a call to
    /// the symbol through any object's hooked entry counts as the same slot.
    public static let allowsReentry = HookOptions(rawValue: 1 << 1)

    /// Allow a slot in read-only memory (a `const` table the loader protected, an import
    /// table under full RELRO): its page is made writable for the moment of each write to
    /// the slot, then given its protection back (a group of import-table entries keeps its
    /// pages writable until the group's writes end). A page is never made read-only under a
    /// writer that still needs it, and a write of another thread meanwhile lifts its own page
    /// for its own write only (one that a group keeps writable is written as it is). A page of
    /// a loaded object gets its protection back only while the object that held it when it
    /// was lifted still does (looked up and changed under the loader's own list lock, which an
    /// unload holds): one unloaded meanwhile, with a fresh copy mapped at its place that the
    /// loader is still writing, is left to the loader. When that lock stays busy for longer
    /// than a write waits for it (50 ms: another thread inside a `dl_iterate_phdr` callback,
    /// which may itself wait for the library), a thread the library starts for the purpose
    /// gives the page its protection back as soon as the lock is free (a child forked
    /// meanwhile gives it back as it starts); until then the page counts as read-only for
    /// every hook. A read-only page of a file that no
    /// loaded object holds (an object the loader is still loading or already unloading, or a
    /// file the program mapped itself) is not lifted: the write fails with
    /// ``HookError/Code-swift.struct/protectionChangeFailed``. Without the option such a slot
    /// is refused with ``HookError/Code-swift.struct/readOnlySlot``. Memory that is executable
    /// (a function's code) is refused either way, with ``HookError/Code-swift.struct/invalidSlot``.
    public static let liftsPageProtection = HookOptions(rawValue: 1 << 2)

    /// Run the block only for calls made on the thread that installs the hook; other
    /// threads' calls go on as if the hook were not installed (see <doc:TestingWithHooks>).
    ///
    /// A call from another thread skips a before or after block, and passes an instead block
    /// by as if it had called ``Invocation/callOriginal()``. With ``once``, only a call from
    /// the installing thread takes the single run. The thread is known by an address of its
    /// own thread-local storage, which a thread started after the installing one exits may
    /// get again: remove the hook before its thread ends, as ``Hook/scoped(_:during:)`` does.
    /// Code that runs in Swift tasks moves between threads: limit its hooks with
    /// ``inCurrentTaskOnly`` instead. A replacement cannot be limited (see
    /// ``HookError/Code-swift.struct/unsupportedCallerLimit``).
    public static let onInstallingThreadOnly = HookOptions(rawValue: 1 << 3)

    /// Run the block only for calls made from inside the ``Hook/scoped(_:during:)`` that
    /// installs the hook: from its body's task, from the child tasks that task creates (`async
    /// let`, task groups) and from the tasks it starts that inherit its task-local values
    /// (`Task { }`, not `Task.detached`); calls from other tasks and from other threads go
    /// on as if the hook were not installed (see <doc:TestingWithHooks>).
    ///
    /// A call that does not match skips a before or after block, and passes an instead block
    /// by as if it had called ``Invocation/callOriginal()``; with ``once``, only a matching
    /// call takes the single run. The scope is carried by a Swift task-local value, which is
    /// what a call reads to match: synchronous code the body runs on its own thread matches,
    /// code it hands to a thread of its own (a C thread, a dispatch queue) does not. Installing
    /// a hook with this option outside ``Hook/scoped(_:during:)`` throws
    /// ``HookError/Code-swift.struct/unsupportedCallerLimit``, as does a replacement. A task
    /// that the body starts with `Task { }` carries the scope after the body has returned:
    /// a hook it installs then is accepted, limited to that ended scope's tasks, and stays
    /// until its own token removes it.
    public static let inCurrentTaskOnly = HookOptions(rawValue: 1 << 4)

    /// The options that limit a hook to some of its slot's calls.
    package static let callerLimits: HookOptions = [.onInstallingThreadOnly, .inCurrentTaskOnly]
}
