internal import CFFIHookSupport
public import FFIHook

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Many functions planned as inline hooks at once: every function a library exports, a list of
/// symbols, or a list of addresses.
///
/// ```swift
/// // Every function SQLite exports, planned, then attached to in one stop of the threads.
/// let sqlite = try InlineBatch(library: "libsqlite3.so.0")
/// print(sqlite.functions.count, "planned,", sqlite.refusals.count, "refused")
/// let calls = try Hook.attach(on: sqlite) { function in
///     let counter = Counter(function.name)
///     return ({ _ in counter.add() }, nil)
/// }
/// defer { calls.remove() }  // one stop takes every patch out
/// ```
///
/// Planning a batch reads the memory map, the loaded objects and the symbol tables once, and
/// puts every function's trampoline and jump cell in slabs shared by the library's functions
/// (a few mappings for the whole library, and a few dozen bytes per function besides its
/// relocated instructions). A function that cannot be planned is left out with an
/// ``InlineRefusal`` saying why, and the others are planned all the same, unless the batch is
/// made with ``Options/allOrNothing``.
///
/// Every verb of ``/FFIHook/Hook`` has a form that takes a batch (`before`, `instead`, `after`
/// with a signature per function, `replace`, and the signature-free `attach`), and returns one
/// ``/FFIHook/HookGroupToken`` for all the functions. Installing writes every function's patch
/// in one stop of the process's other threads, and removing the group takes them all out in one
/// stop. ``patch()`` and ``unpatch()`` keep the whole batch patched, or stop keeping it, the same
/// way.
///
/// A function's plan is shared with every ``InlineFunction`` of the same address, made before
/// or after. The batch, its functions, their slots and the hooks installed on them keep the
/// plans; once nothing does and none is patched, their memory goes at a later planning (see
/// <doc:InlineHooks>).
public final class InlineBatch: Sendable, CustomStringConvertible {
    /// How a batch is planned and hooked.
    public struct Options: OptionSet, Sendable, Hashable {
        /// The options' bits.
        public let rawValue: Int
        /// Creates options from their raw bits.
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// Also plan the functions only the library file's full symbol table (`.symtab`) names:
        /// `static` functions and those a version script keeps out of the dynamic symbol
        /// table. A file without one (a stripped library, as Debian ships them) adds nothing.
        /// For ``InlineBatch/init(library:options:)`` only.
        public static let localFunctions = Options(rawValue: 1)
        /// Refuse the whole batch when one function cannot be planned (the initializer throws
        /// its refusal's error), and refuse a hook on the batch when one function cannot be
        /// patched or hooked (the verb throws, and installs nothing).
        public static let allOrNothing = Options(rawValue: 2)
    }

    /// The functions planned, in address order, one per address (a function exported under
    /// several names or versions appears once, under the name its library exports by default).
    public let functions: [InlineFunction]
    /// The functions that could not be planned, each with why, in address order.
    public let refusals: [InlineRefusal]
    /// How the batch was made.
    public let options: Options

    /// Plans every function that the loaded object `library` exports (and, with
    /// ``Options/localFunctions``, those only its file's `.symtab` names).
    ///
    /// `library` is a soname (`"libsqlite3.so.0"`), a file name or a path, as for
    /// ``InlineFunction/init(symbol:in:)``; nothing is loaded. An exported IFUNC symbol
    /// (`memcpy`) is planned at the implementation its resolver picks for this machine; an
    /// older version of one is refused (``InlineRefusal/Reason/indirectFunction``).
    ///
    /// - Throws: ``/FFIHook/HookError`` with ``/FFIHook/HookError/Code-swift.struct/objectNotFound``
    ///   when no loaded object has that name, or, with ``Options/allOrNothing``, the error of the
    ///   first function refused.
    public convenience init(library: String, options: Options = []) throws(HookError) {
        try self.init(options: options) { () throws(HookError) in
            try BatchTargets.exports(of: library, locals: options.contains(.localFunctions))
        }
    }

    /// Plans the functions of the loaded object `library` (as ``init(library:options:)`` finds
    /// them) that `selecting` chooses by name, and only those: a function exported under several
    /// names (`memcmp` and `bcmp`) is chosen when one of them is, and planned once, under the
    /// name ``init(library:options:)`` gives it. Planning is most of a batch's cost, so choosing
    /// first makes a few functions of a large library cheap.
    ///
    /// ```swift
    /// // Only SQLite's statement functions, planned and attached to in one stop.
    /// let steps = try InlineBatch(library: "libsqlite3.so.0") { $0.hasPrefix("sqlite3_step") }
    /// ```
    ///
    /// - Throws: as ``init(library:options:)``.
    public convenience init(
        library: String, options: Options = [], selecting: (String) -> Bool
    ) throws(HookError) {
        let locals = options.contains(.localFunctions)
        let found = withoutActuallyEscaping(selecting) { selecting in
            Result { () throws(HookError) in try BatchTargets.exports(of: library, locals: locals, selecting: selecting)
            }
        }
        try self.init(options: options) { () throws(HookError) in try found.get() }
    }

    /// Plans the functions `symbols` name, each found as ``InlineFunction/init(symbol:in:)``
    /// finds it: in the global scope, or in the loaded object `object`. A symbol that names no
    /// function is refused (``InlineRefusal/Reason/symbolNotFound``); symbols that name one
    /// function (aliases) plan it once.
    ///
    /// - Throws: ``/FFIHook/HookError`` with ``/FFIHook/HookError/Code-swift.struct/objectNotFound``
    ///   when `object` is not loaded, or, with ``Options/allOrNothing``, the error of the first
    ///   function refused.
    public convenience init(symbols: [String], in object: String? = nil, options: Options = []) throws(HookError) {
        try self.init(options: options) { () throws(HookError) in try BatchTargets.symbols(symbols, in: object) }
    }

    /// Plans the functions at `addresses`, each as ``InlineFunction/init(address:)`` does (an
    /// address inside a function, or an IFUNC resolver, is refused).
    ///
    /// - Throws: with ``Options/allOrNothing``, the error of the first function refused.
    public convenience init(addresses: [UnsafeRawPointer], options: Options = []) throws(HookError) {
        try self.init(options: options) { () throws(HookError) in
            BatchTargets.addresses(addresses.map { UInt(bitPattern: $0) })
        }
    }

    /// A batch of functions planned already, to hook or patch them together.
    public init(_ functions: [InlineFunction], options: Options = []) {
        var seen = Set<InlineFunction>()
        self.functions =
            Self.ascending(functions)
            ? functions
            : functions.filter { seen.insert($0).inserted }.sorted {
                UInt(bitPattern: $0.address) < UInt(bitPattern: $1.address)
            }
        self.refusals = []
        self.options = options
    }

    private init(options: Options, targets: () throws(HookError) -> BatchTargets.Found) throws(HookError) {
        let (functions, refusals) = try Self.plan(options: options, targets: targets)
        self.functions = functions
        self.refusals = refusals
        self.options = options
        // Planning a library allocates and frees a few hundred bytes per function (decoding,
        // symbol names), all freed by now: give the peak back rather than keep it resident.
        if functions.count + refusals.count >= Self.trimmedBatchSize { ffh_release_free_memory() }
    }

    /// Whether `functions` are at strictly ascending addresses: then they are in a batch's order
    /// and distinct already (a plan is of one address), with no set or sort needed.
    private static func ascending(_ functions: [InlineFunction]) -> Bool {
        zip(functions, functions.dropFirst()).allSatisfy { $0.plan.record.function < $1.plan.record.function }
    }

    /// How many functions a batch plans at least for the allocator's free memory to be given
    /// back afterwards.
    static let trimmedBatchSize = 256

    /// Finds the targets and plans them: the functions planned and those refused.
    private static func plan(
        options: Options, targets find: () throws(HookError) -> BatchTargets.Found
    ) throws(HookError) -> ([InlineFunction], [InlineRefusal]) {
        let found = try find()
        let targets = found.targets
        let refused = found.refused
        if options.contains(.allOrNothing), let first = refused.first { throw first.error }
        // In address order (neighbours share slabs and pages), the first target given for each
        // address. A library's exports come in that order already.
        var ordered: [PlanTarget] = []
        if targets.indices.dropFirst().allSatisfy({ targets[$0 - 1].address < targets[$0].address }) {
            ordered = targets
        } else {
            let order = targets.indices.sorted { (targets[$0].address, $0) < (targets[$1].address, $1) }
            ordered.reserveCapacity(targets.count)
            for index in order where ordered.last?.address != targets[index].address { ordered.append(targets[index]) }
        }
        let (results, group) = InlinePlanner.plan(ordered)
        var functions: [InlineFunction] = []
        var refusals = refused
        functions.reserveCapacity(ordered.count)
        for (index, result) in results.enumerated() {
            switch result {
            case .success(let plan): functions.append(InlineFunction(plan: plan, group: group, index: index))
            case .failure(let refusal):
                if options.contains(.allOrNothing) { throw refusal.error }
                refusals.append(refusal)
            }
        }
        // Each function once.
        var seen = Set<InlineFunction>()
        return (
            Self.ascending(functions) ? functions : functions.filter { seen.insert($0).inserted },
            refusals.sorted { UInt(bitPattern: $0.address) < UInt(bitPattern: $1.address) }
        )
    }

    // MARK: - Keeping the batch patched

    /// Writes every function's patch that is not in yet, in one stop of the other threads, and
    /// keeps it while nothing is installed (as ``InlineFunction/patch()`` does for one).
    ///
    /// - Returns: the functions whose patch could not be written, each with why
    ///   (``InlineRefusal/Reason/patchFailed``); the others are patched.
    /// - Throws: ``/FFIHook/HookError/Code-swift.struct/calledFromHookBlock`` from a block that
    ///   runs within the library's own install or removal on this thread; with
    ///   ``Options/allOrNothing``, ``/FFIHook/HookError/Code-swift.struct/patchFailed`` when one
    ///   patch could not be written (none is then kept).
    @discardableResult
    public func patch() throws(HookError) -> [InlineRefusal] {
        let refused = try BatchPatching.hold(functions, allOrNothing: options.contains(.allOrNothing))
        // With allOrNothing a refusal has released every hold already. The first in the batch's
        // order is thrown (the refusals are kept by function, in no order).
        if options.contains(.allOrNothing), let first = functions.lazy.compactMap({ refused[$0] }).first {
            throw first.error
        }
        let held = functions.filter { refused[$0] == nil }
        try BatchPatching.release(held, pinning: held)
        return refused.values.sorted { UInt(bitPattern: $0.address) < UInt(bitPattern: $1.address) }
    }

    /// Stops keeping the batch patched: every function with nothing installed gets its bytes
    /// back, in one stop of the other threads; the others when their last hook goes. As for
    /// ``InlineFunction/unpatch()``, this ends the keeping of each function however it began
    /// (through this batch, another, or an ``InlineFunction``).
    ///
    /// - Throws: ``/FFIHook/HookError/Code-swift.struct/calledFromHookBlock`` from a block that
    ///   runs within the library's own install or removal on this thread.
    public func unpatch() throws(HookError) {
        try InlinePatching.withDeferredRemovals { () throws(HookError) in
            try SlotRegistry.shared.withLock { () throws(HookError) in
                for function in functions {
                    InlinePatching.setPinned(function.plan.slab, function.plan.index, false)
                    InlinePatching.cellDidChange(function.plan.slab, function.plan.index)
                }
            }
        }
    }

    /// How many times inline hooks have stopped the process's other threads to write code since
    /// the process started: once per batch written (``patch()``, an install on a batch, a
    /// group's removal), once per single function's patch written or taken out.
    public static var threadStopCount: Int { Int(PatchWriter.stopCount) }

    /// How many functions are planned and refused.
    public var description: String {
        "InlineBatch(\(functions.count) function\(functions.count == 1 ? "" : "s") planned, \(refusals.count) refused)"
    }
}

/// Holding a batch's functions patched while hooks go onto their cells, with one stop.
enum BatchPatching {
    /// Holds every function (so that nothing takes its patch out meanwhile) and writes the
    /// patches not in yet, in one stop. Returns the functions whose patch could not be written
    /// (they are not held). With `allOrNothing`, a failure releases every hold (the written
    /// patches come out again in one stop) before returning.
    static func hold(_ functions: [InlineFunction], allOrNothing: Bool) throws(HookError) -> [InlineFunction:
        InlineRefusal]
    {
        try InlinePatching.withDeferredRemovals { () throws(HookError) -> [InlineFunction: InlineRefusal] in
            try SlotRegistry.shared.withLock { () throws(HookError) -> [InlineFunction: InlineRefusal] in
                var items: [PatchWriter.Item] = []
                var pending: [InlineFunction] = []
                for function in functions {
                    InlinePatching.addHold(function.plan.slab, function.plan.index)
                    if InlinePatching.state(function.plan.slab, function.plan.index) & InlinePatching.patched == 0 {
                        items.append(
                            PatchWriter.Item(slab: function.plan.slab, index: function.plan.index, patching: true))
                        pending.append(function)
                    }
                }
                let outcome = PatchWriter.write(items)
                var refused: [InlineFunction: InlineRefusal] = [:]
                for (function, item) in zip(pending, outcome.items) {
                    guard let failure = outcome.failure ?? item.failure else { continue }
                    refused[function] = InlineRefusal(
                        name: function.name, address: function.plan.record.function, reason: .patchFailed,
                        error: HookError(code: .patchFailed, message: failure, symbol: function.name))
                    InlinePatching.dropHold(function.plan.slab, function.plan.index)
                }
                if allOrNothing && !refused.isEmpty {
                    for function in functions where refused[function] == nil {
                        InlinePatching.dropHold(function.plan.slab, function.plan.index)
                        InlinePatching.cellDidChange(function.plan.slab, function.plan.index)
                    }
                }
                return refused
            }
        }
    }

    /// Drops the holds on `held` that ``hold(_:allOrNothing:)`` took, pinning `pinning` first;
    /// the patches no longer needed come out in one stop.
    static func release(_ held: [InlineFunction], pinning: [InlineFunction] = []) throws(HookError) {
        try InlinePatching.withDeferredRemovals { () throws(HookError) in
            try SlotRegistry.shared.withLock { () throws(HookError) in
                for function in pinning { InlinePatching.setPinned(function.plan.slab, function.plan.index, true) }
                for function in held {
                    InlinePatching.dropHold(function.plan.slab, function.plan.index)
                    InlinePatching.cellDidChange(function.plan.slab, function.plan.index)
                }
            }
        }
    }
}
