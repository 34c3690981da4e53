import CTestSupport
import Synchronization
import Testing

@testable import FFIHook

#if canImport(Glibc)
    import Glibc
#endif

/// What a caller finds in `errno` after a hooked call: what the blocks set, or what the
/// original left, never something the library's own work on the call path left.
///
/// The callers are C (``ct_errno_call``): they read `errno` right after the call, with no
/// Swift code in between.
@Suite(.serialized)
struct ErrnoTests {
    /// `int (int)`, ``ct_errno_fail``: sets errno to its argument and returns -1.
    let signature = try! Signature("ii")
    var slot: FunctionSlot { FunctionSlot(ct_errno_slot_address()) }

    /// Calls through the slot with errno set to `before` first; the result and errno seen.
    func call(before: Int32 = 0, setting value: Int32) -> (result: Int32, errno: Int32) {
        var seen: Int32 = 0
        let result = ct_errno_call(before, value, &seen)
        return (result, seen)
    }

    @Test func anInsteadBlockThatSetsErrnoIsWhatTheCallerSees() throws {
        let token = try Hook.instead(on: slot, signature: signature) { call in
            errno = EACCES
            call.setReturnValue(Int32(-1))
        }
        defer { token.remove() }
        #expect(call(setting: 0) == (-1, EACCES))
    }

    @Test func theOriginalsErrnoReachesTheCallerThroughBeforeAndAfterBlocks() throws {
        let seenInAfter = Mutex<[Int32]>([])
        let before = try Hook.before(on: slot, signature: signature) { _ in }
        defer { before.remove() }
        let after = try Hook.after(on: slot, signature: signature) { _ in
            let swift = errno
            let c = ct_errno_get()
            seenInAfter.withLock { $0 += [swift, c] }
        }
        defer { after.remove() }
        #expect(call(setting: ENOENT) == (-1, ENOENT))
        #expect(seenInAfter.withLock { $0 } == [ENOENT, ENOENT])
    }

    @Test func anInsteadBlockThatCallsTheOriginalPassesItsErrnoOn() throws {
        let token = try Hook.instead(on: slot, signature: signature) { call in
            call.callOriginal()
        }
        defer { token.remove() }
        #expect(call(setting: EBADF) == (-1, EBADF))
    }

    @Test func anAfterBlockThatSetsErrnoOverridesTheOriginals() throws {
        let token = try Hook.after(on: slot, signature: signature) { _ in
            errno = EIO
        }
        defer { token.remove() }
        #expect(call(setting: ENOENT) == (-1, EIO))
    }

    /// The library's own work around the original leaves errno as it was: a `once` hook
    /// removing itself after the original ran, a thread claiming its record on its first
    /// hooked call, calls through a slot whose hooks are gone.
    @Test func theLibrarysOwnWorkLeavesErrnoAlone() throws {
        let sentinel: Int32 = 4321
        let before = try Hook.before(on: slot, signature: signature, options: .once) { _ in }
        let after = try Hook.after(on: slot, signature: signature, options: .once) { _ in }
        defer {
            before.remove()
            after.remove()
        }
        // An original that leaves errno alone: what the caller set stays.
        #expect(call(before: sentinel, setting: 0) == (0, sentinel))
        #expect(!before.isActive && !after.isActive)
        // A new thread's first hooked call claims the thread's record.
        let instead = try Hook.instead(on: slot, signature: signature, options: .once) { call in
            call.callOriginal()
        }
        defer { instead.remove() }
        var seen: Int32 = 0
        #expect(ct_errno_call_on_new_thread(sentinel, 0, &seen) == 0)
        #expect(seen == sentinel)
        #expect(ct_errno_call_on_new_thread(sentinel, ENOENT, &seen) == -1)
        #expect(seen == ENOENT)
        // The slot keeps its closure as a pass-through once its hooks are gone.
        #expect(call(before: sentinel, setting: 0) == (0, sentinel))
        #expect(call(before: sentinel, setting: EPERM) == (-1, EPERM))
    }

    /// The same through an import-table entry: `fsync(-1)` fails with EBADF.
    @Test func throughAnImportTableEntry() throws {
        var seen: Int32 = 0
        let failing = try Hook.scoped {
            try ImportTable.instead(
                symbol: "fsync", in: .mainProgram, signature: signature, options: .inCurrentTaskOnly
            ) { call in
                errno = EACCES
                call.setReturnValue(Int32(-1))
            }
        } during: {
            ct_errno_call_fsync(0, 1, &seen)
        }
        #expect(failing == -1 && seen == EACCES)

        let afterSaw = Mutex<Int32>(0)
        let original = try Hook.scoped {
            try ImportTable.after(
                symbol: "fsync", in: .mainProgram, signature: signature, options: [.inCurrentTaskOnly, .once]
            ) { _ in
                afterSaw.withLock { $0 = errno }
            }
        } during: {
            ct_errno_call_fsync(0, -1, &seen)
        }
        #expect(original == -1 && seen == EBADF)
        #expect(afterSaw.withLock { $0 } == EBADF)

        let overridden = try Hook.scoped {
            try ImportTable.after(
                symbol: "fsync", in: .mainProgram, signature: signature, options: .inCurrentTaskOnly
            ) { _ in
                errno = EIO
            }
        } during: {
            ct_errno_call_fsync(0, -1, &seen)
        }
        #expect(overridden == -1 && seen == EIO)
    }
}
