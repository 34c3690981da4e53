import CTestSupport
import FFIHook
import Testing

/// A block that stores a new narrow integer in an argument writes only its bytes; the
/// original must still receive it widened, as a compiled caller passes it, since optimized
/// callees read the whole register or stack word. The callees here trust the extension.
extension FixtureTableTests {
    @Suite struct NarrowArgumentTests {
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
    }
}
