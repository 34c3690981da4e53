import CFuzzSupport
import FFIHook
import FuzzKit

/// Hooks whose background count was frozen when the previous input ended.
private nonisolated(unsafe) var finishedHooks: [(counters: HookCounters, background: Int)] = []

/// Runs one input as a sequence of hook operations on the fixed slots and checks each
/// against the model.
///
/// Each operation is one byte (its value modulo 12) and the bytes after it:
/// 0, 1, 2 install before, instead or after (a byte: slot in bits 0-1, once in bit 2, instead
/// variant in bits 3-4 modulo 3; a byte: the block's constant); 3 removes a live hook (a byte
/// choosing it); 4 removes a removed one again; 5 to 8 call through a slot (a byte for the
/// slot, one byte each for the two arguments); 9 waits for reclamation; 10 installs with a
/// mismatched signature (a byte for the slot); 11 calls through every slot. At the end all
/// hooks are removed and the slots and counts checked.
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    cfuzz_mark_fuzzing_thread()
    Background.startOnce()
    let bytes = inputBytes(data, size)
    currentInput = bytes

    // After reclamation no call can be inside a removed block, and no new call runs it.
    for (index, finished) in finishedHooks.enumerated() {
        let now = finished.counters.background.load(ordering: .relaxed)
        require(
            now == finished.background,
            "hook \(index) of the previous input ran on another thread after its removal and reclamation "
                + "(\(finished.background) runs then, \(now) now)", bytes)
    }

    var model = HookModel(bytes: bytes)
    var input = bytes[...]
    func next() -> UInt8 { input.popFirst() ?? 0 }
    func argument() -> Int32 { Int32(Int8(bitPattern: next())) }
    while let operation = input.popFirst() {
        switch operation % 12 {
        case 0, 1, 2:
            let position: [HookPosition] = [.before, .instead, .after]
            let choice = next()
            let variant = InsteadVariant.allCases[Int(choice >> 3) % InsteadVariant.allCases.count]
            model.install(
                slot: Int(choice & 3), position: position[Int(operation % 12)], once: choice & 4 != 0,
                variant: variant, constant: argument())
        case 3:
            model.removeLive(next())
        case 4:
            model.removeAgain(next())
        case 5, 6, 7, 8:
            let slot = Int(next() % UInt8(Slots.count))
            model.call(slot: slot, argument(), argument())
        case 9:
            model.waitForReclamation()
        case 10:
            model.installMismatched(slot: Int(next() % UInt8(Slots.count)))
        default:
            let a = argument()
            for slot in 0..<Slots.count { model.call(slot: slot, a, 1) }
        }
    }
    model.finish()
    finishedHooks = model.hooks.map { ($0.counters, $0.counters.background.load(ordering: .relaxed)) }
    return 0
}
