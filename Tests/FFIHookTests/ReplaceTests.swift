import CTestSupport
import FFIHookCore
import Foundation
import Synchronization
import Testing

@testable import FFIHook

/// What the replacing functions call as their original (C functions capture nothing).
private let tenfoldOriginal = Atomic<UInt>(0)

/// `int (*)(int, int)` replacements.
private let times: AddFunction = { a, b in a * b }
private let tenfold: AddFunction = { a, b in
    unsafeBitCast(tenfoldOriginal.load(ordering: .acquiring), to: AddFunction.self)(a, b) * 10
}

extension FixtureTableTests {
    /// fishhook-style replacement: a function written into a slot, composed with hooks. In the
    /// serialized group: its hooks and closures would move the process-wide counts that other
    /// tests of the group compare exactly.
    @Suite struct ReplaceTests {
        /// Calls through `slot`, read atomically: in one test another thread writes it meanwhile.
        static func call(_ slot: UnsafeMutablePointer<AddFunction?>, _ a: Int32, _ b: Int32) -> Int32 {
            ct_fix_call_add_slot(slot, a, b)
        }

        static func holds(_ slot: UnsafeMutablePointer<AddFunction?>, _ function: UInt) -> Bool {
            UnsafeRawPointer(slot).load(as: UInt.self) == function
        }

        static let timesAddress = unsafeBitCast(times, to: UInt.self)
        static let tenfoldAddress = unsafeBitCast(tenfold, to: UInt.self)

        @Test func aReplacementIsCalledDirectlyAndComesOut() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let token = try Hook.replace(on: FunctionSlot(slot), with: times)
            #expect(Self.holds(slot, Self.timesAddress))
            #expect(Self.call(slot, 3, 4) == 12)
            #expect(token.original.map { UInt(bitPattern: $0) } == addOriginalAddress)
            #expect(token.original(as: AddFunction.self)!(3, 4) == 7)
            #expect(token.isActive)
            #expect(token.remove())
            #expect(!token.remove())
            #expect(!token.isActive)
            #expect(Self.holds(slot, addOriginalAddress))
            #expect(Self.call(slot, 3, 4) == 7)
        }

        /// A replacement written over an attached slot gets the attach as its original (an
        /// attach counts as a replacement): the attach's blocks run for the calls the
        /// replacement passes on, and none for those it does not; removed, the attach sees the
        /// calls again.
        @Test func aReplacementOverAnAttachHasItAsItsOriginal() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let enters = Counter()
            let leaves = Counter()
            let attach = try Hook.attach(on: FunctionSlot(slot)) { _ in
                enters.increment()
            } onLeave: { _ in
                leaves.increment()
            }
            let passing = try Hook.replace(on: FunctionSlot(slot), with: tenfold)
            tenfoldOriginal.store(UInt(bitPattern: passing.original), ordering: .releasing)
            #expect(Self.call(slot, 3, 4) == 70)
            #expect(enters.count == 1 && leaves.count == 1)
            passing.remove()
            let keeping = try Hook.replace(on: FunctionSlot(slot), with: times)
            #expect(Self.call(slot, 3, 4) == 12)
            #expect(enters.count == 1 && leaves.count == 1)
            keeping.remove()
            #expect(Self.call(slot, 3, 4) == 7)
            #expect(enters.count == 2 && leaves.count == 2)
            #expect(attach.remove())
            #expect(Self.holds(slot, addOriginalAddress))
        }

        @Test func hooksWrapAReplacementMadeUnderThem() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let seen = Counter()
            let hook = try Hook.after(on: FunctionSlot(slot), signature: Signature("iii")) { call in
                seen.increment()
                call.setReturnValue(call.returnValue(as: Int32.self) + 1000)
            }
            let replacement = try Hook.replace(on: FunctionSlot(slot), with: times)
            // The slot still holds the hooks' closure; the replacement sits under the hooks.
            #expect(!Self.holds(slot, Self.timesAddress))
            #expect(Self.call(slot, 3, 4) == 1012)
            #expect(replacement.original.map { UInt(bitPattern: $0) } == addOriginalAddress)
            #expect(replacement.remove())
            #expect(Self.call(slot, 3, 4) == 1007)
            #expect(hook.remove())
            #expect(Self.holds(slot, addOriginalAddress))
            #expect(seen.count == 2)
        }

        @Test func hooksInstalledOnAReplacedSlotWrapTheReplacement() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let replacement = try Hook.replace(on: FunctionSlot(slot), with: times)
            let hook = try Hook.after(on: FunctionSlot(slot), signature: Signature("iii")) { call in
                call.setReturnValue(call.returnValue(as: Int32.self) + 1000)
            }
            #expect(Self.call(slot, 3, 4) == 1012)
            // Removed while hooked: the hooks wrap the function it replaced.
            #expect(replacement.remove())
            #expect(Self.call(slot, 3, 4) == 1007)
            #expect(hook.remove())
            #expect(Self.holds(slot, addOriginalAddress))
        }

        @Test func replacementsStackAndComeOutInAnyOrder() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let lower = try Hook.replace(on: FunctionSlot(slot), with: times)
            let upper = try Hook.replace(on: FunctionSlot(slot), with: tenfold)
            #expect(upper.original.map { UInt(bitPattern: $0) } == unsafeBitCast(times, to: UInt.self))
            tenfoldOriginal.store(UInt(bitPattern: upper.original), ordering: .releasing)
            #expect(Self.call(slot, 3, 4) == 120)
            // The lower one out: the upper one's original is what the lower one replaced.
            #expect(lower.remove())
            #expect(upper.original.map { UInt(bitPattern: $0) } == addOriginalAddress)
            tenfoldOriginal.store(UInt(bitPattern: upper.original), ordering: .releasing)
            #expect(Self.call(slot, 3, 4) == 70)
            #expect(upper.remove())
            #expect(Self.holds(slot, addOriginalAddress))
        }

        @Test func aSlotSomeoneElseWroteIsLeftAsTheyLeftIt() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let token = try Hook.replace(on: FunctionSlot(slot), with: times)
            slot.pointee = tenfold
            #expect(token.remove())
            #expect(Self.holds(slot, Self.tenfoldAddress))
        }

        @Test func whatCannotBeAReplacementIsAnError() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let factor = Int32.random(in: 2...9)
            // A Swift closure with a context is not a C function pointer.
            let thick: (Int32, Int32) -> Int32 = { a, b in a * b * factor }
            let error = #expect(throws: HookError.self) {
                try Hook.replace(on: FunctionSlot(slot), with: thick)
            }
            guard let reason = error?.message, error?.code == .invalidSlot else {
                Issue.record("expected invalidSlot, got \(String(describing: error))")
                return
            }
            #expect(reason.contains("@convention(c)"))
            #expect(Self.holds(slot, addOriginalAddress))
            let empty = #expect(throws: HookError.self) {
                try Hook.replace(on: FunctionSlot(address: 0), with: times)
            }
            #expect(empty?.code == .nullSlot)
        }

        @Test func aReadOnlySlotNeedsTheOptionAndKeepsItsProtection() throws {
            let size = Int(sysconf(Int32(_SC_PAGESIZE)))
            let page = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
            defer { munmap(page, size) }
            let slot = page.assumingMemoryBound(to: AddFunction?.self)
            slot.initialize(to: ct_fix_add)
            mprotect(page, size, PROT_READ)
            let refused = #expect(throws: HookError.self) {
                try Hook.replace(on: FunctionSlot(slot), with: times)
            }
            #expect(refused?.code == .readOnlySlot)
            let token = try Hook.replace(on: FunctionSlot(slot), with: times, options: .liftsPageProtection)
            #expect(Self.call(slot, 3, 4) == 12)
            #expect(SlotMemory.protection(of: UInt(bitPattern: page))?.writable == false)
            #expect(token.remove())
            #expect(Self.call(slot, 3, 4) == 7)
            #expect(SlotMemory.protection(of: UInt(bitPattern: page))?.writable == false)
        }

        /// Replacements going in and out, under hooks and without, while another thread calls
        /// through the slot: every call reaches the original or the replacement, never anything
        /// else.
        @Test func replacingWhileAnotherThreadCalls() async throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let address = UInt(bitPattern: slot)
            let stop = Atomic<Bool>(false)
            let wrong = Atomic<Int>(0)
            let caller = Task.detached {
                let slot = UnsafeMutablePointer<AddFunction?>(bitPattern: address)!
                var calls = 0
                while !stop.load(ordering: .relaxed) || calls < 1000 {
                    let result = Self.call(slot, 3, 4)
                    if result != 7 && result != 12 && result != 1007 && result != 1012 {
                        wrong.add(1, ordering: .relaxed)
                    }
                    calls += 1
                }
            }
            for round in 0..<500 {
                let hook =
                    round % 2 == 0
                    ? nil
                    : try Hook.after(on: FunctionSlot(slot), signature: Signature("iii")) { call in
                        call.setReturnValue(call.returnValue(as: Int32.self) + 1000)
                    }
                let replacement = try Hook.replace(on: FunctionSlot(slot), with: times)
                if round % 3 == 0 {
                    hook?.remove()
                    replacement.remove()
                } else {
                    replacement.remove()
                    hook?.remove()
                }
            }
            stop.store(true, ordering: .relaxed)
            await caller.value
            #expect(wrong.load(ordering: .relaxed) == 0)
            #expect(Self.holds(slot, addOriginalAddress))
            try Hook.waitForReclamation()
        }

        /// A table of one callback, for a group token.
        struct AddTable {
            var add: AddFunction?
        }

        /// Every kind of token is Hashable by identity, has `remove() -> Bool` and `isActive`.
        @Test func everyTokenKindHasTheSameSemantics() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let table = UnsafeMutablePointer<AddTable>.allocate(capacity: 1)
            table.initialize(to: AddTable(add: ct_fix_add))
            defer { table.deallocate() }
            let hook = try Hook.before(on: FunctionSlot(slot), signature: Signature("iii")) { _ in }
            let group = try Hook.install(
                on: table, layout: TableLayout<AddTable>([.init("add", \.add, try Signature("iii"))]), position: .after
            ) { _, _ in }
            let replacement = try Hook.replace(on: FunctionSlot(slot), with: times)
            let hooks: Set<HookToken> = [hook, hook]
            let groups: Set<HookGroupToken> = [group, group]
            let replacements: Set<ReplacementToken> = [replacement, replacement]
            #expect(hooks.count == 1 && groups.count == 1 && replacements.count == 1)
            #expect(hook.isActive && group.isActive && replacement.isActive)
            #expect(hook.remove() && group.remove() && replacement.remove())
            #expect(!hook.remove() && !group.remove() && !replacement.remove())
            #expect(!hook.isActive && !group.isActive && !replacement.isActive)
            #expect(Self.holds(slot, addOriginalAddress))
        }

        /// The same function at two places in the stack: removing the upper one leaves the lower
        /// one and the one between them as they were.
        @Test func theSameFunctionTwiceInTheStack() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let first = try Hook.replace(on: FunctionSlot(slot), with: times)
            let middle = try Hook.replace(on: FunctionSlot(slot), with: tenfold)
            let top = try Hook.replace(on: FunctionSlot(slot), with: times)
            #expect(top.remove())
            #expect(Self.holds(slot, Self.tenfoldAddress))
            #expect(middle.original.map { UInt(bitPattern: $0) } == Self.timesAddress)
            #expect(first.original.map { UInt(bitPattern: $0) } == addOriginalAddress)
            #expect(middle.remove() && first.remove())
            #expect(Self.holds(slot, addOriginalAddress))
        }

        /// A slot made read-only since the replacement went in is not written by its removal.
        @Test func removalDoesNotWriteASlotMadeReadOnlySince() throws {
            let size = Int(sysconf(Int32(_SC_PAGESIZE)))
            let page = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
            defer { munmap(page, size) }
            let slot = page.assumingMemoryBound(to: AddFunction?.self)
            slot.initialize(to: ct_fix_add)
            let token = try Hook.replace(on: FunctionSlot(slot), with: times)
            mprotect(page, size, PROT_READ)
            #expect(token.remove())
            #expect(Self.holds(slot, Self.timesAddress))
            #expect(!token.isActive)
        }

        /// A pointer-sized value that is not a function's address is refused.
        @Test func aValueThatIsNotAFunctionIsRefused() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let data = UnsafeMutableRawPointer.allocate(byteCount: 8, alignment: 8)
            defer { data.deallocate() }
            let error = #expect(throws: HookError.self) {
                try Hook.replace(on: FunctionSlot(slot), with: UnsafeRawPointer(data))
            }
            guard let reason = error?.message, error?.code == .invalidSlot else {
                Issue.record("expected invalidSlot, got \(String(describing: error))")
                return
            }
            #expect(reason.contains("not the address of a function"))
            #expect(Self.holds(slot, addOriginalAddress))
        }
    }
}
