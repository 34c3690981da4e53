import CTestSupport
import FFIHook
import Foundation
import Testing

/// The README's example, kept compiling and true.
@Suite struct ReadmeExampleTests {
    @Test func callingAtan2() throws {
        let signature = try Signature("ddd")
        let interface = try CallInterface.shared(for: signature)
        let atan2Pointer = unsafeBitCast(
            atan2 as @convention(c) (Double, Double) -> Double, to: UnsafeRawPointer.self)
        let angle: Double = try interface.call(atan2Pointer, returning: Double.self, 1.0, 1.0)
        #expect(angle == atan2(1.0, 1.0))
    }

    @Test func structureOfAType() throws {
        let point = try CType("{Point=\"x\"d\"y\"d}")
        #expect(point.size == 16)
        #expect(point.alignment == 8)
    }

    @Test func badInputExplainsItself() {
        let error = #expect(throws: EncodingError.self) { try Signature("{S=i") }
        #expect(error?.description == "unexpected end of encoding, expected '}' at offset 4 in \"{S=i\"")
    }

    @Test func variadicShape() throws {
        let shape = try CallInterface(variadic: Signature("ir*id"), fixedArgumentCount: 1)
        #expect(shape.fixedArgumentCount == 1)
    }
}

extension FixtureTableTests {
    /// The README's hook example on the C fixture table.
    @Suite struct ReadmeHookExampleTests {
        @Test func loggerAndDoubler() throws {
            ct_fix_reset()
            let tablePointer = ct_fix_table_get()!
            let slot = FunctionSlot.field(\ct_fix_table.add, of: tablePointer)
            let seen = EventLog()
            let logger = try Hook.before(on: slot, signature: Signature("iii")) { call in
                seen.record("add \(call.argument(0, as: Int32.self)) \(call.argument(1, as: Int32.self))")
            }
            let doubler = try Hook.instead(on: slot, arguments: Int32.self, Int32.self, returning: Int32.self) {
                original, a, b in
                original(a, b) * 2
            }
            #expect(ct_fix_call_add(2, 3) == 10)
            #expect(seen.all == ["add 2 3"])
            logger.remove()
            doubler.remove()
            #expect(
                tablePointer.pointee.add.map { unsafeBitCast($0, to: UInt.self) }
                    == addOriginalAddress)
        }
    }
}

extension FixtureTableTests {
    /// The README's table and lifecycle examples, on the C fixture table (its fields are
    /// named like the README's `callbacks`).
    @Suite struct ReadmeTableExampleTests {
        @Test func tableAndLifecycle() throws {
            ct_fix_reset()
            let table = ct_fix_table_get()!
            let layout = TableLayout<ct_fix_table>([
                .init("add", \.add, try Signature("iii")),
                .init("notify", \.notify, try Signature("vi")),
            ])
            let returned = EventLog()
            let group = try Hook.install(on: table, layout: layout, position: .after) { slot, call in
                returned.record("\(slot.name) returned")
            }
            _ = ct_fix_call_add(1, 1)
            ct_fix_call_notify(1)
            group.remove()
            #expect(returned.all == ["add returned", "notify returned"])

            let analyticsCallbacks = componentTable(componentA)
            let auditCallbacks = componentTable(componentB)
            defer {
                analyticsCallbacks.deallocate()
                auditCallbacks.deallocate()
            }
            let dispatcher = LifecycleDispatcher(table: table, layout: layout)
            let analytics = try dispatcher.register(analyticsCallbacks, priority: 10)  // before the original
            let audit = try dispatcher.register(auditCallbacks, priority: -1)  // after it
            let start = lifecycleLog.all.count
            #expect(ct_fix_call_add(4, 5) == 9)
            #expect(Array(lifecycleLog.all.dropFirst(start)) == ["A 4 5", "B 4 5"])
            analytics.remove()
            audit.remove()
        }
    }
}
