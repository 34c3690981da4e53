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
