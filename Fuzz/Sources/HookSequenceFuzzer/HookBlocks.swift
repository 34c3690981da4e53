import CFuzzSupport
import FFIHook
import FuzzKit
import Synchronization

/// How many times one hook's block ran, on the fuzzing thread and on any other.
final class HookCounters: Sendable {
    /// Runs on the fuzzing thread.
    let fuzzing = Atomic<Int>(0)
    /// Runs on other threads (the background thread).
    let background = Atomic<Int>(0)
}

/// What an instead block does.
enum InsteadVariant: CaseIterable {
    /// Calls the original (the next instead block inward), then transforms its result.
    case wrap
    /// Returns a value made from the first argument without calling inward.
    case replace
    /// Calls through its own slot, which as a nested call goes straight to the original.
    case reenter
}

/// The arithmetic blocks apply on the fuzzing thread; the model applies the same.
enum Transform {
    static func before(_ a: Int32, _ k: Int32) -> Int32 { a &* 3 &+ k }
    static func wrap(_ result: Int32, _ k: Int32) -> Int32 { result &* 5 &+ k }
    static func replace(_ a: Int32, _ k: Int32) -> Int32 { a ^ k }
    static func reenter(_ inner: Int32, _ k: Int32) -> Int32 { inner &+ k }
    static func after(_ result: Int32, _ k: Int32) -> Int32 { result &* 7 &+ k }
}

/// The input being run, for messages from inside blocks (read on the fuzzing thread only).
nonisolated(unsafe) var currentInput: [UInt8] = []

/// Hook blocks whose effect the model predicts.
///
/// On the fuzzing thread a block counts its run and applies its ``Transform``. On any other
/// thread it counts its run and leaves the call as the original would answer it: before and
/// after blocks change nothing, a wrapping instead block calls inward, a replacing one
/// returns the original's result computed in Swift, and a re-entering one returns what the
/// nested call gave.
enum HookBlocks {
    static func make(
        slot: Int, position: HookPosition, variant: InsteadVariant, constant k: Int32, counters: HookCounters
    ) -> @Sendable (borrowing Invocation) -> Void {
        { call in
            let fuzzing = cfuzz_is_fuzzing_thread() != 0
            if fuzzing {
                counters.fuzzing.wrappingAdd(1, ordering: .relaxed)
            } else {
                counters.background.wrappingAdd(1, ordering: .relaxed)
            }
            switch position {
            case .before:
                guard fuzzing else { return }
                call.setArgument(0, to: Transform.before(call.argument(0, as: Int32.self), k))
                if k & 0xF == 0 { checkWaitRefused() }
            case .instead:
                let a = call.argument(0, as: Int32.self)
                let b = call.argument(1, as: Int32.self)
                switch variant {
                case .wrap:
                    call.callOriginal()
                    if fuzzing { call.setReturnValue(Transform.wrap(call.returnValue(as: Int32.self), k)) }
                case .replace:
                    call.setReturnValue(fuzzing ? Transform.replace(a, k) : Slots.reference(slot, a, b))
                case .reenter:
                    let inner = Slots.call(slot, a, b).result
                    call.setReturnValue(fuzzing ? Transform.reenter(inner, k) : inner)
                }
            case .after:
                guard fuzzing else { return }
                call.setReturnValue(Transform.after(call.returnValue(as: Int32.self), k))
            }
        }
    }

    /// Waiting for reclamation inside a block would wait for itself: it must be refused.
    private static func checkWaitRefused() {
        do {
            try Hook.waitForReclamation()
            require(false, "waitForReclamation() returned inside a hook block", currentInput)
        } catch {
            require(
                error.code == .calledFromHookBlock,
                "waitForReclamation() inside a hook block threw \(error)", currentInput)
        }
    }
}
