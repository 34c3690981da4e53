internal import CTracerSupport
internal import FFIHook
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Starts tracing in a process that is running already: `ffi-hook-tracer --pid` loads the
/// library into the process with `dlopen` (its constructor then does nothing, the library not
/// being preloaded) and calls this function on one of its threads.
///
/// `configuration` holds the variables a started program reads from its environment, one
/// `NAME=VALUE` a line (see ``TracerConfiguration``); `FFI_HOOK_TRACER_OUTPUT` names the file
/// the messages and the table go to, and `FFI_HOOK_TRACER_JOINER` is the process ID of the
/// `ffi-hook-tracer` that joined: if it ends without leaving, the process leaves by itself.
/// Returns a ``JoinResult`` raw value: 0 when tracing, 1 when the process is traced already,
/// 2 when the configuration names no library, 4 when the thread was doing the tracer's own work
/// (the call is to be made again).
///
/// A process that was joined and left may be joined again; each join counts from zero.
@_cdecl("ffi_hook_tracer_join")
public func ffiHookTracerJoin(_ configuration: UnsafePointer<CChar>?) -> Int32 {
    // The process's own environment again, which its SWIFT_BACKTRACE was hidden from while the
    // join's dlopen loaded the library.
    fht_environment_restore()
    // (Before the stretch of the tracer's own work, in which the thread is busy with it.)
    guard fht_thread_busy() == 0 else { return JoinResult.threadBusy.rawValue }
    // The whole join is the tracer's work, the strings it makes and frees after its hooks are
    // in too.
    var call = (configuration: configuration, result: JoinResult.done)
    asOwnWork(&call) { context in
        let call = context!.assumingMemoryBound(to: (configuration: UnsafePointer<CChar>?, result: JoinResult).self)
        call.pointee.result = Tracer.shared.join(call.pointee.configuration.map { String(cString: $0) } ?? "")
    }
    return call.result.rawValue
}

/// Stops tracing in a process that ``ffiHookTracerJoin(_:)`` joined: removes every hook, writes
/// the report (the table, and the JSON file when one was asked for) for the calls since the
/// join, and leaves the library loaded but idle (a Swift library cannot be unloaded safely:
/// its runtime's metadata and the hooks' reclaimed memory outlive it).
///
/// Returns a ``JoinResult`` raw value: 0 when it left, 3 when no join was tracing, 4 when the
/// thread was doing the tracer's own work (the call is to be made again), 5 when it left after a
/// report that found no object for a `--library` name or could not write one of its files.
@_cdecl("ffi_hook_tracer_leave")
public func ffiHookTracerLeave() -> Int32 {
    Tracer.shared.leave().rawValue
}

/// What ``ffiHookTracerJoin(_:)`` and ``ffiHookTracerLeave()`` return; `ffi-hook-tracer`
/// reads the same values.
enum JoinResult: Int32 {
    /// Joined, or left.
    case done = 0
    /// The process is traced already: the library was preloaded with libraries to trace, or a
    /// join has not left yet.
    case busy = 1
    /// The configuration names no library: nothing would be traced.
    case nothingToTrace = 2
    /// A leave found no join tracing.
    case notJoined = 3
    /// The thread the call was made on was doing the tracer's or the hooking library's own
    /// work (holding their locks): nothing was done, and the call is to be made again once the
    /// thread has moved on.
    case threadBusy = 4
    /// Left, after a report that said a `--library` name answered to none of the process's
    /// objects, or that one of its files could not be written (the joiner exits with status 1).
    case leftWithProblems = 5
}

extension Tracer {
    /// Starts with the configuration in `text` unless tracing already (a tracer that has left,
    /// or a preloaded one with nothing to trace, starts afresh). Called in a stretch of the
    /// tracer's own work.
    func join(_ text: String) -> JoinResult {
        let (configuration, problems) = TracerConfiguration.from(text: text)
        let free = state.withLock { state -> Bool in
            guard !state.started || state.finished || state.configuration.libraries.isEmpty else { return false }
            state = State()
            // What an earlier join traced is not this one's: its names find no counter now, and
            // its events are gone (no hook records any now: the leave removed them all).
            fht_names_forget()
            fht_reset_events()
            unwrittenOutputs.store(0, ordering: .relaxed)
            reportWritten.store(false, ordering: .releasing)
            return true
        }
        guard free else { return .busy }
        fht_report_begins()
        LazyEntries.shared.record()
        guard !configuration.libraries.isEmpty else {
            if let path = configuration.outputPath { TracerOutput.redirect(to: path) }
            for problem in problems { say(problem) }
            TracerOutput.restore()
            return .nothingToTrace
        }
        start(configuration, problems: problems)
        // The joiner may be killed before it leaves (SIGKILL, which it cannot catch): the
        // process then leaves by itself, rather than keep its hooks and refuse later joins.
        let joiner = text.split(separator: "\n").first { $0.hasPrefix("FFI_HOOK_TRACER_JOINER=") }
            .flatMap { Int32($0.dropFirst("FFI_HOOK_TRACER_JOINER=".count)) }
        if let joiner {
            _ = fht_watch_joiner(joiner, { Tracer.shared.abandon() }, { Tracer.shared.finish(endedBy: $0) })
        }
        return .done
    }

    /// Leaves after the joiner ended without leaving: the hooks go as at a leave, and so do the
    /// report's files, which no one will read (and the private directory they were in).
    func abandon() {
        guard [.done, .leftWithProblems].contains(leave()) else { return }
        let paths = state.withLock { [$0.configuration.outputPath, $0.configuration.jsonPath] }.compactMap { $0 }
        for path in paths { unlink(path) }
        if let output = paths.first, let slash = output.lastIndex(of: "/") {
            rmdir(String(output[..<slash]))
        }
    }

    /// Removes every hook group (each entry gets back what it held before the join: an entry
    /// that was not bound yet is made lazy again, see ``LazyEntries``), then reports and writes
    /// to standard error again.
    ///
    /// It does not wait for the removed hooks' memory to be reclaimed: a call blocked inside a
    /// traced function (the very thread this runs on may be in one) would keep it waiting, and
    /// the memory of the hooks of one join is small.
    func leave() -> JoinResult {
        guard fht_thread_busy() == 0 else { return .threadBusy }
        // The removal's calls are the tracer's: the report, made after it, would count them.
        var call = (tracer: self, result: JoinResult.done)
        asOwnWork(&call) { context in
            let call = context!.assumingMemoryBound(to: (tracer: Tracer, result: JoinResult).self)
            call.pointee.result = call.pointee.tracer.leaveAsOwnWork()
        }
        // The report's mark on this thread ends: a later join counts its calls.
        if call.result == .done || call.result == .leftWithProblems { fht_set_own_work(0) }
        return call.result
    }

    /// ``leave()``, run as the tracer's own work.
    private func leaveAsOwnWork() -> JoinResult {
        let tracing = state.withLock { state in
            guard state.started, !state.finished, !state.leaving else { return false }
            state.leaving = true
            return true
        }
        guard tracing else { return .notJoined }
        fht_join_release_signals()
        fht_stop_watching()
        // The hooks go first, the report after: the process runs untraced while the report and
        // its files are written (a large flame graph takes seconds), and the table and the
        // event files show the same calls, none of which goes on arriving meanwhile.
        let groups = state.withLock { state in
            defer {
                state.groups = []
                state.objectGroups = [:]
            }
            return state.groups + state.objectGroups.values.joined()
        }
        for group in groups { group.remove() }
        // What the attaches bound, lazy again: the traced functions' entries and dlopen's.
        // (Inline, the counters' names are of functions patched in their own code, not entries.)
        let functions = state.withLock { $0.configuration.inline ? [] : Set($0.counters.keys) }.union(["dlopen"])
        LazyEntries.shared.restore(functions)
        finish()
        TracerOutput.restore()
        let problems = state.withLock(\.reportedUnmatched) || unwrittenOutputs.load(ordering: .relaxed) > 0
        return problems ? .leftWithProblems : .done
    }
}

/// The import entries not bound yet when a process was joined (each still leads into its
/// object's PLT, for the loader to bind at the first call).
///
/// An attach binds such an entry to its function before hooking it (the loader's resolver
/// would otherwise overwrite the hook at the first call), and the hook's removal leaves it
/// bound. The leave makes those of the traced functions lazy again, so that the process's
/// import tables hold what they held before the join. An entry of a traced function that the
/// program itself bound meanwhile (one no hook covered, outside the scope) is made lazy again
/// too, which only means that the loader binds it once more.
final class LazyEntries: Sendable {
    /// One entry: its symbol, its address and the PLT address it held.
    struct Entry: Sendable {
        let symbol: String
        let slot: UInt
        let value: UInt
    }

    /// The process's entries, recorded at the last join.
    static let shared = LazyEntries()

    private let entries = Mutex<[Entry]>([])

    /// Records the lazy entries of the objects loaded now.
    func record() {
        final class Collector {
            var entries: [Entry] = []
        }
        let collector = Collector()
        withExtendedLifetime(collector) {
            fht_lazy_entries(
                { context, symbol, slot, value in
                    let collector = Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue()
                    collector.entries.append(Entry(symbol: String(cString: symbol), slot: slot, value: value))
                }, Unmanaged.passUnretained(collector).toOpaque())
        }
        let recorded = collector.entries
        entries.withLock { $0 = recorded }
    }

    /// Makes the recorded entries of `symbols` that are bound now lazy again.
    func restore(_ symbols: Set<String>) {
        let chosen = entries.withLock { entries in
            defer { entries = [] }
            return entries.filter { symbols.contains($0.symbol) }.sorted { $0.slot < $1.slot }
        }
        guard !chosen.isEmpty else { return }
        _ = fht_restore_lazy_entries(chosen.map(\.slot), chosen.map(\.value), chosen.count)
    }
}
