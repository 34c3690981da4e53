import CTestSupport
import FFIHookCore
import Synchronization
import Testing

@testable import FFIHook

/// Before and after blocks alone run from the C call path, which calls each Swift block itself
/// with an invocation it lays out (checked by a probe block as the library starts): what a
/// block sees there is what the Swift dispatch would give it.
extension FixtureTableTests {
    @Suite struct CallPathBlockTests {
        /// The strings the blocks of one test write, in order.
        final class Log: Sendable {
            let entries = Mutex<[String]>([])
            func add(_ entry: String) { entries.withLock { $0.append(entry) } }
            var all: [String] { entries.withLock { $0 } }
        }

        /// What a block saw of its call.
        static func describe(_ name: String, _ call: borrowing Invocation) -> String {
            let result = call.position == .after ? " = \(call.returnValue(as: Int32.self))" : ""
            return "\(name) \(call.position) \(call.argument(0, as: Int32.self)), \(call.argument(1, as: Int32.self))"
                + "\(result)\(call.isReentrant ? " re-entrant" : "") of \(call.argumentCount) \(call.signature)"
        }

        #if arch(x86_64) && os(Linux)
            /// The probe found this build's closures callable from C, so the tests below run
            /// through C's calls of the blocks (otherwise through a Swift function per block).
            @Test func theCallPathCallsBlocksItself() {
                #expect(SlotEntry.blocksCalledFromC)
                #expect(SlotEntry.typedBlocksCalledFromC)
            }
        #endif

        /// Typed after blocks of two arguments, which the C path calls with the arguments'
        /// addresses: what they return reaches the caller widened to the whole register, by
        /// the C type's signedness, as from a libffi closure; a `float` as its bytes.
        @Test func typedResultsReachTheCallerWidened() throws {
            typealias Difference = @convention(c) (Int8, Int8) -> Int8
            typealias Sum = @convention(c) (UInt16, UInt16) -> UInt16
            typealias Product = @convention(c) (Float, Float) -> Float
            let difference = UnsafeMutablePointer<Difference?>.allocate(capacity: 1)
            difference.initialize(to: ct_fix_schar_difference)
            let sum = UnsafeMutablePointer<Sum?>.allocate(capacity: 1)
            sum.initialize(to: ct_fix_ushort_sum)
            let product = UnsafeMutablePointer<Product?>.allocate(capacity: 1)
            product.initialize(to: ct_fix_float_product)
            defer {
                difference.deallocate()
                sum.deallocate()
                product.deallocate()
            }
            let log = Log()
            let tokens = [
                try Hook.before(on: FunctionSlot(difference), arguments: Int8.self, Int8.self, returning: Int8.self) {
                    a, b in log.add("before \(a) \(b)")
                },
                try Hook.after(on: FunctionSlot(difference), arguments: Int8.self, Int8.self, returning: Int8.self) {
                    result, a, b in
                    log.add("after \(result) \(a) \(b)")
                    return result &- 100
                },
                try Hook.after(on: FunctionSlot(sum), arguments: UInt16.self, UInt16.self, returning: UInt16.self) {
                    result, _, _ in result &+ 0x8000
                },
                try Hook.after(on: FunctionSlot(product), arguments: Float.self, Float.self, returning: Float.self) {
                    result, a, _ in result + a
                },
            ]
            // 5 - 3 = 2 (no bit above the byte set), then -98: every bit above the byte set.
            #expect(ct_fix_call_schar_difference_word(difference, 5, 3) == -98)
            #expect(log.all == ["before 5 3", "after 2 5 3"])
            // 0x1000 + 0x2000 + 0x8000: no bit above the 16.
            #expect(ct_fix_call_ushort_sum_word(sum, 0x1000, 0x2000) == 0xB000)
            #expect(ct_fix_call_float_product(product, 1.5, 4) == 7.5)
            for token in tokens { #expect(token.remove()) }
            #expect(ct_fix_call_schar_difference_word(difference, 5, 3) & 0xFF == 2)
        }

        /// A `Bool` stands for a byte as C reads a truth value: any nonzero byte (an Objective-C
        /// `BOOL` of 2, a flag) is `true`, in typed blocks and through an `Invocation`, where the
        /// byte read as a `Bool` kept its lowest bit alone (2 was `false`).
        @Test func aNonzeroByteIsTrue() throws {
            typealias Identity = @convention(c) (UInt8) -> UInt8
            let slot = UnsafeMutablePointer<Identity?>.allocate(capacity: 1)
            slot.initialize(to: ct_fix_byte_identity)
            defer { slot.deallocate() }
            let log = Log()
            let typed = try Hook.after(on: FunctionSlot(slot), arguments: Bool.self, returning: Bool.self) {
                result, flag in
                log.add("typed \(flag) \(result) \(flag == true)")
                return result
            }
            let invocation = try Hook.before(on: FunctionSlot(slot), signature: Signature("BB")) { call in
                log.add("invocation \(call.argument(0, as: Bool.self))")
            }
            // The typed after block gives back a Bool: the caller gets 1 for 2, as a C `_Bool` is.
            #expect(ct_fix_call_byte_slot(slot, 2) == 1)
            #expect(ct_fix_call_byte_slot(slot, 0) == 0)
            #expect(
                log.all == ["invocation true", "typed true true true", "invocation false", "typed false false false"])
            #expect(invocation.remove() && typed.remove())
            #expect(ct_fix_call_byte_slot(slot, 2) == 2)
        }

        /// Several blocks in each position, one of them changing an argument and one the
        /// result: each sees its position, the arguments as the blocks before it left them,
        /// and, after, the result as it stands; none is re-entrant.
        @Test func blocksSeeTheCallAsTheyLeftIt() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let log = Log()
            let signature = try Signature("iii")
            let tokens = [
                try Hook.before(on: FunctionSlot(slot), signature: signature) { call in
                    log.add(Self.describe("b1", call))
                    call.setArgument(1, to: call.argument(1, as: Int32.self) * 10)
                },
                try Hook.before(on: FunctionSlot(slot), signature: signature) { call in
                    log.add(Self.describe("b2", call))
                },
                try Hook.after(on: FunctionSlot(slot), signature: signature) { call in
                    log.add(Self.describe("a1", call))
                    call.setReturnValue(call.returnValue(as: Int32.self) + 1000)
                },
                try Hook.after(on: FunctionSlot(slot), signature: signature) { call in
                    log.add(Self.describe("a2", call))
                },
            ]
            #expect(ct_fix_call_add_slot(slot, 3, 4) == 1043)
            #expect(
                log.all == [
                    "b1 before 3, 4 of 2 iii", "b2 before 3, 40 of 2 iii", "a1 after 3, 40 = 43 of 2 iii",
                    "a2 after 3, 40 = 1043 of 2 iii",
                ])
            for token in tokens { #expect(token.remove()) }
            #expect(ct_fix_call_add_slot(slot, 3, 4) == 7)
        }

        /// One block in each position (the C path calls a lone block without its loop), each
        /// capturing its own state: the blocks are the closures installed, with their contexts.
        @Test func eachBlockRunsWithItsOwnCaptures() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let before = Atomic<Int>(0)
            let after = Atomic<Int>(0)
            let signature = try Signature("iii")
            let first = try Hook.before(on: FunctionSlot(slot), signature: signature) { call in
                before.add(Int(call.argument(0, as: Int32.self)), ordering: .relaxed)
            }
            let second = try Hook.after(on: FunctionSlot(slot), signature: signature) { call in
                after.add(Int(call.returnValue(as: Int32.self)), ordering: .relaxed)
            }
            #expect(ct_fix_call_add_through(slot, 10) == 55)
            #expect(before.load(ordering: .relaxed) == 45)
            #expect(after.load(ordering: .relaxed) == 55)
            #expect(first.remove())
            #expect(ct_fix_call_add_through(slot, 10) == 55)
            #expect(before.load(ordering: .relaxed) == 45)
            #expect(after.load(ordering: .relaxed) == 110)
            #expect(second.remove())
        }
    }
}
