extension ImportTable {
    /// Attaches `onEnter` and `onLeave` to `symbol` as the objects of `scope` call it, without
    /// its signature (see ``Hook/attach(on:options:onEnter:onLeave:)``): every import-table
    /// entry of the symbol in those objects gets an attach stub.
    ///
    /// ```swift
    /// // How long each write(2) of libz takes, whatever its arguments.
    /// let group = try ImportTable.attach(symbol: "write", in: .object("libz.so.1")) { call in
    ///     call.scratch = UInt64(DispatchTime.now().uptimeNanoseconds)
    /// } onLeave: { call in
    ///     print(UInt64(DispatchTime.now().uptimeNanoseconds) - call.scratch, "ns")
    /// }
    /// ```
    ///
    /// Entries are found, bound and written as for
    /// ``hook(symbol:in:signature:position:options:_:)``, whose notes hold here too, with
    /// ``ImportScope/allIncludingLaterLoads`` following `dlopen`. Safe to call from any thread.
    ///
    /// - Throws: ``HookError`` as ``hook(symbol:in:signature:position:options:_:)`` does;
    ///   the attach is all or nothing.
    public static func attach(
        symbol: String, in scope: ImportScope, onEnter: EnterBlock?, onLeave: LeaveBlock?
    ) throws(HookError) -> HookGroupToken {
        // One symbol is a list of one: the same walk, and the same error when nothing
        // imports it.
        do throws(HookError) {
            return try attach(symbols: [symbol], in: scope) { _ in (onEnter, onLeave) }
        } catch {
            throw error.naming(symbol: symbol)
        }
    }

    /// Attaches `onEnter` alone to `symbol` as the objects of `scope` call it: see
    /// ``attach(symbol:in:onEnter:onLeave:)``. A lone trailing closure is this `onEnter`, in
    /// every language mode; for a leave block alone, name both
    /// (`attach(symbol: "write", in: scope, onEnter: nil) { call in … }`).
    ///
    /// - Throws: as ``attach(symbol:in:onEnter:onLeave:)``.
    public static func attach(
        symbol: String, in scope: ImportScope, onEnter: @escaping EnterBlock
    ) throws(HookError) -> HookGroupToken {
        try attach(symbol: symbol, in: scope, onEnter: onEnter, onLeave: nil)
    }

    /// Attaches to each of `symbols` as the objects of `scope` call them, in one group: what a
    /// tracer does. `blocks` is asked once per symbol for that symbol's blocks (so each can
    /// count into its own place); a symbol listed twice is attached once.
    ///
    /// Unlike ``attach(symbol:in:onEnter:onLeave:)``, a symbol that no object of the scope
    /// imports is skipped, not an error (a tracer names every function a library exports,
    /// and a program calls a few): ``HookGroupToken/tokens`` holds the entries attached. With
    /// ``ImportScope/allIncludingLaterLoads`` one `dlopen` hook follows later loads for all
    /// of them.
    ///
    /// - Throws: ``HookError`` when an entry cannot be attached (the group is then removed),
    ///   ``HookError/Code-swift.struct/objectNotFound`` for an object scope that matches no
    ///   loaded object, or ``HookError/Code-swift.struct/symbolNotImported`` when the list is
    ///   empty or no symbol of it has an entry in the scope (that `leadingTo` accepts; not for
    ///   ``ImportScope/allIncludingLaterLoads``, which waits for objects that import them).
    ///
    /// - Parameters:
    ///   - symbols: the functions' names.
    ///   - scope: the objects whose calls are attached to.
    ///   - options: ``HookOptions/allowsReentry`` to run the blocks also for calls made while a
    ///     block runs on the thread (see ``Hook/attach(on:options:onEnter:onLeave:)``); other
    ///     options are refused as there, or ignored.
    ///   - leadingTo: whether an entry is attached, given the function it leads to (the address
    ///     it holds; a lazily bound entry is bound first): where two objects export a name (a
    ///     second copy of a library, an interposed `malloc`), a tracer of one of them attaches
    ///     only the entries bound into it. Asked during the walk, with the walk's locks held:
    ///     it must not load or unload objects, nor hook. Nil: every entry of the symbols.
    ///   - blocks: each symbol's blocks.
    public static func attach(
        symbols: [String], in scope: ImportScope, options: HookOptions = [],
        leadingTo: (@Sendable (UnsafeRawPointer) -> Bool)? = nil,
        blocks: (String) -> (onEnter: EnterBlock?, onLeave: LeaveBlock?)
    ) throws(HookError) -> HookGroupToken {
        try attach(symbols: symbols, in: scope, options: options, leadingTo: leadingTo) { symbol in
            let (onEnter, onLeave) = blocks(symbol)
            return Attachment(onEnter: onEnter, onLeave: onLeave, reenters: options.contains(.allowsReentry))
        }
    }

    /// ``attach(symbols:in:options:leadingTo:blocks:)`` with blocks written as C functions
    /// (``AttachFunctions``): `functions` is asked once per symbol for that symbol's functions
    /// and context (nil: no blocks, the entries attached to run none).
    ///
    /// - Throws: as ``attach(symbols:in:options:leadingTo:blocks:)``.
    ///
    /// - Parameters:
    ///   - symbols: the functions' names.
    ///   - scope: the objects whose calls are attached to.
    ///   - options: as for ``attach(symbols:in:options:leadingTo:blocks:)``.
    ///   - leadingTo: as for ``attach(symbols:in:options:leadingTo:blocks:)``.
    ///   - functions: each symbol's functions.
    public static func attach(
        symbols: [String], in scope: ImportScope, options: HookOptions = [],
        leadingTo: (@Sendable (UnsafeRawPointer) -> Bool)? = nil,
        functions: (String) -> AttachFunctions?
    ) throws(HookError) -> HookGroupToken {
        try attach(symbols: symbols, in: scope, options: options, leadingTo: leadingTo) { symbol in
            let reenters = options.contains(.allowsReentry)
            guard let chosen = functions(symbol) else {
                return Attachment(onEnter: nil, onLeave: nil, reenters: reenters)
            }
            return Attachment(functions: chosen, reenters: reenters)
        }
    }

    /// Attaches each of `symbols` with the attachment `attachment` makes for it, in one group.
    private static func attach(
        symbols: [String], in scope: ImportScope, options: HookOptions,
        leadingTo: (@Sendable (UnsafeRawPointer) -> Bool)? = nil, attachment: (String) -> Attachment
    ) throws(HookError) -> HookGroupToken {
        guard options.isDisjoint(with: HookOptions.callerLimits) else {
            throw HookError(code: .unsupportedCallerLimit, message: HookError.Problem.limitedAttachReason)
        }
        guard !symbols.isEmpty else {
            throw HookError(code: .symbolNotImported, message: "the list of symbols to attach to is empty")
        }
        var requests: [ImportRequest] = []
        let distinct = ImportWalk.distinctNames(symbols)
        requests.reserveCapacity(distinct.count)
        for (place, hash) in distinct {
            let symbol = symbols[place]
            requests.append(
                ImportRequest(symbol: symbol, attachment: attachment(symbol), nameHash: hash, leadsTo: leadingTo))
        }
        if scope == .allIncludingLaterLoads {
            return try LoadFollower.start(requests)
        }
        let tokens = try ImportWalk.withLoadedObjects(in: scope) { objects throws(HookError) in
            let chosen = try ImportWalk.chosen(from: objects, in: scope, signature: nil)
            let index = ImportWalk.EntryIndex(requests: requests)
            return try SlotMemory.keepingPagesWritable { () throws(HookError) -> [HookToken] in
                try ImportWalk.attach(requests, in: chosen, index: index) { _ in true }
            }
        }
        guard !tokens.isEmpty else {
            let names = requests.map(\.symbol)
            if leadingTo != nil {
                // Entries may be there, leading elsewhere: said so, not that nothing imports them.
                let listed = names.prefix(5).map { "\"\($0)\"" }.joined(separator: ", ")
                let more = names.count > 5 ? " and \(names.count - 5) more" : ""
                throw HookError(
                    code: .symbolNotImported,
                    message: "no import-table entry in \(scope) of \(listed)\(more) leads to a function "
                        + "that leadingTo accepts",
                    symbol: names[0])
            }
            guard names.count > 1 else { throw notImported(names[0], in: scope, signature: nil) }
            let listed = names.prefix(5).map { "\"\($0)\"" }.joined(separator: ", ")
            let more = names.count > 5 ? " and \(names.count - 5) more" : ""
            throw HookError(
                code: .symbolNotImported,
                message: "none of the \(names.count) symbols (\(listed)\(more)) has an import-table entry in \(scope)",
                symbol: names[0])
        }
        return HookGroupToken(tokens: tokens, skippedFields: [])
    }
}
