import CTestSupport
import FFIHook
import FFIHookCore
import TestHookLock
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Slots that come and go: what the library keeps for a slot whose hooks are gone, reuse of
/// its closure, releasing it, and slots whose memory is unmapped under their hooks.
extension FixtureTableTests {
    @Suite(.exclusiveProcessHooks) struct TransientSlotTests {
        /// Hooking one address again and again reuses its closure: memory is bounded by the
        /// distinct addresses hooked, not by the number of hooks.
        @Test func hookingTheSameAddressAgainReusesItsClosure() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let first = try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in }
            // The closure the slot holds while hooked (the registry's count of closures made
            // is the process's: tests running beside this one make closures too).
            let closure = address(in: slot)
            first.remove()
            for round in 0..<200 {
                let counter = Counter()
                let token = try Hook.after(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in
                    counter.increment()
                }
                #expect(address(in: slot) == closure)
                #expect(slot.pointee!(Int32(round), 1) == Int32(round) + 1)
                #expect(counter.count == 1)
                #expect(token.remove())
                #expect(address(in: slot) == addOriginalAddress)
            }
        }

        /// A closure read from the slot before its last hook went still reaches the original.
        @Test func aClosureKeptByACallerStillPassesThrough() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let token = try Hook.instead(on: FunctionSlot(slot), signature: FixtureSignature.add) { call in
                call.setReturnValue(Int32(-1))
            }
            let kept = slot.pointee!
            #expect(kept(2, 3) == -1)
            token.remove()
            try Hook.waitForReclamation()
            #expect(kept(2, 3) == 5)
        }

        /// Released slots give their closures back for reuse once no call can be inside.
        @Test func releasedSlotsAreReused() throws {
            let tables = (0..<8).map { _ in makeAddSlot() }
            for table in tables {
                try Hook.before(on: FunctionSlot(table), signature: FixtureSignature.add) { _ in }.remove()
            }
            let serving = SlotRegistry.shared.closureCounts.serving
            var released = 0
            for table in tables {
                released += Hook.releaseSlots(in: UnsafeRawBufferPointer(start: table, count: 8))
                table.deallocate()
            }
            #expect(released == 8)
            #expect(SlotRegistry.shared.closureCounts.serving == serving - 8)
            try Hook.waitForReclamation()
            let made = SlotRegistry.shared.closureCounts.made
            let fresh = (0..<8).map { _ in UnsafeMutablePointer<AddFunction?>.allocate(capacity: 4) }
            defer { for table in fresh { table.deallocate() } }
            for table in fresh {
                table.initialize(repeating: ct_fix_add, count: 4)
                let token = try Hook.after(on: FunctionSlot(table + 2), signature: FixtureSignature.add) { call in
                    call.setReturnValue(call.returnValue(as: Int32.self) * 10)
                }
                #expect((table + 2).pointee!(4, 1) == 50)
                #expect(token.remove())
            }
            #expect(SlotRegistry.shared.closureCounts.made == made)
        }

        /// Releasing leaves slots that still have hooks alone, and an empty range releases nothing.
        @Test func releaseLeavesHookedSlotsAlone() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let token = try Hook.after(on: FunctionSlot(slot), signature: FixtureSignature.add) { call in
                call.setReturnValue(Int32(7))
            }
            #expect(Hook.releaseSlots(in: UnsafeRawBufferPointer(start: slot, count: 8)) == 0)
            #expect(Hook.releaseSlots(in: UnsafeRawBufferPointer(start: slot, count: 0)) == 0)
            #expect(Hook.releaseSlots(in: UnsafeRawBufferPointer(start: slot, count: 7)) == 0)
            // A range running past the end of the address space ends there (it trapped).
            let top = UnsafeRawPointer(bitPattern: UInt.max - 4095)
            #expect(Hook.releaseSlots(in: UnsafeRawBufferPointer(start: top, count: 8192)) == 0)
            #expect(slot.pointee!(1, 1) == 7)
            #expect(token.remove())
            #expect(slot.pointee!(1, 1) == 2)
            #expect(Hook.releaseSlots(in: UnsafeRawBufferPointer(start: slot, count: 8)) == 1)
            #expect(Hook.releaseSlots(in: UnsafeRawBufferPointer(start: slot, count: 8)) == 0)
        }

        /// A table unmapped under its hooks: removal writes nothing there, returns true once,
        /// and the slot's closure goes back for reuse. In a process of its own: the page unmapped
        /// may be any thread's next mapping, and the second hook would then go into that.
        @Test func removingAHookOfAnUnmappedTableWritesNothing() async {
            await #expect(processExitsWith: .success) { try TransientSlotTests.removeFromAnUnmappedTable() }
        }

        static func removeFromAnUnmappedTable() throws {
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            let memory = try #require(
                mmap(nil, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), "mmap failed")
            #expect(memory != MAP_FAILED)
            let slot = memory.bindMemory(to: AddFunction?.self, capacity: 1)
            slot.initialize(to: ct_fix_add)
            let before = try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in }
            let after = try Hook.after(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in }
            #expect(slot.pointee!(1, 1) == 2)
            let serving = SlotRegistry.shared.closureCounts.serving
            munmap(memory, page)
            #expect(before.remove())
            #expect(after.remove())
            #expect(!after.remove())
            #expect(SlotRegistry.shared.closureCounts.serving == serving - 1)
            // Hooking the address again is refused: nothing is mapped there.
            let error = #expect(throws: HookError.self) {
                try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in }
            }
            #expect(error?.code == .unmappedSlot)
            try Hook.waitForReclamation()
        }
    }
}
