import CTestSupport
import FFIHook
import Foundation
import Testing

/// `holdsItsSlot`: whether a hook's or a replacement's slot still leads to the library, as
/// someone else writes it, the memory goes away, or the object holding an import table is
/// loaded again at the same address.
@Suite struct SlotHoldingTests {
    private struct LoadFailure: Error {
        let path: String
    }

    private static func value(in slot: UnsafeMutablePointer<AddFunction?>) -> UInt { address(in: slot) }

    @Test func aHookHoldsItsSlotUntilAnotherWriterTakesIt() throws {
        let slot = makeAddSlot()
        defer { slot.deallocate() }
        let token = try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in }
        #expect(token.holdsItsSlot == true)
        let ours = slot.pointee
        slot.pointee = ct_fix_negate_add_shim()
        #expect(token.holdsItsSlot == false)
        slot.pointee = ours
        #expect(token.holdsItsSlot == true)
        #expect(token.remove())
        #expect(token.holdsItsSlot == nil)
        #expect(Self.value(in: slot) == addOriginalAddress)
    }

    @Test func hooksAndReplacementsStackedOnOneSlotAllHoldIt() throws {
        let slot = makeAddSlot()
        defer { slot.deallocate() }
        let replacement = try Hook.replace(on: FunctionSlot(slot), with: ct_fix_add as AddFunction)
        let attach = try Hook.attach(on: FunctionSlot(slot), onEnter: { _ in }, onLeave: nil)
        let hook = try Hook.after(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in }
        #expect(replacement.holdsItsSlot == true)
        #expect(attach.holdsItsSlot == true)
        #expect(hook.holdsItsSlot == true)
        #expect(slot.pointee?(2, 3) == 5)
        // The loader, or another tool, writes the slot: none of them is called through it now.
        let ours = slot.pointee
        slot.pointee = ct_fix_negate_add_shim()
        #expect(replacement.holdsItsSlot == false)
        #expect(attach.holdsItsSlot == false)
        #expect(hook.holdsItsSlot == false)
        // Written back with the replacement's own function: the hooks no longer run, so the
        // slot is not what the library wrote there last.
        slot.pointee = ct_fix_add
        #expect(replacement.holdsItsSlot == false)
        #expect(hook.holdsItsSlot == false)
        slot.pointee = ours
        #expect(hook.remove())
        #expect(hook.holdsItsSlot == nil)
        #expect(attach.holdsItsSlot == true)
        #expect(replacement.holdsItsSlot == true)
        #expect(attach.remove())
        #expect(replacement.holdsItsSlot == true)
        #expect(replacement.remove())
        #expect(replacement.holdsItsSlot == nil)
        #expect(Self.value(in: slot) == addOriginalAddress)
    }

    @Test func onlyTheNewestOfTwoReplacementsIsWhatTheSlotShouldHold() throws {
        let slot = makeAddSlot()
        defer { slot.deallocate() }
        let first = try Hook.replace(on: FunctionSlot(slot), with: ct_fix_add as AddFunction)
        let second = try Hook.replace(on: FunctionSlot(slot), with: try #require(ct_fix_negate_add_shim()))
        #expect(first.holdsItsSlot == true)
        #expect(second.holdsItsSlot == true)
        // Another writer puts the older replacement's function back: the newer one no longer runs.
        let newest = slot.pointee
        slot.pointee = ct_fix_add
        #expect(first.holdsItsSlot == false)
        #expect(second.holdsItsSlot == false)
        slot.pointee = newest
        #expect(second.remove())
        #expect(first.holdsItsSlot == true)
        #expect(first.remove())
        #expect(Self.value(in: slot) == addOriginalAddress)
    }

    @Test func aSlotNoLongerMappedIsHeldByNoOne() throws {
        let page = try #require(ff_map_page(PROT_READ | PROT_WRITE))
        let slot = page.assumingMemoryBound(to: AddFunction?.self)
        slot.initialize(to: ct_fix_add)
        let token = try Hook.attach(on: FunctionSlot(slot), onEnter: { _ in }, onLeave: nil)
        #expect(token.holdsItsSlot == true)
        #expect(ff_unmap_page(page) == 0)
        #expect(token.holdsItsSlot == nil)
        #expect(token.remove())
    }

    /// An object unloaded and loaded again: its new table holds what the loader put there. At
    /// the same address (what the loader usually picks) the slot is readable and no longer
    /// the library's; elsewhere it is not mapped, or not the library's either.
    @Test func anImportTableLoadedAgainNoLongerLeadsToItsAttach() throws {
        let libraries = try ThrowawayLibraries("holding")
        defer { libraries.remove() }
        _ = try libraries.build("libholding_definer.so", source: "int holding_double(int value) { return value * 2; }")
        let user = try libraries.build(
            "libholding_user.so",
            source: "int holding_double(int);\nint holding_user(int value) { return holding_double(value) + 1; }",
            flags: "-L$DIR -l:libholding_definer.so -Wl,-rpath,$DIR")
        typealias UserFunction = @convention(c) (Int32) -> Int32
        func load() throws -> (handle: UnsafeMutableRawPointer, function: UserFunction, address: UInt) {
            guard let handle = dlopen(user, RTLD_NOW | RTLD_LOCAL), let symbol = dlsym(handle, "holding_user")
            else {
                throw LoadFailure(path: user)
            }
            return (handle, unsafeBitCast(symbol, to: UserFunction.self), UInt(bitPattern: symbol))
        }
        let first = try load()
        let calls = AttachTests.Counter()
        let group = try ImportTable.attach(symbol: "holding_double", in: .object(user)) { _ in calls.add() }
        let token = try #require(group.tokens.first)
        #expect(first.function(4) == 9)
        #expect(calls.count == 1)
        #expect(token.holdsItsSlot == true)
        #expect(dlclose(first.handle) == 0)
        let second = try load()
        defer { dlclose(second.handle) }
        #expect(second.function(5) == 11)
        if second.address == first.address {
            #expect(token.holdsItsSlot == false)
            #expect(calls.count == 1)
        } else {
            #expect(token.holdsItsSlot != true)
        }
        // Removal writes nothing into the new copy's table.
        #expect(group.remove())
        #expect(second.function(6) == 13)
        #expect(calls.count == 1)
    }
}
