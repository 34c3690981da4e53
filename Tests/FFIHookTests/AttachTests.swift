import CTestSupport
import FFIHook
import FFIHookCore
import Foundation
import Synchronization
import TestHookLock
import Testing

/// Attach without a signature: registers read and written by enter and leave blocks of calls
/// that compiled C code makes through a slot, every shape of argument and result, and what
/// meets a swapped return address (longjmp, unwinding, backtraces, thread exit, signals, fork,
/// recursion deeper than the side stack, removal during a call).
@Suite(.serialized, .exclusiveProcessHooks) struct AttachTests {
    init() { at_reset() }

    static func slot<Function>(_ field: KeyPath<at_slots, Function?>) -> FunctionSlot {
        FunctionSlot.field(field, of: at_slots_get())
    }

    /// A counter the blocks can share.
    final class Counter: Sendable {
        let value = Atomic<Int>(0)
        func add() { value.add(1, ordering: .relaxed) }
        var count: Int { value.load(ordering: .relaxed) }
    }

    // MARK: - Registers

    @Test func enterAndLeaveSeeAndChangeIntegerRegisters() throws {
        let original = UInt(bitPattern: unsafeBitCast(at_slots_get().pointee.add, to: UnsafeRawPointer?.self))
        let seen = Mutex<[UInt64]>([])
        let token = try Hook.attach(on: Self.slot(\.add)) { call in
            seen.withLock { $0 += [call.integerArgument(0), call.integerArgument(1), UInt64(call.function)] }
            call.setIntegerArgument(1, to: call.integerArgument(1) + 100)
            call.scratch = 77
            #expect(call.threadID == at_gettid())
            #expect(call.returnAddress != 0 && call.stackPointer != 0)
        } onLeave: { call in
            #expect(call.scratch == 77)
            #expect(call.threadID == at_gettid())
            call.returnValue = call.returnValue * 2
        }
        #expect(at_call_add(3, 4) == (3 + 104) * 2)
        #expect(seen.withLock { $0 } == [3, 4, UInt64(original)])
        #expect(token.remove())
        #expect(!token.remove())
        #expect(at_call_add(3, 4) == 7)
        #expect(UInt(bitPattern: unsafeBitCast(at_slots_get().pointee.add, to: UnsafeRawPointer?.self)) == original)
    }

    @Test func floatingRegistersAndStackArgumentsReachTheOriginalUnchanged() throws {
        let enters = Counter()
        let leaves = Counter()
        let expectedMix = at_call_mix_direct()
        let mixToken = try Hook.attach(on: Self.slot(\.mix)) { call in
            // Integers in rdi, rsi, ...; doubles and the float in xmm0, xmm1, ... in order.
            #expect(call.integerArgument(0) == 1)
            #expect(call.floatingArgument(0) == 2.5)
            #expect(call.floatingArgument(4) == 10.5)
            #expect(Float(bitPattern: UInt32(truncatingIfNeeded: call.vectorArgument(5)[0])) == 11.5)
            #expect(call.integerArgument(5) == 12)
            enters.add()
        } onLeave: { call in
            #expect(call.floatingReturnValue == expectedMix)
            leaves.add()
        }
        defer { mixToken.remove() }
        #expect(at_call_mix() == expectedMix)

        let expectedMany = at_call_many_direct()
        let manyToken = try Hook.attach(on: Self.slot(\.many)) { call in
            // Eight longs: six in registers, two on the stack; ten doubles: eight in registers,
            // two on the stack; then the 24-byte structure on the stack.
            #expect(call.stackArgument(0) == 7 && call.stackArgument(1) == 8)
            #expect(Double(bitPattern: call.stackArgument(2)) == 9.5)
            #expect(Double(bitPattern: call.stackArgument(3)) == 10.5)
            #expect(call.stackArgument(4) == 11 && call.stackArgument(5) == 12 && call.stackArgument(6) == 13)
            enters.add()
        } onLeave: { call in
            #expect(Int(truncatingIfNeeded: call.returnValue) == expectedMany)
            leaves.add()
        }
        defer { manyToken.remove() }
        #expect(at_call_many() == expectedMany)
        #expect(enters.count == 2 && leaves.count == 2)
    }

    @Test func variadicCallsKeepTheirVectorCount() throws {
        let expected: Double = 1.0 + 2.5 * 2.0 + 9.0 + 4.5 * 4.0 + 25.0 + 6.5 * 6.0
        let counts = Mutex<[UInt8]>([])
        let token = try Hook.attach(on: Self.slot(\.vsum)) { call in
            counts.withLock { $0.append(call.vectorArgumentCount) }
        } onLeave: { call in
            call.floatingReturnValue += 1000
        }
        #expect(at_call_vsum() == expected + 1000)
        #expect(counts.withLock { $0 } == [3])
        token.remove()
        #expect(at_call_vsum() == expected)
    }

    @Test func resultsInEveryRegisterAndInMemory() throws {
        let tokens = [
            try Hook.attach(
                on: Self.slot(\.pair),
                onEnter: nil,
                onLeave: { call in
                    #expect(call.returnValue == 3 * 3 && call.secondReturnValue == 4 * 5)
                    call.secondReturnValue = 1
                }),
            try Hook.attach(
                on: Self.slot(\.point),
                onEnter: nil,
                onLeave: { call in
                    #expect(call.vectorReturnValue(0)[0] == (1.5 * 3).bitPattern)
                    #expect(call.vectorReturnValue(1)[0] == (2.5 * 5).bitPattern)
                    call.setVectorReturnValue(1, to: SIMD2((-1.0).bitPattern, 0))
                }),
            // A 24-byte structure comes back in memory; rax holds its address.
            try Hook.attach(
                on: Self.slot(\.triple),
                onEnter: nil,
                onLeave: { call in
                    let result = UnsafePointer<at_triple>(bitPattern: UInt(call.returnValue))!
                    #expect(result.pointee.a == 2 && result.pointee.b == 4 && result.pointee.c == 6)
                }),
            // long double travels on the x87 stack, which the library leaves alone.
            try Hook.attach(on: Self.slot(\.extended), onEnter: { _ in }, onLeave: { _ in }),
        ]
        defer { for token in tokens { token.remove() } }
        let pair = at_call_pair(3, 4)
        #expect(pair.a == 9 && pair.b == 1)
        let point = at_call_point(1.5, 2.5)
        #expect(point.x == 4.5 && point.y == -1)
        let triple = at_call_triple(1, 2, 3)
        #expect(triple.a == 2 && triple.b == 4 && triple.c == 6)
        #expect(at_call_extended(3, 4) == 12.25)
    }

    /// A Swift function returns in rcx, r8, xmm2 and xmm3 as well (up to four words and four
    /// vectors): the leave path keeps them while its block runs code that overwrites them.
    @Test func resultsInEveryRegisterASwiftFunctionReturnsIn() throws {
        ct_all_returns_reset()
        let slot = FunctionSlot(UnsafeMutableRawPointer(ct_all_returns_slot_address()))
        var direct = [UInt64](repeating: 0, count: 8)
        ct_call_all_returns(&direct)
        let expected: [UInt64] = [0x11, 0x21, 0x31, 0x41, 0x51, 0x61, 0x71, 0x81].map {
            UInt64($0) * 0x0101_0101_0101_0101
        }
        #expect(direct == expected)
        let token = try Hook.attach(
            on: slot, onEnter: { _ in ct_clobber_return_registers() }, onLeave: { _ in ct_clobber_return_registers() })
        defer { token.remove() }
        var attached = [UInt64](repeating: 0, count: 8)
        ct_call_all_returns(&attached)
        #expect(attached == expected)
    }

    /// A function called with the stack 8 bytes off the ABI's alignment (gcc calls a static
    /// function of its own file so when it knows the function needs no more): the hook's and
    /// the attach's entries call their blocks with the stack aligned again.
    @Test func aCallWithTheStackOffTheABIsAlignment() throws {
        let slot = Self.slot(\.add)
        let seen = Atomic<Int>(0)
        let hook = try Hook.before(on: slot, signature: Signature("qqq")) { _ in
            seen.add(Int(ct_needs_aligned_stack(1.5)), ordering: .relaxed)
        }
        let attach = try Hook.attach(
            on: slot, onEnter: { _ in seen.add(Int(ct_needs_aligned_stack(2.5)), ordering: .relaxed) },
            onLeave: { _ in seen.add(Int(ct_needs_aligned_stack(0.5)), ordering: .relaxed) })
        defer {
            attach.remove()
            hook.remove()
        }
        let function = at_slots_get().pointee.add!
        #expect(ct_call_misaligned(function, 20, 22) == 42)
        #expect(seen.load(ordering: .relaxed) == 3 + 5 + 1)
    }

    // MARK: - Errors

    @Test func badSlotsAreRefused() throws {
        #expect(throws: HookError.self) { try Hook.attach(on: FunctionSlot(address: 0), onEnter: { _ in }) }
        #expect(throws: HookError.self) { try Hook.attach(on: FunctionSlot(address: 0x1003), onEnter: { _ in }) }
        let empty = UnsafeMutablePointer<UnsafeRawPointer?>.allocate(capacity: 1)
        defer { empty.deallocate() }
        empty.initialize(to: nil)
        do {
            _ = try Hook.attach(on: FunctionSlot(empty), onEnter: { _ in })
            Issue.record("a slot holding NULL was attached to")
        } catch {
            #expect(error.code == .emptySlot)
            #expect(error.message.contains("no function to attach to"))
        }
        #expect(empty.pointee == nil)
        do {
            _ = try Hook.attach(on: Self.slot(\.add), options: .onInstallingThreadOnly, onEnter: { _ in })
            Issue.record("a caller limit was accepted")
        } catch {
            #expect(error.code == .unsupportedCallerLimit)
        }
        #expect(at_call_add(1, 2) == 3)
    }

    // MARK: - Composition

    @Test func attachComposesWithHooksAndReplacements() throws {
        let order = Mutex<[String]>([])
        let signature = try Signature("qqq")
        let hook = try Hook.before(on: Self.slot(\.add), signature: signature) { _ in
            order.withLock { $0.append("hook") }
        }
        let attach = try Hook.attach(on: Self.slot(\.add)) { _ in
            order.withLock { $0.append("enter") }
        } onLeave: { _ in
            order.withLock { $0.append("leave") }
        }
        #expect(at_call_add(1, 2) == 3)
        // The attach went in under the hook, as a replacement does: the hook's original is
        // the attach stub.
        #expect(order.withLock { $0 } == ["hook", "enter", "leave"])
        hook.remove()
        order.withLock { $0 = [] }
        #expect(at_call_add(1, 2) == 3)
        #expect(order.withLock { $0 } == ["enter", "leave"])
        attach.remove()
        #expect(at_call_add(1, 2) == 3)
        at_reset()
        // In the other order of removal, a hook installed over the attach.
        let attach2 = try Hook.attach(on: Self.slot(\.add), onEnter: nil, onLeave: { call in call.returnValue += 1 })
        let hook2 = try Hook.after(on: Self.slot(\.add), signature: signature) { call in
            call.setReturnValue(call.returnValue(as: Int64.self) * 10)
        }
        // The hook wraps the stub: (3 + 1) * 10.
        #expect(at_call_add(1, 2) == 40)
        attach2.remove()
        #expect(at_call_add(1, 2) == 30)
        hook2.remove()
        #expect(at_call_add(1, 2) == 3)
    }

    /// Two attaches of one slot: the second stub enters at the stack pointer of the frame the
    /// first pushed (its thunk is the call's return address by then); both leave blocks run,
    /// innermost first, and the call returns to its caller. Removed in either order.
    @Test func twoAttachesOfOneSlotBothLeave() throws {
        for removeFirstFirst in [true, false] {
            let events = Mutex<[String]>([])
            let first = try Hook.attach(on: Self.slot(\.add)) { _ in
                events.withLock { $0.append("enter 1") }
            } onLeave: { call in
                events.withLock { $0.append("leave 1") }
                call.returnValue += 10
            }
            let second = try Hook.attach(on: Self.slot(\.add)) { _ in
                events.withLock { $0.append("enter 2") }
            } onLeave: { call in
                events.withLock { $0.append("leave 2") }
                call.returnValue *= 2
            }
            #expect(at_call_add(1, 2) == (3 + 10) * 2)
            #expect(events.withLock { $0 } == ["enter 2", "enter 1", "leave 1", "leave 2"])
            #expect(try Hook.statistics.attachCount >= 2)
            if removeFirstFirst {
                first.remove()
                #expect(at_call_add(1, 2) == 6)
                second.remove()
            } else {
                second.remove()
                #expect(at_call_add(1, 2) == 13)
                first.remove()
            }
            #expect(at_call_add(1, 2) == 3)
        }
        #expect(at_call_add(1, 2) == 3)
    }

    /// A function that tail-calls another attached function: the second attach's stub is
    /// entered at the first one's stack pointer, with the first one's thunk as return address.
    @Test func aTailCallBetweenAttachedFunctions() throws {
        let events = Mutex<[String]>([])
        let tail = try Hook.attach(on: Self.slot(\.tail)) { _ in
            events.withLock { $0.append("enter tail") }
        } onLeave: { _ in
            events.withLock { $0.append("leave tail") }
        }
        let add = try Hook.attach(on: Self.slot(\.add)) { _ in
            events.withLock { $0.append("enter add") }
        } onLeave: { call in
            events.withLock { $0.append("leave add") }
            call.returnValue += 100
        }
        defer {
            tail.remove()
            add.remove()
        }
        #expect(at_call_tail(1, 2) == 103)
        #expect(events.withLock { $0 } == ["enter tail", "enter add", "leave add", "leave tail"])
    }

    // MARK: - Frames that do not return normally

    @Test func longjmpPastAnAttachedCallDropsItsFrame() throws {
        let enters = Counter()
        let leaves = Counter()
        let token = try Hook.attach(on: Self.slot(\.jumper)) { _ in
            enters.add()
        } onLeave: { _ in
            leaves.add()
        }
        defer { token.remove() }
        let abandoned = (try Hook.statistics).abandonedFrameCount
        for round in 0..<2000 {
            let value = Int(round)
            #expect(at_call_jumper(value) == (value % 2 == 1 ? -1 : value * 10))
        }
        #expect(enters.count == 2000)
        #expect(leaves.count == 1000)
        // Each jump leaves a frame behind, dropped by the next call at the same depth: the
        // side stack never fills.
        #expect(try Hook.statistics.abandonedFrameCount - abandoned >= 999)
    }

    /// A block that leaves by `siglongjmp` (as a signal handler that interrupts it may) leaves
    /// the thread's window of library work with it: later calls run their blocks again. (The
    /// blocks capture nothing: the reference the call held on a block's captures is never given
    /// back when Swift frames are jumped over, and the leak checker would rightly see it.)
    @Test func aBlockLeftBySiglongjmpDoesNotSwitchTheThreadOff() throws {
        enum Escape {
            static let enters = Counter()
            static let leaves = Counter()
            static let now = Mutex(true)
        }
        let token = try Hook.attach(on: Self.slot(\.add)) { _ in
            Escape.enters.add()
            if Escape.now.withLock({ $0 }) { at_escape_now() }
        } onLeave: { _ in
            Escape.leaves.add()
        }
        defer { token.remove() }
        #expect(at_call_escaping(2) == -1)
        Escape.now.withLock { $0 = false }
        #expect(at_call_escaping(2) == 3)
        #expect(at_call_add(4, 5) == 9)
        #expect(Escape.enters.count == 3 && Escape.leaves.count == 2)
        // Its call was ended too: reclamation does not wait for it.
        try Hook.waitForReclamation()
    }

    /// A signal handler that calls an attached function runs its blocks wherever it interrupted
    /// the library's part of another attached call (the entry, the push of a frame onto the
    /// side stack, the return thunk), and skips them, counted, only while a block runs; with
    /// ``HookOptions/allowsReentry``, inside a block too (all but the Swift runtime's calls
    /// around a block in an unoptimised build, the library's own code). Checked at every
    /// instruction: the trap flag raises SIGTRAP after each one the calls execute, and the
    /// handler calls the attached function each time.
    @Test(.enabled(if: at_step_available() != 0), arguments: [false, true])
    func aSignalHandlerRunsTheBlocksUnlessItInterruptedOne(reentry: Bool) throws {
        let token = try Hook.attach(on: Self.slot(\.add), options: reentry ? .allowsReentry : []) { _ in
            at_step_block(0)
        } onLeave: { _ in
            at_step_block(1)
        }
        defer { token.remove() }
        // The thread's first attached call sets up its side stack (not stepped through).
        #expect(at_call_add(1, 2) == 3)
        // (Not the library's own work's, which other tests' threads may do meanwhile.)
        func passedByBlocks() throws -> Int { try Hook.statistics.programPassedCallCount }
        let passed = try passedByBlocks()
        let calls = 20
        let tally = at_step_calls(calls, reentry ? 1 : 0)
        let passedNow = try passedByBlocks()
        #expect(tally.wrong == 0)
        #expect(tally.main_enters == calls && tally.main_leaves == calls)
        // Every handler call outside a block ran both blocks; those inside one ran none and
        // were counted.
        #expect(tally.handler_enters == tally.handler_calls - tally.in_block)
        #expect(tally.handler_leaves == tally.handler_enters)
        #expect(passedNow - passed == Int(tally.in_block))
        // The handler interrupted the attach path's C code many times and ran the blocks each
        // time; only the few instructions around each block's call (two blocks per call)
        // count as inside one.
        #expect(tally.in_code > 40 * UInt64(calls))
        #expect(tally.in_block_in_code <= 8 * UInt64(calls), "\(tally.in_block_in_code) steps marked")
        #if !DEBUG
            if reentry { #expect(tally.in_block == 0) }
        #endif
    }

    /// A signal handler on a signal stack that lies above the thread's stack, where every frame
    /// of the thread's side stack looks deeper than the handler's calls, and so left behind by a
    /// longjmp: each frame is kept while its slot holds its thunk, or still holds the return
    /// address the call came with (the push done, the thunk's call not yet made). Stepped
    /// through every instruction of attached calls; a frame dropped there ended the process
    /// ("the side stack no longer holds its frame") when its call returned.
    @Test(.enabled(if: at_step_above_available() != 0))
    func aSignalHandlerOnAStackAboveTheThreadsKeepsItsFrames() throws {
        let token = try Hook.attach(on: Self.slot(\.add)) { _ in
            at_step_block(0)
        } onLeave: { _ in
            at_step_block(1)
        }
        defer { token.remove() }
        let abandoned = try Hook.statistics.abandonedFrameCount
        let calls = 10
        let tally = at_step_calls_above(calls)
        #expect(tally.above == 1)
        #expect(tally.wrong == 0)
        #expect(tally.main_enters == calls + 1 && tally.main_leaves == calls + 1)
        #expect(tally.handler_enters == tally.handler_calls - tally.in_block)
        #expect(tally.handler_leaves == tally.handler_enters)
        #expect(try Hook.statistics.abandonedFrameCount == abandoned)
    }

    /// A thread's first attached call claims a record and sets up the side stack, work that
    /// calls other libraries, through which attached calls pass straight. A signal handler's
    /// call that interrupts that work is the program's: it runs both blocks. While the side
    /// stack is being made, the handler's call makes one itself (the thread's then goes, a
    /// second one never made, or made half and unmapped); before that, in the claim of the
    /// thread's record (no leave block could run), it goes straight through, counted as
    /// passed through but not as the library's. Stepped through every instruction of that
    /// work, with the handler calling the attached function each time: on the thread's stack,
    /// on a signal stack of its own, and letting the first 2,000 instructions of the side
    /// stack's making go by.
    @Test(.enabled(if: at_step_available() != 0), arguments: [(false, 0), (true, 0), (false, 2000)])
    func aSignalHandlerInterruptingAThreadsSetUpRunsTheBlocks(onSignalStack: Bool, skip: Int) throws {
        let token = try Hook.attach(on: Self.slot(\.add)) { _ in
            at_step_block(0)
        } onLeave: { _ in
            at_step_block(1)
        }
        defer { token.remove() }
        let before = try Hook.statistics
        let tally = at_step_first_call(1, 1, onSignalStack ? 1 : 0, skip)
        let after = try Hook.statistics
        #expect(tally.wrong == 0)
        #expect(tally.main_enters == 1 && tally.main_leaves == 1)
        // Every instruction of the work was interrupted by a call: in the claim (passed
        // through), and in the making of the side stack (the first of those made one).
        #expect(tally.in_block > 40, "\(tally.in_block) instructions of the set-up")
        #expect(tally.sideless > 0 && tally.sideless < tally.in_block)
        #expect(tally.handler_calls == tally.in_block)
        #expect(tally.handler_enters == tally.handler_calls - tally.sideless)
        #expect(tally.handler_leaves == tally.handler_enters)
        #expect(after.passedThroughCallCount - before.passedThroughCallCount == Int(tally.sideless))
        #expect(after.libraryPassedCallCount == before.libraryPassedCallCount)
        #expect(after.programPassedCallCount - before.programPassedCallCount == Int(tally.sideless))
        #expect(after.skippedLeaveCount == before.skippedLeaveCount)
        #expect(tally.records == 1)
    }

    /// The same with hooks that have a signature: the thread's first hooked call claims its
    /// record (work that calls pthread_setspecific, which a program may hook), and a signal
    /// handler's call that interrupts it runs the before and after blocks.
    @Test(.enabled(if: at_step_available() != 0))
    func aSignalHandlerInterruptingAThreadsClaimRunsTheHooks() throws {
        let before = try Hook.before(on: Self.slot(\.add), signature: Signature("qqq")) { _ in
            at_step_block(0)
        }
        defer { before.remove() }
        let after = try Hook.after(on: Self.slot(\.add), signature: Signature("qqq")) { _ in
            at_step_block(1)
        }
        defer { after.remove() }
        let tally = at_step_first_call(1, 0, 0, 0)
        #expect(tally.wrong == 0)
        #expect(tally.main_enters == 1 && tally.main_leaves == 1)
        #expect(tally.in_block > 10, "\(tally.in_block) instructions of the set-up")
        #expect(tally.handler_calls == tally.in_block)
        #expect(tally.handler_enters == tally.handler_calls && tally.handler_leaves == tally.handler_calls)
        #expect(tally.records == 1)
    }

    /// A signal handler that interrupts a thread's first hooked call before the thread has a
    /// record, and makes an attached call of its own, claims the record the thread then keeps:
    /// the interrupted claim gives its own back (the thread holds one record) and both calls
    /// run their blocks.
    @Test(.enabled(if: at_step_available() != 0))
    func aSignalHandlerInterruptingAThreadsClaimLeavesItOneRecord() throws {
        let token = try Hook.attach(on: Self.slot(\.add)) { _ in
            at_step_block(0)
        } onLeave: { _ in
            at_step_block(1)
        }
        defer { token.remove() }
        let tally = at_step_first_call(2, 1, 0, 0)
        #expect(tally.wrong == 0)
        #expect(tally.handler_calls == 1 && tally.handler_enters == 1 && tally.handler_leaves == 1)
        #expect(tally.main_enters == 1 && tally.main_leaves == 1)
        #expect(tally.records == 1)
    }

    /// An attach whose token is dropped stays, with its blocks: what they capture lives on
    /// (the attach stays for the life of the process, so the slot is memory never freed).
    @Test func anAttachWhoseTokenIsDroppedKeepsItsBlocks() throws {
        // (No weak reference to the canary: its side table, which lives as long as the canary,
        // is reached only through bits a leak checker does not read as a pointer.)
        final class Canary: Sendable {
            let calls: Counter
            let freed: Counter
            init(calls: Counter, freed: Counter) {
                self.calls = calls
                self.freed = freed
            }
            deinit { freed.add() }
        }
        typealias Add = @convention(c) (Int, Int) -> Int
        let slot = UnsafeMutablePointer<Add>.allocate(capacity: 1)
        slot.initialize(to: { $0 + $1 })
        let calls = Counter()
        let freed = Counter()
        do {
            let canary = Canary(calls: calls, freed: freed)
            _ = try Hook.attach(on: FunctionSlot(slot)) { _ in
                canary.calls.add()
            } onLeave: { _ in
                canary.calls.add()
            }
        }
        #expect(freed.count == 0)
        #expect(slot.pointee(2, 3) == 5)
        #expect(calls.count == 2 && freed.count == 0)
    }

    /// `_setjmp` returns a second time when `longjmp` resumes the context it saved, to the
    /// return address saved with it: an attach with `onLeave` would have put the return thunk
    /// there, its frame gone with the first return. The attach runs `onEnter` only.
    @Test func aFunctionThatReturnsTwiceIsAttachedOnEntryOnly() throws {
        let enters = Counter()
        let leaves = Counter()
        let function = Mutex<UInt>(0)
        let token = try Hook.attach(on: Self.slot(\.setjmper)) { call in
            enters.add()
            function.withLock { $0 = call.function }
        } onLeave: { _ in
            leaves.add()
        }
        defer { token.remove() }
        for _ in 0..<3 {
            #expect(at_call_setjmp_twice() == 207)
        }
        #expect(enters.count == 3 && leaves.count == 0)
        #expect(function.withLock { $0 } == UInt(bitPattern: at_setjmp_address()))
    }

    /// The function that returns twice is found behind what is in front of it: a second attach
    /// on the slot meets the first one's stub; a slot may hold a PLT entry that jumps to it.
    @Test func aFunctionThatReturnsTwiceIsFoundBehindStubsAndJumps() throws {
        let leaves = Counter()
        let first = try Hook.attach(on: Self.slot(\.setjmper), onEnter: { _ in })
        let second = try Hook.attach(on: Self.slot(\.setjmper), onEnter: { _ in }, onLeave: { _ in leaves.add() })
        #expect(at_call_setjmp_twice() == 207)
        second.remove()
        first.remove()
        at_slots_get().pointee.setjmper = at_setjmp_plt
        let behindAJump = try Hook.attach(on: Self.slot(\.setjmper), onEnter: { _ in }, onLeave: { _ in leaves.add() })
        #expect(at_call_setjmp_twice() == 207)
        behindAJump.remove()
        #expect(leaves.count == 0)
    }

    @Test func unwindersFindTheCallerThroughTheThunk() throws {
        let leaves = Counter()
        let token = try Hook.attach(on: Self.slot(\.tracer), onEnter: nil, onLeave: { _ in leaves.add() })
        defer { token.remove() }
        let result = at_call_tracer()
        let frames = (unwinder: at_tracer_report(0), backtrace: at_tracer_report(1))
        #expect(result == 1, "unwind frames \(frames.unwinder), backtrace frames \(frames.backtrace)")
        #expect(at_tracer_report(2) == 1 && at_tracer_report(3) == 1)
        #expect(leaves.count == 1)
    }

    /// An exception no frame catches: phase one walks the whole stack, through the attached
    /// call's thunk, and reports the end of the stack (5), not an error (3). In a child: were
    /// the thunk's unwind information wrong, the unwinder could crash.
    @Test func anExceptionSearchWalksPastTheThunk() async {
        await #expect(processExitsWith: .success) {
            at_reset()
            guard let token = try? Hook.attach(on: AttachTests.slot(\.unwinder), onEnter: nil, onLeave: { _ in }) else {
                exit(2)
            }
            let code = at_call_unwinder()
            token.remove()
            // Exit code 10 + the unwinder's code when it is not the end of the stack.
            exit(code == 5 ? 0 : Int32(10 + code))
        }
    }

    /// A C++ exception thrown inside an attached function and caught by its caller: the
    /// unwinder walks through the thunk to the caller's handler and lands there; the call's
    /// leave block does not run, and its frame is dropped as abandoned by the next call. In a
    /// child: libgcc aborts when it takes the thunk's frame for the handler's.
    @Test func aCppExceptionCaughtByTheCaller() async {
        await #expect(processExitsWith: .success) {
            at_reset()
            let leaves = AttachTests.Counter()
            guard
                let token = try? Hook.attach(
                    on: AttachTests.slot(\.thrower), onEnter: { _ in }, onLeave: { _ in leaves.add() })
            else { exit(2) }
            for round in 1...100 {
                guard at_call_catching(round) == 1000 + round else { exit(3) }
                guard at_call_catching(0) == -1 else { exit(4) }
            }
            guard leaves.count == 100 else { exit(5) }
            guard let abandoned = try? Hook.statistics.abandonedFrameCount, abandoned >= 99 else { exit(6) }
            token.remove()
            exit(0)
        }
    }

    /// The same through a function that tail-calls the thrower, both attached: their calls share
    /// one return slot, so the unwinder meets two thunk frames at one stack pointer, each of which
    /// must have a CFA of its own (libgcc took the outer one's for the handler's and aborted).
    /// Each leave block runs for the calls that return; neither for those the exception leaves.
    @Test func aCppExceptionThroughATailCallOfTwoAttachedFunctions() async {
        await #expect(processExitsWith: .success) {
            at_reset()
            let leaves = AttachTests.Counter()
            guard
                let outer = try? Hook.attach(
                    on: AttachTests.slot(\.tail_thrower), onEnter: { _ in }, onLeave: { _ in leaves.add() }),
                let inner = try? Hook.attach(
                    on: AttachTests.slot(\.thrower), onEnter: { _ in }, onLeave: { _ in leaves.add() })
            else { exit(2) }
            for round in 1...100 {
                guard at_call_catching_through_tail(round) == 1000 + round else { exit(3) }
                guard at_call_catching_through_tail(0) == -1 else { exit(4) }
            }
            guard leaves.count == 200 else { exit(5) }
            inner.remove()
            outer.remove()
            exit(0)
        }
    }

    /// pthread_exit inside an attached call: glibc unwinds the thread's stack (forced
    /// unwinding, through the thunk) to run the cleanup the caller registered. In a child.
    @Test func aThreadExitingInsideAnAttachedCall() async {
        await #expect(processExitsWith: .success) {
            at_reset()
            let leaves = AttachTests.Counter()
            let token = try Hook.attach(
                on: AttachTests.slot(\.exiter), onEnter: { _ in }, onLeave: { _ in leaves.add() })
            for value in 0..<20 where at_exit_in_thread(value) != 1 { exit(1) }
            token.remove()
            exit(leaves.count == 0 ? 0 : 2)
        }
    }

    @Test func aSignalHandlerCallsAnAttachedFunctionInsideAnotherAttachedCall() throws {
        at_install_signal_handler()
        let events = Mutex<[String]>([])
        let add = try Hook.attach(on: Self.slot(\.add)) { _ in
            events.withLock { $0.append("enter add") }
        } onLeave: { call in
            events.withLock { $0.append("leave add") }
            call.returnValue += 1
        }
        let signaller = try Hook.attach(on: Self.slot(\.signaller)) { _ in
            events.withLock { $0.append("enter signaller") }
        } onLeave: { _ in
            events.withLock { $0.append("leave signaller") }
        }
        defer {
            add.remove()
            signaller.remove()
        }
        #expect(at_call_signaller(9) == 9)
        #expect(at_signal_result() == 43)
        #expect(events.withLock { $0 } == ["enter signaller", "enter add", "leave add", "leave signaller"])
    }

    /// On a thread of its own, whose side stack starts empty: a thread of the test runner's
    /// pool may hold a frame another test's task left there (a call a longjmp left, seen from
    /// a shallower stack as a call still running), and has a slot fewer.
    @Test func recursionDeeperThanTheSideStackSkipsAndCountsLeaves() throws {
        let enters = Counter()
        let leaves = Counter()
        let token = try Hook.attach(on: Self.slot(\.recurse)) { _ in
            enters.add()
        } onLeave: { _ in
            leaves.add()
        }
        defer { token.remove() }
        let skipped = (try Hook.statistics).skippedLeaveCount
        let results = Mutex<[Int]>([])
        let thread = JoinableThread {
            let deep = at_call_recurse(600)
            // And the thread's side stack is empty again: the next calls all leave.
            let leavesAfterDeep = leaves.count
            let shallow = at_call_recurse(10)
            results.withLock { $0 = [deep, leavesAfterDeep, shallow] }
        }
        thread.join()
        let (deep, leavesAfterDeep, shallow) = results.withLock { ($0[0], $0[1], $0[2]) }
        #expect(deep == 600)
        #expect(enters.count == 601 + 11)
        #expect(leavesAfterDeep == 512)
        #expect((try Hook.statistics).skippedLeaveCount - skipped == 601 - 512)
        #expect(shallow == 10)
        #expect(leaves.count == 512 + 11)
    }

    @Test func aForkedChildRunsTheBlocksOfItsOwnCalls() async {
        await #expect(processExitsWith: .success) {
            at_reset()
            let leaves = AttachTests.Counter()
            let token = try Hook.attach(
                on: AttachTests.slot(\.add),
                onEnter: nil,
                onLeave: { call in
                    leaves.add()
                    call.returnValue += 1
                })
            let child = fork()
            if child == 0 {
                let ok = at_call_add(1, 1) == 3 && leaves.count == 1 && token.remove() && at_call_add(1, 1) == 2
                _exit(ok ? 0 : 1)
            }
            var status: Int32 = 0
            waitpid(child, &status, 0)
            guard status == 0, at_call_add(2, 2) == 5, leaves.count == 1 else { exit(1) }
            token.remove()
            exit(0)
        }
    }

    /// Calls made inside `fork` between the library's own fork handlers (the library marks the
    /// thread as its own from its prepare handler to its parent handler, locks held) are the
    /// program's: another library's fork handlers that run there, and a signal handler's
    /// calls, run the blocks, attached or hooked with a signature. They went straight through,
    /// as the library's own work.
    @Test func callsInsideForkBetweenTheLibrarysHandlersRunTheBlocks() async {
        await #expect(processExitsWith: .success) { exit(AttachTests.forkHandlersCount(withSignature: false)) }
        await #expect(processExitsWith: .success) { exit(AttachTests.forkHandlersCount(withSignature: true)) }
    }

    /// The body of the test above, in its own process: 0 when the blocks ran for the calls of
    /// both fork handlers, 10 plus the blocks that ran otherwise.
    static func forkHandlersCount(withSignature: Bool) -> Int32 {
        at_reset()
        // Before the library registers its handlers, at the process's first hook.
        guard at_fork_register() == 0 else { return 2 }
        let leaves = AttachTests.Counter()
        let made: HookToken?
        if withSignature {
            made = try? Hook.after(on: AttachTests.slot(\.add), signature: Signature("qqq")) { _ in leaves.add() }
        } else {
            made = try? Hook.attach(on: AttachTests.slot(\.add), onEnter: nil, onLeave: { _ in leaves.add() })
        }
        guard let token = made else { return 4 }
        defer { token.remove() }
        // The thread's side stack is made by its first attached call: not inside fork, where
        // the locks that takes are held (a call there without one goes straight through,
        // counted as passed through, not as the library's).
        guard at_call_add(1, 1) == 2, leaves.count == 1 else { return 3 }
        let child = fork()
        if child == 0 { _exit(0) }
        var status: Int32 = 0
        waitpid(child, &status, 0)
        // The prepare handler's call and the parent handler's, in this process.
        guard status == 0, leaves.count == 3 else { return Int32(10 + leaves.count) }
        return 0
    }

    @Test func removalWhileACallIsInsideTheOriginal() async throws {
        at_block_set_hold(1)
        let leaves = Counter()
        // Held by the blocks only: released when reclamation lets the attach's blocks go, the
        // token gone too. (Not the process's figures: other suites install and remove hooks
        // meanwhile.)
        var marker: Marker? = Marker()
        weak let released = marker
        var token: HookToken? = try Hook.attach(
            on: Self.slot(\.block), onEnter: { [marker] _ in _ = marker }, onLeave: { _ in leaves.add() })
        marker = nil
        let result = Mutex<Int>(0)
        let thread = Thread { result.withLock { $0 = at_call_block(21) } }
        thread.start()
        while at_block_inside_count() == 0 { usleep(100) }
        #expect(token?.remove() == true)
        token = nil
        at_block_set_hold(0)
        while result.withLock({ $0 }) == 0 { usleep(100) }
        #expect(result.withLock { $0 } == 42)
        // The attach was gone when the call returned: its leave block did not run.
        #expect(leaves.count == 0)
        try Hook.waitForReclamation()
        #expect(released == nil, "the removed attach's blocks were not released")
    }

    /// An object a test's blocks hold, to see them released.
    final class Marker: Sendable {}

    @Test func callsTheBlocksMakeAreNotAttached() throws {
        let enters = Counter()
        let token = try Hook.attach(on: Self.slot(\.add)) { _ in
            enters.add()
            _ = at_call_add(5, 5)  // through the same slot: straight to the function
        }
        defer { token.remove() }
        #expect(at_call_add(1, 2) == 3)
        #expect(enters.count == 1)
    }

    // MARK: - Threads

    @Test func fourThreadsCallWhileAttachesComeAndGo() throws {
        let stop = Atomic<Bool>(false)
        let enters = Counter()
        let leaves = Counter()
        let wrong = Counter()
        let threads = (0..<4).map { index in
            Thread {
                var calls = 0
                while !stop.load(ordering: .relaxed) {
                    let value = at_call_add(index, calls)
                    if value != index + calls && value != index + calls + 1000 { wrong.add() }
                    calls += 1
                }
            }
        }
        for thread in threads { thread.start() }
        defer { stop.store(true, ordering: .relaxed) }
        // The blocks of every attach hold one marker: released once reclamation has let them
        // all go. (Not the process's figures: other suites install and remove hooks meanwhile.)
        var marker: Marker? = Marker()
        weak let released = marker
        for _ in 0..<500 {
            let token = try Hook.attach(on: Self.slot(\.add)) { [marker] _ in
                _ = marker
                enters.add()
            } onLeave: { call in
                leaves.add()
                call.returnValue += 1000
            }
            token.remove()
        }
        marker = nil
        stop.store(true, ordering: .relaxed)
        usleep(50_000)
        #expect(wrong.count == 0)
        #expect(leaves.count <= enters.count)
        try Hook.waitForReclamation()
        #expect(released == nil, "the removed attaches' blocks were not released")
        #expect(at_call_add(1, 2) == 3)
    }
}

extension FixtureTableTests {
    /// Attach through import tables: the strlen entries of a fixture library bound at load
    /// (full RELRO; the test program's own calls may not go through an import table: a
    /// sanitizer's runtime defines strlen in the executable). Blocks count only this thread's
    /// calls: other threads call strlen too.
    @Suite struct ImportAttachTests {
        static let library = FixtureTableTests.ImportTableTests.fullRELRO

        static func length() throws -> ImportFixtures.Length {
            let handle = try ImportFixtures.open(library)
            return try ImportFixtures.function("cimportfixture_length", in: handle, as: ImportFixtures.Length.self)
        }

        @Test func importTableAttachCountsCallsOfAnImportedFunction() throws {
            let length = try Self.length()
            let me = at_gettid()
            let enters = AttachTests.Counter()
            let leaves = AttachTests.Counter()
            let group = try ImportTable.attach(symbol: "strlen", in: .object(Self.library)) { call in
                guard call.threadID == me else { return }
                let text = UnsafePointer<CChar>(bitPattern: UInt(call.integerArgument(0)))!
                if String(cString: text) == "attached" { enters.add() }
            } onLeave: { call in
                guard call.threadID == me else { return }
                leaves.add()
                call.returnValue = 7
            }
            #expect(length("attached") == 7)
            #expect(enters.count == 1 && leaves.count == 1)
            group.remove()
            #expect(length("attached") == 8)
            #expect(leaves.count == 1)
        }

        /// setjmp through a lazily bound import entry: attached with both blocks, it runs
        /// `onEnter` only, and its second return (by `longjmp`) reaches the caller.
        @Test func importTableAttachOfSetjmpRunsOnEnterOnly() throws {
            typealias Twice = @convention(c) () -> Int32
            let name = FixtureTableTests.ImportTableTests.lazy
            let library = try ImportFixtures.open(name, flags: RTLD_LAZY)
            let twice = try ImportFixtures.function("cimportlazy_setjmp_twice", in: library, as: Twice.self)
            let me = at_gettid()
            let enters = AttachTests.Counter()
            let leaves = AttachTests.Counter()
            let group = try ImportTable.attach(symbol: "_setjmp", in: .object(name)) { call in
                if call.threadID == me { enters.add() }
            } onLeave: { call in
                if call.threadID == me { leaves.add() }
            }
            defer { group.remove() }
            #expect(!group.tokens.isEmpty)
            #expect(twice() == 207)
            #expect(twice() == 207)
            #expect(enters.count == 2 && leaves.count == 0)
        }

        @Test func importTableAttachOfManySymbolsSkipsThoseNotImported() throws {
            let length = try Self.length()
            let me = at_gettid()
            let names = Mutex<[String]>([])
            let group = try ImportTable.attach(
                symbols: ["strlen", "no_such_function_anywhere", "strlen"], in: .object(Self.library)
            ) { name in
                (onEnter: { call in if call.threadID == me { names.withLock { $0.append(name) } } }, onLeave: nil)
            }
            #expect(group.tokens.count == ImportFixtures.entries(of: "strlen", in: .object(Self.library)).count)
            #expect(length("one") == 3)
            #expect(names.withLock { $0 } == ["strlen"])
            group.remove()
            #expect(throws: HookError.self) {
                try ImportTable.attach(symbols: ["no_such_function_anywhere"], in: .all) { _ in (nil, nil) }
            }
            // An empty list, and a list of which nothing is imported, name what they are.
            do {
                _ = try ImportTable.attach(symbols: [], in: .all) { _ in (nil, nil) }
                Issue.record("an empty list was attached to")
            } catch {
                #expect(error.code == .symbolNotImported && error.message.contains("empty"))
            }
            do {
                _ = try ImportTable.attach(symbols: ["no_such_a", "no_such_b"], in: .all) { _ in (nil, nil) }
                Issue.record("a list of symbols nothing imports was attached to")
            } catch {
                #expect(error.code == .symbolNotImported)
                #expect(error.message.contains("\"no_such_a\", \"no_such_b\""), "\(error.message)")
            }
        }

        @Test func importTableAttachLeadingToKeepsTheEntriesBoundThere() throws {
            let length = try Self.length()
            let me = at_gettid()
            let names = Mutex<[String]>([])
            let entries = ImportFixtures.entries(of: "strlen", in: .object(Self.library)).count
            // The functions the fixture's entries are bound to (the C library's strlen as its
            // resolver chose it; under AddressSanitizer, its interceptor), and where each entry
            // leads as the attach asks.
            let bound = try ImportTable.bindings(of: "strlen").filter {
                $0.entry.objectPath == ImportFixtures.path(Self.library)
            }
            #expect(bound.count == entries && bound.allSatisfy { $0.value != 0 })
            let functions = Set(bound.map(\.value))
            let asked = Mutex<[UInt]>([])
            let toTheCLibrary: @Sendable (UnsafeRawPointer) -> Bool = { function in
                asked.withLock { $0.append(UInt(bitPattern: function)) }
                return functions.contains(UInt(bitPattern: function))
            }
            let group = try ImportTable.attach(
                symbols: ["strlen"], in: .object(Self.library), leadingTo: toTheCLibrary
            ) { name in
                (onEnter: { call in if call.threadID == me { names.withLock { $0.append(name) } } }, onLeave: nil)
            }
            #expect(group.tokens.count == entries)
            #expect(Set(asked.withLock { $0 }) == functions)
            #expect(length("three") == 5)
            #expect(names.withLock { $0 } == ["strlen"])
            group.remove()
            // Entries that lead elsewhere than asked are left alone: none here, which is an error
            // as for a symbol nothing imports.
            let nowhere: @Sendable (UnsafeRawPointer) -> Bool = { _ in false }
            do {
                _ = try ImportTable.attach(symbols: ["strlen"], in: .object(Self.library), leadingTo: nowhere) { _ in
                    (onEnter: { _ in Issue.record("an entry leading elsewhere was attached") }, onLeave: nil)
                }
                Issue.record("entries none of which leads where asked were attached")
            } catch {
                #expect(error.code == .symbolNotImported)
            }
            #expect(length("four") == 4)
        }

        @Test func laterLoadsAreFollowed() throws {
            let me = at_gettid()
            let names = Mutex<[String]>([])
            let group = try ImportTable.attach(symbols: ["strlen"], in: .allIncludingLaterLoads) { name in
                (
                    onEnter: nil,
                    onLeave: { call in
                        if call.threadID == me && call.returnValue == 11 { names.withLock { $0.append(name) } }
                    }
                )
            }
            defer { group.remove() }
            let length = try Self.length()
            let before = names.withLock { $0.count }
            #expect(length("eleven char") == 11)
            // Other objects' calls on this thread count too (the scope is every object).
            #expect(names.withLock { $0.count } > before)
        }
    }
}
