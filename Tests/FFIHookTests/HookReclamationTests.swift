import CTestSupport
import FFIHook
import Foundation
import Synchronization
import Testing

/// Memory of removed hooks is freed once no call can be inside it.
extension FixtureTableTests {
    @Suite struct HookReclamationTests {
        /// Counts live block contexts: each block captures one of these.
        final class Tracked: Sendable {
            static let live = Atomic<Int>(0)
            init() { Self.live.add(1, ordering: .relaxed) }
            deinit { Self.live.subtract(1, ordering: .relaxed) }
            func touch() {}
        }

        @Test func hundredThousandInstallsAndRemovalsLeaveNothingBehind() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let entriesBefore = Tracked.live.load(ordering: .relaxed)
            // (Ten thousand under ThreadSanitizer: the hundred thousand took 40 s of the serialized
            // fixture suites there.)
            let rounds = ProcessLifeTests.underThreadSanitizer ? 10_000 : 100_000
            for round in 0..<rounds {
                let tracked = Tracked()
                let token = try Hook.install(
                    on: FunctionSlot(slot), signature: FixtureSignature.add,
                    position: [HookPosition.before, .instead, .after][round % 3]
                ) { call in
                    tracked.touch()
                    if call.position == .instead { call.callOriginal() }
                }
                if round % 100 == 0 { _ = ct_fix_call_add_through(slot, 1) }
                token.remove()
            }
            try Hook.waitForReclamation()
            #expect(Tracked.live.load(ordering: .relaxed) == entriesBefore)
            #expect(
                address(in: slot) == addOriginalAddress)
        }

        @Test func aCallInsideARemovedBlockKeepsItAliveUntilItLeaves() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let liveBefore = Tracked.live.load(ordering: .relaxed)
            let tokenBox = Locked<HookToken?>(nil)
            let observed = Locked<Int>(-1)
            do {
                let tracked = Tracked()
                let token = try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in
                    // Remove our own hook from inside the block, then keep using what it captured.
                    _ = tokenBox.withLock { $0 }?.remove()
                    tracked.touch()
                    observed.withLock { $0 = Tracked.live.load(ordering: .relaxed) }
                }
                tokenBox.withLock { $0 = token }
            }
            _ = ct_fix_call_add_through(slot, 1)
            #expect(observed.withLock { $0 } == liveBefore + 1)
            try Hook.waitForReclamation()
            tokenBox.withLock { $0 = nil }
            #expect(Tracked.live.load(ordering: .relaxed) == liveBefore)
        }

        /// Waiting covers what was removed before the wait began: hooks removed while it
        /// waits, with other calls in flight, cannot keep it waiting.
        @Test func waitingCoversOnlyWhatWasRemovedBeforeIt() throws {
            let slots = (0..<3).map { _ in makeAddSlot() }
            defer { for slot in slots { slot.deallocate() } }
            // Two callers, each held inside a hooked call until released.
            let entered = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
            let release = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
            let holdA = try Hook.before(on: FunctionSlot(slots[0]), signature: FixtureSignature.add) { _ in
                entered.0.signal()
                release.0.wait()
            }
            let holdB = try Hook.before(on: FunctionSlot(slots[1]), signature: FixtureSignature.add) { _ in
                entered.1.signal()
                release.1.wait()
            }
            defer {
                holdA.remove()
                holdB.remove()
            }
            let finished = DispatchGroup()
            func spawn(_ body: @escaping @Sendable () -> Void) {
                finished.enter()
                Thread.detachNewThread {
                    body()
                    finished.leave()
                }
            }
            let addresses = slots.map { UInt(bitPattern: $0) }
            @Sendable func callThrough(_ index: Int) {
                _ = ct_fix_call_add_through(UnsafeMutablePointer<AddFunction?>(bitPattern: addresses[index]), 1)
            }
            func installAndRemove() throws {
                try Hook.after(on: FunctionSlot(slots[2]), signature: FixtureSignature.add) { _ in }.remove()
            }

            // A is inside a call when a hook is removed: the wait waits for A.
            spawn { callThrough(0) }
            entered.0.wait()
            try installAndRemove()
            let waitReturned = DispatchSemaphore(value: 0)
            spawn {
                try? Hook.waitForReclamation()
                waitReturned.signal()
            }
            #expect(waitReturned.wait(timeout: .now() + .milliseconds(200)) == .timedOut)
            // B enters, and another hook is removed while A and B are inside.
            spawn { callThrough(1) }
            entered.1.wait()
            try installAndRemove()
            // A leaves: the wait returns, though B is still inside a call that the later removal waits for.
            release.0.signal()
            let outcome = waitReturned.wait(timeout: .now() + .seconds(10))
            #expect(outcome == .success, "the wait waited for a removal made after it began")
            release.1.signal()
            if outcome == .timedOut { waitReturned.wait() }
            finished.wait()
        }
    }
}
