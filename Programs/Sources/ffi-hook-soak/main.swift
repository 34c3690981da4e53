// A soak test of the hook engine: callers call through a table of C function pointers
// while mutators install and remove hooks of every kind on its slots and a reclaimer waits
// for reclamation, for a set time. It then removes everything and checks that no call was
// lost or answered wrongly, that every slot has its original back, and that the memory of
// removed hooks was freed. It exits with status 1 when a check fails.
//
//     swift run -c release ffi-hook-soak --seconds 60 --callers 4 --mutators 2
//
// from Programs/; Scripts/soak.sh builds and runs it with AddressSanitizer. With --inline it
// runs the inline soak instead (InlineSoak.swift).

internal import CSoakSupport
import FFIHook
import FFIHookCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// MARK: - Options

let options: SoakOptions
switch SoakOptions.parse(Array(CommandLine.arguments.dropFirst())) {
case .success(let parsed):
    options = parsed
case .failure(let error):
    if let message = error.message {
        printError("ffi-hook-soak: \(message)\n\(SoakOptions.usage)\n")
        exit(2)
    }
    printLine(SoakOptions.usage)
    exit(0)
}

if options.inline { exit(runInlineSoak(options)) }

let signatures: [Signature]
do {
    signatures = try SlotShape.allCases.map { shape throws(EncodingError) in try Signature(shape.encoding) }
} catch {
    printError("ffi-hook-soak: bad signature: \(error)\n")
    exit(1)
}
guard soak_table_differences() == 0 else {
    printError("ffi-hook-soak: the table does not hold its originals at the start\n")
    exit(1)
}

printLine(
    "ffi-hook-soak: \(options.seconds) s, \(options.callers) callers, \(options.mutators) mutators, "
        + "seed \(options.seed)" + (options.fault.map { ", injected fault \($0.rawValue)" } ?? ""))
for shape in SlotShape.allCases {
    printLine("  slot \(shape.rawValue): \(shape)  \"\(shape.encoding)\"")
}

// MARK: - Run

let failures = FailureLog()
let tallies = SlotShape.allCases.map { _ in SlotTally() }
let reservations = Reservations()
let callTotals = Shared(Array(repeating: SlotCalls(), count: SlotShape.allCases.count))
let callProgress = (0..<options.callers).map { _ in Counter() }
let mutatorProgress = (0..<options.mutators).map { _ in MutatorProgress() }
let reclamations = Counter()
let longestWait = Shared(0.0)
let slowWaits = Counter()
let verySlowWaits = Counter()

var threads: [SoakThread] = []
for id in 0..<options.callers {
    let caller = Caller(
        id: id, seed: options.seed, failures: failures, progress: callProgress[id], totals: callTotals)
    threads.append(SoakThread { caller.run() })
}
for id in 0..<options.mutators {
    let mutator = Mutator(
        id: id, seed: options.seed, signatures: signatures, tallies: tallies, reservations: reservations,
        failures: failures, progress: mutatorProgress[id])
    threads.append(SoakThread { mutator.run() })
}
let reclaimer = Reclaimer(
    failures: failures, rounds: reclamations, longest: longestWait, slow: slowWaits, verySlow: verySlowWaits)
threads.append(SoakThread { reclaimer.run() })

/// Memory figures now.
func sampleMemory() -> MemorySample {
    MemorySample(resident: soak_resident_bytes(), heap: soak_heap_bytes(nil))
}

/// One line of progress.
func progressLine(_ elapsed: Double) -> String {
    let calls = callProgress.reduce(0) { $0 + $1.value }
    let installs = mutatorProgress.reduce(0) { $0 + $1.installs.value }
    let removes = mutatorProgress.reduce(0) { $0 + $1.removes.value }
    return "[\(Int(elapsed)) s] calls \(calls), installs \(installs), removes \(removes), "
        + "reclamations \(reclamations.value), live blocks \(liveBlocks.value), \(sampleMemory().description)"
}

let start = monotonicSeconds()
let deadline = start + options.seconds
let warmUpEnd = start + min(max(options.seconds * 0.1, 0.5), 30)
var warmUp: MemorySample?
var nextProgress = options.progressInterval > 0 ? start + options.progressInterval : .infinity
var faultPlanted = false
while true {
    let now = monotonicSeconds()
    if now >= deadline { break }
    if warmUp == nil && now >= warmUpEnd {
        warmUp = sampleMemory()
        if let fault = options.fault, !faultPlanted {
            switch fault {
            case .lostCall: soak_drop_next_add_count()
            case .badResult: badResultArmed.store(true, ordering: .relaxed)
            }
            faultPlanted = true
        }
    }
    if now >= nextProgress {
        printLine(progressLine(now - start))
        nextProgress += options.progressInterval
    }
    sleep(seconds: min(0.25, deadline - now))
}
let warmUpSample = warmUp ?? sampleMemory()
let beforeStop = sampleMemory()
running.store(false, ordering: .relaxed)
for thread in threads { thread.join() }
let runSeconds = monotonicSeconds() - start

// MARK: - Wind-down

// The mutators removed their hooks before they stopped; free what the removals replaced.
var reclamationError: HookError?
do {
    try Hook.waitForReclamation()
} catch {
    reclamationError = error
}

// One more call through each slot, now unhooked: the original's answer, counted once.
var unhookedWrong: [String] = []
for shape in SlotShape.allCases {
    let input = CallInput(seed: 17 + shape.rawValue)
    let before = soak_original_calls(Int32(shape.rawValue))
    let result = shape.call(input)
    let after = soak_original_calls(Int32(shape.rawValue))
    if result != input.a + shape.rest(input) || after != before + 1 {
        unhookedWrong.append("\(shape): \(result.map(String.init) ?? "inconsistent"), \(after - before) runs")
    }
}
let endSample = sampleMemory()

// MARK: - Summary

let calls = callTotals.withLock { $0 }
let totalCalls = calls.reduce(0) { $0 + $1.calls }
let installs = mutatorProgress.reduce(0) { $0 + $1.installs.value }
let removes = mutatorProgress.reduce(0) { $0 + $1.removes.value }
let onceFired = mutatorProgress.reduce(0) { $0 + $1.onceFired.value }
let drains = mutatorProgress.reduce(0) { $0 + $1.drains.value }
var heapSource: UnsafePointer<CChar>?
_ = soak_heap_bytes(&heapSource)

printLine("ran \(oneDecimal(runSeconds)) s")
printLine("calls: \(totalCalls) (\(Int(Double(totalCalls) / runSeconds)) per second)")
for shape in SlotShape.allCases {
    let seen = calls[shape.rawValue]
    let tally = tallies[shape.rawValue]
    printLine(
        "  \(shape.rawValue) \(shape): calls \(seen.calls), original runs "
            + "\(soak_original_calls(Int32(shape.rawValue))), replaced \(tally.skipped.value), "
            + "nested \(tally.nested.value); block runs "
            + HookKind.allCases.map { "\($0) \(tally.runs[$0.rawValue].value)" }.joined(separator: ", "))
}
printLine(
    "installs: \(installs), removes: \(removes), once hooks that removed themselves: \(onceFired), drains: \(drains)")
printLine(
    "reclamations: \(reclamations.value) (longest wait \(Int(longestWait.withLock { $0 })) µs, "
        + "\(slowWaits.value) over 10 ms, \(verySlowWaits.value) over 100 ms)")
printLine("memory after warm-up: \(warmUpSample.description)")
printLine("memory before stop:   \(beforeStop.description)")
printLine("memory at end:        \(endSample.description)")
printLine("heap figures from: \(heapSource.map { String(cString: $0) } ?? "?")")

// MARK: - Checks

var checks: [Check] = []
let badResults = calls.reduce(0) { $0 + $1.bad }
let resultSamples = failures.samples.filter { $0.hasPrefix("results:") }
checks.append(
    Check(
        name: "results", passed: badResults == 0,
        detail: "\(badResults) of \(totalCalls) results not explained by the installable hooks"
            + (resultSamples.isEmpty ? "" : ", first: " + resultSamples.joined(separator: " | "))))

var lost: [String] = []
for shape in SlotShape.allCases {
    let tally = tallies[shape.rawValue]
    // Caller calls, nested calls from blocks, and the one unhooked call, less replaced ones.
    let expected = calls[shape.rawValue].calls + tally.nested.value + 1 - tally.skipped.value
    let actual = Int(soak_original_calls(Int32(shape.rawValue)))
    if actual != expected { lost.append("\(shape): original ran \(actual) times, expected \(expected)") }
}
checks.append(
    Check(
        name: "no lost calls", passed: lost.isEmpty,
        detail: lost.isEmpty
            ? "each slot's original ran once per call not replaced" : lost.joined(separator: "; ")))

var marks: [String] = []
for shape in SlotShape.allCases {
    let seen = calls[shape.rawValue]
    let runs = tallies[shape.rawValue].runs.map(\.value)
    let pairs: [(String, Int, Int)] = [
        ("before", seen.before, runs[HookKind.before.rawValue]),
        ("pass-through", seen.passthrough, runs[HookKind.passthrough.rawValue]),
        ("after", seen.after, runs[HookKind.after.rawValue]),
        ("replace", seen.replaced, runs[HookKind.replace.rawValue]),
        ("replaced count", seen.replaced, tallies[shape.rawValue].skipped.value),
    ]
    for (name, decoded, counted) in pairs where decoded != counted {
        marks.append("\(shape): \(name) marks \(decoded), block runs \(counted)")
    }
}
checks.append(
    Check(
        name: "marks match block runs", passed: marks.isEmpty,
        detail: marks.isEmpty ? "every block run is in exactly one result" : marks.joined(separator: "; ")))

let nestedWrong = tallies.reduce(0) { $0 + $1.nestedWrong.value }
let nested = tallies.reduce(0) { $0 + $1.nested.value }
checks.append(
    Check(
        name: "re-entry", passed: nestedWrong == 0,
        detail: "\(nestedWrong) of \(nested) nested calls from blocks did not get the plain original's result"))

let blockFaults = tallies.reduce(0) { $0 + $1.blockFaults.value }
checks.append(
    Check(
        name: "arguments in blocks", passed: blockFaults == 0,
        detail: "\(blockFaults) blocks saw an inconsistent argument or return value"))

let argumentsChanged = tallies.reduce(0) { $0 + $1.argumentsChanged.value }
let changedSlots = SlotShape.allCases.filter { tallies[$0.rawValue].argumentsChanged.value > 0 }
checks.append(
    Check(
        name: "arguments after the original", passed: argumentsChanged == 0,
        detail: "\(argumentsChanged) after or pass-through blocks saw arguments other than the original got"
            + (changedSlots.isEmpty ? "" : " (slots: \(changedSlots.map { "\($0.rawValue)" }.joined(separator: ", ")))")
    ))

let onceRepeats = tallies.reduce(0) { $0 + $1.onceRepeats.value }
checks.append(
    Check(name: "once", passed: onceRepeats == 0, detail: "\(onceRepeats) extra runs of once hooks"))

let otherFailures = failures.count - badResults
let otherSamples = failures.samples.filter { !$0.hasPrefix("results:") }
checks.append(
    Check(
        name: "installs and removes", passed: otherFailures == 0,
        detail: otherFailures == 0
            ? "installs, removes and reclamations reported nothing wrong"
            : "\(otherFailures) failures, first: " + otherSamples.joined(separator: " | ")))

checks.append(
    Check(
        name: "unhooked calls", passed: unhookedWrong.isEmpty,
        detail: unhookedWrong.isEmpty
            ? "each slot answered once, with the original's result" : unhookedWrong.joined(separator: "; ")))

let differences = soak_table_differences()
checks.append(
    Check(
        name: "originals restored", passed: differences == 0,
        detail: differences == 0
            ? "every slot holds its original function"
            : "slots not holding their original (bit per slot): 0x\(String(differences, radix: 16))"))

// Read after every thread has stopped: nothing changes the figures any more.
let statistics = try Hook.statistics
let pending = statistics.pendingReclamationCount
checks.append(
    Check(
        name: "reclamation", passed: pending == 0 && reclamationError == nil,
        detail: "\(pending) snapshots pending" + (reclamationError.map { ", wait threw \($0)" } ?? "")))

let hookedSlots = statistics.hookedSlotCount
checks.append(
    Check(
        name: "hooked slots", passed: hookedSlots <= SlotShape.allCases.count,
        detail: "\(hookedSlots) of the \(SlotShape.allCases.count) slots still hooked"))

checks.append(
    Check(
        name: "blocks freed", passed: liveBlocks.value == 0,
        detail: "\(liveBlocks.value) hook blocks alive after \(installs) installs"))

// AddressSanitizer keeps freed memory in its quarantine (256 MiB by default), so resident
// memory grows until the quarantine is full whatever the program does; under valgrind the
// resident set holds valgrind's own memory and no heap figures exist. The heap check (or
// valgrind's leak check) covers those cases.
let heapFigures = heapSource.map { String(cString: $0) } ?? "?"
let sanitized = heapFigures == "sanitizer allocator"
let underValgrind = heapFigures == "none under valgrind"
let heapGrowth = Int64(endSample.heap) - Int64(warmUpSample.heap)
let heapAllowance: Int64 = 4 << 20
checks.append(
    Check(
        name: "heap", passed: underValgrind || heapGrowth <= heapAllowance,
        detail: underValgrind
            ? "not checked: no heap figures under valgrind (see its leak summary)"
            : "\(mebibytes(difference: heapGrowth)) MiB from warm-up to end (allowed +\(heapAllowance >> 20) MiB)"))

let residentGrowth = Int64(endSample.resident) - Int64(warmUpSample.resident)
let residentAllowance: Int64 = 16 << 20
checks.append(
    Check(
        name: "resident memory", passed: sanitized || underValgrind || residentGrowth <= residentAllowance,
        detail: "\(mebibytes(difference: residentGrowth)) MiB from warm-up to end"
            + (sanitized
                ? " (not checked: the sanitizer's quarantine holds freed memory)"
                : underValgrind
                    ? " (not checked: valgrind's own memory is resident)"
                    : " (allowed +\(residentAllowance >> 20) MiB)")))

exit(printChecks(checks) ? 0 : 1)
