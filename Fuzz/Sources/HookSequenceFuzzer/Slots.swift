import CFuzzSupport
import FFIHook
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The fixed slots the fuzzer hooks, allocated once: a slot keeps its library entry for the
/// life of the process, so the set must stay small.
///
/// Slot 0 holds `a + b`, slot 1 `a * b`, slot 2 `a - b` (all wrapping), slot 3 NULL, which
/// only an instead hook can fill. The background thread calls through the noisy slots 0
/// and 1; slots 2 and 3 are called only by the fuzzing thread, so there every `once` hook
/// runs exactly where the model says.
enum Slots {
    /// How many slots there are.
    static let count = 4
    /// The slots the background thread calls through.
    static let noisy = 0..<2
    /// The signature of every slot: `int32_t (int32_t, int32_t)`.
    static let signature = try! Signature("iii")

    private nonisolated(unsafe) static let storage: UnsafeMutablePointer<UnsafeMutableRawPointer?> = {
        let storage = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: count)
        for index in 0..<count {
            (storage + index).initialize(to: UnsafeMutableRawPointer(mutating: cfuzz_binary_function(Int32(index))))
        }
        return storage
    }()

    /// The slot at `index`.
    static func slot(_ index: Int) -> FunctionSlot {
        FunctionSlot(storage + index)
    }

    /// The function slot `index` holds when it is not hooked (0 for slot 3).
    static func original(_ index: Int) -> UInt {
        UInt(bitPattern: cfuzz_binary_function(Int32(index)))
    }

    /// What slot `index` holds now.
    static func current(_ index: Int) -> UInt {
        UnsafeMutableRawPointer(storage + index).assumingMemoryBound(to: Atomic<UInt>.self).pointee.load(
            ordering: .acquiring)
    }

    /// The unhooked function's result.
    static func reference(_ index: Int, _ a: Int32, _ b: Int32) -> Int32 {
        switch index {
        case 0: a &+ b
        case 1: a &* b
        case 2: a &- b
        default: 0
        }
    }

    /// Calls through slot `index`; `called` is false when it held NULL.
    static func call(_ index: Int, _ a: Int32, _ b: Int32) -> (result: Int32, called: Bool) {
        var called: CInt = 0
        let result = cfuzz_call_slot(storage + index, a, b, &called)
        return (result, called != 0)
    }

    /// Whether the background thread calls through slot `index`.
    static func isNoisy(_ index: Int) -> Bool {
        noisy.contains(index)
    }
}

/// The thread that keeps calling through the noisy slots for the life of the process, so
/// that installs and removals race with real calls.
///
/// Every block leaves background calls as the original would answer them (see
/// ``HookBlocks``), so each result must be the unhooked function's.
enum Background {
    private static let started = Atomic<Bool>(false)

    /// Starts the thread unless it runs already.
    static func startOnce() {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        let status = cfuzz_start_thread(backgroundMain)
        precondition(status == 0, "cannot start the background thread: \(status)")
    }
}

private func backgroundMain() {
    var round: UInt32 = 0
    while true {
        for slot in Slots.noisy {
            let a = Int32(bitPattern: round &* 0x9E37_79B9)
            let b = Int32(bitPattern: round ^ 0x5A5A_0000)
            let (result, called) = Slots.call(slot, a, b)
            let expected = Slots.reference(slot, a, b)
            if !called || result != expected {
                fatalError(
                    "background call through slot \(slot) with (\(a), \(b)) returned \(result) (called: \(called)), "
                        + "expected \(expected) from the original")
            }
        }
        round &+= 1
        if round % 64 == 0 { sched_yield() }
    }
}
