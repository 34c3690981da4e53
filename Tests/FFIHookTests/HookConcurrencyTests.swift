import CTestSupport
import FFIHook
import Foundation
import Synchronization
import Testing

/// Threads calling a hooked slot from C while another thread installs and removes hooks.
extension FixtureTableTests {
    @Suite struct HookConcurrencyTests {
        /// One million calls from two threads, ten thousand random installs and removals.
        @Test func callsWhileHooksComeAndGo() throws {
            let callers = 2
            let callsPerThread: Int64 = 500_000
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            ct_fix_reset()

            // Hooks present for the whole run count exactly one run per call.
            let steadyBefore = Counter()
            let steadyAfter = Counter()
            let before = try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in
                steadyBefore.increment()
            }
            let after = try Hook.after(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in
                steadyAfter.increment()
            }

            let transientRuns = Counter()
            let running = Atomic<Bool>(true)
            let sums = Locked<[Int64]>([])
            let group = DispatchGroup()
            let slotAddress = UInt(bitPattern: slot)
            for _ in 0..<callers {
                DispatchQueue.global().async(group: group) {
                    let slot = UnsafeMutablePointer<AddFunction?>(bitPattern: slotAddress)
                    let sum = ct_fix_call_add_through(slot, callsPerThread)
                    sums.withLock { $0.append(sum) }
                }
            }

            var generator = SystemRandomNumberGenerator()
            var live: [HookToken] = []
            var changes = 0
            while changes < 10_000 {
                if live.isEmpty || (live.count < 16 && Bool.random(using: &generator)) {
                    let position = [HookPosition.before, .instead, .after].randomElement(using: &generator)!
                    live.append(
                        try Hook.install(on: FunctionSlot(slot), signature: FixtureSignature.add, position: position) {
                            call in
                            transientRuns.increment()
                            if call.position == .instead { call.callOriginal() }
                        })
                } else {
                    let index = Int.random(in: 0..<live.count, using: &generator)
                    #expect(live.remove(at: index).remove())
                }
                changes += 1
            }
            for token in live { token.remove() }
            group.wait()
            running.store(false, ordering: .relaxed)
            before.remove()
            after.remove()
            try Hook.waitForReclamation()

            let totalCalls = Int(callsPerThread) * callers
            // Each thread's sum of results is untouched: sum over i of ((i & 0xFFFF) + 1).
            let expectedSum = (0..<callsPerThread).reduce(Int64(0)) { $0 + ($1 & 0xFFFF) + 1 }
            #expect(sums.withLock { $0 } == Array(repeating: expectedSum, count: callers))
            #expect(ct_fix_add_runs() == UInt64(totalCalls))
            #expect(steadyBefore.count == totalCalls)
            #expect(steadyAfter.count == totalCalls)
            #expect(transientRuns.count <= totalCalls * 16)
            #expect(
                address(in: slot) == addOriginalAddress)
        }

        /// A `once` hook runs exactly once when many threads call at the same moment.
        @Test func onceUnderContention() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            for _ in 0..<50 {
                let counter = Counter()
                let token = try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add, options: .once) {
                    _ in
                    counter.increment()
                }
                let slotAddress = UInt(bitPattern: slot)
                DispatchQueue.concurrentPerform(iterations: 8) { _ in
                    let slot = UnsafeMutablePointer<AddFunction?>(bitPattern: slotAddress)
                    _ = ct_fix_call_add_through(slot, 100)
                }
                #expect(counter.count == 1)
                #expect(!token.isActive)
            }
            try Hook.waitForReclamation()
        }

        /// Threads calling hooks at once write each one's own record only, and no two records
        /// share a cache line (or the pair of lines the processor fetches together): records
        /// packed at their size put one record's `busy` in the line of the next one's
        /// generation and marks, and two threads then missed in the cache on every call.
        @Test func threadRecordsShareNoCacheLine() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let token = try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in }
            let slotAddress = UInt(bitPattern: slot)
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                let slot = UnsafeMutablePointer<AddFunction?>(bitPattern: slotAddress)
                _ = ct_fix_call_add_through(slot, 100)
            }
            token.remove()
            try Hook.waitForReclamation()

            let addresses = ThreadState.recordAddresses.sorted()
            #expect(addresses.count >= 2)
            for address in addresses {
                #expect(address % ThreadState.recordAlignment == 0, "record at 0x\(String(address, radix: 16))")
            }
            for (lower, upper) in zip(addresses, addresses.dropFirst()) {
                #expect(upper - lower >= ThreadState.recordSize, "records at 0x\(String(lower, radix: 16)) overlap")
            }
        }
    }
}
