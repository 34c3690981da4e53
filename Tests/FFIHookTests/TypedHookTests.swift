import CTestSupport
import FFIHookCore
import Testing

@testable import FFIHook

extension FixtureTableTests {
    /// Blocks that receive the arguments as Swift values, with types checked at install time.
    @Suite struct TypedHookTests {
        init() {
            ct_fix_reset()
        }

        /// `write` as C declares it ("qi^vQ", `size_t` unsigned) and as Swift's types derive it
        /// ("qi^vq", `Int`) hook one slot together: the calling convention passes them alike.
        @Test func aTypedAndAnEncodedHookOfOneFunctionInSignednessesOfTheirOwn() throws {
            typealias Write = @convention(c) (Int32, UnsafeRawPointer?, Int) -> Int
            let slot = UnsafeMutablePointer<Write?>.allocate(capacity: 1)
            defer { slot.deallocate() }
            slot.initialize(to: { _, _, count in count })
            let seen = Locked<[String]>([])
            let encoded = try Hook.before(on: FunctionSlot(slot), signature: Signature("qi^vQ")) { call in
                seen.withLock { $0.append("encoded \(call.argument(2, as: UInt.self))") }
                call.setArgument(2, to: call.argument(2, as: UInt.self) / 2)
            }
            let typed = try Hook.after(
                on: FunctionSlot(slot), arguments: Int32.self, UnsafeRawPointer?.self, Int.self, returning: Int.self
            ) { result, _, _, count in
                seen.withLock { $0.append("typed \(result) of \(count)") }
                return result + 1
            }
            #expect(slot.pointee!(1, nil, 10) == 6)
            #expect(seen.withLock { $0 } == ["encoded 10", "typed 5 of 5"])
            typed.remove()
            encoded.remove()
            #expect(slot.pointee!(1, nil, 10) == 10)
        }

        /// A typed block's small result reaches the caller as libffi closures return it: an
        /// integer narrower than a word widened to one by its C type's signedness, a float as
        /// its 4 bytes.
        @Test func typedBlocksReturnNarrowValuesWidenedAsTheCTypeSays() throws {
            typealias Signed = @convention(c) (Int8) -> Int8
            typealias Unsigned = @convention(c) (UInt16) -> UInt16
            typealias Single = @convention(c) (Float) -> Float
            let signed = UnsafeMutablePointer<Signed?>.allocate(capacity: 1)
            let unsigned = UnsafeMutablePointer<Unsigned?>.allocate(capacity: 1)
            let single = UnsafeMutablePointer<Single?>.allocate(capacity: 1)
            defer {
                signed.deallocate()
                unsigned.deallocate()
                single.deallocate()
            }
            signed.initialize(to: { $0 })
            unsigned.initialize(to: { $0 })
            single.initialize(to: { $0 })
            let words = Locked<[UInt64]>([])
            @Sendable func recordWord(_ call: borrowing Invocation) {
                let word = call.returnBuffer!.load(as: UInt64.self)
                words.withLock { $0.append(word) }
            }
            let tokens = [
                // A single expression: the one-argument form's block is inferred as written.
                try Hook.instead(on: FunctionSlot(signed), arguments: Int8.self, returning: Int8.self) { original, x in
                    original(x) &- 10
                },
                try Hook.after(on: FunctionSlot(signed), signature: Signature("cc")) { recordWord($0) },
                try Hook.after(on: FunctionSlot(unsigned), arguments: UInt16.self, returning: UInt16.self) { r, _ in
                    r &- 1
                },
                try Hook.after(on: FunctionSlot(unsigned), signature: Signature("SS")) { recordWord($0) },
                try Hook.instead(on: FunctionSlot(single), arguments: Float.self, returning: Float.self) { _, x in
                    x * 2
                },
            ]
            defer { for token in tokens { token.remove() } }
            #expect(signed.pointee!(5) == -5)
            #expect(unsigned.pointee!(0) == 0xFFFF)
            #expect(single.pointee!(0.75) == 1.5)
            #expect(words.withLock { $0 } == [UInt64(bitPattern: -5), 0xFFFF])
        }

        @Test func typedBeforeAndAfter() throws {
            let log = EventLog()
            let before = try Hook.before(
                on: fixtureSlot(\.add), arguments: Int32.self, Int32.self, returning: Int32.self
            ) { a, b in
                log.record("before \(a) \(b)")
            }
            let after = try Hook.after(
                on: fixtureSlot(\.add), arguments: Int32.self, Int32.self, returning: Int32.self
            ) { result, a, b in
                log.record("after \(a) \(b) -> \(result)")
                return result * 2
            }
            defer {
                before.remove()
                after.remove()
            }
            #expect(ct_fix_call_add(5, 6) == 22)
            #expect(log.all == ["before 5 6", "after 5 6 -> 11"])
        }

        @Test func typedInsteadCallsTheOriginalWithOtherArguments() throws {
            let token = try Hook.instead(
                on: fixtureSlot(\.add), arguments: Int32.self, Int32.self, returning: Int32.self
            ) { original, a, b in
                original(a * 10, b * 10) + 1
            }
            defer { token.remove() }
            #expect(ct_fix_call_add(1, 2) == 31)
            #expect(ct_fix_last_add_a() == 10)
            #expect(ct_fix_last_add_b() == 20)
        }

        @Test func typedHooksOnAVoidFunction() throws {
            let log = EventLog()
            let instead = try Hook.instead(on: fixtureSlot(\.notify), arguments: Int32.self) { original, code in
                log.record("instead \(code)")
                original(code + 1)
            }
            let after = try Hook.after(on: fixtureSlot(\.notify), arguments: Int32.self) { code in
                log.record("after \(code)")
            }
            defer {
                instead.remove()
                after.remove()
            }
            ct_fix_call_notify(41)
            #expect(ct_fix_last_notified() == 42)
            #expect(log.all == ["instead 41", "after 42"])
        }

        /// An instead block of a single expression on a function of one argument: the
        /// one-argument forms' blocks are inferred as written (with the argument types as a
        /// parameter pack of one, the compiler said "cannot pass value pack expansion to
        /// non-pack parameter"), void or not, the signature derived or given.
        @Test func oneArgumentInsteadBlocksOfOneExpression() throws {
            let notify = try Hook.instead(on: fixtureSlot(\.notify), arguments: Int32.self) { original, code in
                original(code * 2)
            }
            ct_fix_call_notify(21)
            notify.remove()
            #expect(ct_fix_last_notified() == 42)
            let signed = UnsafeMutablePointer<(@convention(c) (Int8) -> Int8)?>.allocate(capacity: 1)
            defer { signed.deallocate() }
            signed.initialize(to: { 0 &- $0 })
            let given = try Hook.instead(
                on: FunctionSlot(signed), signature: Signature("cc"), arguments: Int8.self, returning: Int8.self
            ) { original, x in original(x) &+ 1 }
            #expect(signed.pointee!(5) == -4)
            given.remove()
            #expect(signed.pointee!(5) == -5)
        }

        @Test func typedMixedScalars() throws {
            let token = try Hook.instead(
                on: fixtureSlot(\.mix), arguments: Int32.self, Double.self, Float.self, Int.self, returning: Double.self
            ) { original, a, b, c, d in
                original(a, b, c, d) + 0.5
            }
            defer { token.remove() }
            #expect(ct_fix_call_mix(1, 2, 3, 4) == 1234.5)
        }

        /// Before and after blocks read arguments of every kind of register through their
        /// types' conformances, a type of the caller's own included.
        @Test func typedBeforeAndAfterReadMixedScalars() throws {
            let log = EventLog()
            let before = try Hook.before(
                on: fixtureSlot(\.mix), arguments: Int32.self, Double.self, Float.self, Int.self, returning: Double.self
            ) { a, b, c, d in
                log.record("before \(a) \(b) \(c) \(d)")
            }
            let after = try Hook.after(
                on: fixtureSlot(\.mix), arguments: Count.self, Double.self, Float.self, Int.self, returning: Double.self
            ) { result, a, b, c, d in
                log.record("after \(a.value) \(b) \(c) \(d) -> \(result)")
                return result + 0.25
            }
            defer {
                before.remove()
                after.remove()
            }
            #expect(ct_fix_call_mix(1, 2, 3, 4) == 1234.25)
            #expect(log.all == ["before 1 2.0 3.0 4", "after 1 2.0 3.0 4 -> 1234.0"])
        }

        /// A type of the caller's own that stands for C's `int`, with the default way of reading it.
        struct Count: CEncodable {
            var value: Int32
            static var typeEncoding: String { "i" }
        }

        @Test func importedStructWithAGivenEncoding() throws {
            let token = try Hook.instead(
                on: fixtureSlot(\.offset), signature: FixtureSignature.offset,
                arguments: ct_fix_point.self, Double.self, returning: ct_fix_point.self
            ) { original, point, delta in
                var result = original(point, delta)
                result.x += 1000
                return result
            }
            defer { token.remove() }
            let result = ct_fix_call_offset(ct_fix_point(x: 1, y: 2), 3)
            #expect(result.x == 1004)
            #expect(result.y == -1)
        }

        @Test func swiftTypesThatDisagreeWithTheSignatureAreRefused() throws {
            var error = #expect(throws: HookError.self) {
                try Hook.before(
                    on: fixtureSlot(\.add), signature: FixtureSignature.add,
                    arguments: Int32.self, Double.self, returning: Int32.self
                ) { _, _ in }
            }
            #expect(error?.code == .invalidSignature)
            #expect(error?.callInterfaceError?.code == .typeMismatch)
            #expect(error?.callInterfaceError?.position == .argument(1))
            #expect(error?.message == "argument 1 (i) does not match the Swift type Double")
            #expect(error?.slot == fixtureSlot(\.add))
            error = #expect(throws: HookError.self) {
                try Hook.before(
                    on: fixtureSlot(\.add), signature: FixtureSignature.add, arguments: Int32.self,
                    returning: Int32.self
                ) { _ in }
            }
            #expect(error?.code == .invalidSignature)
            #expect(error?.callInterfaceError?.code == .argumentCountMismatch)
            #expect(error?.message == "1 argument given where the signature has 2")
            error = #expect(throws: HookError.self) {
                try Hook.after(
                    on: fixtureSlot(\.add), signature: FixtureSignature.add,
                    arguments: Int32.self, Int32.self, returning: Float.self
                ) { result, _, _ in result }
            }
            #expect(error?.code == .invalidSignature)
            #expect(error?.callInterfaceError?.code == .typeMismatch)
            #expect(error?.callInterfaceError?.position == .returnValue)
            error = #expect(throws: HookError.self) {
                try Hook.before(
                    on: fixtureSlot(\.offset), signature: FixtureSignature.offset,
                    arguments: (Double, Double, Double).self, Double.self, returning: ct_fix_point.self
                ) { _, _ in }
            }
            #expect(
                error?.description.contains(
                    "argument 0 ({ct_fix_point=dd}) does not match the Swift type (Double, Double, Double)") == true)
            // Nothing was installed by the refused calls.
            #expect(
                fixtureField(\.add)
                    == addOriginalAddress)
        }

        @Test func aDerivedSignatureThatDisagreesWithTheSlotsHooks() throws {
            let token = try Hook.before(on: fixtureSlot(\.add), signature: FixtureSignature.add) { _ in }
            defer { token.remove() }
            let error = #expect(throws: HookError.self) {
                try Hook.before(on: fixtureSlot(\.add), arguments: Double.self, Double.self, returning: Double.self) {
                    _, _ in
                }
            }
            #expect(error?.is(.signatureMismatch(installed: "iii")) == true)
        }
    }
}
