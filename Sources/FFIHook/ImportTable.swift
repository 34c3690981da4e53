import Synchronization

/// Which loaded objects an import-table hook covers.
public enum ImportScope: Sendable, Hashable, CustomStringConvertible {
    /// The loaded objects whose path ends with this name at a path component (a full path,
    /// or a file name such as `"libz.so.1"`), or whose soname it is. The main program's
    /// path is the file `/proc/self/exe` names.
    case object(String)
    /// The main program.
    case mainProgram
    /// Every object loaded when the hook is installed.
    case all
    /// Every object loaded when the hook is installed, and every object loaded later through
    /// `dlopen` (see ``ImportTable/hook(symbol:in:signature:position:options:_:)``).
    case allIncludingLaterLoads

    /// The scope in words, such as `object "libz.so.1"`.
    public var description: String {
        switch self {
        case .object(let name): "object \"\(name)\""
        case .mainProgram: "main program"
        case .all: "all objects"
        case .allIncludingLaterLoads: "all objects, including later loads"
        }
    }
}

/// Hooks a C function as called from loaded objects, by rebinding their import-table
/// entries: what fishhook does for Mach-O, for ELF.
///
/// ```swift
/// // Every strlen call libz makes, and no other.
/// let group = try ImportTable.hook(
///     symbol: "strlen", in: .object("libz.so.1"), signature: Signature("Q*"), position: .before
/// ) { call in
///     print("strlen of", String(cString: call.argument(0, as: UnsafePointer<CChar>.self)))
/// }
/// group.remove()
/// ```
///
/// An object calls a function of another object through an entry of its global offset
/// table (GOT) that the dynamic loader fills with the function's address: a `JUMP_SLOT`
/// entry behind each PLT stub, a `GLOB_DAT` entry for address-taken functions and `-fno-plt`
/// calls. Each entry of the symbol in each object of the scope is a ``FunctionSlot`` that
/// gets a hook; one ``HookGroupToken`` holds them all and removes them in any order, and the
/// usual rule applies: an entry gets its original back only if it still holds the hook.
///
/// - Full RELRO (`-z relro -z now`) makes the GOT read-only after relocation: the hooks
///   always lift the page's protection for the moment of each write and restore it.
/// - Lazy binding: until its first call, a `JUMP_SLOT` entry points at the object's own PLT
///   stub, which would jump back through the hooked entry. Such an entry is first bound to
///   the function the loader would bind it to (the symbol's first definition in the global
///   scope, else in the object's own scope), so the hook's original is the real function.
///   A lazy entry whose symbol nothing defines is left alone.
/// - An object's `GLOB_DAT` entry for a function it defines itself is no import, and gets no
///   hook (nor is it listed by ``bindings(of:in:)``): it holds the address the object's code
///   takes of its own function, which the object may compare with the addresses its data
///   holds. OpenSSL's `CRYPTO_malloc` calls the allocator it was given unless that is
///   `CRYPTO_malloc` itself, so a hook in libcrypto's own entry made it call itself for ever.
///   The object's calls to its own function go through its PLT, or are bound inside it (only
///   code built with `-fno-plt` calls through such an entry).
/// - Calls that do not go through an import table are not seen: calls inside the defining
///   object, calls through pointers the program obtained with `dlsym` or kept from before
///   the hook, calls an object binds to itself (`-Bsymbolic`, hidden symbols), calls through
///   pointers the loader writes into data (`R_X86_64_64`; see <doc:HookingCTables>).
/// - Swift's overlays: Swift code calls some C functions through wrappers in its platform
///   overlay, and those calls come from the overlay's import table, not the program's. On
///   Linux, `libswiftGlibc.so` imports `open`, `openat`, `fcntl`, `ioctl` and `sem_open` (C
///   functions with variadic arguments, which Swift cannot call directly) and a number of
///   `float` and `long double` math functions: hook Swift's `open` with
///   `.object("libswiftGlibc.so")` (or ``ImportScope/all``), not ``ImportScope/mainProgram``.
///   ``bindings(of:in:)`` lists the objects that import a symbol, and
///   ``HookError/Code-swift.struct/symbolNotImported`` names them.
/// - The symbol is matched by name, whatever its version; an object that imports two
///   versions of it has both hooked with the one signature.
/// - A function that the library itself calls (`memcpy`, `malloc`, `dlopen`, the Swift
///   runtime's `swift_retain`…) can be hooked in every object, the library's own entries
///   included: a hooked call's own work never goes through the hook, so blocks run for the
///   program's calls (libffi's and the Swift runtime's among them), not for that work.
///   Installs and removals do call through it, and its blocks run for those calls; a block
///   that then installs a hook where the registry's lock is held is refused with
///   ``HookError/Code-swift.struct/calledFromHookBlock``. A block that calls the same
///   function, through any object's hooked entry of the symbol, is re-entry (see
///   ``HookOptions/allowsReentry``).
public enum ImportTable {
    /// Hooks `symbol` as called from the objects of `scope`.
    ///
    /// Safe to call from any thread, also while other threads call the symbol or load and
    /// unload objects: each object in scope is kept loaded while this call hooks its entries.
    ///
    /// With ``ImportScope/allIncludingLaterLoads`` the group also attaches to `dlopen` in every
    /// object's import table (no signature: a hook of `dlopen` with types of the program's own
    /// stays beside it). When a call loaded something, the attach hooks the symbol's
    /// entries in the objects that are new (and their own `dlopen` entries) and adds them to
    /// the group before `dlopen` returns, also when other threads load at the same moment;
    /// an entry that no longer holds the group's hook (its object was unloaded and another
    /// loaded at its address) is hooked again, and the hooks of objects unloaded since are
    /// dropped from the group. Objects loaded by other means (`dlmopen`, glibc's internal
    /// loads for NSS or iconv, a call to `dlopen` through a pointer from `dlsym`, a `dlopen`
    /// defined in the executable itself, as sanitizer runtimes do) are not followed, and
    /// entries of a new object that cannot be hooked are skipped. The `dlopen` hooks are
    /// removed with the group but are not among its ``HookGroupToken/tokens``. glibc finds
    /// the object that called `dlopen` by its return address, to search that object's
    /// `DT_RPATH` or `DT_RUNPATH` and load into its namespace: the attach calls `dlopen` through
    /// a `ret` in that object, so a bare name is found as without the group (see
    /// <doc:AttachingWithoutASignature>).
    ///
    /// - Parameters:
    ///   - symbol: the function's name as the objects import it, such as `"strlen"`.
    ///   - scope: the objects whose calls are hooked.
    ///   - signature: the function's C signature.
    ///   - position: before, instead of, or after the original.
    ///   - options: as for ``Hook/install(on:signature:position:options:_:)``;
    ///     ``HookOptions/liftsPageProtection`` is always added.
    ///     ``HookOptions/once`` holds for the group: the block runs for one call through any
    ///     of its entries (the program's own calls of the symbol count too), then the whole
    ///     group is removed while its token is held (an instead block's later calls meanwhile
    ///     reach the original); once the token is dropped, each entry's hook goes at its
    ///     next call instead.
    ///   - block: runs with a view of each call through a hooked entry.
    /// - Returns: the token that removes every hook of the call.
    /// - Throws: ``HookError`` with
    ///   ``HookError/Code-swift.struct/objectNotFound`` when no loaded object
    ///   matches ``ImportScope/object(_:)``,
    ///   ``HookError/Code-swift.struct/symbolNotImported`` when no object of the
    ///   scope has an entry for `symbol` (its message names the loaded objects that do and a
    ///   scope that covers them, or says that none does; not thrown for
    ///   ``ImportScope/allIncludingLaterLoads``, which waits for objects that do), or the errors of
    ///   ``Hook/install(on:signature:position:options:_:)``; the install is all or nothing.
    public static func hook(
        symbol: String, in scope: ImportScope, signature: Signature, position: HookPosition,
        options: HookOptions = [], _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(HookError) -> HookGroupToken {
        guard options.contains(.once) else {
            return try hook(symbol: symbol, in: scope, signature: signature, position: position, options, block)
        }
        let once = GroupOnce()
        let group = try hook(symbol: symbol, in: scope, signature: signature, position: position, options) { call in
            guard once.claim() else {
                if position == .instead { call.callOriginal() }
                return
            }
            block(call)
            once.finish()
        }
        once.attach(group)
        return group
    }

    /// Runs `block` before `symbol` as the objects of `scope` call it (see
    /// ``hook(symbol:in:signature:position:options:_:)``).
    public static func before(
        symbol: String, in scope: ImportScope, signature: Signature, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(HookError) -> HookGroupToken {
        try hook(symbol: symbol, in: scope, signature: signature, position: .before, options: options, block)
    }

    /// Runs `block` instead of `symbol` as the objects of `scope` call it; the block calls
    /// the original with ``Invocation/callOriginal()`` (see
    /// ``hook(symbol:in:signature:position:options:_:)``).
    public static func instead(
        symbol: String, in scope: ImportScope, signature: Signature, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(HookError) -> HookGroupToken {
        try hook(symbol: symbol, in: scope, signature: signature, position: .instead, options: options, block)
    }

    /// Runs `block` after `symbol` as the objects of `scope` call it (see
    /// ``hook(symbol:in:signature:position:options:_:)``).
    public static func after(
        symbol: String, in scope: ImportScope, signature: Signature, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(HookError) -> HookGroupToken {
        try hook(symbol: symbol, in: scope, signature: signature, position: .after, options: options, block)
    }

    private static func hook(
        symbol: String, in scope: ImportScope, signature: Signature, position: HookPosition, _ options: HookOptions,
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(HookError) -> HookGroupToken {
        do {
            return try hookEntries(
                symbol: symbol, in: scope, signature: signature, position: position, options, block)
        } catch {
            throw error.naming(symbol: symbol)
        }
    }

    private static func hookEntries(
        symbol: String, in scope: ImportScope, signature: Signature, position: HookPosition, _ options: HookOptions,
        _ block: @escaping @Sendable (borrowing Invocation) -> Void
    ) throws(HookError) -> HookGroupToken {
        var request = ImportRequest(
            symbol: symbol, signature: signature, position: position,
            options: options.union(.liftsPageProtection), block: block)
        request.limit = try CallerLimit(options: options, signature: signature)
        if scope == .allIncludingLaterLoads {
            return try LoadFollower.start(request)
        }
        let tokens = try ImportWalk.withLoadedObjects(in: scope) { objects throws(HookError) in
            let chosen = try ImportWalk.chosen(from: objects, in: scope, signature: signature)
            return try ImportWalk.install(request, in: chosen) { _ in true }
        }
        guard !tokens.isEmpty else {
            throw notImported(symbol, in: scope, signature: signature)
        }
        return HookGroupToken(tokens: tokens, skippedFields: [])
    }
}

/// What one import-table hook asks for.
struct ImportRequest: Sendable {
    let symbol: String
    /// The signature of a hook; nil for an attach.
    let signature: Signature?
    /// For an attach (no signature, no block), the attachment every entry gets.
    var attachment: Attachment?
    let position: HookPosition
    let options: HookOptions
    /// The calls the hooks take part in, taken where the hook was asked for (entries hooked
    /// later, as objects load, keep it).
    var limit: CallerLimit = .none
    /// The symbol's ELF hash (`ffh_elf_name_hash`), when the request's maker has it already.
    var nameHash: UInt32?
    /// For an attach, whether an entry that leads to this function (the address it holds,
    /// bound first when it is a lazy one) is attached; nil: every entry is.
    var leadsTo: (@Sendable (UnsafeRawPointer) -> Bool)?
    /// Makes the block of the hook of one entry, given the entry (found at install, so that
    /// a call pays nothing to know it).
    let makeBlock: @Sendable (ImportEntry) -> HookRecord.Block

    /// A request whose hooks all run `block`.
    init(
        symbol: String, signature: Signature, position: HookPosition, options: HookOptions,
        block: @escaping HookRecord.Block
    ) {
        self.init(symbol: symbol, signature: signature, position: position, options: options) { _ in block }
    }

    /// A request whose hook of each entry runs `block` with that entry.
    init(
        symbol: String, signature: Signature, position: HookPosition, options: HookOptions,
        entryBlock block: @escaping @Sendable (borrowing Invocation, ImportEntry) -> Void
    ) {
        self.init(symbol: symbol, signature: signature, position: position, options: options) { entry in
            { call in block(call, entry) }
        }
    }

    /// A request that attaches `attachment` to each entry (`nameHash`: the symbol's ELF hash,
    /// when known).
    init(
        symbol: String, attachment: Attachment, nameHash: UInt32? = nil,
        leadsTo: (@Sendable (UnsafeRawPointer) -> Bool)? = nil
    ) {
        self.init(symbol: symbol, signature: nil, position: .before, options: .liftsPageProtection) { _ in { _ in } }
        self.attachment = attachment
        self.nameHash = nameHash
        self.leadsTo = leadsTo
    }

    private init(
        symbol: String, signature: Signature?, position: HookPosition, options: HookOptions,
        makeBlock: @escaping @Sendable (ImportEntry) -> HookRecord.Block
    ) {
        self.symbol = symbol
        self.signature = signature
        self.position = position
        self.options = options
        self.makeBlock = makeBlock
    }
}

/// `once` for a whole group of hooks: the first call to claim it runs the block, and the
/// group is removed when that block has run (at once, or as soon as the group exists when
/// the block ran during the install).
///
/// Each entry's hook is also a `once` hook, which removes itself after its first call (the
/// block does not run again): so the group's hooks go even where nothing can remove the
/// group, and nothing here holds the group strongly, which would make a cycle through the
/// hooks' blocks that removal never breaks.
final class GroupOnce: Sendable {
    private struct Group {
        weak var token: HookGroupToken?
        var finished = false
    }

    private let claimed = Atomic<Bool>(false)
    private let state = Locked(Group())

    /// Whether this call is the one that runs the block.
    func claim() -> Bool {
        !claimed.exchange(true, ordering: .acquiringAndReleasing)
    }

    /// Called after the block ran: removes the group, or has ``attach(_:)`` remove it.
    func finish() {
        let group = state.withLock { state in
            state.finished = true
            return state.token
        }
        group?.remove()
    }

    /// Hands over the group once it is installed.
    func attach(_ group: HookGroupToken) {
        let finished = state.withLock { state in
            state.token = group
            return state.finished
        }
        if finished { group.remove() }
    }
}
