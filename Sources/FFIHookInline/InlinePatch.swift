internal import CFFIHookPatch
internal import CFFIHookSupport
internal import FFIHook
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One function's inline patch: the jump written over its first instructions, the region
/// with the stub and the trampoline, and the jump cell the hook engine hooks as a slot.
///
/// The function is patched only while its cell leads somewhere other than the trampoline
/// (a hook's closure or a replacement): the registry tells the patch before the cell's first
/// such write (``slotWillChange()``, which writes the jump) and after every write
/// (``slotDidChange()``, which takes the jump out once the cell holds the trampoline again).
/// The region is kept for the life of the process, as slot closures are: a thread may still
/// run in the trampoline (preempted in it, or inside a function it called) after the jump is
/// taken out, and hooking the function again reuses it.
final class InlinePatch: SlotObserver, Sendable {
    /// The function's address.
    let function: UInt
    /// Its symbol, or its address in hexadecimal.
    let name: String
    /// The stub, trampoline and cell.
    let region: CodeRegion
    /// Where the jump goes (4 past an `endbr64`) and what it overwrites, through the end of
    /// the last instruction it touches (filled with `int3` after the jump).
    let patchStart: UInt
    let originalBytes: [UInt8]
    let patchBytes: [UInt8]
    /// Where a stopped thread inside the overwritten bytes goes: the copy of its instruction.
    let moves: [(from: UInt, to: UInt)]
    /// The protection of the function's page, restored after each write.
    let protection: Int32
    /// How many bytes the relocator copied from the function's start.
    let copiedLength: Int
    /// Whether the jump is in the function now (changed only under the registry's lock).
    let isPatched = Atomic<Bool>(false)
    /// Whether the jump stays while nothing hooks the function (``InlineFunction/patch()``).
    let isPinned = Atomic<Bool>(false)
    /// How many threads the writes of the jump have moved into the trampoline, in all.
    let movedThreads = Atomic<Int>(0)

    init(
        function: UInt, name: String, region: CodeRegion, patchStart: UInt, originalBytes: [UInt8],
        patchBytes: [UInt8], moves: [(from: UInt, to: UInt)], protection: Int32, copiedLength: Int
    ) {
        self.function = function
        self.name = name
        self.region = region
        self.patchStart = patchStart
        self.originalBytes = originalBytes
        self.patchBytes = patchBytes
        self.moves = moves
        self.protection = protection
        self.copiedLength = copiedLength
    }

    /// The cell as a slot.
    var slot: FunctionSlot { FunctionSlot(address: region.cell) }

    /// The trampoline: the function's first instructions, then a jump to the rest.
    var trampoline: UInt { region.trampoline }

    // MARK: - Writing the jump

    func slotWillChange() throws(HookError) {
        guard !isPatched.load(ordering: .acquiring) else { return }
        let result = writeStatus(expected: originalBytes, bytes: patchBytes, moving: true)
        if let problem = Self.describe(result) {
            throw HookError(code: .patchFailed, message: problem, symbol: name)
        }
        movedThreads.add(Int(result.moved), ordering: .relaxed)
        isPatched.store(true, ordering: .releasing)
    }

    func slotDidChange() {
        guard isPatched.load(ordering: .acquiring), !isPinned.load(ordering: .acquiring) else { return }
        let cell = UnsafeMutablePointer<Atomic<UInt>>(bitPattern: region.cell)!
        guard cell.pointee.load(ordering: .acquiring) == region.trampoline else { return }
        switch writeStatus(expected: patchBytes, bytes: originalBytes, moving: false).status {
        case FFH_PATCH_DONE, FFH_PATCH_CHANGED, FFH_PATCH_UNMAPPED:
            // Taken out, or the function's object is gone (nothing to write into).
            isPatched.store(false, ordering: .releasing)
        default:
            // Left in: calls pass through the trampoline until a later write takes it out.
            break
        }
    }

    /// Writes `bytes` over `expected` at the patch's start with the other threads stopped;
    /// moving a thread inside the overwritten bytes when `moving`.
    private func writeStatus(expected: [UInt8], bytes: [UInt8], moving: Bool) -> ffh_patch_result {
        var result = ffh_patch_result()
        let moves = moving ? self.moves.map { ffh_patch_move(from: $0.from, to: $0.to) } : []
        let watchEnd = function + UInt(copiedLength)
        _ = expected.withUnsafeBufferPointer { expected in
            bytes.withUnsafeBufferPointer { bytes in
                moves.withUnsafeBufferPointer { moves in
                    ffh_patch_write(
                        UnsafeMutableRawPointer(bitPattern: patchStart), expected.baseAddress, bytes.baseAddress,
                        bytes.count, protection, patchStart + 1, watchEnd, moves.baseAddress, moves.count, &result)
                }
            }
        }
        return result
    }

    /// Why a write failed, in words; nil for a write that was done.
    static func describe(_ result: ffh_patch_result) -> String? {
        let thread = "thread \(result.thread)"
        let pc = "0x" + String(result.pc, radix: 16)
        switch result.status {
        case FFH_PATCH_DONE: return nil
        case FFH_PATCH_UNSUPPORTED: return "this platform has no code writer (inline hooks work on Linux x86-64)"
        case FFH_PATCH_NO_SIGNAL:
            return "no real-time signal is free to stop the other threads while the code changes"
        case FFH_PATCH_THREAD_UNRESPONSIVE:
            return "\(thread) did not stop within 2 s (it blocks signals and runs outside a system call)"
        case FFH_PATCH_THREAD_INSIDE:
            return "\(thread) is at \(pc), inside the bytes to overwrite, where it cannot be moved"
        case FFH_PATCH_PROTECTION:
            return "the code's page could not be made writable (mprotect failed with errno \(result.error))"
        case FFH_PATCH_CHANGED:
            return
                "the function's bytes are no longer the ones planned for (its object was unloaded or its code rewritten)"
        case FFH_PATCH_NO_MEMORY: return "memory for stopping the threads could not be mapped"
        case FFH_PATCH_UNMAPPED: return "the function's code is no longer mapped"
        default: return "the code writer failed (status \(result.status.rawValue))"
        }
    }
}
