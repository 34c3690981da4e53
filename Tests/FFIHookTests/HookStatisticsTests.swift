import CTestSupport
import FFIHook
import TestHookLock
import Testing

/// The figures of `Hook.statistics` as hooks are installed, removed, reclaimed and their
/// slots released.
extension FixtureTableTests {
    @Suite(.exclusiveProcessHooks) struct HookStatisticsTests {
        /// Closures that serve a slot, with hooks or as a pass-through.
        static func serving(_ statistics: HookStatistics) -> Int {
            statistics.closureCount - statistics.idleClosureCount
        }

        @Test func figuresFollowInstallsRemovalsAndReclamation() throws {
            let slots = (0..<4).map { _ in makeAddSlot() }
            defer { for slot in slots { slot.deallocate() } }
            func memory(_ slot: UnsafeMutablePointer<AddFunction?>) -> UnsafeRawBufferPointer {
                UnsafeRawBufferPointer(start: slot, count: MemoryLayout<AddFunction?>.size)
            }
            // The process's first install warms the call path up on a slot of its own, and an
            // earlier test may have hooked these addresses: start with their closures given back.
            for slot in slots {
                try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in }.remove()
                Hook.releaseSlots(in: memory(slot))
            }
            try Hook.waitForReclamation()
            let start = try Hook.statistics
            #expect(start.pendingReclamationCount == 0)

            // One hooked slot and one serving closure per slot, however many hooks it has;
            // new closures are made only when no idle one is left to reuse.
            let tokens = try slots.map { slot in
                try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in }
            }
            let extra = try Hook.after(on: FunctionSlot(slots[0]), signature: FixtureSignature.add) { _ in }
            let installed = try Hook.statistics
            #expect(installed.hookedSlotCount == start.hookedSlotCount + 4)
            #expect(Self.serving(installed) == Self.serving(start) + 4)
            #expect(installed.closureCount == start.closureCount + max(0, 4 - start.idleClosureCount))
            #expect(installed.idleClosureCount == max(0, start.idleClosureCount - 4))

            // A hook removed while this thread is inside a hooked call waits for the call to leave.
            let seenInside = Locked<HookStatistics?>(nil)
            let probe = try Hook.before(on: FunctionSlot(slots[1]), signature: FixtureSignature.add) { _ in
                guard extra.remove() else { return }
                seenInside.withLock { $0 = try? Hook.statistics }
            }
            #expect(ct_fix_call_add_through(slots[1], 1) == 1)
            let inside = try #require(seenInside.withLock { $0 })
            #expect(inside.pendingReclamationCount > 0)
            #expect(inside.hookedSlotCount == installed.hookedSlotCount)
            #expect(try Hook.statistics.pendingReclamationCount > 0)
            try Hook.waitForReclamation()
            #expect(try Hook.statistics.pendingReclamationCount == 0)

            // Removed: the slots are no longer hooked, and keep their closures as pass-throughs.
            for token in tokens + [probe] { #expect(token.remove()) }
            try Hook.waitForReclamation()
            let removed = try Hook.statistics
            #expect(removed.hookedSlotCount == start.hookedSlotCount)
            #expect(removed.pendingReclamationCount == 0)
            #expect(Self.serving(removed) == Self.serving(installed))
            #expect(removed.closureCount == installed.closureCount)

            // Released: their closures are idle, ready for the next addresses hooked.
            #expect(slots.reduce(0) { $0 + Hook.releaseSlots(in: memory($1)) } == 4)
            try Hook.waitForReclamation()
            let released = try Hook.statistics
            #expect(Self.serving(released) == Self.serving(start))
            #expect(released.closureCount == installed.closureCount)
            #expect(released.pendingReclamationCount == 0)
            #expect(released.description.hasPrefix("HookStatistics(hooked slots: \(start.hookedSlotCount), "))
        }
    }
}
