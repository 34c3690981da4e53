import CTestSupport
import FFIHookCore
import Testing

@testable import FFIHook

/// When libffi cannot allocate a closure, installing reports it and changes nothing.
extension FixtureTableTests {
    @Suite struct ClosureFailureTests {
        @Test func allocationFailureIsAnErrorAndTheSlotIsUntouched() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let registry = SlotRegistry(failingClosureAllocation: true)
            let error = #expect(throws: HookError.self) {
                try registry.install(
                    slot: UnsafeMutableRawPointer(slot), signature: Signature("iii"), position: .before, options: []
                ) { _ in }
            }
            #expect(error?.code == .closureAllocationFailed)
            #expect(error?.description.contains("could not allocate a closure") == true)
            #expect(ct_fix_call_add_through(slot, 2) == 3)
        }
    }
}
