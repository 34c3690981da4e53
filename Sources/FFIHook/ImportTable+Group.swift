/// A function to hook in a group of import-table hooks: its name and its C signature.
///
/// ```swift
/// let step = try ImportSymbol("sqlite3_step", signature: Signature("i^v"))
/// ```
public struct ImportSymbol: Sendable, Hashable, CustomStringConvertible {
    /// The function's name as the objects import it, such as `"sqlite3_step"`.
    public let name: String
    /// The function's C signature.
    public let signature: Signature

    /// The function `name` of type `signature`.
    public init(_ name: String, signature: Signature) {
        self.name = name
        self.signature = signature
    }

    /// The name and the signature's encoding, such as `sqlite3_step "i^v"`.
    public var description: String { "\(name) \"\(signature.encoding)\"" }
}

/// Groups of symbols: one hook over several functions, one token for all of them, and a
/// block that learns which function and which object's entry each call came through.
///
/// ```swift
/// let group = try ImportTable.before(
///     symbols: [
///         ImportSymbol("sqlite3_prepare_v2", signature: Signature("i^v*i^^v^*")),
///         ImportSymbol("sqlite3_step", signature: Signature("i^v")),
///         ImportSymbol("sqlite3_finalize", signature: Signature("i^v")),
///     ],
///     in: .mainProgram
/// ) { call, entry in
///     counts.add(1, for: entry.symbol)
/// }
/// defer { group.remove() }
/// ```
extension ImportTable {
    /// Hooks each of `symbols`, with its own signature, as called from the objects of
    /// `scope`, under one group token; the block receives each call and the entry it came
    /// through (``ImportEntry/symbol`` says which function, ``ImportEntry/objectName`` from
    /// which object).
    ///
    /// Each entry's hook is the one ``hook(symbol:in:signature:position:options:_:)`` makes,
    /// with the block given the entry that was found at install: a call pays nothing more
    /// to learn its symbol, and allocates nothing. A list of one symbol is how the block of
    /// a single function's hook learns which object's entry each call came through. Safe to call from any thread, also while other threads call the
    /// symbols or load and unload objects.
    ///
    /// The install is all or nothing: when a symbol has no entry in the scope, or an entry
    /// cannot be hooked (it is hooked already with a signature of other types, say), nothing
    /// is installed and the error names that symbol. A symbol listed twice with the same
    /// signature is hooked once; listed with signatures of different types, it is refused
    /// with ``HookError/Code-swift.struct/signatureMismatch``.
    ///
    /// - Parameters:
    ///   - symbols: the functions and their signatures; an empty list installs nothing and
    ///     returns an empty group.
    ///   - scope: the objects whose calls are hooked. With
    ///     ``ImportScope/allIncludingLaterLoads`` the group follows later loads as one symbol's
    ///     hook does (see ``hook(symbol:in:signature:position:options:_:)``): the entries of
    ///     every symbol in objects that `dlopen` loads later join the group, and a symbol that
    ///     no object imports yet is not an error.
    ///   - position: before, instead of, or after each original.
    ///   - options: as for ``hook(symbol:in:signature:position:options:_:)``.
    ///     ``HookOptions/once`` holds for the whole group: the block runs for one call, of any
    ///     of the symbols through any of their entries, then every hook of the group is
    ///     removed (an instead block's later calls meanwhile reach their originals).
    ///   - block: runs with a view of each call and the entry the call came through, on the
    ///     calling thread, possibly on several threads at once.
    /// - Returns: the token that removes every hook of the group, in any order with other
    ///   tokens; its ``HookGroupToken/tokens`` are the entries' hooks, symbol by symbol in
    ///   the order of `symbols`.
    /// - Throws: ``HookError`` with ``HookError/Code-swift.struct/objectNotFound``,
    ///   ``HookError/Code-swift.struct/symbolNotImported`` (naming the symbol, and the
    ///   objects outside the scope that import it), or the errors of ``Hook/install(on:signature:position:options:_:)``, with
    ///   ``HookError/symbol`` and ``HookError/signature`` those of the symbol at fault.
    public static func hook(
        symbols: [ImportSymbol], in scope: ImportScope, position: HookPosition, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation, ImportEntry) -> Void
    ) throws(HookError) -> HookGroupToken {
        guard options.contains(.once) else {
            return try hookGroup(symbols, in: scope, position: position, options, block)
        }
        let once = GroupOnce()
        let group = try hookGroup(symbols, in: scope, position: position, options) { call, entry in
            guard once.claim() else {
                if position == .instead { call.callOriginal() }
                return
            }
            block(call, entry)
            once.finish()
        }
        once.attach(group)
        return group
    }

    /// Runs `block` before each of `symbols` as the objects of `scope` call them (see
    /// ``hook(symbols:in:position:options:_:)``).
    public static func before(
        symbols: [ImportSymbol], in scope: ImportScope, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation, ImportEntry) -> Void
    ) throws(HookError) -> HookGroupToken {
        try hook(symbols: symbols, in: scope, position: .before, options: options, block)
    }

    /// Runs `block` instead of each of `symbols` as the objects of `scope` call them; the
    /// block calls the original with ``Invocation/callOriginal()`` (see
    /// ``hook(symbols:in:position:options:_:)``).
    public static func instead(
        symbols: [ImportSymbol], in scope: ImportScope, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation, ImportEntry) -> Void
    ) throws(HookError) -> HookGroupToken {
        try hook(symbols: symbols, in: scope, position: .instead, options: options, block)
    }

    /// Runs `block` after each of `symbols` as the objects of `scope` call them (see
    /// ``hook(symbols:in:position:options:_:)``).
    public static func after(
        symbols: [ImportSymbol], in scope: ImportScope, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation, ImportEntry) -> Void
    ) throws(HookError) -> HookGroupToken {
        try hook(symbols: symbols, in: scope, position: .after, options: options, block)
    }

    private static func hookGroup(
        _ symbols: [ImportSymbol], in scope: ImportScope, position: HookPosition, _ options: HookOptions,
        _ block: @escaping @Sendable (borrowing Invocation, ImportEntry) -> Void
    ) throws(HookError) -> HookGroupToken {
        let requests = try requests(for: symbols, position: position, options.union(.liftsPageProtection), block)
        do {
            if scope == .allIncludingLaterLoads {
                return try LoadFollower.start(requests)
            }
            let tokens = try ImportGroup.install(requests.map(\.symbol), in: scope) {
                index, entry, object throws(HookError) in
                try ImportWalk.install(requests[index], at: entry, in: object)
            }
            return HookGroupToken(tokens: tokens, skippedFields: [])
        } catch {
            // The error names its symbol; give it that symbol's signature.
            var error = error
            if error.signature == nil, let request = requests.first(where: { $0.symbol == error.symbol }) {
                error.signature = request.signature
            }
            throw error
        }
    }

    /// One request per symbol: a symbol listed again with the same types is dropped, one
    /// listed with other types refuses the group before anything is hooked.
    private static func requests(
        for symbols: [ImportSymbol], position: HookPosition, _ options: HookOptions,
        _ block: @escaping @Sendable (borrowing Invocation, ImportEntry) -> Void
    ) throws(HookError) -> [ImportRequest] {
        var first: [String: Signature] = [:]
        var requests: [ImportRequest] = []
        let limit = try CallerLimit(options: options, signature: symbols.first?.signature)
        for symbol in symbols {
            if let earlier = first[symbol.name] {
                guard earlier.slotSharingKey == symbol.signature.slotSharingKey else {
                    throw HookError(
                        slot: nil, signature: symbol.signature,
                        problem: .signatureMismatch(
                            installed: earlier.encoding, fixedArgumentCount: earlier.fixedArgumentCount)
                    ).naming(symbol: symbol.name)
                }
                continue
            }
            first[symbol.name] = symbol.signature
            var request = ImportRequest(
                symbol: symbol.name, signature: symbol.signature, position: position, options: options,
                entryBlock: block)
            request.limit = limit
            requests.append(request)
        }
        return requests
    }
}

/// Installs hooks on the import-table entries of several symbols at once, all or nothing.
///
/// Knows nothing of signatures or blocks: the caller makes each entry's hook, so that other
/// kinds of hook (one that needs no signature, say) can share the walk and its rules.
enum ImportGroup {
    /// Makes a hook with `hook` on every entry of each of `names` in the objects of `scope`
    /// (not ``ImportScope/allIncludingLaterLoads``, which `LoadFollower` serves), binding
    /// lazy entries first; `hook` receives the name's index, the entry and its object.
    ///
    /// Every name must have an entry in the scope, checked before anything is hooked; when
    /// one has none, or a hook cannot be made, the hooks made are removed and the error names
    /// the symbol.
    static func install(
        _ names: [String], in scope: ImportScope,
        hook: (_ index: Int, _ entry: ImportWalk.Entry, _ object: LoadedObject) throws(HookError) -> HookToken
    ) throws(HookError) -> [HookToken] {
        return try ImportWalk.withLoadedObjects { objects throws(HookError) in
            let chosen = try ImportWalk.chosen(from: objects, in: scope, signature: nil)
            var found: [[(object: LoadedObject, entry: ImportWalk.Entry)]] = []
            let entryIndex =
                ImportWalk.EntryIndex.forSymbols(names)
            for name in names {
                let entries = ImportWalk.entries(of: name, in: chosen, index: entryIndex).map {
                    (object: chosen[$0.object], entry: $0.entry)
                }
                guard !entries.isEmpty else {
                    throw ImportTable.notImported(
                        name, in: scope, signature: nil, importers: ImportTable.importers(of: name, among: objects))
                }
                found.append(entries)
            }
            var tokens: [HookToken] = []
            do throws(HookError) {
                for (index, entries) in found.enumerated() {
                    let name = names[index]
                    var hooked = 0
                    for (object, entry) in entries {
                        // A lazy entry whose symbol nothing defines is left alone, as for one symbol.
                        guard ImportWalk.bindLazyEntry(entry, of: name, in: object) else { continue }
                        do throws(HookError) {
                            tokens.append(try hook(index, entry, object))
                        } catch {
                            throw error.naming(symbol: name)
                        }
                        hooked += 1
                    }
                    guard hooked > 0 else {
                        throw ImportTable.notImported(
                            name, in: scope, signature: nil,
                            importers: ImportTable.importers(of: name, among: objects))
                    }
                }
            } catch {
                for token in tokens { token.remove() }
                throw error
            }
            return tokens
        }
    }
}
