import CTestSupport
import CZlib
import FFIHook
import Foundation
import Testing

/// Slots that hold NULL: a fallback original for before and after hooks, what
/// `callOriginal()` does without one, and zlib's allocator fields on a fresh stream.
extension FixtureTableTests {
    @Suite struct EmptySlotTests {
        init() {
            ct_fix_reset()
        }

        /// A fresh slot holding NULL; the caller deallocates it.
        func makeEmptySlot() -> UnsafeMutablePointer<AddFunction?> {
            let slot = UnsafeMutablePointer<AddFunction?>.allocate(capacity: 1)
            slot.initialize(to: nil)
            return slot
        }

        @Test func beforeAndAfterHooksWrapTheFallback() throws {
            let slot = makeEmptySlot()
            defer { slot.deallocate() }
            let log = EventLog()
            let empty = FunctionSlot(slot).withFallback(ct_fix_add as AddFunction)
            #expect(empty.fallback == UnsafeRawPointer(bitPattern: addOriginalAddress))
            let before = try Hook.before(on: empty, signature: FixtureSignature.add) { call in
                log.record("before \(call.argument(0, as: Int32.self))")
            }
            let after = try Hook.after(on: empty, signature: FixtureSignature.add) { call in
                log.record("after \(call.returnValue(as: Int32.self))")
            }
            #expect(slot.pointee != nil)
            // Arguments (i, 1) for i in 0..<3, each reaching ct_fix_add.
            #expect(ct_fix_call_add_through(slot, 3) == 1 + 2 + 3)
            #expect(ct_fix_add_runs() == 3)
            #expect(log.all == ["before 0", "after 1", "before 1", "after 2", "before 2", "after 3"])
            before.remove()
            #expect(slot.pointee != nil)
            after.remove()
            // The slot held NULL: it gets NULL back, not the fallback.
            #expect(slot.pointee == nil)
        }

        @Test func withoutAFallbackBeforeAndAfterAreStillRefused() throws {
            let slot = makeEmptySlot()
            defer { slot.deallocate() }
            let error = #expect(throws: HookError.self) {
                try Hook.after(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in }
            }
            #expect(error?.code == .emptySlot)
            #expect(slot.pointee == nil)
        }

        @Test func callOriginalOnAnEmptySlotReturnsZero() throws {
            let slot = makeEmptySlot()
            defer { slot.deallocate() }
            let seen = Locked<[Int32]>([])
            let token = try Hook.instead(on: FunctionSlot(slot), signature: FixtureSignature.add) { call in
                call.setReturnValue(Int32(99))
                call.callOriginal()
                seen.withLock { $0.append(call.returnValue(as: Int32.self)) }
            }
            defer { token.remove() }
            #expect(ct_fix_call_add_through(slot, 2) == 0)
            #expect(seen.withLock { $0 } == [0, 0])
            #expect(ct_fix_add_runs() == 0)
        }

        @Test func callOriginalOnAnEmptySlotZeroesAnAggregate() throws {
            let table = ct_fix_table_get()!
            defer { ct_fix_reset() }
            table.pointee.offset = nil
            let seen = Locked<[Double]>([])
            let token = try Hook.instead(on: fixtureSlot(\.offset), signature: FixtureSignature.offset) { call in
                call.setReturnValue(ct_fix_point(x: 7, y: 8))
                call.callOriginal()
                let point = call.returnValue(as: ct_fix_point.self)
                seen.withLock { $0 += [point.x, point.y] }
            }
            defer { token.remove() }
            let result = ct_fix_call_offset(ct_fix_point(x: 1, y: 2), 3)
            #expect(result.x == 0 && result.y == 0)
            #expect(seen.withLock { $0 } == [0, 0])
        }

        @Test func aFallbackFillsTheOriginalOfAnInsteadHookOnTheEmptySlot() throws {
            let slot = makeEmptySlot()
            defer { slot.deallocate() }
            let provider = try Hook.instead(on: FunctionSlot(slot), signature: FixtureSignature.add) { call in
                call.callOriginal()
                call.setReturnValue(call.returnValue(as: Int32.self) * 10)
            }
            #expect(ct_fix_call_add_through(slot, 1) == 0)
            let counter = Counter()
            let observer = try Hook.before(
                on: FunctionSlot(slot).withFallback(ct_fix_add as AddFunction), signature: FixtureSignature.add
            ) { _ in counter.increment() }
            // Now callOriginal() reaches the fallback: (0 + 1) * 10 + (1 + 1) * 10.
            #expect(ct_fix_call_add_through(slot, 2) == 30)
            #expect(counter.count == 2)
            provider.remove()
            #expect(ct_fix_call_add_through(slot, 1) == 1)
            observer.remove()
            #expect(slot.pointee == nil)
        }

        @Test func aSlotThatHoldsAFunctionKeepsIt() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let counter = Counter()
            let token = try Hook.before(
                on: FunctionSlot(slot).withFallback(ct_fix_negate_add_shim()), signature: FixtureSignature.add
            ) { _ in counter.increment() }
            #expect(ct_fix_call_add_through(slot, 2) == 1 + 2)
            #expect(counter.count == 2)
            token.remove()
            #expect(address(in: slot) == addOriginalAddress)
        }

        @Test func theProgramWritesItsOwnFunctionIntoAHookedEmptySlot() throws {
            let slot = makeEmptySlot()
            defer { slot.deallocate() }
            let counter = Counter()
            let token = try Hook.before(
                on: FunctionSlot(slot).withFallback(ct_fix_add as AddFunction), signature: FixtureSignature.add
            ) { _ in counter.increment() }
            let closure = slot.pointee!
            // The program fills the slot itself: its calls reach its function directly.
            slot.pointee = ct_fix_negate_add_shim()
            #expect(ct_fix_call_add_through(slot, 2) == -(1 + 2))
            #expect(counter.count == 0)
            // Whoever kept the closure still runs the hooks around the fallback.
            #expect(closure(4, 5) == 9)
            #expect(counter.count == 1)
            token.remove()
            // Removal leaves the program's function in place; the closure passes through.
            #expect(ct_fix_call_add_through(slot, 1) == -1)
            #expect(closure(4, 5) == 9)
            #expect(counter.count == 1)
            #expect(ct_fix_add_runs() == 2)
        }

        @Test func fallbacksThatAreNotFunctionsAreRefused() throws {
            let slot = makeEmptySlot()
            defer { slot.deallocate() }
            let none: AddFunction? = nil
            let null = #expect(throws: HookError.self) {
                try Hook.before(on: FunctionSlot(slot).withFallback(none), signature: FixtureSignature.add) { _ in }
            }
            #expect(null?.code == .invalidSlot)
            #expect(null?.message == "the fallback function is NULL")

            let swiftClosure: (Int32, Int32) -> Int32 = { $0 + $1 }
            let thick = #expect(throws: HookError.self) {
                try Hook.before(on: FunctionSlot(slot).withFallback(swiftClosure), signature: FixtureSignature.add) {
                    _ in
                }
            }
            #expect(thick?.code == .invalidSlot)
            #expect(thick?.message == "the fallback (Int32, Int32) -> Int32 is not a @convention(c) function pointer")

            let data = UnsafeMutableRawPointer.allocate(byteCount: 16, alignment: 16)
            defer { data.deallocate() }
            let notCode = #expect(throws: HookError.self) {
                try Hook.after(on: FunctionSlot(slot).withFallback(data), signature: FixtureSignature.add) { _ in }
            }
            #expect(notCode?.code == .invalidSlot)
            #expect(
                notCode?.message
                    == "the fallback 0x\(String(UInt(bitPattern: data), radix: 16)) is not the address of a function (not in executable memory)"
            )
            #expect(notCode?.slot == FunctionSlot(slot))
            // Nothing was installed.
            #expect(slot.pointee == nil)
        }

        /// A slot that holds what cannot be a function's address (a small integer, memory that
        /// cannot be read) is refused as its fallback would be: every hook kind would call it.
        @Test func slotsHoldingWhatCannotBeAFunctionAreRefused() throws {
            let slot = UnsafeMutablePointer<UInt>.allocate(capacity: 1)
            defer { slot.deallocate() }
            // (Memory unmapped here could be mapped again by the install itself: pages that
            // cannot be accessed stay, and a non-canonical address is never mapped. 64 KiB is
            // whole pages whatever their size.)
            let size = 1 << 16
            let inaccessible = try #require(
                mmap(nil, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0).flatMap {
                    $0 == MAP_FAILED ? nil : $0
                })
            defer { munmap(inaccessible, size) }
            for held in [UInt(5), UInt(bitPattern: inaccessible) + 16, 0xdead_0000_0000_0010] {
                slot.pointee = held
                let message =
                    "it holds 0x\(String(held, radix: 16)), which is not the address of a function (no memory can be read there)"
                let before = #expect(throws: HookError.self) {
                    try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in }
                }
                #expect(before?.code == .invalidSlot)
                #expect(before?.message == message)
                #expect(before?.slot == FunctionSlot(slot))
                let instead = #expect(throws: HookError.self) {
                    try Hook.instead(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in }
                }
                #expect(instead?.message == message)
                let attach = #expect(throws: HookError.self) {
                    try Hook.attach(on: FunctionSlot(slot), onEnter: { _ in })
                }
                #expect(attach?.code == .invalidSlot)
                #expect(attach?.message == message)
                // Nothing was installed: the slot holds what it held.
                #expect(slot.pointee == held)
            }
            // A function's address is taken.
            slot.pointee = unsafeBitCast(ct_fix_add as AddFunction, to: UInt.self)
            let hook = try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in }
            #expect(hook.remove())
        }
    }

    /// zlib fills in `zalloc` and `zfree` in `deflateInit` only where they are NULL.
    @Suite struct ZlibEmptySlotTests {
        typealias Alloc = @convention(c) (UnsafeMutableRawPointer?, UInt32, UInt32) -> UnsafeMutableRawPointer?
        typealias Free = @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void

        /// Deflates the sample on `stream` from deflateInit to deflateEnd.
        func compress(_ stream: UnsafeMutablePointer<z_stream>) {
            #expect(CZlib_deflateInit(stream, Z_BEST_COMPRESSION) == Z_OK)
            #expect(ZlibImportTests.deflateSample(stream).status == Z_STREAM_END)
            #expect(deflateEnd(stream) == Z_OK)
        }

        @Test func countingAllocationsOfAFreshStream() throws {
            // What zlib allocates for this stream, told by the C allocator set by the program.
            ct_fix_zalloc_reset()
            var direct = z_stream()
            direct.zalloc = ct_fix_zalloc
            direct.zfree = ct_fix_zfree
            compress(&direct)
            let expectedBlocks = ct_fix_zalloc_blocks()
            let expectedBytes = ct_fix_zalloc_bytes()
            #expect(expectedBlocks > 0)
            #expect(ct_fix_zfree_bytes() == expectedBytes)

            // A fresh stream: both fields NULL, and hooks that only watch.
            ct_fix_zalloc_reset()
            let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
            defer { stream.deallocate() }
            stream.initialize(to: z_stream())
            #expect(stream.pointee.zalloc == nil && stream.pointee.zfree == nil)
            let blocks = Locked<(allocated: [UInt], freed: [UInt])>(([], []))
            let sizes = Locked<UInt64>(0)
            let zalloc = FunctionSlot.field(\z_stream.zalloc, of: stream).withFallback(ct_fix_zalloc as Alloc)
            let zfree = FunctionSlot.field(\z_stream.zfree, of: stream).withFallback(ct_fix_zfree as Free)
            let beforeAlloc = try Hook.before(on: zalloc, signature: Signature("^v^vII")) { call in
                let bytes = UInt64(call.argument(1, as: UInt32.self)) * UInt64(call.argument(2, as: UInt32.self))
                sizes.withLock { $0 += bytes }
            }
            let afterAlloc = try Hook.after(on: zalloc, signature: Signature("^v^vII")) { call in
                let block = call.returnValue(as: UInt.self)
                blocks.withLock { $0.allocated.append(block) }
            }
            let beforeFree = try Hook.before(on: zfree, signature: Signature("v^v^v")) { call in
                let block = call.argument(1, as: UInt.self)
                blocks.withLock { $0.freed.append(block) }
            }
            let hookedAlloc = unsafeBitCast(stream.pointee.zalloc, to: UInt.self)
            compress(stream)
            // zlib took the closures for the stream's own functions and kept them.
            #expect(unsafeBitCast(stream.pointee.zalloc, to: UInt.self) == hookedAlloc)

            let seen = blocks.withLock { $0 }
            #expect(UInt64(seen.allocated.count) == expectedBlocks)
            #expect(ct_fix_zalloc_blocks() == expectedBlocks)
            #expect(sizes.withLock { $0 } == expectedBytes)
            #expect(ct_fix_zalloc_bytes() == expectedBytes)
            #expect(ct_fix_zfree_bytes() == expectedBytes)
            #expect(Set(seen.allocated) == Set(seen.freed))
            #expect(seen.freed.count == seen.allocated.count)

            beforeAlloc.remove()
            afterAlloc.remove()
            beforeFree.remove()
            // The fresh stream is fresh again.
            #expect(stream.pointee.zalloc == nil && stream.pointee.zfree == nil)
        }
    }
}
