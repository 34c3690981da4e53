import CHookBench
import FFIHook
import FFIHookInline
import FoundationEssentials
import Glibc

/// A batch of a thousand inline hooks: `hb_batch_000` … `hb_batch_999` (each `int (int, int)`,
/// an addition in 8 bytes), planned as one ``FFIHookInline/InlineBatch``, then a no-op before
/// hook installed on all of them and removed, again and again, while four threads call every
/// one of them directly and check each result.
struct InlineBatchRun {
    let plan: SamplingPlan
    /// How many threads call the functions meanwhile.
    static let callerThreads = 4

    /// Samples: the full run's install samples' count, at least 10.
    private var samples: Int { max(plan.installSamples / 10, 10) }

    func run() throws -> Report.InlineBatchCost {
        let addresses = (0..<Int(HB_BATCH_COUNT)).map { UnsafeRawPointer(hb_batch_function(Int32($0))!) }
        let stops = InlineBatch.threadStopCount
        var start = hb_now_ns()
        let batch = try InlineBatch(addresses: addresses)
        let planned = Double(hb_now_ns() - start)
        guard batch.functions.count == addresses.count else {
            throw BenchError("the batch refused \(batch.refusals.count) functions: \(batch.refusals.prefix(3))")
        }
        let signature = try Signature("iii")
        guard hb_batch_callers_start(Int32(Self.callerThreads)) == 0 else {
            throw BenchError("cannot start \(Self.callerThreads) threads calling the batch functions")
        }
        var installs: [Double] = []
        var removals: [Double] = []
        var failure: (any Error)?
        for _ in 0..<samples {
            do {
                start = hb_now_ns()
                let group = try Hook.before(on: batch, signature: signature) { _, _ in }
                let installed = hb_now_ns()
                guard group.refusals.isEmpty, group.tokens.count == addresses.count else {
                    group.remove()
                    throw BenchError("the batch install refused \(group.refusals.count): \(group.refusals.prefix(3))")
                }
                group.remove()
                installs.append(Double(installed - start))
                removals.append(Double(hb_now_ns() - installed))
            } catch {
                failure = error
                break
            }
        }
        var wrong: Int64 = 0
        let calls = hb_batch_callers_stop(&wrong)
        if let failure { throw failure }
        guard wrong == 0, calls > 0 else {
            throw BenchError("\(wrong) of \(calls) calls of the batch functions returned a wrong sum")
        }
        guard !batch.functions.contains(where: { $0.isPatched }), hb_batch_check() == 0 else {
            throw BenchError("a batch function is still patched, or returns a wrong sum")
        }
        return Report.InlineBatchCost(
            functions: batch.functions.count, planNanoseconds: planned, install: Self.distribution(installs),
            remove: Self.distribution(removals), callerThreads: Self.callerThreads, callerCalls: calls,
            stopsPerInstallAndRemove: Double(InlineBatch.threadStopCount - stops) / Double(installs.count))
    }

    /// The median and p99 of `values`, one call each.
    static func distribution(_ values: [Double]) -> Distribution {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return Distribution(median: 0, p99: 0, samples: 0, callsPerSample: 1) }
        let p99 = sorted[min(sorted.count - 1, Int((Double(sorted.count) * 0.99).rounded(.up)) - 1)]
        return Distribution(median: sorted[sorted.count / 2], p99: p99, samples: sorted.count, callsPerSample: 1)
    }
}

/// Every function a real library exports (`libcrypto.so.3`, OpenSSL's: 5,363 functions on
/// Debian 12), planned and patched in a child process of its own, where nothing planned it
/// before and its memory can be measured: once as one batch, once one function at a time.
struct LibraryRun {
    /// The library, loaded with `dlopen` by the child.
    static let library = "libcrypto.so.3"

    /// Both runs; nil when the library is not installed.
    static func run() throws -> Report.LibraryCost? {
        guard let handle = dlopen(library, RTLD_NOW | RTLD_LOCAL) else { return nil }
        dlclose(handle)
        let batch: Report.LibraryCost.Batch = try child(mode: "batch")
        let single: Report.LibraryCost.OneByOne = try child(mode: "single")
        return Report.LibraryCost(library: library, batch: batch, oneByOne: single)
    }

    /// Each of `libraries` (names or paths `dlopen` takes) as one batch, each in a child
    /// process of its own: `hookbench --libraries`.
    static func batches(of libraries: [String]) throws -> [(library: String, batch: Report.LibraryCost.Batch)] {
        try libraries.map { library in
            // Loaded to see that it exists, and kept: a Swift library (libFoundation.so) that
            // is unloaded leaves its conformances in the Swift runtime's tables.
            guard dlopen(library, RTLD_NOW | RTLD_LOCAL) != nil else {
                throw BenchError("cannot load \(library): \(String(cString: dlerror()))")
            }
            return (library, try child(mode: "batch:\(library)"))
        }
    }

    /// The figures of ``batches(of:)`` as a table.
    static func text(_ batches: [(library: String, batch: Report.LibraryCost.Batch)]) -> String {
        let rows = batches.map { library, batch in
            [
                library, Format.fixed(Double(batch.functions), 0),
                batch.refused.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "),
                Format.fixed(batch.planMilliseconds, 1), Format.fixed(batch.patchMilliseconds, 1),
                Format.fixed(batch.unpatchMilliseconds, 1), Format.fixed(Double(batch.residentKiBAfterPatch), 0),
                Format.fixed(batch.bytesPerFunctionPlanned, 0), "\(batch.mappingsAdded)",
            ]
        }
        return Report.aligned(
            [
                [
                    "Library", "planned", "refused", "plan ms", "patch ms", "unpatch ms", "KiB added",
                    "bytes/function", "mappings",
                ]
            ] + rows, rightAlignedFrom: 1)
    }

    /// Runs `hookbench --library-child MODE` and decodes the line it prints.
    private static func child<Result: Decodable>(mode: String) throws -> Result {
        let strings = ["/proc/self/exe", "--library-child", mode]
        let arguments: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var process = hb_peer()
        let error = hb_peer_start(arguments, &process)
        guard error == 0 else {
            throw BenchError("cannot start hookbench --library-child: \(String(cString: strerror(error)))")
        }
        var line = [CChar](repeating: 0, count: 1 << 16)
        let length = hb_peer_exchange(&process, nil, &line, line.count)
        let status = hb_peer_finish(&process)
        guard length > 0, status == 0 else {
            throw BenchError("hookbench --library-child \(mode) failed (status \(status))")
        }
        let text = String(decoding: line.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard text.hasPrefix("{") else { throw BenchError("hookbench --library-child \(mode): \(text)") }
        return try JSONDecoder().decode(Result.self, from: Data(text.utf8))
    }

    /// What the child does: loads the library, warms the code paths up on the batch functions,
    /// reads the library's pages once (so that its code is resident before memory is measured:
    /// a patch then turns a page of the file into a private copy of it, which leaves the
    /// resident size as it was), measures, and prints one line of JSON.
    /// `mode` is `batch`, `single`, `attach` or `host` for ``library``, or `batch:LIBRARY` for
    /// another one.
    static func childMain(mode: String) throws {
        var mode = mode
        var library = Self.library
        if let colon = mode.firstIndex(of: ":") {
            library = String(mode[mode.index(after: colon)...])
            mode = String(mode[..<colon])
        }
        guard dlopen(library, RTLD_NOW | RTLD_LOCAL) != nil else { throw BenchError("cannot load \(library)") }
        let warm = try InlineBatch(addresses: (0..<50).map { UnsafeRawPointer(hb_batch_function(Int32($0))!) })
        try warm.patch()
        try warm.unpatch()
        _ = hb_library_touch(library)
        hb_trim()
        let json: Data
        switch mode {
        case "batch": json = try JSONEncoder().encode(batch(library))
        case "single": json = try JSONEncoder().encode(oneByOne())
        case "attach": json = try JSONEncoder().encode(attach())
        case "host":
            // For a peer that attaches to this process: its id, then wait until standard input
            // closes.
            print("ready \(getpid())")
            fflush(nil)
            while getchar() != EOF {}
            return
        default: throw BenchError("unknown --library-child mode \(mode)")
        }
        print(String(decoding: json, as: UTF8.self))
    }

    /// What frida's Interceptor is measured doing to the same library (Benchmarks/Peers/
    /// frida-library.py): every exported function attached with empty enter and leave code,
    /// here as one batch planned and attached with empty blocks.
    struct Attach: Codable {
        var functions: Int
        var attached: Int
        var refused: Int
        var milliseconds: Double
        var residentKiB: Int
    }

    private static func attach() throws -> Attach {
        let memory = hb_memory_now()
        let start = hb_now_ns()
        let batch = try InlineBatch(library: library)
        let group = try Hook.attach(on: batch, onEnter: { _ in }, onLeave: { _ in })
        let elapsed = hb_now_ns() - start
        hb_trim()
        let after = hb_memory_now()
        let result = Attach(
            functions: batch.functions.count + batch.refusals.count, attached: group.tokens.count,
            refused: batch.refusals.count + group.refusals.count, milliseconds: Double(elapsed) / 1e6,
            residentKiB: after.resident - memory.resident)
        group.remove()
        return result
    }

    /// The library as one batch: planned, patched (one stop), unpatched (one stop).
    private static func batch(_ library: String) throws -> Report.LibraryCost.Batch {
        let memory = hb_memory_now()
        let mappings = hb_mapping_count()
        var start = hb_now_ns()
        let batch = try InlineBatch(library: library)
        let planned = hb_now_ns() - start
        // What the plan keeps: memory the planning used and freed goes back first.
        hb_trim()
        let afterPlan = hb_memory_now()
        start = hb_now_ns()
        let notPatched = try batch.patch()
        let patched = hb_now_ns() - start
        hb_trim()
        let afterPatch = hb_memory_now()
        let mappingsAfter = hb_mapping_count()
        start = hb_now_ns()
        try batch.unpatch()
        let unpatched = hb_now_ns() - start
        var reasons: [String: Int] = [:]
        for refusal in batch.refusals { reasons["\(refusal.reason)", default: 0] += 1 }
        let count = Double(batch.functions.count)
        return Report.LibraryCost.Batch(
            functions: batch.functions.count, refused: reasons, notPatched: notPatched.count,
            planMilliseconds: Double(planned) / 1e6, patchMilliseconds: Double(patched) / 1e6,
            unpatchMilliseconds: Double(unpatched) / 1e6,
            residentKiBAfterPlan: afterPlan.resident - memory.resident,
            residentKiBAfterPatch: afterPatch.resident - memory.resident,
            privateKiBAfterPatch: afterPatch.anonymous - memory.anonymous,
            anonymousKiBAfterPlan: afterPlan.anonymous - memory.anonymous,
            bytesPerFunctionPlanned: Double((afterPlan.anonymous - memory.anonymous) * 1024) / count,
            mappingsAdded: Int(mappingsAfter - mappings))
    }

    /// The library one function at a time, in the table's order: each planned with
    /// `InlineFunction(address:)` and patched with `patch()`.
    private static func oneByOne() throws -> Report.LibraryCost.OneByOne {
        let count = hb_library_functions(library, nil, 0)
        guard count > 0 else { throw BenchError("\(library) exports no function") }
        var addresses = [UInt](repeating: 0, count: count)
        _ = hb_library_functions(library, &addresses, addresses.count)
        var seen = Set<UInt>()
        addresses = addresses.filter { seen.insert($0).inserted }
        var times: [Double] = []
        var planned: [InlineFunction] = []
        var refused = 0
        for address in addresses {
            let start = hb_now_ns()
            do {
                let function = try InlineFunction(address: UnsafeRawPointer(bitPattern: address)!)
                try function.patch()
                planned.append(function)
            } catch {
                refused += 1
            }
            times.append(Double(hb_now_ns() - start))
        }
        for function in planned { try function.unpatch() }
        let first = times.prefix(100).reduce(0, +) / Double(min(100, times.count))
        let last = times.suffix(100).reduce(0, +) / Double(min(100, times.count))
        return Report.LibraryCost.OneByOne(
            functions: addresses.count, refused: refused, totalMilliseconds: times.reduce(0, +) / 1e6,
            firstHundredMicroseconds: first / 1e3, lastHundredMicroseconds: last / 1e3)
    }
}
