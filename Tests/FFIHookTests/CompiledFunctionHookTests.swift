import CTestSupport
import FFIHook
import FFIHookCore
import Testing

/// Every compiler-built function of the test-support table, called from C through a slot
/// of a C function table, with hooks installed on the slot. Each callee checks its
/// arguments byte for byte; the C caller checks the result. Serialized: the tests share
/// the slots (and with the fixture suites, one of which makes closure allocation fail).
extension FixtureTableTests {
    @Suite struct CompiledFunctionHookTests {
        static let indices = 0..<Int(ct_call_count())

        static func entry(_ index: Int) -> ct_call { ct_call_at(Int32(index))!.pointee }

        struct Prepared {
            let entry: ct_call
            let name: String
            let slot: FunctionSlot
            let signature: Signature
            let original: UnsafeMutableRawPointer?
        }

        /// Both ways to reach the original: the register path where the signature allows it, and `ffi_call`.
        static let paths = [true, false]

        static func prepare(_ index: Int, registerPath: Bool) throws -> Prepared {
            RegisterCallPlan.setEnabled(registerPath)
            let entry = entry(index)
            let slotPointer = try #require(ct_slot_at(Int32(index)))
            ct_reset_slot(Int32(index))
            return Prepared(
                entry: entry, name: String(cString: entry.name), slot: FunctionSlot(slotPointer),
                signature: try Signature(String(cString: entry.encoding)), original: slotPointer.pointee)
        }

        /// Calls through the slot from C and checks both sides.
        static func callAndCheck(_ index: Int, _ prepared: Prepared, expectation: Int32, calls: Int32 = 1) {
            _ = ct_take_report()
            let status = ct_call_through_slot(Int32(index), expectation)
            let report = ct_take_report()
            #expect(status == 0, "\(prepared.name) \(prepared.signature): the C caller received a wrong result")
            #expect(report.calls == calls, "\(prepared.name): the original ran \(report.calls) times")
            #expect(
                report.failed_argument == 0,
                "\(prepared.name) \(prepared.signature): argument \(report.failed_argument - 1) arrived wrong")
        }

        static func expectRestored(_ index: Int, _ prepared: Prepared) {
            #expect(ct_slot_at(Int32(index))?.pointee == prepared.original, "\(prepared.name): slot not restored")
        }

        @Test func tableCoversEnoughFunctions() {
            #expect(Self.indices.count >= 100)
        }

        @Test(arguments: indices, paths)
        func beforeAndAfterLeaveTheCallIntact(index: Int, registerPath: Bool) throws {
            let prepared = try Self.prepare(index, registerPath: registerPath)
            defer { RegisterCallPlan.setEnabled(true) }
            let counter = Counter()
            let interface = try CallInterface(prepared.signature)
            let original = UInt(bitPattern: prepared.original)
            let before = try Hook.before(on: prepared.slot, signature: prepared.signature) { _ in counter.increment() }
            let after = try Hook.after(on: prepared.slot, signature: prepared.signature) { call in
                counter.increment()
                // The arguments as an after block sees them, passed to the original once more:
                // the callee checks each of them again, so none may have changed or dangle.
                var buffers: [UnsafeMutableRawPointer] = []
                for argument in 0..<call.argumentCount {
                    guard let buffer = call.withUnsafeArgument(argument, { $0.baseAddress }) else { return }
                    buffers.append(buffer)
                }
                withUnsafeTemporaryAllocation(byteCount: max(interface.returnBufferSize, 16), alignment: 16) {
                    scratch in
                    interface.call(
                        UnsafeRawPointer(bitPattern: original)!, returnValue: scratch.baseAddress, arguments: buffers)
                }
            }
            Self.callAndCheck(index, prepared, expectation: 0, calls: 2)
            #expect(counter.count == 2)
            before.remove()
            after.remove()
            Self.expectRestored(index, prepared)
        }

        @Test(arguments: indices, paths)
        func insteadCallingTheOriginalLeavesTheCallIntact(index: Int, registerPath: Bool) throws {
            let prepared = try Self.prepare(index, registerPath: registerPath)
            defer { RegisterCallPlan.setEnabled(true) }
            let instead = try Hook.instead(on: prepared.slot, signature: prepared.signature) { call in
                call.callOriginal()
            }
            Self.callAndCheck(index, prepared, expectation: 0)
            instead.remove()
            Self.expectRestored(index, prepared)
        }

        @Test(arguments: indices, paths)
        func allPositionsTogetherLeaveTheCallIntact(index: Int, registerPath: Bool) throws {
            let prepared = try Self.prepare(index, registerPath: registerPath)
            defer { RegisterCallPlan.setEnabled(true) }
            let tokens = try [HookPosition.before, .instead, .after, .instead].map { position in
                try Hook.install(on: prepared.slot, signature: prepared.signature, position: position) { call in
                    if call.position == .instead { call.callOriginal() }
                }
            }
            Self.callAndCheck(index, prepared, expectation: 0)
            for token in tokens.reversed() { token.remove() }
            Self.expectRestored(index, prepared)
        }

        /// A before block writes other argument values and an after block another return value;
        /// both arrive byte-exact on the other side.
        @Test(arguments: indices, paths)
        func changedArgumentsAndResultArriveExactly(index: Int, registerPath: Bool) throws {
            let prepared = try Self.prepare(index, registerPath: registerPath)
            defer { RegisterCallPlan.setEnabled(true) }
            let before = try Hook.before(on: prepared.slot, signature: prepared.signature) { call in
                for argument in 0..<call.argumentCount {
                    call.withUnsafeArgument(argument) { bytes in
                        Self.entry(index).fill_alternate_argument(Int32(argument), bytes.baseAddress)
                    }
                }
            }
            let after = try Hook.after(on: prepared.slot, signature: prepared.signature) { call in
                guard !call.signature.returnType.isVoid else { return }
                call.withUnsafeReturnValue { bytes in Self.entry(index).fill_alternate_return(bytes.baseAddress) }
            }
            Self.callAndCheck(
                index, prepared, expectation: CT_EXPECT_ALTERNATE_ARGUMENTS | CT_EXPECT_ALTERNATE_RETURN)
            before.remove()
            after.remove()
            Self.expectRestored(index, prepared)
        }

        /// An instead block that never calls the original provides the whole result.
        @Test(arguments: indices, paths)
        func insteadReplacesTheFunction(index: Int, registerPath: Bool) throws {
            let prepared = try Self.prepare(index, registerPath: registerPath)
            defer { RegisterCallPlan.setEnabled(true) }
            let instead = try Hook.instead(on: prepared.slot, signature: prepared.signature) { call in
                guard !call.signature.returnType.isVoid else { return }
                call.withUnsafeReturnValue { bytes in Self.entry(index).fill_return(bytes.baseAddress) }
            }
            Self.callAndCheck(index, prepared, expectation: 0, calls: 0)
            instead.remove()
            Self.expectRestored(index, prepared)
        }

        /// A closure kept after its last hook went, since another writer had taken the slot
        /// over, still passes calls to the original with every argument and the result
        /// intact, including where the platform's libffi would mispass them.
        @Test(arguments: indices)
        func aKeptClosurePassesCallsThroughIntact(index: Int) throws {
            let prepared = try Self.prepare(index, registerPath: true)
            let slot = try #require(ct_slot_at(Int32(index)))
            let hook = try Hook.before(on: prepared.slot, signature: prepared.signature) { _ in }
            let closure = slot.pointee
            // Another library takes the slot over, and later chains to our closure.
            slot.pointee = prepared.original
            #expect(hook.remove())
            slot.pointee = closure
            Self.callAndCheck(index, prepared, expectation: 0)
            slot.pointee = prepared.original
        }
    }
}
