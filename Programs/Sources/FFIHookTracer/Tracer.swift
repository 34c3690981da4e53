internal import CTracerSupport
internal import FFIHook
internal import FFIHookInline
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Starts the tracer: called by the library's constructor when the loader maps it.
@_cdecl("ffi_hook_tracer_start")
public func ffiHookTracerStart() {
    Tracer.shared.start()
}

/// Prints the report: called by the library's finalizer at exit, once the start has run.
@_cdecl("ffi_hook_tracer_finish")
public func ffiHookTracerFinish() {
    Tracer.shared.finish()
}

/// Prints the report of a process that `signal` is ending: called by the start library's
/// report thread, which the handler it puts where the signal's action was the default wakes.
@_cdecl("ffi_hook_tracer_finish_signalled")
public func ffiHookTracerFinishSignalled(_ signal: Int32) {
    Tracer.shared.finish(endedBy: signal)
}

/// Prints the table of the calls counted so far, when there are any, and starts counting from
/// zero: called by the start library as the process executes another program (`path`), whose
/// image replaces this one (and traces itself, under the same process ID). Should the exec
/// fail, the process's report at its end counts the calls made after it.
@_cdecl("ffi_hook_tracer_report_before_exec")
public func ffiHookTracerReportBeforeExec(_ path: UnsafePointer<CChar>?) {
    // (The path made a string inside the stretch: a long one is allocated.)
    var path = path
    asOwnWork(&path) { context in
        let path = context!.load(as: UnsafePointer<CChar>?.self)
        Tracer.shared.reportBeforeExec(path.map { String(cString: $0) } ?? "another program")
    }
}

/// Walks the objects loaded (`unloading`: unloaded) since the last walk: called by the start
/// library's `dlopen` and `dlclose` after the loader's, once the tracer has started (see
/// ``fht_loads_are_told()``), on the thread that called them.
@_cdecl("ffi_hook_tracer_loads_changed")
public func ffiHookTracerLoadsChanged(_ unloading: Int32) {
    guard fht_may_follow_loads() != 0 else { return }
    // The walk's calls (the locks it takes, libc's) are the tracer's, not the program's.
    var unloading = unloading
    asOwnWork(&unloading) { context in
        if context!.load(as: Int32.self) != 0 {
            Tracer.shared.objectsUnloaded()
        } else {
            Tracer.shared.objectsLoaded()
        }
    }
}

/// Runs `body(context)`, `context` pointing to the caller's `context`, as a stretch of the
/// tracer's own work: the traced calls it makes are not counted, those of a signal handler that
/// interrupts it are. Begun and ended by a C function (``fht_as_own_work``) whose frame the
/// whole stretch lies below: marked from Swift, the stretch's end ran in a tail call after the
/// marking function's frame was gone, and a handler's call there went uncounted (1 in 15 runs
/// of a loop of `dlopen` and `dlclose` interrupted every 100 µs lost one).
///
/// `body` is a C function, which captures nothing, and what it needs is in `context`, on the
/// caller's stack: nothing is allocated before the stretch or freed after it. (A Swift closure
/// carried into it was boxed on the heap before it and freed after: a program that called
/// neither `malloc` nor `free` was reported with 2 calls of `malloc` and 4 of `free`, the
/// tracer's own, started with `--inline`; 6 and 24 joined.)
func asOwnWork<Context>(_ context: inout Context, _ body: @convention(c) (UnsafeMutableRawPointer?) -> Void) {
    withUnsafeMutablePointer(to: &context) { fht_as_own_work(body, $0) }
}

/// A counter's address, handed to the blocks of every entry of its function.
struct CounterAddress: @unchecked Sendable {
    /// The counter, in memory that is never freed.
    let pointer: UnsafeMutablePointer<fht_counter>
}

/// Where a function traced inline lives: its file's path and its offset from the file's load
/// address (``Tracer/State/counterOwners``).
struct FunctionPlace: Hashable {
    let path: String
    let offset: UInt
}

/// A counter's address as an object: what a function's two counting blocks capture.
private final class CounterBox: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<fht_counter>
    init(_ pointer: UnsafeMutablePointer<fht_counter>) { self.pointer = pointer }
}

/// The tracer of this process: what it attached to and the counters the blocks update.
final class Tracer: Sendable {
    /// The process's tracer.
    static let shared = Tracer()

    struct State {
        var configuration = TracerConfiguration()
        /// Each function's counter by its name (the tracer's table of names, read: see
        /// ``Tracer/counter(named:)``): in import-table mode, the functions chosen so far
        /// (exported by a traced library, selected by a pattern), each given its counter when
        /// chosen.
        var counters: [String: CounterAddress] { Tracer.namedCounters() }
        /// The figures of the functions called at least once, by name: what a report shows (a
        /// name becomes a string only for those, of the thousands a library may export).
        var counted: [(String, fht_counter)] { Tracer.countedFunctions() }
        /// The objects seen by a walk.
        var seen: Set<String> = []
        /// Their sonames or file names, for a `--library` that names none of them.
        var seenNames: Set<String> = []
        /// The `--library` names some object answered to.
        var matchedNames: Set<String> = []
        /// The import-table symbols of each object in scope seen so far (not kept with
        /// ``TracerConfiguration/Scope/all``, whose groups look at every object themselves). Each
        /// object is attached to once for the functions chosen when it is first seen, then for
        /// functions chosen since, which it cannot have been attached to.
        var imports: [String: [String]] = [:]
        /// The objects of ``imports`` that import each name that had no counter when they were
        /// first seen, by key: a walk that chose new functions finds the objects seen before
        /// whose tables lead to them here, rather than by asking about every name those objects
        /// import (Python's interpreter imports hundreds of the C library's functions, and each
        /// extension module it loads may choose a few more).
        var importers: [String: [String]] = [:]
        /// The objects seen so far, by load bias, without their exports and imports: a walk takes
        /// one still loaded at its address under its path as it is (``LoadedImage/current(details:keeps:known:)``).
        var known: [UInt: LoadedImage] = [:]
        /// In the import-table scopes: the traced libraries loaded now, in the order they were
        /// first seen, whose exports are looked up only for the names objects in scope import.
        var tracedLibraries: [TracedLibrary] = []
        /// The objects whose calls are not counted (``TracerConfiguration/Scope/program``).
        var excluded: Set<String> = []
        /// The groups that look at every object (following dlopen and dlclose, and those of
        /// ``TracerConfiguration/Scope/all``): kept for the life of the process (dropping one
        /// would not remove it).
        var groups: [HookGroupToken] = []
        /// The groups of one object each (its import table, or its code inline), by
        /// ``LoadedImage/key``: removed when the object is unloaded (a program that loads and
        /// unloads a plugin in a loop kept a group of each load, 10 KB a cycle for libz's own
        /// calls through its table, 157 KB inline).
        var objectGroups: [String: [HookGroupToken]] = [:]
        /// Inline mode: the batch of each library traced in its own code (by
        /// ``LoadedImage/key``), kept with its hooks.
        var batches: [String: InlineBatch] = [:]
        /// Inline mode: the function each counter's name was given to, by its file's path and
        /// its offset there, so that two functions of one name (local functions of two files,
        /// or the same library in two copies) get counters of their own. Kept when the library
        /// is unloaded: a function keeps its row, whatever else is loaded and unloaded
        /// meanwhile, and the same file loaded again counts in the same rows.
        var counterOwners: [String: FunctionPlace] = [:]
        /// The loader's counts of loads and unloads (``fht_load_counts``) when the objects were
        /// last walked after a `dlopen` and a `dlclose`: a call that changed neither (the
        /// library's own walks pin objects with both) needs no walk.
        var loadsWalked: UInt64 = 0
        var unloadsWalked: UInt64 = 0
        /// The loader's count of unloads as the walk under way began, and as the last walk that
        /// looked for objects loaded again at their old address (``forgetReloaded(_:)``) did:
        /// while it stays, no object can have been.
        var unloadsNow: UInt64 = 0
        var unloadsCheckedForReloads: UInt64 = 0
        /// Problems already reported, so that each is said once.
        var reported: Set<String> = []
        /// The files of this library and of the start library, never traced.
        var tracerPaths: Set<String> = []
        /// The clock at the start, for converting ticks to nanoseconds.
        var startTicks: UInt64 = 0
        /// The clock when the counters were zeroed at the start: the event outputs begin there.
        var countingTicks: UInt64 = 0
        var startNanoseconds: UInt64 = 0
        /// The attached calls that had gone straight through when the start was done (see
        /// ``missedCalls``).
        var passedAtStart = 0
        /// The attached calls whose leave blocks had been skipped (nested too deep) when the
        /// start was done (see ``TraceReport/tooDeepCalls``).
        var skippedAtStart = 0
        /// Those of them the tracer's own work after a `dlopen` made (its walk calls functions
        /// it may trace).
        var passedInUpdates = 0
        var started = false
        var finished = false
        /// The signal ending the process whose report is made, 0 for an exit.
        var endedBy: Int32 = 0
        /// Set by the leave that removes a joined process's hooks, so that a second one (the
        /// joiner's, and the watch's when the joiner died during it) does nothing.
        var leaving = false
        /// Set by the report when a `--library` name answered to no object (a joined process's
        /// leave returns ``JoinResult/leftWithProblems`` then).
        var reportedUnmatched = false
    }

    let state = Mutex(State())

    // MARK: - Start

    /// Reads the configuration, attaches to the chosen functions of the objects loaded now,
    /// and follows later loads.
    func start() {
        // What the start makes the C library and the loader do on this thread is the tracer's:
        // neither counted nor recorded (the counters are zeroed at its end for other threads;
        // the events files would otherwise hold calls the table does not). The configuration
        // is read inside too: its strings are freed after the hooks are in.
        var tracer = self
        asOwnWork(&tracer) { context in
            let (configuration, problems) = TracerConfiguration.fromEnvironment()
            context!.load(as: Tracer.self).start(configuration, problems: problems)
        }
    }

    /// Starts with `configuration` (from the environment, or given to a joined process),
    /// saying `problems` first; does nothing once started. Called in a stretch of the tracer's
    /// own work (``asOwnWork(_:_:)``).
    func start(_ configuration: TracerConfiguration, problems: [String]) {
        if let path = configuration.outputPath {
            TracerOutput.redirect(to: path)
        } else {
            TracerOutput.keepStandardError()
        }
        for problem in problems { say(problem) }
        state.withLock { state in
            guard !state.started else { return }
            state.started = true
            state.configuration = configuration
            state.startTicks = fht_ticks()
            state.startNanoseconds = fht_monotonic_nanoseconds()
        }
        fht_install_process_handlers()
        Self.forkHandler
        guard !configuration.libraries.isEmpty else { return }
        fht_register_barriers()
        configuration.events.arm()
        let tracer = Self.tracerPaths()
        state.withLock { state in
            state.tracerPaths = tracer
            if configuration.scope == .program {
                let images = LoadedImage.current { _ in [] }
                let brought = LoadedImage.broughtByProgram(images, tracer: tracer)
                state.excluded = Set(images.map(\.key)).subtracting(brought)
            }
            // The counts before the first walk: a load after them is walked again at its dlopen.
            var loads: UInt64 = 0
            var unloads: UInt64 = 0
            fht_load_counts(&loads, &unloads)
            state.loadsWalked = loads
            state.unloadsWalked = unloads
            update(&state)
        }
        // Every scope follows later loads: the executable's own entries may lead to a library
        // loaded later (a weak import that `dlopen` with RTLD_GLOBAL binds). And unloads: a
        // library loaded again after `dlclose` is new, at the same address or not.
        // One group for both (one walk of every object at the start). Unless the start library
        // tells of loads: its dlopen and dlclose are the ones every object calls.
        if fht_loads_are_told() == 0 {
            followLoads()
        }
        // What the start itself made libc and the loader do is not the program's (nor, for the
        // event outputs, what was recorded before: the start's, and an earlier join's).
        fht_reset_counters()
        let countingFrom = fht_ticks()
        CallLog.shared?.begin()
        state.withLock {
            // (Under the lock: see ``afterLoaderAsOwnWork(unloading:)``.)
            $0.passedAtStart = Self.passedThroughCalls
            $0.skippedAtStart = Self.skippedLeaves
            $0.countingTicks = countingFrom
        }
    }

    /// Hooks `dlopen` and `dlclose` in every object's import table, those loaded later too, to
    /// walk the objects after each.
    private func followLoads() {
        do {
            // Not for a load or an unload of the tracer's own work (a walk that pins objects),
            // which may hold the lock the walk takes on this very thread (as the start library's
            // calls are told, ``ffiHookTracerLoadsChanged(_:)``): the block of an earlier join's
            // hook, which that join's follower had put back for a moment after its leave, ran
            // as the next join's start pinned objects, and locked the state the start held.
            let loaded: LeaveBlock = { _ in
                if fht_may_follow_loads() != 0 { Tracer.shared.objectsLoaded() }
            }
            let unloaded: LeaveBlock = { _ in
                if fht_may_follow_loads() != 0 { Tracer.shared.objectsUnloaded() }
            }
            let blocks: (String) -> (onEnter: EnterBlock?, onLeave: LeaveBlock?) = { symbol in
                (nil, symbol == "dlopen" ? loaded : unloaded)
            }
            let follower = try ImportTable.attach(
                symbols: ["dlopen", "dlclose"], in: .allIncludingLaterLoads, options: [], blocks: blocks)
            state.withLock { $0.groups.append(follower) }
        } catch {
            say("cannot follow dlopen and dlclose: \(error)")
        }
    }

    /// The attached calls that went straight to their function so far because a block of the
    /// tracer ran on their thread (made by a signal handler that interrupted the block, or by
    /// the block itself); not those the hooking library's own work made, which are not the
    /// program's.
    private static var passedThroughCalls: Int {
        guard let statistics = try? Hook.statistics else { return 0 }
        return statistics.programPassedCallCount
    }

    /// The attached calls whose leave blocks were skipped because they were nested deeper than
    /// their thread's side stack holds, since the process started.
    private static var skippedLeaves: Int {
        guard let statistics = try? Hook.statistics else { return 0 }
        return statistics.skippedLeaveCount
    }

    /// Called after each `dlopen` returns (inside a block, so the tracer's own calls are not
    /// counted): attaches in the objects loaded since and to the functions of traced
    /// libraries loaded since.
    fileprivate func objectsLoaded() {
        afterLoader(unloading: false)
    }

    /// Called after each `dlclose` returns: forgets the objects no longer loaded, so that one
    /// loaded again is attached to as new (its import tables and code are new), and removes
    /// their groups (which write nothing where the object was). Inline, its functions keep
    /// their rows (``State/counterOwners``): the same file loaded again counts in them.
    fileprivate func objectsUnloaded() {
        afterLoader(unloading: true)
    }

    /// ``objectsUnloaded()``'s work on the state.
    private static func forgetUnloaded(_ state: inout State) {
        // An object seen is gone when no object is loaded at its address under its path (the
        // keys compared by address: no key of the objects still loaded is hashed).
        var loaded: [UInt: String] = [:]
        for image in LoadedImage.current(details: { _ in [] }, known: state.known) {
            loaded[image.base] = image.key
        }
        var gone = Set(state.known.values.lazy.filter { loaded[$0.base] != $0.key }.map(\.key))
        if state.seen.count != state.known.count {
            // (Seen but not known: not expected, each seen object is known; looked at as before.)
            gone.formUnion(state.seen.subtracting(loaded.values))
        }
        forget(gone, &state)
    }

    /// Forgets the objects of `keys` (unloaded): a walk takes one loaded again as new.
    private static func forget(_ keys: Set<String>, _ state: inout State) {
        guard !keys.isEmpty else { return }
        state.seen.subtract(keys)
        // (Each key found by comparing, not hashing, the known objects' keys: a few keys go at a
        // time, and hundreds of objects may be known.)
        for key in keys {
            if let base = state.known.first(where: { $0.value.key == key })?.key { state.known[base] = nil }
        }
        state.tracedLibraries.removeAll { keys.contains($0.key) }
        for key in keys {
            for group in state.objectGroups.removeValue(forKey: key) ?? [] { group.remove() }
            for name in state.imports.removeValue(forKey: key) ?? [] {
                state.importers[name]?.removeAll { $0 == key }
                if state.importers[name]?.isEmpty == true { state.importers[name] = nil }
            }
            state.batches[key] = nil
        }
    }

    /// Forgets the objects unloaded by another thread's `dlclose` and loaded again at the same
    /// address (the same key) by a `dlopen` whose walk came first, before the walk after the
    /// `dlclose` forgot them: the libraries traced inline whose code no longer holds the
    /// patches, and the objects whose import table no longer leads to the tracer's attaches (or
    /// is no longer mapped). Their new copy's calls went untraced (a loop of threads loading and
    /// unloading libsqlite3 inline lost a third of them now and then; four threads loading,
    /// calling and unloading a library through its import table, 4 in 1,000).
    private static func forgetReloaded(_ state: inout State) {
        var reloaded: Set<String> = []
        for (key, batch) in state.batches where batch.functions.first.map({ !$0.holdsItsCode }) ?? false {
            reloaded.insert(key)
        }
        // An import table is looked at only when something was unloaded since the last look (or
        // the loader counts no unloads): one entry of each object's first group tells, as the
        // loader fills a new copy's table whole. An object whose entry is no longer mapped is
        // gone (unloaded by a dlclose the start library did not see, and not loaded again yet):
        // it is forgotten now, or a later walk, with no unload since this one, would take a
        // copy loaded again at its address for it.
        if state.unloadsNow == 0 || state.unloadsNow != state.unloadsCheckedForReloads {
            state.unloadsCheckedForReloads = state.unloadsNow
            for (key, groups) in state.objectGroups where state.batches[key] == nil {
                if let token = groups.first?.tokens.first, token.isActive, token.holdsItsSlot != true {
                    reloaded.insert(key)
                }
            }
        }
        forget(reloaded, &state)
    }

    /// Walks the objects after a call of the loader (``update(_:)``; ``forgetUnloaded(_:)`` for
    /// `unloading`), as the tracer's own work (calls the walk and the planning make of traced
    /// functions are not the program's), when the loader's count of loads (of unloads) moved
    /// since the last time: not for the calls that loaded or unloaded nothing (the library's
    /// own walks pin objects with `dlopen` and `dlclose`). A loader that counts no load at all
    /// walks every time.
    private func afterLoader(unloading: Bool) {
        // (Nested in the start's own, or the walk's, which it gives back at its end.)
        var call = (tracer: self, unloading: unloading)
        asOwnWork(&call) { context in
            let call = context!.load(as: (tracer: Tracer, unloading: Bool).self)
            call.tracer.afterLoaderAsOwnWork(unloading: call.unloading)
        }
    }

    /// ``afterLoader(unloading:)``, run as the tracer's own work.
    private func afterLoaderAsOwnWork(unloading: Bool) {
        var loads: UInt64 = 0
        var unloads: UInt64 = 0
        fht_load_counts(&loads, &unloads)
        let (count, walked) = unloading ? (unloads, \State.unloadsWalked) : (loads, \State.loadsWalked)
        state.withLock { state in
            guard !state.finished, loads == 0 || count != state[keyPath: walked] else { return }
            state[keyPath: walked] = count
            state.unloadsNow = unloads
            // The calls that went straight through meanwhile are the walk's own, accounted
            // under the lock that the report's reading of the count takes too: a report made
            // while a walk runs (a joined process loading in a loop) waits for the walk and its
            // account, and does not take the walk's calls as the program's.
            let before = Self.passedThroughCalls
            if unloading {
                Self.forgetUnloaded(&state)
            } else {
                update(&state)
            }
            state.passedInUpdates += Self.passedThroughCalls - before
        }
    }

    /// Walks the loaded objects, reads the exports of traced libraries and the imports of
    /// objects in scope not seen before, and attaches to what is not attached yet.
    private func update(_ state: inout State) {
        Self.forgetReloaded(&state)
        let configuration = state.configuration
        let seen = state.seen
        let excluded = state.excluded
        let tracer = state.tracerPaths
        // (Under `all`, every object but the tracer's own two libraries: every call through
        // their tables is the tracer's own work, never counted, and each would be told apart
        // from a signal handler's call by a look down the stack.)
        let isInScope = { (image: LoadedImage) -> Bool in
            switch configuration.scope {
            case .main: image.isMainProgram
            case .program: !excluded.contains(image.key)
            case .all: !tracer.contains(image.path)
            }
        }
        // The `--library` names each new object answers to, found once (the match may resolve
        // the object's symbolic links).
        var namingByKey: [String: [String]] = [:]
        // Only the names --symbols selects are kept of exports and imports: the functions traced
        // are among them, and a function imported under another name has no counter.
        let images = LoadedImage.current(
            details: { image in
                guard !seen.contains(image.key) else { return [] }
                var details: LoadedImage.Details = []
                let naming = configuration.libraries(naming: image.path, soname: image.soname)
                namingByKey[image.key] = naming
                // The exports chosen are those that objects in scope import, read in a second
                // walk; inline, no import table is attached to.
                if !configuration.inline, isInScope(image) { details.insert(.imports) }
                return details
            }, keeps: configuration.selects(cString:), known: state.known)
        // Only what is new is looked at: the functions of the traced libraries loaded since the
        // last walk in every object, every function in the objects loaded since (a program that
        // loads many objects would otherwise pay for all of them at each dlopen).
        // The functions chosen in the objects loaded since the last walk, with the counters they
        // got then (each is chosen once: when it first gets its counter).
        var added: [Chosen] = []
        var newImages: Set<String> = []
        var exhausted = false
        // Gives each of `functions` its counter, keeping those made now.
        func choose(_ functions: [String], _ state: inout State) {
            added.reserveCapacity(added.count + functions.count)
            for function in functions where !exhausted {
                // One lookup of the name, which makes its counter when it has none.
                guard let (counter, made) = Self.counter(naming: function, kindOf: function) else {
                    exhausted = true
                    report("out of counters; \(function) and later functions are not traced", &state)
                    break
                }
                if made { added.append(Chosen(name: function, counter: counter)) }
            }
        }
        // The traced libraries first seen in this walk.
        var newTraced: [String] = []
        // The objects the program brought, found once a new object answers to a name: one that
        // only the tracer brought (libffi, say) is traced, but answers to no `--library` of the
        // program's.
        var brought: Set<String>?
        for image in images where !image.isKnown && !seen.contains(image.key) {
            newImages.insert(image.key)
            state.seen.insert(image.key)
            var known = image
            known.exports = []
            known.imports = []
            state.known[image.base] = known
            if !image.isMainProgram { state.seenNames.insert(image.name) }
            if !configuration.inline, isInScope(image) {
                state.imports[image.key] = image.imports
            }
            let naming = namingByKey[image.key] ?? configuration.libraries(naming: image.path, soname: image.soname)
            guard !naming.isEmpty else { continue }
            if brought == nil { brought = LoadedImage.broughtByProgram(images, tracer: state.tracerPaths) }
            if brought?.contains(image.key) == true { state.matchedNames.formUnion(naming) }
            if let reason = Self.untraceable(image, state) {
                report("\(image.name) is not traced: \(reason)", &state)
                continue
            }
            if configuration.inline {
                traceInline(image, &state)
                continue
            }
            var low: UInt = 0
            var high: UInt = 0
            state.tracedLibraries.append(
                TracedLibrary(
                    key: image.key, path: image.path, base: image.base, name: image.name,
                    span: fht_object_span(image.base, &low, &high) != 0 ? low..<high : nil))
            newTraced.append(image.key)
        }
        if !configuration.inline, !state.tracedLibraries.isEmpty {
            chooseImported(newTraced: newTraced, newImages: newImages, &state, choose)
        }
        // The new objects' names that still have no counter go to the index of importers: only
        // those can be chosen by a later walk (a name keeps the counter it gets), so a name
        // chosen now needs no entry. (SQLite loaded by `dlopen` imports 1,222 functions of its
        // own, all chosen in the walk that first sees it: their entries, one array each, made
        // the index cost a tenth of that walk.)
        if !configuration.inline {
            for image in images where newImages.contains(image.key) {
                for name in state.imports[image.key] ?? [] where Self.counter(named: name) == nil {
                    state.importers[name, default: []].append(image.key)
                }
            }
        }
        // The objects seen before that import a function chosen now, each with those functions
        // (found through the index of importers, made the first time an object seen before is
        // looked at: not by asking for every name every such object imports).
        var addedByObject: [String: [Chosen]]?
        // The functions each object's table leads to and that are not attached to there yet: the
        // chosen functions in the objects seen first now, those chosen now in the others.
        func wanted(in image: LoadedImage) -> [Chosen] {
            if !image.isKnown && newImages.contains(image.key) {
                // The walk names each import-table symbol of an object once.
                return (state.imports[image.key] ?? []).compactMap { name in
                    Self.counter(named: name).map { Chosen(name: name, counter: $0) }
                }
            }
            guard !added.isEmpty else { return [] }
            if addedByObject == nil {
                var byObject: [String: [Chosen]] = [:]
                for chosen in added {
                    for key in state.importers[chosen.name] ?? [] where !newImages.contains(key) {
                        byObject[key, default: []].append(chosen)
                    }
                }
                addedByObject = byObject
            }
            return addedByObject?[image.key] ?? []
        }
        // Inline, the counters are those of functions patched in their own code, not imports.
        guard !configuration.inline else { return }
        // Each object in scope gets its own group (`.all` too: the tracer walks at every load
        // and unload, which the start library tells it of, rather than the hooking library's
        // groups that follow loads, which learn of them through hooks on `dlopen` in every
        // object's table and miss a `dlopen` called through its address).
        for image in images where !(image.isKnown && added.isEmpty) && isInScope(image) {
            let wanted = wanted(in: image)
            guard !wanted.isEmpty else { continue }
            attach(
                wanted, in: image.isMainProgram ? .mainProgram : .object(image.path), named: image.name,
                object: image.key, &state)
        }
    }

    /// Chooses the functions the traced libraries export that the objects in scope import (the
    /// imports read are those --symbols selects), looking each name up in each library's symbol
    /// hash table (libc exports 2,900 functions, a program imports a few dozen). A new traced
    /// library is asked about every import of every object in scope that has no counter; a new
    /// object's imports that have no counter are asked of every traced library.
    private func chooseImported(
        newTraced: [String], newImages: Set<String>, _ state: inout State,
        _ choose: ([String], inout State) -> Void
    ) {
        let sources = newTraced.isEmpty ? newImages.compactMap { state.imports[$0] } : Array(state.imports.values)
        // The names without a counter, as the objects list them: a name two objects import is
        // asked about twice, which costs a lookup in the library's hash table, less than
        // hashing every name into a set to ask once (each name chosen gets its counter once).
        var names: [String] = []
        names.reserveCapacity(sources.reduce(0) { $0 + $1.count })
        for source in sources {
            for name in source where Self.counter(named: name) == nil { names.append(name) }
        }
        guard !names.isEmpty || !newTraced.isEmpty else { return }
        let fresh = Set(newTraced)
        var found = [UInt8](repeating: 0, count: names.count)
        Self.withCStrings(names) { pointers in
            for library in state.tracedLibraries {
                for index in found.indices { found[index] = 0 }
                guard fht_find_exports(library.path, library.base, pointers, names.count, &found) != 0 else { continue }
                let exported = names.indices.filter { found[$0] != 0 }.map { names[$0] }
                // A name found is one --symbols selects: only a new library that exports none
                // of those asked about has its exports read, for the report.
                if fresh.contains(library.key), exported.isEmpty, !Self.exportsSelected(library, state.configuration) {
                    report("\(library.name) exports no function that --symbols selects", &state)
                }
                choose(exported, &state)
            }
        }
    }

    /// A traced library, as the import-table scopes look up its exports.
    struct TracedLibrary {
        let key: String
        /// The path the loader knows it by and its load bias.
        let path: String
        let base: UInt
        /// Its name for messages.
        let name: String
        /// The addresses it maps (nil when they could not be read): an import-table entry is
        /// attached only where it leads into one of the traced libraries.
        var span: Range<UInt>? = nil
    }

    /// Calls `body` with `strings` as an array of C strings, valid during the call.
    private static func withCStrings<Result>(
        _ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>>) -> Result
    ) -> Result {
        // One buffer: each string's bytes and a NUL, then the pointers into it (and an empty
        // string after them: neither array is empty, so both have an address).
        var bytes: [UInt8] = []
        bytes.reserveCapacity(strings.reduce(1) { $0 + $1.utf8.count + 1 })
        var offsets: [Int] = []
        offsets.reserveCapacity(strings.count + 1)
        for string in strings {
            offsets.append(bytes.count)
            bytes.append(contentsOf: string.utf8)
            bytes.append(0)
        }
        offsets.append(bytes.count)
        bytes.append(0)
        return bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { characters in
                let base = characters.baseAddress!
                let pointers = offsets.map { base + $0 }
                return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
            }
        }
    }

    /// Whether `library` (loaded now) exports a function that --symbols selects: its exports
    /// read until one is.
    private static func exportsSelected(_ library: TracedLibrary, _ configuration: TracerConfiguration) -> Bool {
        final class Answer {
            @exclusivity(unchecked) var selecting = false
        }
        let answer = Answer()
        _ = LoadedImage.current(
            details: { $0.key == library.key ? .exports : [] },
            keeps: { name in
                if !answer.selecting, configuration.selects(cString: name) { answer.selecting = true }
                return false
            })
        return answer.selecting
    }

    /// A function chosen for tracing and its counter.
    struct Chosen {
        let name: String
        let counter: CounterAddress
    }

    /// The counter of the function `name`, nil when it has none.
    private static func counter(named name: String) -> CounterAddress? {
        withCharacters(of: name) { fht_counter_named($0, $1) }.map(CounterAddress.init(pointer:))
    }

    /// The counter of the function `name`, made when it has none (given the kind of the
    /// function `function`, see ``kind(of:)``), and whether it was made now; nil when no
    /// counter is left.
    private static func counter(naming name: String, kindOf function: String) -> (CounterAddress, made: Bool)? {
        var made: Int32 = 0
        guard let counter = withCharacters(of: name, { fht_counter_naming($0, $1, &made) }) else { return nil }
        if made != 0 { setKind(of: counter, function: function) }
        return (CounterAddress(pointer: counter), made != 0)
    }

    /// Every function's counter by its name, from the tracer's table of names.
    static func namedCounters() -> [String: CounterAddress] {
        let count = fht_named_count()
        var counters: [String: CounterAddress] = [:]
        counters.reserveCapacity(count)
        for index in 0..<count {
            var length = 0
            var counter: UnsafeMutablePointer<fht_counter>?
            let name = fht_named_at(index, &length, &counter)
            let string = String(
                decoding: UnsafeRawBufferPointer(start: name, count: length).bindMemory(to: UInt8.self), as: UTF8.self)
            if let counter { counters[string] = CounterAddress(pointer: counter) }
        }
        return counters
    }

    /// See ``State/counted``.
    static func countedFunctions() -> [(String, fht_counter)] {
        var counted: [(String, fht_counter)] = []
        for index in 0..<fht_named_count() {
            var length = 0
            var counter: UnsafeMutablePointer<fht_counter>?
            let name = fht_named_at(index, &length, &counter)
            guard let counter else { continue }
            let figures = fht_read(counter)
            guard figures.calls > 0 else { continue }
            let string = String(
                decoding: UnsafeRawBufferPointer(start: name, count: length).bindMemory(to: UInt8.self), as: UTF8.self)
            counted.append((string, figures))
        }
        return counted
    }

    /// Calls `body` with the bytes of `name` as C characters (not NUL-terminated) and their count.
    private static func withCharacters<Result>(
        of name: String, _ body: (UnsafePointer<CChar>, Int) -> Result
    ) -> Result {
        name.withCString { body($0, name.utf8.count) }
    }

    /// Where a group's request for blocks is in the list of chosen functions.
    private final class Cursor {
        // Unchecked: used by the attaching thread alone, during the attach.
        @exclusivity(unchecked) var next = 0
    }

    /// Attaches to the `chosen` functions in `scope` as one group; when the group cannot be
    /// made, one function at a time, reporting those that fail.
    private func attach(
        _ chosen: [Chosen], in scope: ImportScope, named name: String, object: String?, _ state: inout State
    ) {
        guard !chosen.isEmpty else { return }
        let records = state.configuration.events.isEnabled
        // The group asks for each symbol's blocks in the order of the list (a name listed twice
        // once): the next symbol's counter is looked up by name only when it asks otherwise.
        let cursor = Cursor()
        let counter = { (symbol: String) -> CounterAddress? in
            let next = cursor.next
            if next < chosen.count && chosen[next].name == symbol {
                cursor.next = next + 1
                return chosen[next].counter
            }
            return Self.counter(named: symbol)
        }
        let blocks: (String) -> (onEnter: EnterBlock?, onLeave: LeaveBlock?) = { symbol in
            guard let counter = counter(symbol) else { return (nil, nil) }
            return Self.blocks(counting: counter, named: symbol, recording: records)
        }
        // Without events or a log, the blocks only count: C functions, with no Swift closure on
        // the call.
        let countsOnly = !records && CallLog.shared == nil
        let functions = { (symbol: String) -> AttachFunctions? in counter(symbol).map(Self.countingFunctions) }
        // Only the entries that lead into a traced library: where another object exports a
        // name too (a second copy of the library, loaded under another name; an interposed
        // function), an entry bound to that one is not the traced library's call. (A library
        // whose span could not be read lets every entry of its names through, as before.)
        let spans = state.tracedLibraries.compactMap(\.span)
        var leadingTo: (@Sendable (UnsafeRawPointer) -> Bool)?
        if spans.count == state.tracedLibraries.count {
            leadingTo = { function in Self.leads(function, into: spans) }
        }
        let attachGroup = { (symbols: [String]) throws(HookError) -> HookGroupToken in
            if countsOnly {
                return try ImportTable.attach(
                    symbols: symbols, in: scope, options: .allowsReentry, leadingTo: leadingTo, functions: functions)
            }
            return try ImportTable.attach(
                symbols: symbols, in: scope, options: .allowsReentry, leadingTo: leadingTo, blocks: blocks)
        }
        let symbols = chosen.map(\.name)
        let keep = { (group: HookGroupToken, state: inout State) in
            if let object { state.objectGroups[object, default: []].append(group) } else { state.groups.append(group) }
        }
        do {
            keep(try attachGroup(symbols), &state)
        } catch {
            // None of the object's entries of these names leads into a traced library (another
            // object exports them, and the object is bound there): nothing to count.
            if error.code == .symbolNotImported, leadingTo != nil { return }
            // The object was unloaded by another thread since the walk that saw it: said once,
            // not for each of its functions.
            if error.code == .objectNotFound, object != nil {
                report(
                    "\(name) was unloaded while its imports were hooked: not traced until it is loaded again", &state)
                return
            }
            for symbol in symbols {
                do {
                    keep(try attachGroup([symbol]), &state)
                } catch {
                    if error.code == .symbolNotImported, leadingTo != nil { continue }
                    report("\(symbol) in \(name): \(error)", &state)
                }
            }
        }
    }

    /// Whether `function` lies in one of `spans` (a traced library's).
    private static func leads(_ function: UnsafeRawPointer, into spans: [Range<UInt>]) -> Bool {
        let address = UInt(bitPattern: function)
        return spans.contains { $0.contains(address) }
    }

    /// The blocks that count a function's calls into `counter` (see ``blocks(counting:named:recording:)``)
    /// as C functions, for an attach with neither events nor a log.
    private static func countingFunctions(_ counter: CounterAddress) -> AttachFunctions {
        AttachFunctions(
            onEnter: fht_enter_function, onLeave: fht_leave_function, context: UnsafeMutableRawPointer(counter.pointer))
    }

    /// The blocks that count a function's calls into `counter`: its calls, their times, and
    /// its calls in flight on each thread (by the stack pointer at entry, which tells a
    /// recursive or tail call from an abandoned one).
    /// With `recording`, they also record each call's begin and end for the event outputs
    /// (``EventOutputs``); with a log, they also log each call of `name` (``CallLog``).
    private static func blocks(
        counting counter: CounterAddress, named name: String, recording: Bool
    ) -> (onEnter: EnterBlock?, onLeave: LeaveBlock?) {
        let blocks: (onEnter: EnterBlock?, onLeave: LeaveBlock?)
        if recording {
            blocks = EventOutputs.recordingBlocks(counter)
        } else {
            // Both capture one object holding the address, which serves as the context of both:
            // one allocation for the pair (a thousand functions attach at a `dlopen`).
            let box = CounterBox(counter.pointer)
            let onEnter: EnterBlock = { context in fht_enter(box.pointer, UInt64(context.stackPointer)) }
            let onLeave: LeaveBlock = { context in fht_leave(box.pointer, UInt64(context.stackPointer)) }
            blocks = (onEnter, onLeave)
        }
        // Not `??`: through a generic the blocks would come back wrapped in conversion thunks,
        // two more calls on every traced call.
        if let log = CallLog.shared { return log.blocks(wrapping: blocks, function: name) }
        return blocks
    }

    // MARK: - Inline

    /// The functions the compiler's start and end files put in every object (its constructors
    /// and finalizers' scaffolding, which the symbol table names as local functions): not the
    /// library's own code, and run by the loader around the program, so not traced inline.
    static let startupCode: Set<String> = [
        "_init", "_fini", "deregister_tm_clones", "register_tm_clones", "__do_global_dtors_aux", "frame_dummy",
        "__do_global_ctors_aux", "call_weak_fn",
    ]

    /// Whether `name` is one of ``startupCode``: a library's thousands of names are asked about
    /// at a `dlopen`, and most are told apart by their first byte, without a hash.
    static func isStartupCode(_ name: String) -> Bool {
        switch name.utf8.first {
        case UInt8(ascii: "_"), UInt8(ascii: "c"), UInt8(ascii: "d"), UInt8(ascii: "f"), UInt8(ascii: "r"):
            startupCode.contains(name)
        default: false
        }
    }

    /// The name each of `functions` is reported under when the batch named it otherwise than
    /// `--symbols` chose it: a function with several names (libc's `index` and `strchr`, one
    /// address) is planned under one of them, and `--symbols strchr` must report `strchr`.
    /// The selected names that are no function's name are looked up in the library (`dlsym`,
    /// which binds an IFUNC to the code the batch plans); local functions have one name each.
    /// `handle` is the object's, opened on first use.
    private static func selectedNames(
        _ selected: [String], of functions: [InlineFunction], named functionNames: [String], in path: String,
        handle: inout UnsafeMutableRawPointer?
    ) -> [UInt: String] {
        guard !selected.isEmpty else { return [:] }
        let named = Set(functionNames)
        let chosen = Set(selected)
        let others = chosen.subtracting(named).sorted()
        guard !others.isEmpty else { return [:] }
        if handle == nil { handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD) }
        guard let handle else { return [:] }
        let unselected = Set(
            zip(functions, functionNames).filter { !chosen.contains($0.1) }.map { UInt(bitPattern: $0.0.address) })
        var names: [UInt: String] = [:]
        for name in others {
            guard let address = dlsym(handle, name).map({ UInt(bitPattern: $0) }), unselected.contains(address),
                names[address] == nil
            else { continue }
            names[address] = name
        }
        return names
    }

    /// Whether the loader binds `name` in the object at `path` to `address` (`dlsym`; an
    /// IFUNC's to the code its resolver picks). `handle` is the object's, opened on first use.
    private static func loaderBinds(
        _ name: String, to address: UInt, in path: String, handle: inout UnsafeMutableRawPointer?
    ) -> Bool {
        if handle == nil { handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD) }
        guard let handle, let bound = dlsym(handle, name) else { return false }
        return UInt(bitPattern: bound) == address
    }

    /// Traces every function of `image` in its own code: plans the library as one batch
    /// (exports, and local functions its `.symtab` names), keeps those `--symbols` selects,
    /// and attaches to them in one stop of the other threads.
    private func traceInline(_ image: LoadedImage, _ state: inout State) {
        let batch: InlineBatch
        let configuration = state.configuration
        // The names --symbols selected, for a function with several (see `reportedName`).
        var selected: [String] = []
        do {
            // Only the functions --symbols selects are planned (planning is most of the cost);
            // a function with several names is selected by any of them.
            batch = try InlineBatch(library: image.path, options: .localFunctions) { name in
                let chosen = !Self.isStartupCode(name) && configuration.selects(symbol: name)
                if chosen && !configuration.symbolPatterns.isEmpty { selected.append(name) }
                return chosen
            }
        } catch {
            // Unloaded by another thread since the walk that saw it.
            if error.code == .objectNotFound {
                reportUnloaded(image, while: "listed", &state)
            } else {
                report("\(image.name): cannot trace in its own code: \(error)", &state)
            }
            return
        }
        // Each function's name, made once (from the batch's packed names).
        var chosen: [InlineFunction] = []
        var chosenNames: [String] = []
        chosen.reserveCapacity(batch.functions.count)
        chosenNames.reserveCapacity(batch.functions.count)
        for function in batch.functions {
            let name = function.name
            guard !Self.isStartupCode(name) else { continue }
            chosen.append(function)
            chosenNames.append(name)
        }
        // The object's handle, for `dlsym`, opened when first needed (by a name --symbols
        // selected, or two functions named alike).
        var handle: UnsafeMutableRawPointer?
        defer { if let handle { dlclose(handle) } }
        let reportedName = Self.selectedNames(
            selected, of: chosen, named: chosenNames, in: image.path, handle: &handle)
        // Every function refused as not in code: the library was unloaded while it was planned
        // (another thread's dlclose). The walk after that dlclose forgets it.
        if batch.functions.isEmpty && !batch.refusals.isEmpty && batch.refusals.allSatisfy({ $0.reason == .notCode }) {
            reportUnloaded(image, while: "planned", &state)
            return
        }
        if !batch.refusals.isEmpty {
            let reasons = Dictionary(grouping: batch.refusals, by: { Self.words(for: $0.reason) })
                .map { "\($0.value.count) \($0.key)" }.sorted().joined(separator: ", ")
            // (A name may come twice: two versions of one symbol, memcpy@GLIBC_2.2.5 and memcpy.)
            var named: Set<String> = []
            let first = batch.refusals.map(\.name).filter { named.insert($0).inserted }.prefix(3)
                .joined(separator: ", ")
            report(
                "\(image.name): \(batch.refusals.count) of \(batch.refusals.count + batch.functions.count) functions "
                    + "cannot be patched safely and are not traced (\(reasons); \(first)…)", &state)
        }
        guard !chosen.isEmpty else {
            // Where every selected function was refused, the line above has said why.
            report(
                batch.refusals.isEmpty
                    ? "\(image.name) has no function that --symbols selects"
                    : configuration.symbolPatterns.isEmpty
                        ? "\(image.name): none of its functions can be patched, so none is traced"
                        : "\(image.name): none of the functions --symbols selects can be patched, so none is traced",
                &state)
            return
        }
        var counters: [UInt: CounterAddress] = [:]
        counters.reserveCapacity(chosen.count)
        state.counterOwners.reserveCapacity(state.counterOwners.count + chosen.count)
        // Each function's row name: the plain name, else the name with the object's and the
        // offset (by its path where another copy of the object, of the same soname, holds
        // that). One lookup for a name not taken yet (nearly all), and no other name made.
        var names: [String] = []
        names.reserveCapacity(chosen.count)
        func claim(_ plain: String, _ place: FunctionPlace, from first: Int) -> String {
            var name = plain
            for attempt in first..<3 {
                switch attempt {
                case 0: name = plain
                case 1: name = "\(plain) (\(image.name)+0x\(String(place.offset, radix: 16)))"
                default: name = "\(plain) (\(image.path)+0x\(String(place.offset, radix: 16)))"
                }
                guard let owner = state.counterOwners.updateValue(place, forKey: name), owner != place else { break }
                // Two functions of this file named alike (a symbol's versions: the C library's
                // current pthread_cond_wait and the one of its first version): the plain name
                // goes to the one the loader binds it to, which a program calls by it.
                if attempt == 0, owner.path == place.path,
                    let earlier = names.lastIndex(of: plain),
                    Self.loaderBinds(plain, to: image.base &+ place.offset, in: image.path, handle: &handle)
                {
                    names[earlier] = claim(plain, owner, from: 1)
                    break
                }
                state.counterOwners[name] = owner
            }
            return name
        }
        for (function, own) in zip(chosen, chosenNames) {
            let address = UInt(bitPattern: function.address)
            names.append(
                claim(
                    reportedName[address] ?? own, FunctionPlace(path: image.path, offset: address &- image.base),
                    from: 0))
        }
        for ((function, own), name) in zip(zip(chosen, chosenNames), names) {
            guard let (counter, _) = Self.counter(naming: name, kindOf: own) else {
                report("out of counters; \(name) and later functions are not traced", &state)
                break
            }
            counters[UInt(bitPattern: function.address)] = counter
        }
        let traced = InlineBatch(chosen.filter { counters[UInt(bitPattern: $0.address)] != nil })
        let records = state.configuration.events.isEnabled
        do {
            let group: HookGroupToken
            if !records && CallLog.shared == nil {
                // Counting only: C functions (see attach(_:in:named:object:_:)).
                group = try Hook.attach(on: traced, options: .allowsReentry) { function in
                    counters[UInt(bitPattern: function.address)].map(Self.countingFunctions)
                }
            } else {
                group = try Hook.attach(on: traced, options: .allowsReentry) { function in
                    guard let counter = counters[UInt(bitPattern: function.address)] else { return (nil, nil) }
                    let name = reportedName[UInt(bitPattern: function.address)] ?? function.name
                    return Self.blocks(counting: counter, named: name, recording: records)
                }
            }
            state.objectGroups[image.key, default: []].append(group)
            state.batches[image.key] = traced
            let skipped = traced.functions.count - group.tokens.count
            if skipped > 0 && group.tokens.isEmpty && traced.functions.first?.holdsItsCode == false {
                reportUnloaded(image, while: "attached", &state)
            } else if skipped > 0 {
                // Why, by the first refusal (the same for all where the other threads could not
                // be stopped: one blocking every signal).
                let why = group.refusals.first.map { ": \($0)" } ?? ""
                report(
                    "\(image.name): \(skipped) functions could not be attached to and are not traced\(why)", &state)
            }
        } catch {
            report("\(image.name): cannot trace in its own code: \(error)", &state)
        }
    }

    /// Says that `image` was unloaded (another thread's `dlclose`) while its functions were
    /// listed, planned or attached to: the walk after that `dlclose` forgets it, and a walk
    /// after it is loaded again traces it.
    private func reportUnloaded(_ image: LoadedImage, while step: String, _ state: inout State) {
        report(
            "\(image.name) was unloaded while its functions were \(step): not traced until it is loaded again", &state)
    }

    // MARK: - Finish

    /// What the report is made from, taken under the lock.
    private typealias Snapshot = (
        configuration: TracerConfiguration, counts: [(String, fht_counter)], startTicks: UInt64,
        startNanoseconds: UInt64, missed: Int, tooDeep: Int, isWriter: Bool, endedBy: Int32,
        window: ClosedRange<UInt64>
    )

    /// Set once the report is written, for a report asked for by a signal while the exit's is
    /// being made, or by the exit while a joined process's leave makes it (which they wait
    /// for); cleared by a join.
    let reportWritten = Atomic<Bool>(false)

    /// Prints the table to standard error and writes the files asked for; runs once. With a
    /// signal (the process is ending of it), the table's heading names it. If the report is
    /// being made already (the process was exiting, or a joined process is left as it exits),
    /// waits until it is written (29 seconds at most; the signal's handler waits while reports
    /// write): the exit would otherwise end the leave's thread as it wrote the files (a joined
    /// process that exited as the tracer left had no JSON file and half a Chrome trace).
    func finish(endedBy signal: Int32 = 0) {
        guard signal != 0 else {
            // (Not in a forked child: a report its parent was making when it forked is no one's.)
            if !report(), !isForkedChild { waitForReport() }
            return
        }
        // The thread the signal interrupted may hold the lock (the start, or the attach after a
        // `dlopen`, was under way), and it waits for this report: a report that cannot take the
        // lock within two seconds is not made.
        var named = false
        for _ in 0..<2000 {
            named =
                state.withLockIfAvailable { state -> Bool in
                    if !state.finished { state.endedBy = signal }
                    return true
                } ?? false
            if named { break }
            usleep(1000)
        }
        guard named else {
            say(
                "\(Self.programName) (pid \(getpid())) ended by \(String(cString: fht_signal_name(signal))) while the "
                    + "tracer was attaching to its functions: no report")
            return
        }
        if !report() { waitForReport() }
    }

    /// Waits until the report another thread is making is written, 29 seconds at most.
    private func waitForReport() {
        var waited = 0
        while !reportWritten.load(ordering: .acquiring), waited < 29_000 {
            usleep(1000)
            waited += 1
        }
    }

    /// Makes the report unless another call made it or is making it (then false; true when
    /// this call made it, or found nothing to report).
    /// See ``ffiHookTracerReportBeforeExec(_:)``. Only the table: the files named by the
    /// options are the last image's, which has the same process ID (a log goes on in the new
    /// image, which appends to it).
    /// Called in a stretch of the tracer's own work.
    func reportBeforeExec(_ path: String) {
        let pid = getpid()
        let taken = withStateLock { state -> (counts: [(String, fht_counter)], ticks: UInt64, nanoseconds: UInt64)? in
            guard state.started, !state.finished, !state.configuration.libraries.isEmpty else { return nil }
            return (
                state.counted, state.startTicks, state.startNanoseconds
            )
        }
        guard let taken = taken ?? nil else { return }
        let report = TraceReport(
            counts: taken.counts, nanosecondsPerTick: Self.nanosecondsPerTick(since: taken.ticks, taken.nanoseconds),
            missedCalls: 0)
        guard report.rows.contains(where: { $0.calls > 0 }) else { return }
        let pipe = TracerOutput.ignoringBrokenPipes()
        defer { pipe.end() }
        write(
            report.table(process: "\(Self.programName) (pid \(pid), before it executed \(path))"),
            to: TracerOutput.descriptor)
        fht_reset_counters()
    }

    @discardableResult
    private func report() -> Bool {
        // What the report's own work calls is not the program's (inline, it could be traced),
        // nor what the thread calls after the report at exit (other libraries' finalizers): the
        // mark stays (a leave of a joined process ends it, see ``leave()``).
        fht_set_own_work(1)
        fht_report_progress()
        let pid = getpid()
        var taken = false
        var takenElsewhere = false
        defer {
            if taken {
                reportWritten.store(true, ordering: .releasing)
                fht_report_written()
            }
        }
        let snapshot: Snapshot? =
            withStateLock { state -> Snapshot? in
                // (Under the lock: see ``afterLoaderAsOwnWork(unloading:)``.)
                let passed = Self.passedThroughCalls
                guard state.started, !state.configuration.libraries.isEmpty else { return nil }
                guard !state.finished else {
                    takenElsewhere = true
                    return nil
                }
                state.finished = true
                taken = true
                // The objects loaded now too (those the walks after each `dlopen` did not list).
                // (Only while a name is unmatched: matching may resolve each object's symbolic links.)
                // Objects only the tracer brought answer to none of them (see ``update(_:)``).
                var unmatched = state.configuration.libraries.contains { !state.matchedNames.contains($0) }
                let images = LoadedImage.current(details: { _ in [] })
                let brought = unmatched ? LoadedImage.broughtByProgram(images, tracer: state.tracerPaths) : []
                for image in images where !image.isMainProgram {
                    state.seenNames.insert(image.name)
                    guard unmatched, brought.contains(image.key) else { continue }
                    state.matchedNames.formUnion(
                        state.configuration.libraries(naming: image.path, soname: image.soname))
                    unmatched = state.configuration.libraries.contains { !state.matchedNames.contains($0) }
                }
                // A process other than the one started (a child it forked or ran: a shell's
                // subshells, a version manager's shims) that never loaded a traced library says
                // nothing: it has nothing to report, and the started process says what was missed.
                let isWriter = state.configuration.jsonWriter.map { $0 == pid } ?? !isForkedChild
                if !isWriter && state.matchedNames.isEmpty { return nil }
                // Nor does such a process say which `--library` names it did not load (a shell's
                // `true` loads the C library but not libz): the started process says that.
                let missing = isWriter ? state.configuration.libraries.filter { !state.matchedNames.contains($0) } : []
                if !missing.isEmpty {
                    state.reportedUnmatched = true
                    // What only the tracer brought (its library, libffi, Zydis) is no
                    // name to suggest.
                    let own = Set(images.filter { !brought.contains($0.key) }.map(\.name))
                    let elsewhere = Self.otherNamespacePaths()
                    for name in missing {
                        let there = elsewhere.filter {
                            state.configuration.libraries(naming: $0, soname: nil).contains(name)
                        }
                        say(
                            there.isEmpty
                                ? Self.unmatched(name, loaded: state.seenNames.subtracting(own))
                                : Self.inOtherNamespace(name, paths: there))
                    }
                }
                let counts = state.counted
                // The event outputs show the calls the table counts: those made from the start
                // until now (a joined process goes on calling while the files are written).
                let now = fht_ticks()
                let window = min(state.countingTicks, now)...now
                let missed = passed - state.passedAtStart - state.passedInUpdates
                let tooDeep = Self.skippedLeaves - state.skippedAtStart
                return (
                    state.configuration, counts, state.startTicks, state.startNanoseconds, missed, tooDeep, isWriter,
                    state.endedBy, window
                )
            } ?? nil
        guard
            let (configuration, counts, startTicks, startNanoseconds, missed, tooDeep, isWriter, signal, window) =
                snapshot
        else {
            return !takenElsewhere
        }
        let nanosecondsPerTick = Self.nanosecondsPerTick(since: startTicks, startNanoseconds)
        let report = TraceReport(
            counts: counts, nanosecondsPerTick: nanosecondsPerTick, missedCalls: max(missed, 0),
            tooDeepCalls: max(tooDeep, 0))
        CallLog.shared?.finish()
        // A reader that went away (`| head`) must not end the program with SIGPIPE, nor keep
        // the files from being written.
        let pipe = TracerOutput.ignoringBrokenPipes()
        defer { pipe.end() }
        let signalName = signal == 0 ? nil : String(cString: fht_signal_name(signal))
        let ending = signalName.map { ", ended by \($0)" } ?? ""
        // A process other than the started one (a shell's command, a shim) that counted no call
        // has no table to show: a script's every process would print an empty one.
        let counted = report.rows.contains { $0.calls > 0 }
        if isWriter || signal != 0 || counted || report.missedCalls > 0 {
            write(report.table(process: "\(Self.programName) (pid \(pid)\(ending))"), to: TracerOutput.descriptor)
        }
        fht_report_progress()
        configuration.events.write(
            functions: { self.state.withLock { $0.counters } },
            clock: EventClock(startTicks: startTicks, nanosecondsPerTick: nanosecondsPerTick),
            program: Self.programName, pid: pid, isWriter: isWriter, window: window)
        if !isWriter, counted {
            // Files named without %p are the started process's alone: a process it started (a
            // shell's commands) that counted calls says that they are not in them, rather than
            // nothing.
            let events = configuration.events
            let shared = [
                configuration.jsonPath, events.chromeTracePath, events.foldedPath, events.flameGraphPath,
                events.timelinePath,
            ].compactMap { $0 }.filter { !OutputPathTemplate(template: $0).namesProcess }
            if !shared.isEmpty {
                say(
                    "the calls of \(Self.programName) (pid \(pid)) are in the table above only, not in "
                        + "\(shared.joined(separator: ", ")): a file named without %p is written only by the "
                        + "process the tracer started" + (configuration.jsonWriter.map { " (pid \($0))" } ?? "")
                        + "; put %p in its name to have each process's own")
            }
        }
        if var path = configuration.jsonPath {
            let named = OutputPathTemplate(template: path).namesProcess
            path = OutputPathTemplate(template: path).path(for: pid)
            guard named || isWriter else { return true }
            let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else {
                say("cannot write \(path): \(String(cString: strerror(errno)))")
                unwrittenOutputs.add(1, ordering: .relaxed)
                return true
            }
            let json = report.json(
                program: Self.programName, pid: pid,
                scope: configuration.inline ? "inline" : configuration.scope.rawValue, endedBy: signalName)
            let written = write(json, to: descriptor)
            let writeError = errno
            let closed = close(descriptor) == 0
            if !written || !closed {
                say("cannot write \(path): \(String(cString: strerror(written ? errno : writeError)))")
                unwrittenOutputs.add(1, ordering: .relaxed)
            }
        }
        return true
    }

    // MARK: - Support

    /// What the tracer must know of a function's calls (an `FHT_KIND_` value): whether it runs
    /// a child process on the caller's memory (see `fht_spawning`: that child's calls, made
    /// before it execs, are not the caller's), or returns twice (no leave comes: see
    /// `FHT_KIND_ONCE`).
    static func kind(of function: String) -> UInt8 {
        // (Inline, a name may carry its version: posix_spawn@GLIBC_2.2.5.) Found by two words of
        // its bytes, with no hash and no string made: a dlopen of a library of 1,500 functions
        // asks about each, and hashing each name took a tenth of the attach's time.
        var function = function
        return function.withUTF8 { bytes in
            let length = bytes.firstIndex(of: UInt8(ascii: "@")) ?? bytes.count
            guard length <= KindName.longest else { return UInt8(FHT_KIND_PLAIN) }
            let name = KindName(UnsafeBufferPointer(rebasing: bytes[..<length]))
            for place in kinds.indices where kinds[place].name == name { return kinds[place].kind }
            return UInt8(FHT_KIND_PLAIN)
        }
    }

    /// A name of at most 16 bytes as its length and two words: its first eight bytes and its
    /// last eight (which overlap when it is shorter than 16), so that two names are equal when
    /// these are.
    private struct KindName: Equatable {
        /// The longest name a ``KindName`` tells from every other.
        static let longest = 16
        let length: Int
        let head: UInt64
        let tail: UInt64

        init(_ bytes: UnsafeBufferPointer<UInt8>) {
            length = bytes.count
            var head: UInt64 = 0
            for place in 0..<min(length, 8) { head |= UInt64(bytes[place]) << (8 * UInt64(place)) }
            var tail: UInt64 = 0
            for place in max(length - 8, 0)..<length { tail = tail << 8 | UInt64(bytes[place]) }
            self.head = head
            self.tail = tail
        }

        init(_ string: String) {
            precondition(string.utf8.count <= Self.longest)
            self = Array(string.utf8).withUnsafeBufferPointer { KindName($0) }
        }
    }

    /// The functions of a kind but plain, by name.
    private static let kinds: [(name: KindName, kind: UInt8)] = {
        var kinds: [(name: KindName, kind: UInt8)] = []
        for name in ["vfork", "__vfork"] { kinds.append((KindName(name), UInt8(FHT_KIND_VFORK))) }
        for name in ["posix_spawn", "posix_spawnp", "__posix_spawn", "system", "__libc_system", "popen", "_IO_popen"] {
            kinds.append((KindName(name), UInt8(FHT_KIND_SPAWN)))
        }
        // The others an attach runs only the enter of (the library's list of functions that
        // return twice).
        for name in [
            "setjmp", "_setjmp", "__setjmp", "sigsetjmp", "__sigsetjmp", "savectx", "getcontext", "swapcontext",
        ] {
            kinds.append((KindName(name), UInt8(FHT_KIND_ONCE)))
        }
        return kinds
    }()

    /// Gives `counter` the kind of `function` (``kind(of:)``).
    static func setKind(of counter: UnsafeMutablePointer<fht_counter>, function: String) {
        let kind = kind(of: function)
        if kind != UInt8(FHT_KIND_PLAIN) { fht_set_kind(counter, kind) }
    }

    /// Why functions were left out of an inline trace, in words for the report (the reasons'
    /// own names are the API's: `tooShort`).
    static func words(for reason: InlineRefusal.Reason) -> String {
        let words: [(InlineRefusal.Reason, String)] = [
            (.notCode, "not in code"), (.indirectFunction, "IFUNC symbols"),
            (.notAFunctionStart, "not at a function's start"), (.tooShort, "too short for a patch"),
            (.undecodable, "with an undecodable instruction in the patched bytes"),
            (.unrelocatable, "with an instruction that cannot move to a trampoline"),
            (.ripRelativeOutOfRange, "with an operand out of a trampoline's reach"),
            (.callReturnsIntoPatch, "with a call that returns into the patch"),
            (.branchIntoPatch, "with a branch into the patched bytes"),
            (.tooManyInstructions, "with too many instructions in the patched bytes"),
            (.noMemory, "without memory for a trampoline"), (.symbolNotFound, "not found"),
            (.patchFailed, "whose patch could not be written"), (.libraryCode, "the hooking library's own"),
            (.unsupportedPlatform, "on a platform without inline hooks"),
        ]
        return words.first { $0.0 == reason }?.1 ?? reason.description
    }

    /// What to say of a `--library` name that none of the process's objects answered to: the
    /// three loaded objects whose names are closest to it (fewest characters to change).
    static func unmatched(_ name: String, loaded: Set<String>) -> String {
        let wanted = Array(name.utf8)
        let closest = loaded.map { (distance(wanted, Array($0.utf8)), $0) }.sorted { $0 < $1 }.prefix(3).map(\.1)
        return "error: --library \(name) names none of the objects this process loaded, so none of its calls "
            + "were traced" + (closest.isEmpty ? "" : "; the closest loaded: \(closest.joined(separator: ", "))")
    }

    /// What to say of a `--library` name that only objects of another link-map namespace (loaded
    /// by `dlmopen`) answer to: the tracer sees the default namespace alone.
    static func inOtherNamespace(_ name: String, paths: [String]) -> String {
        "error: --library \(name) names only objects loaded in another link-map namespace (by dlmopen), which the "
            + "tracer does not trace: \(Set(paths).sorted().joined(separator: ", "))"
    }

    /// The paths of the objects loaded in link-map namespaces other than the default one.
    static func otherNamespacePaths() -> [String] {
        var paths: [String] = []
        withUnsafeMutablePointer(to: &paths) { pointer in
            fht_other_namespaces(
                { context, path in
                    context!.assumingMemoryBound(to: [String].self).pointee.append(String(cString: path))
                }, pointer)
        }
        return paths
    }

    /// The edit distance between two names: characters inserted, deleted or replaced.
    private static func distance(_ one: [UInt8], _ other: [UInt8]) -> Int {
        var previous = Array(0...other.count)
        for (index, character) in one.enumerated() {
            var current = [index + 1]
            for (otherIndex, otherCharacter) in other.enumerated() {
                current.append(
                    min(
                        previous[otherIndex + 1] + 1, current[otherIndex] + 1,
                        previous[otherIndex] + (character == otherCharacter ? 0 : 1)))
            }
            previous = current
        }
        return previous[other.count]
    }

    /// The process that loaded the library, to tell forked children, which inherit the tracer.
    private let loadingProcess = getpid()

    /// Whether this process is a child forked from the one that loaded the library.
    private var isForkedChild: Bool { getpid() != loadingProcess }

    /// The forked child whose state lock a thread of its parent held as it forked (see
    /// ``withStateLock(_:)``), 0 for none; set as the child starts, while it has one thread,
    /// and negated once the child has said it gives its report up.
    private let lockLostIn = Atomic<Int32>(0)

    /// Notes, in each forked child as it starts, whether the state's lock was held then.
    private static let forkHandler: Void = {
        pthread_atfork(nil, nil) {
            let tracer = Tracer.shared
            let free = tracer.state.withLockIfAvailable { _ in true } ?? false
            if !free { tracer.lockLostIn.store(getpid(), ordering: .relaxed) }
        }
    }()

    /// Runs `body` under the state's lock; nil in a forked child that cannot have it: a thread
    /// of the parent held it as the process forked (the attach after a `dlopen`), and the child,
    /// which has no such thread, never sees it released. The report of an exit or an exec in
    /// such a child is then given up, not waited for for ever; it says so once. (A child's lock
    /// held by a thread of its own is waited for, a second at most.)
    private func withStateLock<Result>(_ body: (inout State) -> sending Result) -> Result? {
        guard isForkedChild else { return state.withLock(body) }
        let pid = getpid()
        let lost = lockLostIn.load(ordering: .relaxed)
        if lost != pid && lost != -pid {
            for _ in 0..<1000 {
                if let result = state.withLockIfAvailable(body) { return result }
                usleep(1000)
            }
        }
        // (Said by the first call to give up: an exit's report and the finalizer's after it ask
        // in turn.)
        if lockLostIn.exchange(-pid, ordering: .relaxed) != -pid {
            say("process \(pid), forked while a thread of its parent held the tracer's lock: no report")
        }
        return nil
    }

    /// Nanoseconds per tick of the time-stamp counter, measured over the whole run (and over
    /// at least a millisecond, waiting out the rest for a shorter run).
    private static func nanosecondsPerTick(since startTicks: UInt64, _ startNanoseconds: UInt64) -> Double {
        var ticks = fht_ticks()
        var nanoseconds = fht_monotonic_nanoseconds()
        while nanoseconds &- startNanoseconds < 1_000_000 {
            ticks = fht_ticks()
            nanoseconds = fht_monotonic_nanoseconds()
        }
        guard ticks > startTicks else { return 1 }
        return Double(nanoseconds &- startNanoseconds) / Double(ticks &- startTicks)
    }

    /// Why `image`, which a `--library` name matches, is not traced; nil when it is. The
    /// tracer's own libraries never are (a name like `lib*.so` matches them). A Swift program's
    /// runtime is traced like any library, inline too: the tracer runs on its own copy, linked
    /// into it, so its blocks never call the code being patched.
    private static func untraceable(_ image: LoadedImage, _ state: State) -> String? {
        state.tracerPaths.contains(image.path) ? "it is part of the tracer" : nil
    }

    /// This library's file and the start library's (which loaded it), to leave them out of the
    /// program's objects.
    private static func tracerPaths() -> Set<String> {
        var paths: Set<String> = []
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let address = unsafeBitCast(
            fht_walk as @convention(c) (fht_visitor, UnsafeMutableRawPointer?) -> Void, to: UnsafeRawPointer.self)
        if fht_object_path(address, &buffer, buffer.count) != 0 {
            paths.insert(buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        }
        if fht_start_library_path(&buffer, buffer.count) != 0 {
            paths.insert(buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        }
        return paths
    }

    /// The program's file name.
    private static var programName: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        // The calling thread's link first: /proc/self is the main thread's, whose link is gone
        // once it has ended by pthread_exit (the process lives on in its other threads).
        var length = readlink("/proc/thread-self/exe", &buffer, Int(PATH_MAX))
        if length <= 0 { length = readlink("/proc/self/exe", &buffer, Int(PATH_MAX)) }
        guard length > 0 else { return "?" }
        let path = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return path.lastPathComponent
    }

    /// Says a problem once.
    private func report(_ problem: String, _ state: inout State) {
        if state.reported.insert(problem).inserted { say(problem) }
    }
}

/// The C library's `write`, which the function below shadows.
private let systemWrite: @Sendable (Int32, UnsafeRawPointer?, Int) -> Int = {
    // A step of the report, for a signal's handler that waits for it.
    fht_report_progress()
    return write($0, $1, $2)
}

/// Writes a line to standard error (or to ``TracerOutput``'s file), prefixed with the tracer's name.
func say(_ message: String) {
    write("ffi-hook-tracer: \(message)\n", to: TracerOutput.descriptor)
}

/// Writes all of `text` to `descriptor`; false when a write failed or wrote nothing (`errno`
/// says why: ENOSPC for a write of nothing).
@discardableResult
func write(_ text: String, to descriptor: Int32) -> Bool {
    var text = text
    return text.withUTF8 { bytes in
        var done = 0
        while done < bytes.count {
            let written = systemWrite(descriptor, bytes.baseAddress! + done, bytes.count - done)
            if written < 0, errno == EINTR { continue }
            guard written > 0 else {
                if written == 0 { errno = ENOSPC }
                return false
            }
            done += written
        }
        return true
    }
}
