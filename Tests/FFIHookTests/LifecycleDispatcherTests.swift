import CTestSupport
import FFIHook
import Foundation
import Testing

/// What the components' C functions saw, in order.
let lifecycleLog = EventLog()

/// A component's table: `add` logs under `name` and returns a value nobody should receive.
func componentTable(_ add: AddFunction?, notify: (@convention(c) (Int32) -> Void)? = nil) -> UnsafeMutablePointer<
    ct_fix_table
> {
    let table = UnsafeMutablePointer<ct_fix_table>.allocate(capacity: 1)
    table.initialize(to: ct_fix_table())
    table.pointee.add = add
    table.pointee.notify = notify
    return table
}

let componentA: AddFunction = { a, b in
    lifecycleLog.record("A \(a) \(b)")
    return -1
}
let componentB: AddFunction = { a, b in
    lifecycleLog.record("B \(a) \(b)")
    return -2
}
let componentC: AddFunction = { a, b in
    lifecycleLog.record("C \(a) \(b)")
    return -3
}
let componentD: AddFunction = { a, b in
    lifecycleLog.record("D \(a) \(b)")
    return -4
}
let componentE: AddFunction = { a, b in
    lifecycleLog.record("E \(a) \(b)")
    return -5
}
let originalMarker: @convention(c) (Int32) -> Void = { code in lifecycleLog.record("notify \(code)") }

extension FixtureTableTests {
    /// Lifecycle dispatch over the C fixture table.
    @Suite struct LifecycleDispatcherTests {
        let layout = TableLayout<ct_fix_table>([
            .init("add", \.add, FixtureSignature.add),
            .init("notify", \.notify, FixtureSignature.notify),
        ])

        init() {
            ct_fix_reset()
            _ = lifecycleLog
        }

        @Test func componentsRunByPriorityAroundTheOriginal() throws {
            let dispatcher = LifecycleDispatcher(table: ct_fix_table_get()!, layout: layout)
            let tables = [componentA, componentB, componentC, componentD, componentE].map { componentTable($0) }
            defer {
                for table in tables { table.deallocate() }
            }
            // The original's own call, seen through an after hook of lower priority than any component.
            let marker = try Hook.after(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                lifecycleLog.record("original returned \(call.returnValue(as: Int32.self))")
            }
            let registrations = try [
                dispatcher.register(tables[0], priority: 10),
                dispatcher.register(tables[1], priority: 0),
                dispatcher.register(tables[2], priority: -1),
                dispatcher.register(tables[3], priority: -5),
                dispatcher.register(tables[4], priority: 10),
            ]
            let start = lifecycleLog.all.count
            #expect(ct_fix_call_add(2, 3) == 5)
            #expect(
                Array(lifecycleLog.all.dropFirst(start)) == [
                    "A 2 3", "E 2 3", "B 2 3", "original returned 5", "C 2 3", "D 2 3",
                ])
            #expect(ct_fix_add_runs() == 1)
            for registration in registrations {
                #expect(registration.skippedFields == ["notify"])
                registration.remove()
            }
            marker.remove()
            #expect(fixtureField(\.add) == addOriginalAddress)
        }

        @Test func aComponentWithoutASlotIsSkippedThere() throws {
            let dispatcher = LifecycleDispatcher(table: ct_fix_table_get()!, layout: layout)
            let withNotify = componentTable(nil, notify: originalMarker)
            defer { withNotify.deallocate() }
            let registration = try dispatcher.register(withNotify, priority: 1)
            defer { registration.remove() }
            #expect(registration.skippedFields == ["add"])
            #expect(fixtureField(\.add) == addOriginalAddress)
            let start = lifecycleLog.all.count
            ct_fix_call_notify(7)
            #expect(Array(lifecycleLog.all.dropFirst(start)) == ["notify 7"])
            #expect(ct_fix_last_notified() == 7)
        }

        @Test func aComponentGivenAsAValueIsReadOnceWhenItRegisters() throws {
            let dispatcher = LifecycleDispatcher(table: ct_fix_table_get()!, layout: layout)
            var component = ct_fix_table()
            component.add = componentA
            let registration = try dispatcher.register(component, priority: 1)
            defer { registration.remove() }
            // Changing the value afterwards changes nothing: its pointers were read already.
            component.add = componentB
            let start = lifecycleLog.all.count
            #expect(ct_fix_call_add(4, 5) == 9)
            #expect(Array(lifecycleLog.all.dropFirst(start)) == ["A 4 5"])
            #expect(registration.skippedFields == ["notify"])
        }

        @Test func componentsComeAndGoWhileOtherThreadsCall() throws {
            let dispatcher = LifecycleDispatcher(table: ct_fix_table_get()!, layout: layout)
            let counted: AddFunction = { a, b in
                componentCalls.increment()
                return 0
            }
            let table = componentTable(counted)
            defer { table.deallocate() }
            let calls: Int64 = 200_000
            let group = DispatchGroup()
            let sums = Locked<[Int64]>([])
            for _ in 0..<2 {
                DispatchQueue.global().async(group: group) {
                    let sum = ct_fix_call_add_repeatedly(calls)
                    sums.withLock { $0.append(sum) }
                }
            }
            for round in 0..<2_000 {
                let registration = try dispatcher.register(UnsafePointer(table), priority: round % 3 - 1)
                registration.remove()
            }
            group.wait()
            try Hook.waitForReclamation()
            let expected = (0..<calls).reduce(Int64(0)) { $0 + ($1 & 0xFFFF) + 1 }
            #expect(sums.withLock { $0 } == [expected, expected])
            #expect(ct_fix_add_runs() == UInt64(2 * calls))
            #expect(componentCalls.count <= Int(2 * calls))
            #expect(fixtureField(\.add) == addOriginalAddress)
        }
    }
}

let componentCalls = Counter()
