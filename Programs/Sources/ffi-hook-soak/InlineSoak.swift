// The inline soak (`ffi-hook-soak --inline`, issue #24): caller threads call a C function
// directly (a `call rel32`, no pointer) in a tight loop while the main thread installs and
// removes an inline hook on it, in two phases:
//
// - cold (`--cycles`): each install writes the jump over the function's first instructions
//   and each removal writes them back, so every cycle stops the other threads twice (and
//   moves a thread found inside the overwritten bytes to its instruction's copy);
// - kept patched (`--kept-cycles`): `patch()` once, then each install and removal only
//   writes the jump cell.
//
// The hook calls the original and adds SOAK_INLINE_MARK to the result. Checked exactly:
// every result is the sum or the marked sum, the marked results are as many as the hook's
// runs, the function's own counter ran once per call, and its bytes are back at the end.

internal import CSoakSupport
import FFIHook
import FFIHookCore
import FFIHookInline
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A flag the callers poll.
final class StopFlag: Sendable {
    private let cell = Atomic<Bool>(false)
    func set() { cell.store(true, ordering: .releasing) }
    var isSet: Bool { cell.load(ordering: .acquiring) }
}

/// What one phase did.
struct InlinePhase {
    let name: String
    var cycles = 0
    /// Wall time of the phase's cycles.
    var seconds = 0.0
    /// Time spent in the installs and removals themselves.
    var writeSeconds = 0.0
    /// Cycles during which some call went through the hook.
    var cyclesHooked = 0
    var calls = 0
    var hooked = 0
    var blocks = 0
    var runs = 0
    var wrongResults: [String] = []
    var failures: [String] = []

    var summary: String {
        let perCycle = cycles > 0 ? Int((writeSeconds / Double(cycles) * 1e6).rounded()) : 0
        return "\(name): \(cycles) install+remove cycles in \(oneDecimal(seconds)) s, "
            + "\(oneDecimal(writeSeconds)) s of it installing and removing (\(perCycle) µs per cycle); "
            + "\(cyclesHooked) cycles saw a hooked call; "
            + "calls \(calls), hooked \(hooked), hook runs \(blocks), original runs \(runs)"
    }

    var checks: [Check] {
        [
            Check(
                name: "\(name): results", passed: wrongResults.isEmpty,
                detail: wrongResults.isEmpty
                    ? "every result was the sum or the hooked sum" : wrongResults.prefix(3).joined(separator: " | ")),
            Check(
                name: "\(name): hooked calls", passed: hooked == blocks,
                detail: "\(hooked) hooked results, \(blocks) runs of the hook"),
            Check(
                name: "\(name): original runs", passed: runs == calls,
                detail: "the function ran \(runs) times for \(calls) calls"),
            Check(
                name: "\(name): calls through the hook", passed: cyclesHooked > 0,
                detail: "\(cyclesHooked) of \(cycles) cycles saw a call go through the hook"),
            Check(
                name: "\(name): installs and removes", passed: failures.isEmpty && cycles > 0,
                detail: failures.isEmpty ? "\(cycles) cycles" : failures.prefix(3).joined(separator: " | ")),
        ]
    }
}

/// Runs the inline soak; the process's exit status.
func runInlineSoak(_ options: SoakOptions) -> Int32 {
    typealias Add = @convention(c) (Int64, Int64) -> Int64
    let address = unsafeBitCast(soak_inline_add as Add, to: UnsafeRawPointer.self)
    let before = Array(UnsafeRawBufferPointer(start: address, count: 16))
    let function: InlineFunction
    let signature: Signature
    do {
        function = try InlineFunction(address: address)
        signature = try Signature("qqq")
    } catch {
        printError("ffi-hook-soak: cannot plan the inline hook of soak_inline_add: \(error)\n")
        return 1
    }
    printLine(
        "ffi-hook-soak --inline: \(options.cycles) cold and \(options.keptCycles) kept-patched cycles, "
            + "\(options.callers) callers; "
            + "soak_inline_add: the patch overwrites \(function.overwrittenLength) bytes with a "
            + (function.usesNearJump ? "5-byte jmp rel32" : "14-byte absolute jmp"))

    var phases: [InlinePhase] = []
    for keptPatched in [false, true] {
        let phase = runInlinePhase(
            keptPatched ? "kept patched" : "cold", function: function, signature: signature, options: options,
            keptPatched: keptPatched)
        printLine(phase.summary)
        phases.append(phase)
    }

    // The end state: unpatched, the bytes as they were, a call answered by the function.
    var checks = phases.flatMap(\.checks)
    let after = Array(UnsafeRawBufferPointer(start: address, count: 16))
    checks.append(
        Check(
            name: "bytes restored", passed: after == before && !function.isPatched,
            detail: after == before
                ? "the function's first 16 bytes are as before the soak" : "now \(hex(after)), were \(hex(before))"))
    let runs = soak_inline_runs()
    let result = soak_inline_add(2, 3)
    checks.append(
        Check(
            name: "unhooked call", passed: result == 5 && soak_inline_runs() == runs + 1,
            detail: "soak_inline_add(2, 3) = \(result), \(soak_inline_runs() - runs) runs"))
    var reclamation = "nothing pending"
    var reclaimed = true
    do {
        try Hook.waitForReclamation()
        let statistics = try Hook.statistics
        reclaimed = statistics.pendingReclamationCount == 0 && statistics.hookedSlotCount == 0
        reclamation =
            "\(statistics.pendingReclamationCount) snapshots pending, \(statistics.hookedSlotCount) slots hooked"
    } catch {
        reclaimed = false
        reclamation = "\(error)"
    }
    checks.append(Check(name: "reclamation", passed: reclaimed, detail: reclamation))
    return printChecks(checks) ? 0 : 1
}

/// One phase: callers start, the hook comes and goes (`options.cycles` or
/// `options.keptCycles` times), callers stop.
func runInlinePhase(
    _ name: String, function: InlineFunction, signature: Signature, options: SoakOptions, keptPatched: Bool
) -> InlinePhase {
    var phase = InlinePhase(name: name)
    if keptPatched {
        do {
            try function.patch()
        } catch {
            phase.failures.append("patch(): \(error)")
            return phase
        }
    }
    let stop = StopFlag()
    let calls = Counter()
    let hooked = Counter()
    let blocks = Counter()
    let wrong = Shared([String]())
    let runsBefore = soak_inline_runs()
    var callers: [SoakThread] = []
    for id in 0..<options.callers {
        callers.append(
            SoakThread {
                var base = Int64(id) << 40
                while !stop.isSet {
                    var marked: Int64 = 0
                    let done = soak_inline_loop(1000, base, &marked)
                    if done != 1000 {
                        // The call at -1 - done answered wrongly; those before it were right.
                        calls.add(Int(-done))
                        wrong.withLock { $0.append("caller \(id): call \(-1 - done) of a loop at \(base)") }
                        break
                    }
                    calls.add(1000)
                    hooked.add(Int(marked))
                    base += 1000
                }
            })
    }
    while calls.value == 0 { sleep(seconds: 0.001) }

    let start = monotonicSeconds()
    var nextProgress = options.progressInterval > 0 ? start + options.progressInterval : .infinity
    for cycle in 0..<(keptPatched ? options.keptCycles : options.cycles) {
        do {
            let runsBefore = blocks.value
            let installing = monotonicSeconds()
            let token = try Hook.instead(on: function.slot, signature: signature) { call in
                call.callOriginal()
                call.setReturnValue(call.returnValue(as: Int64.self) + Int64(SOAK_INLINE_MARK))
                blocks.add()
            }
            let installed = monotonicSeconds()
            // Cold, the callers were stopped for the write just now: give them a moment
            // (up to 2 ms) to call through the hook before it goes.
            while !keptPatched && blocks.value == runsBefore && monotonicSeconds() < installed + 0.002 {
                sleep(seconds: 0.000_05)
            }
            let removing = monotonicSeconds()
            token.remove()
            phase.writeSeconds += (installed - installing) + (monotonicSeconds() - removing)
            if blocks.value > runsBefore { phase.cyclesHooked += 1 }
        } catch {
            phase.failures.append("cycle \(cycle): \(error)")
            break
        }
        phase.cycles += 1
        let now = monotonicSeconds()
        if now >= nextProgress {
            printLine(
                "[\(Int(now - start)) s] \(name): cycle \(phase.cycles), calls \(calls.value), hooked \(hooked.value)")
            nextProgress += options.progressInterval
        }
    }
    phase.seconds = monotonicSeconds() - start
    stop.set()
    for caller in callers { caller.join() }
    if keptPatched {
        do {
            try function.unpatch()
        } catch {
            phase.failures.append("unpatch(): \(error)")
        }
    }
    phase.calls = calls.value
    phase.hooked = hooked.value
    phase.blocks = blocks.value
    phase.runs = Int(soak_inline_runs() - runsBefore)
    phase.wrongResults = wrong.withLock { $0 }
    return phase
}

/// Bytes in hexadecimal, separated by spaces.
func hex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(separator: " ")
}
