import CTestSupport
import FFIHook
import Testing

/// A hooked call reaches the original with the registers and stack arguments as they
/// arrived, redoing what a block may have changed out of place. A block that stores a new
/// narrow integer writes only its bytes; the original must still receive it widened, as a
/// compiled caller passes it, since optimized callees read the whole register or stack word
/// (the callees here trust the extension).
extension FixtureTableTests {
    @Suite struct ForwardedCallTests {
        static let inRegister = try! Signature("ic")
        static let onStack = try! Signature("iqqqqqqc")

        @Test func theCalleesTrustTheExtension() {
            #expect(ct_fix_call_trusting_schar(-3) == -3)
            #expect(ct_fix_call_trusting_schar_on_stack(-3) == -3)
        }

        @Test(arguments: [HookPosition.before, .instead])
        func aNewValueInARegisterArrivesWidened(position: HookPosition) throws {
            let slot = FunctionSlot(ct_fix_trusting_schar_slot())
            let token = try Hook.install(on: slot, signature: Self.inRegister, position: position) { call in
                call.setArgument(0, to: Int8(-3))
                if call.position == .instead { call.callOriginal() }
            }
            defer { token.remove() }
            #expect(ct_fix_call_trusting_schar(5) == -3)
            #expect(ct_fix_call_trusting_schar(-100) == -3)
        }

        @Test(arguments: [HookPosition.before, .instead])
        func aNewValueOnTheStackArrivesWidened(position: HookPosition) throws {
            let slot = FunctionSlot(ct_fix_trusting_schar_on_stack_slot())
            let token = try Hook.install(on: slot, signature: Self.onStack, position: position) { call in
                #expect(call.argument(6, as: Int8.self) == 5)
                call.setArgument(6, to: Int8(-3))
                if call.position == .instead { call.callOriginal() }
            }
            defer { token.remove() }
            #expect(ct_fix_call_trusting_schar_on_stack(5) == -3)
        }

        @Test func untouchedArgumentsPassThroughAsTheyCame() throws {
            let slot = FunctionSlot(ct_fix_trusting_schar_slot())
            let token = try Hook.before(on: slot, signature: Self.inRegister) { _ in }
            defer { token.remove() }
            #expect(ct_fix_call_trusting_schar(-100) == -100)
            #expect(ct_fix_call_trusting_schar(127) == 127)
        }

        /// Twenty arguments, some in registers and the rest on the stack: every block sees
        /// each, a changed one arrives, and the original's result comes back.
        @Test func twentyArgumentsReachTheBlocksAndTheOriginal() throws {
            let expected = ct_fix_call_twenty()
            let signature = try Signature("d" + String(repeating: "qd", count: 10))
            let slot = FunctionSlot(ct_fix_twenty_slot())
            let seen = EventLog()
            let before = try Hook.before(on: slot, signature: signature) { call in
                let values = (0..<20).map { index in
                    index % 2 == 0 ? Double(call.argument(index, as: Int.self)) : call.argument(index, as: Double.self)
                }
                seen.record(values.map { String($0) }.joined(separator: " "))
                call.setArgument(18, to: 20)
            }
            let after = try Hook.after(on: slot, signature: signature) { call in
                seen.record("\(call.returnValue(as: Double.self))")
            }
            let result = ct_fix_call_twenty()
            #expect(before.remove())
            #expect(after.remove())
            // The tenth integer, weighted 10, went from 10 to 20.
            #expect(result == expected + 10 * 10 * 1000)
            let arguments = (1...10).flatMap { [String(Double($0)), String(Double($0) / 2)] }
            #expect(seen.all == [arguments.joined(separator: " "), "\(result)"])
        }
    }
}
