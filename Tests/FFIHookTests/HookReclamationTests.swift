import CTestSupport
import FFIHook
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
            for round in 0..<100_000 {
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
    }
}
