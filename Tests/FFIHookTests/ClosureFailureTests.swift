import CTestSupport
import Testing

@testable import FFIHookCore

/// When libffi cannot allocate a closure, installing reports it and changes nothing.
/// Serialized with the other fixture suites: it switches allocation off for the process.
extension FixtureTableTests {
    @Suite struct ClosureFailureTests {
        @Test func allocationFailureIsAnErrorAndTheSlotIsUntouched() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            ClosurePool.failsAllocationForTesting.store(true, ordering: .relaxed)
            defer { ClosurePool.failsAllocationForTesting.store(false, ordering: .relaxed) }
            let error = #expect(throws: HookError.self) {
                try SlotRegistry.shared.install(
                    slot: UnsafeMutableRawPointer(slot), signature: Signature("iii"), position: .before, options: []
                ) { _ in }
            }
            #expect(error?.code == .closureAllocationFailed)
            #expect(error?.description.contains("could not allocate a closure") == true)
            #expect(ct_fix_call_add_through(slot, 2) == 3)
        }
    }
}
