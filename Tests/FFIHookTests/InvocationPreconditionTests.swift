import CTestSupport
import FFIHook
import Testing

/// Misuse of an Invocation stops the process with a message; these run in child processes.
@Suite struct InvocationPreconditionTests {
    @Test func readingAnArgumentWithTheWrongSizeStops() async {
        await #expect(processExitsWith: .failure) {
            ct_fix_reset()
            _ = try Hook.before(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                _ = call.argument(0, as: Double.self)
            }
            _ = ct_fix_call_add(1, 2)
        }
    }

    @Test func anArgumentIndexOutOfRangeStops() async {
        await #expect(processExitsWith: .failure) {
            ct_fix_reset()
            _ = try Hook.before(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                call.setArgument(2, to: Int32(0))
            }
            _ = ct_fix_call_add(1, 2)
        }
    }

    @Test func callingTheOriginalFromABeforeBlockStops() async {
        await #expect(processExitsWith: .failure) {
            ct_fix_reset()
            _ = try Hook.before(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                call.callOriginal()
            }
            _ = ct_fix_call_add(1, 2)
        }
    }

    @Test func readingTheReturnValueOfAVoidFunctionStops() async {
        await #expect(processExitsWith: .failure) {
            ct_fix_reset()
            _ = try Hook.after(on: fixtureSlot(\.notify), signature: FixtureSignature.notify) { call in
                _ = call.returnValue(as: Int32.self)
            }
            ct_fix_call_notify(1)
        }
    }

    @Test func aCorrectBlockDoesNotStop() async {
        await #expect(processExitsWith: .success) {
            ct_fix_reset()
            _ = try Hook.before(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                _ = call.argument(0, as: Int32.self)
            }
            _ = ct_fix_call_add(1, 2)
        }
    }
}
