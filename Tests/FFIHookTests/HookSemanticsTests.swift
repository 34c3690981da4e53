import CTestSupport
import FFIHook
import Synchronization
import Testing

/// Before, instead and after blocks on the C fixture table, called from C.
/// Serialized: every test uses the one fixture table.
extension FixtureTableTests {
    @Suite struct HookSemanticsTests {
        init() throws {
            ct_fix_reset()
        }

        @Test func beforeAndAfterSeeTheCall() throws {
            let log = EventLog()
            let before = try Hook.before(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                log.record("before \(call.argument(0, as: Int32.self)) \(call.argument(1, as: Int32.self))")
            }
            let after = try Hook.after(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                log.record("after \(call.returnValue(as: Int32.self))")
            }
            defer {
                before.remove()
                after.remove()
            }
            #expect(ct_fix_call_add(2, 3) == 5)
            #expect(log.all == ["before 2 3", "after 5"])
            #expect(ct_fix_add_runs() == 1)
        }

        @Test func beforeBlocksRunInInstallOrderAndChangeArguments() throws {
            let log = EventLog()
            let first = try Hook.before(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                log.record("first sees \(call.argument(0, as: Int32.self))")
                call.setArgument(0, to: Int32(40))
            }
            let second = try Hook.before(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                log.record("second sees \(call.argument(0, as: Int32.self))")
                call.setArgument(1, to: Int32(2))
            }
            defer {
                first.remove()
                second.remove()
            }
            #expect(ct_fix_call_add(1, 1) == 42)
            #expect(log.all == ["first sees 1", "second sees 40"])
            #expect(ct_fix_last_add_a() == 40 && ct_fix_last_add_b() == 2)
        }

        @Test func afterBlocksRunInInstallOrderAndReplaceTheResult() throws {
            let log = EventLog()
            let first = try Hook.after(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                log.record("first sees \(call.returnValue(as: Int32.self))")
                call.setReturnValue(Int32(100))
            }
            let second = try Hook.after(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                log.record("second sees \(call.returnValue(as: Int32.self))")
                call.setReturnValue(call.returnValue(as: Int32.self) + 1)
            }
            defer {
                first.remove()
                second.remove()
            }
            #expect(ct_fix_call_add(3, 4) == 101)
            #expect(log.all == ["first sees 7", "second sees 100"])
        }

        @Test func insteadBlocksNestNewestOutermost() throws {
            let log = EventLog()
            let older = try Hook.instead(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                log.record("older in")
                call.callOriginal()
                log.record("older out \(call.returnValue(as: Int32.self))")
                call.setReturnValue(call.returnValue(as: Int32.self) * 10)
            }
            let newer = try Hook.instead(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                log.record("newer in")
                call.setArgument(0, to: Int32(5))
                call.callOriginal()
                log.record("newer out \(call.returnValue(as: Int32.self))")
                call.setReturnValue(call.returnValue(as: Int32.self) + 1)
            }
            defer {
                older.remove()
                newer.remove()
            }
            #expect(ct_fix_call_add(1, 2) == 71)
            #expect(log.all == ["newer in", "older in", "older out 7", "newer out 70"])
            #expect(ct_fix_add_runs() == 1)
        }

        @Test func insteadWithoutCallingTheOriginalReplacesItAndReturnsZero() throws {
            let replaced = try Hook.instead(on: fixtureSlot(\.add), signature: FixtureSignature.add) { _ in }
            #expect(ct_fix_call_add(20, 22) == 0)
            #expect(ct_fix_add_runs() == 0)
            replaced.remove()
            #expect(ct_fix_call_add(20, 22) == 42)
        }

        @Test func removalRestoresTheOriginalInAnyOrder() throws {
            let original = fixtureField(\.add)
            let tokens = try (0..<5).map { index in
                try Hook.install(
                    on: fixtureSlot(\.add), signature: FixtureSignature.add,
                    position: [.before, .instead, .after][index % 3]
                ) { call in
                    if call.position == .instead { call.callOriginal() }
                }
            }
            #expect(fixtureField(\.add) != original)
            for index in [3, 0, 4, 1] {
                #expect(tokens[index].remove())
                #expect(!tokens[index].isActive)
                #expect(fixtureField(\.add) != original)
                #expect(ct_fix_call_add(1, 2) == 3)
            }
            #expect(tokens[2].remove())
            #expect(fixtureField(\.add) == original)
            #expect(!tokens[2].remove())
            #expect(!tokens[0].remove())
        }

        @Test func aSlotTakenOverByAnotherWriterKeepsTheirPointer() throws {
            let log = EventLog()
            let token = try Hook.before(on: fixtureSlot(\.add), signature: FixtureSignature.add) { _ in
                log.record("hook")
            }
            let ourClosure = ct_fix_table_get().pointee.add
            // Another library swaps in its own function and keeps ours to chain to.
            ct_fix_table_get().pointee.add = ct_fix_negate_add_shim()
            #expect(token.remove())
            #expect(
                unsafeBitCast(ct_fix_table_get().pointee.add, to: UInt.self)
                    == unsafeBitCast(ct_fix_negate_add_shim(), to: UInt.self))
            // Whoever chained to our closure still reaches the original through it.
            #expect(ourClosure?(4, 5) == 9)
            #expect(log.all.isEmpty)
        }

        /// Hooking a slot again after another library wrapped it and chained to our closure:
        /// the new hook wraps their function, which still reaches the original through our
        /// old closure, instead of calling itself through them without end.
        @Test func hookingAgainAfterAnotherLibraryChainedToOurClosure() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let first = try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in }
            OtherLibrary.chain(onto: slot)
            #expect(first.remove())
            #expect(address(in: slot) == unsafeBitCast(OtherLibrary.wrapper, to: UInt.self))
            let runs = Counter()
            let second = try Hook.after(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in
                runs.increment()
            }
            #expect(slot.pointee!(1, 2) == 1003)
            #expect(runs.count == 1)
            #expect(OtherLibrary.deepest.load(ordering: .relaxed) == 1)
            #expect(second.remove())
            #expect(address(in: slot) == unsafeBitCast(OtherLibrary.wrapper, to: UInt.self))
            #expect(slot.pointee!(1, 2) == 1003)
        }

        @Test func onceRunsOnceAndRemovesItself() throws {
            let counter = Counter()
            let token = try Hook.before(on: fixtureSlot(\.add), signature: FixtureSignature.add, options: .once) { _ in
                counter.increment()
            }
            for _ in 0..<5 { _ = ct_fix_call_add(1, 1) }
            #expect(counter.count == 1)
            #expect(!token.isActive)
            #expect(!token.remove())
            #expect(ct_fix_add_runs() == 5)
        }

        @Test func reentrantCallsReachTheOriginalWithoutTheBlocks() throws {
            let counter = Counter()
            let token = try Hook.before(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                counter.increment()
                // A logging hook that itself calls the hooked function.
                _ = ct_fix_call_add(call.argument(0, as: Int32.self), 0)
            }
            defer { token.remove() }
            #expect(ct_fix_call_add(7, 8) == 15)
            #expect(counter.count == 1)
            #expect(ct_fix_add_runs() == 2)
        }

        /// A block that replaces its slot's hooks (its own removed, the last one, then a new
        /// one installed) and calls back through the slot is still re-entering the slot: the
        /// new hook's block is skipped for that call and runs for the next.
        @Test func reentryIsKnownAcrossAChangeOfTheSlotsHooks() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let replacementRuns = Counter()
            let slotAddress = UInt(bitPattern: slot)
            let nested = Locked<(token: HookToken?, result: Int32?)>((nil, nil))
            let first = Locked<HookToken?>(nil)
            let token = try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { call in
                let slot = UnsafeMutablePointer<AddFunction?>(bitPattern: slotAddress)!
                first.withLock { $0 }?.remove()
                let replacement = try? Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in
                    replacementRuns.increment()
                }
                let result = slot.pointee!(call.argument(0, as: Int32.self), 10)
                nested.withLock { $0 = (replacement, result) }
            }
            first.withLock { $0 = token }
            #expect(slot.pointee!(1, 2) == 3)
            let (replacement, result) = nested.withLock { $0 }
            #expect(result == 11)
            #expect(replacementRuns.count == 0)
            #expect(slot.pointee!(1, 2) == 3)
            #expect(replacementRuns.count == 1)
            #expect(replacement?.remove() == true)
            #expect(!token.isActive)
            // The block holds `first`, which holds the block's token: break the cycle.
            first.withLock { $0 = nil }
            nested.withLock { $0 = (nil, nil) }
        }

        @Test func reentryCanBeAllowed() throws {
            let counter = Counter()
            let token = try Hook.before(
                on: fixtureSlot(\.add), signature: FixtureSignature.add, options: .allowsReentry
            ) { call in
                counter.increment()
                let depth = call.argument(1, as: Int32.self)
                if depth > 0 { _ = ct_fix_call_add(0, depth - 1) }
            }
            defer { token.remove() }
            _ = ct_fix_call_add(0, 3)
            #expect(counter.count == 4)
        }

        @Test func callsTheOriginalMakesThroughTheSlotRunTheBlocks() throws {
            let counter = Counter()
            let token = try Hook.before(on: fixtureSlot(\.countdown), signature: FixtureSignature.countdown) { _ in
                counter.increment()
            }
            defer { token.remove() }
            #expect(ct_fix_call_countdown(4) == 4)
            #expect(counter.count == 5)
        }

        @Test func aggregatesAndFloatingPointArguments() throws {
            let token = try Hook.instead(on: fixtureSlot(\.offset), signature: FixtureSignature.offset) { call in
                call.withUnsafeArgument(0) { bytes in
                    bytes.storeBytes(of: 100.0, toByteOffset: 0, as: Double.self)
                }
                call.setArgument(1, to: 0.5)
                call.callOriginal()
                call.withUnsafeReturnValue { bytes in
                    bytes.storeBytes(
                        of: bytes.load(fromByteOffset: 8, as: Double.self) * 2, toByteOffset: 8, as: Double.self)
                }
            }
            defer { token.remove() }
            let result = ct_fix_call_offset(ct_fix_point(x: 1, y: 2), 3)
            #expect(result.x == 100.5)
            #expect(result.y == 3.0)

            let mix = try Hook.before(on: fixtureSlot(\.mix), signature: FixtureSignature.mix) { call in
                call.setArgument(2, to: Float(9))
            }
            defer { mix.remove() }
            #expect(ct_fix_call_mix(1, 2, 3, 4) == 1000 + 200 + 90 + 4)
        }

        @Test func narrowIntegerResultsAreWidenedForCCallers() throws {
            let token = try Hook.after(on: fixtureSlot(\.negate), signature: FixtureSignature.negate) { call in
                call.setReturnValue(Int8(-100))
            }
            defer { token.remove() }
            #expect(ct_fix_call_negate(5) == -100)
        }

        @Test func voidFunctions() throws {
            let log = EventLog()
            let token = try Hook.after(on: fixtureSlot(\.notify), signature: FixtureSignature.notify) { call in
                log.record("notified \(call.argument(0, as: Int32.self))")
            }
            defer { token.remove() }
            ct_fix_call_notify(12)
            #expect(ct_fix_last_notified() == 12)
            #expect(log.all == ["notified 12"])
        }

        @Test func aSlotWhoseOriginalIsAnotherHookedSlotChains() throws {
            let log = EventLog()
            let inner = try Hook.before(on: fixtureSlot(\.add), signature: FixtureSignature.add) { _ in
                log.record("inner")
            }
            defer { inner.remove() }
            let copy = UnsafeMutablePointer<AddFunction?>.allocate(capacity: 1)
            defer { copy.deallocate() }
            copy.initialize(to: ct_fix_table_get().pointee.add)
            let outer = try Hook.before(on: FunctionSlot(copy), signature: FixtureSignature.add) { _ in
                log.record("outer")
            }
            #expect(ct_fix_call_add_through(copy, 1) == 1)
            #expect(log.all == ["outer", "inner"])
            outer.remove()
        }

        @Test func aSlotWhoseOriginalIsAnotherLibrarysClosureChains() throws {
            let foreign = try #require(ct_fix_foreign_closure())
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            slot.pointee = foreign
            let runsBefore = ct_fix_foreign_closure_runs()
            let log = EventLog()
            let token = try Hook.after(on: FunctionSlot(slot), signature: FixtureSignature.add) { call in
                log.record("after \(call.returnValue(as: Int32.self))")
            }
            #expect(ct_fix_call_add_through(slot, 2) == 3)
            #expect(log.all == ["after 1", "after 2"])
            #expect(ct_fix_foreign_closure_runs() == runsBefore + 2)
            token.remove()
            #expect(slot.pointee.map { unsafeBitCast($0, to: UInt.self) } == unsafeBitCast(foreign, to: UInt.self))
        }
    }
}

/// Another hooking library, as a C library would write one: it replaces a slot with its own
/// function, which calls what the slot held before (kept in `saved`) and adds 1000. A depth
/// guard turns endless recursion into a wrong result.
enum OtherLibrary {
    static let saved = Atomic<UInt>(0)
    static let depth = Atomic<Int>(0)
    static let deepest = Atomic<Int>(0)
    static let wrapper: AddFunction = { a, b in
        let level = OtherLibrary.depth.add(1, ordering: .relaxed).newValue
        defer { OtherLibrary.depth.subtract(1, ordering: .relaxed) }
        OtherLibrary.deepest.max(level, ordering: .relaxed)
        guard level < 10 else { return -1 }
        let original = unsafeBitCast(OtherLibrary.saved.load(ordering: .relaxed), to: AddFunction.self)
        return original(a, b) &+ 1000
    }

    static func chain(onto slot: UnsafeMutablePointer<AddFunction?>) {
        deepest.store(0, ordering: .relaxed)
        saved.store(address(in: slot), ordering: .relaxed)
        slot.pointee = wrapper
    }
}
