import CTestSupport
import FFIHook
import Synchronization
import Testing

@testable import FFIHookInline

#if canImport(Glibc)
    import Glibc
#endif

extension InlineSuites {
    /// A batch's attaches go in together (one hold of each lock for the whole batch), and one
    /// by one when the group is refused: each function still gets what its blocks say.
    @Suite struct InlineBatchAttachTests {
        /// Calls counted on the test's thread, by function.
        final class Counts: Sendable {
            let thread = at_gettid()
            let enters = Mutex<[UInt: Int]>([:])
            let leaves = Mutex<[UInt: Int]>([:])
        }

        /// Both blocks for `function`, counting its calls on the test's thread into `counts`.
        static func blocks(_ function: InlineFunction, _ counts: Counts) -> (EnterBlock?, LeaveBlock?) {
            let address = UInt(bitPattern: function.address)
            return (
                { call in
                    if call.threadID == counts.thread { counts.enters.withLock { $0[address, default: 0] += 1 } }
                },
                { call in
                    if call.threadID == counts.thread { counts.leaves.withLock { $0[address, default: 0] += 1 } }
                }
            )
        }

        /// Calls of one function counted on the test's thread by C functions, with this as
        /// their context.
        final class FunctionCalls: @unchecked Sendable {
            let thread = at_gettid()
            let enters = Atomic<Int>(0)
            let leaves = Atomic<Int>(0)

            /// The C functions that count into this.
            var functions: AttachFunctions {
                AttachFunctions(
                    onEnter: { context, frame in
                        let calls = Unmanaged<FunctionCalls>.fromOpaque(context!).takeUnretainedValue()
                        if EnterContext(unsafeFrame: frame!).threadID == calls.thread {
                            calls.enters.add(1, ordering: .relaxed)
                        }
                    },
                    onLeave: { context, frame in
                        let calls = Unmanaged<FunctionCalls>.fromOpaque(context!).takeUnretainedValue()
                        if LeaveContext(unsafeFrame: frame!).threadID == calls.thread {
                            calls.leaves.add(1, ordering: .relaxed)
                        }
                    }, context: Unmanaged.passUnretained(self).toOpaque())
            }

            /// Enter and leave counts.
            var counts: (Int, Int) { (enters.load(ordering: .relaxed), leaves.load(ordering: .relaxed)) }
        }

        /// Each function given C functions runs its own, with its own context (the group's
        /// attachments hold them in one allocation); the one left out, in the middle, is not
        /// attached to; removing one function's token leaves the other's running, and the
        /// group's removal stops it.
        @Test func eachFunctionsCFunctionsRunWithItsOwnContextUntilItsTokenIsRemoved() throws {
            let plain = (ct_inline_rip(5), ct_inline_call(5), ct_inline_loop(5))
            let batch = try InlineBatch(
                addresses: [address(of: ct_inline_rip), address(of: ct_inline_call), address(of: ct_inline_loop)])
            try #require(batch.functions.count == 3)
            let first = UInt(bitPattern: batch.functions[0].address)
            let last = UInt(bitPattern: batch.functions[2].address)
            let calls = [first: FunctionCalls(), last: FunctionCalls()]
            let group = try Hook.attach(on: batch) { function in calls[UInt(bitPattern: function.address)]?.functions }
            #expect(group.tokens.count == 2 && group.refusals.isEmpty)
            func callAll() {
                #expect(ct_inline_rip(5) == plain.0 && ct_inline_call(5) == plain.1 && ct_inline_loop(5) == plain.2)
            }
            callAll()
            #expect(calls[first]!.counts == (1, 1) && calls[last]!.counts == (1, 1))
            // The tokens are in the batch's order: the first is the first function's.
            #expect(group.tokens[0].remove())
            callAll()
            #expect(calls[first]!.counts == (1, 1) && calls[last]!.counts == (2, 2))
            #expect(group.remove())
            callAll()
            #expect(calls[first]!.counts == (1, 1) && calls[last]!.counts == (2, 2))
            #expect(!batch.functions.contains { $0.isPatched })
        }

        @Test func eachFunctionsBlocksAreAskedForOnceAndCountItsCalls() throws {
            let plain = (ct_inline_rip(5), ct_inline_call(5), ct_inline_loop(5))
            let functions = [address(of: ct_inline_rip), address(of: ct_inline_call), address(of: ct_inline_loop)]
            let batch = try InlineBatch(addresses: functions)
            let counts = Counts()
            let asked = Mutex<[UInt]>([])
            let group = try Hook.attach(on: batch) { function in
                asked.withLock { $0.append(UInt(bitPattern: function.address)) }
                return Self.blocks(function, counts)
            }
            #expect(asked.withLock { $0.sorted() } == functions.map { UInt(bitPattern: $0) }.sorted())
            #expect(group.tokens.count == 3 && group.refusals.isEmpty)
            for round in 1...3 {
                #expect(ct_inline_rip(5) == plain.0)
                if round > 1 { #expect(ct_inline_call(5) == plain.1) }
                if round > 2 { #expect(ct_inline_loop(5) == plain.2) }
            }
            let expected = Dictionary(uniqueKeysWithValues: zip(functions.map { UInt(bitPattern: $0) }, [3, 2, 1]))
            #expect(counts.enters.withLock { $0 } == expected)
            #expect(counts.leaves.withLock { $0 } == expected)
            #expect(group.remove())
            #expect(!batch.functions.contains { $0.isPatched })
        }

        /// In a child: `_setjmp` patched for the whole process.
        @Test func aFunctionThatReturnsTwiceGetsItsEnterBlockOnlyAndTheOthersBoth() async {
            await #expect(processExitsWith: .success) {
                let setjmp = UnsafeRawPointer(at_setjmp_address()!)
                let rip = address(of: ct_inline_rip)
                let plain = ct_inline_rip(5)
                let batch = try InlineBatch(addresses: [setjmp, rip])
                guard batch.functions.count == 2 else { exit(2) }
                let counts = Counts()
                let group = try Hook.attach(on: batch) { function in Self.blocks(function, counts) }
                guard group.tokens.count == 2 else { exit(3) }
                for _ in 0..<3 {
                    guard at_call_setjmp_twice_direct() == 207, ct_inline_rip(5) == plain else { exit(4) }
                }
                let enters = counts.enters.withLock { $0 }
                let leaves = counts.leaves.withLock { $0 }
                guard enters[UInt(bitPattern: setjmp), default: 0] >= 3, leaves[UInt(bitPattern: setjmp)] == nil
                else { exit(5) }
                guard enters[UInt(bitPattern: rip)] == 3, leaves[UInt(bitPattern: rip)] == 3 else { exit(6) }
                group.remove()
                guard at_call_setjmp_twice_direct() == 207 else { exit(7) }
            }
        }

        /// One function's jump cell holds what is no function when the batch is attached: the
        /// group is refused, and the attaches go in one by one, that function refused by name.
        /// In a child: the cell is written by hand.
        @Test func aGroupRefusedForOneFunctionAttachesTheOthersOneByOne() async {
            await #expect(processExitsWith: .success) {
                let plain = (ct_inline_rip(5), ct_inline_call(5))
                let rip = address(of: ct_inline_rip)
                let batch = try InlineBatch(addresses: [rip, address(of: ct_inline_call)])
                guard batch.functions.count == 2, try batch.patch().isEmpty else { exit(2) }
                let broken = try #require(batch.functions.first { $0.address != rip })
                let cell = try #require(UnsafeMutablePointer<UInt>(bitPattern: broken.slot.address))
                let kept = cell.pointee
                cell.pointee = 0x10
                let counts = Counts()
                let group = try Hook.attach(on: batch) { function in Self.blocks(function, counts) }
                cell.pointee = kept
                guard group.tokens.count == 1, group.refusals.count == 1 else { exit(3) }
                guard group.refusals[0].symbol == broken.name else { exit(4) }
                guard ct_inline_rip(5) == plain.0, ct_inline_call(5) == plain.1 else { exit(5) }
                guard counts.enters.withLock({ $0 }) == [UInt(bitPattern: rip): 1] else { exit(6) }
                guard counts.leaves.withLock({ $0 }) == [UInt(bitPattern: rip): 1] else { exit(7) }
                group.remove()
                try batch.unpatch()
                guard !batch.functions.contains(where: { $0.isPatched }) else { exit(8) }
            }
        }
    }
}
