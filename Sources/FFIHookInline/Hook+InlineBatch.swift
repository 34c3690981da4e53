public import FFIHook

/// The verbs of ``/FFIHook/Hook`` on a whole batch of inline functions: one group token, every
/// patch written in one stop of the other threads, and every patch taken out in one stop when
/// the group is removed.
///
/// A function of the batch that cannot be patched or hooked is left out and named in the
/// group's ``/FFIHook/HookGroupToken/refusals`` (its error's ``/FFIHook/HookError/symbol`` is the
/// function's name); the others are hooked. A batch made with
/// ``InlineBatch/Options/allOrNothing`` refuses the whole install instead: the verb throws the
/// first function's error and installs nothing. When every function's install fails, all with
/// the same error code (options an attach refuses, a signature the library refuses), the verb
/// throws the first of them rather than return an empty group.
extension Hook {
    /// Installs `block` at `position` around every function of `batch` for which `signature`
    /// gives a signature (functions it gives `nil` for are left alone, and not refused).
    ///
    /// ```swift
    /// let zlib = try InlineBatch(symbols: ["crc32", "adler32"], in: "libz.so.1")
    /// let checksums = try Hook.install(on: zlib, signature: { _ in try? Signature("QQ^CI") }, position: .after) {
    ///     call, function in
    ///     print(function.name, "of", call.argument(2, as: UInt32.self), "bytes")
    /// }
    /// defer { checksums.remove() }
    /// ```
    ///
    /// Each function's hook is the one ``/FFIHook/Hook/install(on:signature:position:options:_:)``
    /// makes on its ``InlineFunction/slot``, with the block given the function: a call pays nothing more
    /// to learn which function it is in.
    ///
    /// - Throws: ``/FFIHook/HookError/Code-swift.struct/calledFromHookBlock`` from a block that runs
    ///   within the library's own install or removal on this thread; with
    ///   ``InlineBatch/Options/allOrNothing``, the first function's error (nothing is installed);
    ///   the first function's error when every install failed with the same code.
    public static func install(
        on batch: InlineBatch, signature: (InlineFunction) -> Signature?, position: HookPosition,
        options: HookOptions = [], _ block: @escaping @Sendable (borrowing Invocation, InlineFunction) -> Void
    ) throws(HookError) -> HookGroupToken {
        try installEach(
            on: batch, prepare: signature, together: { _, _ in nil },
            { (function: InlineFunction, signature: Signature) throws(HookError) -> HookToken in
                try install(on: function.slot, signature: signature, position: position, options: options) { call in
                    block(call, function)
                }
            })
    }

    /// Installs a block that runs before each function of `batch`, every one of `signature`
    /// (see the batch form of `install(on:signature:position:options:_:)`).
    public static func before(
        on batch: InlineBatch, signature: Signature, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation, InlineFunction) -> Void
    ) throws(HookError) -> HookGroupToken {
        try install(on: batch, signature: { _ in signature }, position: .before, options: options, block)
    }

    /// Installs a block that runs instead of each function of `batch`, every one of `signature`
    /// (see the batch form of `install(on:signature:position:options:_:)`).
    public static func instead(
        on batch: InlineBatch, signature: Signature, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation, InlineFunction) -> Void
    ) throws(HookError) -> HookGroupToken {
        try install(on: batch, signature: { _ in signature }, position: .instead, options: options, block)
    }

    /// Installs a block that runs after each function of `batch`, every one of `signature`
    /// (see the batch form of `install(on:signature:position:options:_:)`).
    public static func after(
        on batch: InlineBatch, signature: Signature, options: HookOptions = [],
        _ block: @escaping @Sendable (borrowing Invocation, InlineFunction) -> Void
    ) throws(HookError) -> HookGroupToken {
        try install(on: batch, signature: { _ in signature }, position: .after, options: options, block)
    }

    /// Attaches to every function of `batch` without their signatures, with the blocks
    /// `blocks` gives for each (so that each can count into its own place, as a tracer does);
    /// a function it gives no block for is left alone, and not refused.
    ///
    /// ```swift
    /// let library = try InlineBatch(library: "libz.so.1")
    /// let counters = Dictionary(uniqueKeysWithValues: library.functions.map { ($0, Counter()) })
    /// let calls = try Hook.attach(on: library) { function in
    ///     let counter = counters[function]!
    ///     return ({ _ in counter.increment() }, nil)
    /// }
    /// defer { calls.remove() }
    /// ```
    ///
    /// Each function's attach is the one ``/FFIHook/Hook/attach(on:options:onEnter:onLeave:)``
    /// makes on its ``InlineFunction/slot``. `blocks` is asked once for each function; the
    /// attaches go in together, with one hold of the library's locks for the whole batch (one by
    /// one only when that is refused, so that the refusal names its function).
    ///
    /// - Throws: as the batch form of `install(on:signature:position:options:_:)`.
    public static func attach(
        on batch: InlineBatch, options: HookOptions = [],
        blocks: (InlineFunction) -> (onEnter: EnterBlock?, onLeave: LeaveBlock?)
    ) throws(HookError) -> HookGroupToken {
        guard options.isDisjoint(with: HookOptions.callerLimits) else {
            throw HookError(code: .unsupportedCallerLimit, message: HookError.Problem.limitedAttachReason)
        }
        return try installEach(
            on: batch,
            prepare: { (function: InlineFunction) -> (onEnter: EnterBlock?, onLeave: LeaveBlock?)? in
                let chosen = blocks(function)
                guard chosen.onEnter != nil || chosen.onLeave != nil else { return nil }
                return chosen
            },
            together: { (functions: [InlineFunction], chosen: [(onEnter: EnterBlock?, onLeave: LeaveBlock?)]) in
                var requests: [AttachRequest] = []
                requests.reserveCapacity(functions.count)
                for place in functions.indices {
                    requests.append(
                        AttachRequest(
                            slot: functions[place].slot, name: nil, onEnter: chosen[place].onEnter,
                            onLeave: chosen[place].onLeave))
                }
                return try? attach(together: requests, options: options)
            },
            {
                (function: InlineFunction, chosen: (onEnter: EnterBlock?, onLeave: LeaveBlock?)) throws(HookError)
                    -> HookToken in
                let request = AttachRequest(
                    slot: function.slot, name: function.name, onEnter: chosen.onEnter, onLeave: chosen.onLeave)
                return try attach(together: [request], options: options)[0]
            })
    }

    /// Attaches to every function of `batch` with blocks written as C functions
    /// (``/FFIHook/AttachFunctions``), which `functions` gives for each; a function it gives
    /// none for is left alone, and not refused. Each function's attach is the one
    /// ``/FFIHook/Hook/attach(on:options:functions:)`` makes on its ``InlineFunction/slot``;
    /// they go in together, as with the form with `blocks:`.
    ///
    /// - Throws: as the batch form of `install(on:signature:position:options:_:)`.
    public static func attach(
        on batch: InlineBatch, options: HookOptions = [], functions: (InlineFunction) -> AttachFunctions?
    ) throws(HookError) -> HookGroupToken {
        guard options.isDisjoint(with: HookOptions.callerLimits) else {
            throw HookError(code: .unsupportedCallerLimit, message: HookError.Problem.limitedAttachReason)
        }
        return try installEach(
            on: batch,
            prepare: { (function: InlineFunction) -> AttachFunctions? in
                guard let chosen = functions(function), chosen.onEnter != nil || chosen.onLeave != nil else {
                    return nil
                }
                return chosen
            },
            together: { (functions: [InlineFunction], chosen: [AttachFunctions]) in
                var requests: [AttachRequest] = []
                requests.reserveCapacity(functions.count)
                for place in functions.indices {
                    requests.append(AttachRequest(slot: functions[place].slot, name: nil, functions: chosen[place]))
                }
                return try? attach(together: requests, options: options)
            },
            { (function: InlineFunction, chosen: AttachFunctions) throws(HookError) -> HookToken in
                let request = AttachRequest(slot: function.slot, name: function.name, functions: chosen)
                return try attach(together: [request], options: options)[0]
            })
    }

    /// Attaches the same blocks to every function of `batch` (see the form with `blocks:`, whose
    /// blocks can capture their function).
    /// ``/FFIHook/EnterContext/function`` is the function's ``InlineFunction/original``, its
    /// trampoline.
    public static func attach(
        on batch: InlineBatch, options: HookOptions = [], onEnter: EnterBlock?, onLeave: LeaveBlock?
    ) throws(HookError) -> HookGroupToken {
        try attach(on: batch, options: options) { _ in (onEnter, onLeave) }
    }

    /// Attaches the same `onEnter` alone to every function of `batch`: see
    /// ``attach(on:options:onEnter:onLeave:)``. For a leave block alone, name both
    /// (`onEnter: nil, onLeave: …`).
    public static func attach(
        on batch: InlineBatch, options: HookOptions = [], onEnter: @escaping EnterBlock
    ) throws(HookError) -> HookGroupToken {
        try attach(on: batch, options: options, onEnter: onEnter, onLeave: nil)
    }

    /// Writes the compiled function `replacement` gives into each function's jump cell, with
    /// no closure (see ``/FFIHook/Hook/replace(on:with:options:)``); a function it gives `nil` for is left
    /// alone, and not refused. Each replacement calls its function's ``InlineFunction/original``.
    ///
    /// - Throws: as the batch form of `install(on:signature:position:options:_:)`.
    public static func replace(
        on batch: InlineBatch, options: HookOptions = [], with replacement: (InlineFunction) -> UnsafeRawPointer?
    ) throws(HookError) -> HookGroupToken {
        try installEach(
            on: batch, prepare: replacement, together: { _, _ in nil },
            { (function: InlineFunction, pointer: UnsafeRawPointer) throws(HookError) -> HookToken in
                let token = try replace(on: function.slot, with: pointer, options: options)
                return HookToken(handle: ReplacementHandle(token, function: function))
            })
    }

    /// Holds every function of the batch patched (one stop writes the patches not in yet),
    /// installs on each, then drops the holds; a refused install's patch comes out with the
    /// others in one stop. `prepare` says what to install on each held function (nil: leave it
    /// alone), once; `together` installs them all at once (the functions prepared, and what
    /// was prepared for each, in the same order), or returns nil having installed none (then
    /// `install` installs them one by one, and a failure names its function: the errors of
    /// `together` need not).
    private static func installEach<Prepared>(
        on batch: InlineBatch, prepare: (InlineFunction) -> Prepared?,
        together: ([InlineFunction], [Prepared]) -> [HookToken]?,
        _ install: (InlineFunction, Prepared) throws(HookError) -> HookToken
    ) throws(HookError) -> HookGroupToken {
        let allOrNothing = batch.options.contains(.allOrNothing)
        return try SlotRegistry.shared.withBatchedReclamation { () throws(HookError) -> HookGroupToken in
            try installEach(
                on: batch, allOrNothing: allOrNothing, prepare: prepare, together: together, install)
        }
    }

    private static func installEach<Prepared>(
        on batch: InlineBatch, allOrNothing: Bool, prepare: (InlineFunction) -> Prepared?,
        together: ([InlineFunction], [Prepared]) -> [HookToken]?,
        _ install: (InlineFunction, Prepared) throws(HookError) -> HookToken
    ) throws(HookError) -> HookGroupToken {
        try InlinePatching.withDeferredRemovals { () throws(HookError) -> HookGroupToken in
            let refused = try BatchPatching.hold(batch.functions, allOrNothing: allOrNothing)
            // The first in the batch's order (the refusals are kept by function, in no order).
            if allOrNothing, let first = batch.functions.lazy.compactMap({ refused[$0] }).first { throw first.error }
            // Most installs have no refusal: then no lookup per function (each would make and
            // drop an optional refusal, a large value).
            let held = refused.isEmpty ? batch.functions : batch.functions.filter { refused.index(forKey: $0) == nil }
            var tokens: [HookToken] = []
            var refusals = refused.values.map(\.error)
            var failures: [HookError] = []
            do throws(HookError) {
                // Two arrays, not one of pairs: the values go to `together` as they are, and
                // the functions are the held ones themselves unless `prepare` leaves some alone.
                var prepared: [Prepared] = []
                prepared.reserveCapacity(held.count)
                var chosen: [InlineFunction]?
                for place in held.indices {
                    if let what = prepare(held[place]) {
                        prepared.append(what)
                        chosen?.append(held[place])
                    } else if chosen == nil {
                        chosen = Array(held[..<place])
                    }
                }
                let functions = chosen ?? held
                if let installed = prepared.isEmpty ? [] : together(functions, prepared) {
                    tokens = installed
                } else {
                    for place in functions.indices {
                        let function = functions[place]
                        do throws(HookError) {
                            tokens.append(try install(function, prepared[place]))
                        } catch {
                            var error = error
                            error.symbol = function.name
                            if allOrNothing { throw error }
                            failures.append(error)
                        }
                    }
                }
                // Every install failed, and for one reason: the options or the signature were
                // wrong for all of them, which an empty group would hide.
                if tokens.isEmpty, let first = failures.first, failures.allSatisfy({ $0.code == first.code }) {
                    throw first
                }
            } catch {
                for token in tokens { token.remove() }
                try? BatchPatching.release(held)
                throw error
            }
            try BatchPatching.release(held)
            refusals += failures
            return HookGroupToken(
                tokens: tokens, skippedFields: [], refusals: refusals.sorted { ($0.symbol ?? "") < ($1.symbol ?? "") },
                removalScope: { body in
                    do {
                        try InlinePatching.withDeferredRemovals { () throws(HookError) in body() }
                    } catch {
                        // From a block within the library's own install on this thread: one
                        // by one.
                        body()
                    }
                })
        }
    }
}

/// A replacement as one hook of a group.
private final class ReplacementHandle: HookHandle {
    let token: ReplacementToken
    let function: InlineFunction

    init(_ token: ReplacementToken, function: InlineFunction) {
        self.token = token
        self.function = function
    }

    func remove() -> Bool { token.remove() }
    var isActive: Bool { token.isActive }
    var summary: String { "replacement of \(function.name)" }
}
