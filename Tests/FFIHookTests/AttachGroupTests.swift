import CTestSupport
import Testing

@testable import FFIHook

/// The engine's group attach (what an import-table group of attaches runs), on slots of the
/// test's own: which items keep their leave block.
@Suite struct AttachGroupTests {
    /// Slots of the test's own, freed after it.
    final class Slots {
        let words: UnsafeMutablePointer<UInt>
        let count: Int
        init(_ values: [UInt]) {
            count = values.count
            words = .allocate(capacity: values.count)
            words.initialize(from: values, count: values.count)
        }
        deinit { words.deallocate() }
        func address(_ index: Int) -> UInt { UInt(bitPattern: words + index) }
    }

    static let setjmp = UInt(bitPattern: at_setjmp_address())
    static let jumpToSetjmp = unsafeBitCast(
        at_setjmp_plt as @convention(c) (UnsafeMutableRawPointer?) -> Int32, to: UInt.self)
    static let add = unsafeBitCast(at_call_add as @convention(c) (Int, Int) -> Int, to: UInt.self)

    /// Functions that return twice are told by what the slots lead to, not only by the
    /// symbols' names, for the whole group at once: `_setjmp` itself, a jump to it (a PLT
    /// entry), and another attach's stub in front of it lose the leave block; the other items
    /// keep theirs, and the symbols' names say nothing here.
    @Test func itemsThatLeadToAFunctionThatReturnsTwiceLoseTheirLeaveBlock() throws {
        let slots = Slots([Self.add, Self.setjmp, Self.jumpToSetjmp, Self.setjmp, Self.add])
        // The slots outlive every removal, which writes them back.
        defer { withExtendedLifetime(slots) {} }
        // The fourth slot holds a stub of an attach made before the group.
        let before = try Hook.attach(on: FunctionSlot(address: slots.address(3)), onEnter: { _ in })
        defer { before.remove() }
        #expect(slots.words[3] != Self.setjmp)
        let attachment = Attachment(onEnter: { _ in }, onLeave: { _ in }, reenters: false)
        let items = (0..<slots.count).map { index in
            AttachEngine.Item(slot: slots.address(index), attachment: attachment, symbol: "entry\(index)")
        }
        let handles = try AttachEngine.attach(items, liftsProtection: false)
        defer { for handle in handles { _ = handle.remove() } }
        #expect(handles.map { $0.attachment.onLeave != nil } == [true, false, false, false, true])
        #expect(handles.map { $0.attachment.onEnter != nil } == [true, true, true, true, true])
        // Those that keep it share the group's attachment.
        #expect(handles[0].attachment === attachment && handles[4].attachment === attachment)
    }

    /// A name that says so is enough, whatever the slot holds; a name that only ends like one
    /// (the check looks at the last byte first) is not.
    @Test func itemsNamedForAFunctionThatReturnsTwiceLoseTheirLeaveBlock() throws {
        let slots = Slots([Self.add, Self.add, Self.add, Self.add])
        defer { withExtendedLifetime(slots) {} }
        let attachment = Attachment(onEnter: { _ in }, onLeave: { _ in }, reenters: true)
        let names = ["sigsetjmp", "getcontext", "notsetjmp", "vfork"]
        let items = names.indices.map { index in
            AttachEngine.Item(slot: slots.address(index), attachment: attachment, symbol: names[index])
        }
        let handles = try AttachEngine.attach(items, liftsProtection: false)
        defer { for handle in handles { _ = handle.remove() } }
        #expect(handles.map { $0.attachment.onLeave != nil } == [false, false, true, false])
        #expect(handles.allSatisfy { $0.attachment.reenters })
    }

    /// An item whose slot holds NULL refuses the whole group, naming its symbol, and leaves every
    /// slot as it was.
    @Test func aNullSlotRefusesTheGroup() throws {
        let slots = Slots([Self.add, 0, Self.add])
        let attachment = Attachment(onEnter: { _ in }, onLeave: nil)
        let items = (0..<slots.count).map { index in
            AttachEngine.Item(slot: slots.address(index), attachment: attachment, symbol: "entry\(index)")
        }
        do {
            _ = try AttachEngine.attach(items, liftsProtection: false)
            Issue.record("a group with a NULL slot was attached")
        } catch {
            #expect(error.code == .emptySlot)
            #expect(error.symbol == "entry1")
        }
        #expect((0..<slots.count).map { slots.words[$0] } == [Self.add, 0, Self.add])
    }
}

/// The pool of attach stubs finds a stub's record from its code address by arithmetic over its
/// blocks: every stub made answers, in any block; nothing else does.
@Suite struct AttachStubsTests {
    @Test func everyStubIsFoundByItsCodeAddressAndNoOtherAddressIs() {
        var pool = AttachStubs()
        // Several blocks' worth (a block holds 256) and a part of one more, each for a slot of
        // its own (addresses the pool only uses as keys).
        let slots: [UInt] = (0..<(2 * 256 + 9)).map { (index: Int) -> UInt in 0x1000 + 8 * UInt(index) }
        var stubs: [AttachStubs.Stub] = []
        for slot in slots {
            guard let stub = pool.take(for: slot) else {
                Issue.record("no memory for a stub")
                return
            }
            stubs.append(stub)
        }
        #expect(pool.count == slots.count)
        for (index, stub) in stubs.enumerated() {
            stub.record.pointee.original = UInt(0x5000 + index)
            #expect(pool.original(ofStubAt: stub.code) == UInt(0x5000 + index))
            #expect(pool.contains(code: stub.code))
            // Inside a stub is no stub's start.
            #expect(pool.original(ofStubAt: stub.code + 1) == nil)
            #expect(pool.original(ofStubAt: stub.code + 32) == nil)
        }
        // Past the last stub made, in its block: no stub yet.
        let stride = stubs[1].code - stubs[0].code
        #expect(pool.original(ofStubAt: stubs[stubs.count - 1].code + stride) == nil)
        // Addresses outside every block.
        let outside: [UInt] = [0, 0x1000, UInt.max - 63, UInt(bitPattern: at_slots_get())]
        for address in outside {
            #expect(pool.original(ofStubAt: address) == nil)
            #expect(!pool.contains(code: address))
        }
        // A stub given back serves its slot again, and is still found (its record as left).
        pool.give(stubs[70], for: slots[70])
        let again = pool.take(for: slots[70])
        #expect(again?.code == stubs[70].code)
        #expect(pool.original(ofStubAt: stubs[70].code) == UInt(0x5000 + 70))
        #expect(pool.count == slots.count)
    }
}
