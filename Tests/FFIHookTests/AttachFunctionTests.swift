import CTestSupport
import FFIHook
import FFIHookCore
import Foundation
import Synchronization
import TestHookLock
import Testing

/// Attach with blocks written as C functions (``AttachFunctions``): a C function compiled apart
/// reads and writes the frames by the byte offsets the documentation gives, Swift functions
/// with `@convention(c)` read them through the contexts, and the forms for a slot, an import
/// table group and a function that returns twice behave as the closure forms do.
@Suite(.serialized, .exclusiveProcessHooks) struct AttachFunctionTests {
    init() { at_reset() }

    static func slot<Function>(_ field: KeyPath<at_slots, Function?>) -> FunctionSlot {
        FunctionSlot.field(field, of: at_slots_get())
    }

    /// What a Swift enter or leave function counts into: the calls of one thread.
    final class ThreadCounts: @unchecked Sendable {
        let thread = at_gettid()
        let enters = Atomic<Int>(0)
        let leaves = Atomic<Int>(0)
        let lastResult = Atomic<UInt64>(0)
        var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }
        static func from(_ context: UnsafeMutableRawPointer?) -> ThreadCounts {
            Unmanaged<ThreadCounts>.fromOpaque(context!).takeUnretainedValue()
        }
    }

    static let countingFunctions = AttachFunctions(
        onEnter: { context, frame in
            let counts = ThreadCounts.from(context)
            let call = EnterContext(unsafeFrame: frame!)
            guard call.threadID == counts.thread else { return }
            counts.enters.add(1, ordering: .relaxed)
            call.scratch = call.integerArgument(0) &* 10
        },
        onLeave: { context, frame in
            let counts = ThreadCounts.from(context)
            let call = LeaveContext(unsafeFrame: frame!)
            guard call.threadID == counts.thread else { return }
            counts.leaves.add(1, ordering: .relaxed)
            counts.lastResult.store(call.returnValue, ordering: .relaxed)
            call.returnValue = call.returnValue &+ call.scratch
        }, context: nil)

    @Test func aCFunctionReadsAndWritesTheFramesAtTheDocumentedOffsets() throws {
        let original = UInt(bitPattern: unsafeBitCast(at_slots_get().pointee.add, to: UnsafeRawPointer?.self))
        var seen = at_functions_seen()
        try withUnsafeMutablePointer(to: &seen) { seen in
            let token = try Hook.attach(
                on: Self.slot(\.add),
                functions: AttachFunctions(onEnter: at_functions_enter, onLeave: at_functions_leave, context: seen))
            // The enter function added 100 to the second argument; the leave one doubled the result.
            #expect(at_call_add(3, 4) == (3 + 104) * 2)
            #expect(seen.pointee.enters == 1 && seen.pointee.leaves == 1)
            #expect(seen.pointee.rdi == 3 && seen.pointee.rsi == 4)
            #expect(seen.pointee.enter_function == original && seen.pointee.leave_function == original)
            #expect(
                seen.pointee.enter_thread == UInt64(at_gettid()) && seen.pointee.leave_thread == UInt64(at_gettid()))
            #expect(seen.pointee.enter_sp != 0 && seen.pointee.leave_sp == seen.pointee.enter_sp)
            #expect(seen.pointee.leave_return != 0 && seen.pointee.leave_return == seen.pointee.enter_return)
            #expect(seen.pointee.leave_scratch == 77)
            #expect(seen.pointee.result == 107)
            #expect(token.remove())
            #expect(at_call_add(3, 4) == 7)
            #expect(seen.pointee.enters == 1 && seen.pointee.leaves == 1)
        }
        #expect(UInt(bitPattern: unsafeBitCast(at_slots_get().pointee.add, to: UnsafeRawPointer?.self)) == original)
    }

    @Test func aCFunctionReadsTheVectorRegistersAndTheVectorCount() throws {
        var seen = at_functions_seen()
        try withUnsafeMutablePointer(to: &seen) { seen in
            let mix = try Hook.attach(
                on: Self.slot(\.mix),
                functions: AttachFunctions(onEnter: at_functions_enter, onLeave: nil, context: seen))
            defer { mix.remove() }
            // mix(1, 2.5, ...): 1 in rdi, 2.5 in xmm0.
            _ = at_call_mix()
            #expect(seen.pointee.enters == 1 && seen.pointee.leaves == 0)
            #expect(seen.pointee.xmm0 == 2.5 && seen.pointee.rdi == 1)
        }
        var variadic = at_functions_seen()
        try withUnsafeMutablePointer(to: &variadic) { seen in
            let expected = at_call_vsum()
            let sum = try Hook.attach(
                on: Self.slot(\.vsum),
                functions: AttachFunctions(onEnter: at_functions_enter, onLeave: nil, context: seen))
            defer { sum.remove() }
            // (The enter function changes the second integer register: the sum differs.)
            _ = at_call_vsum()
            #expect(seen.pointee.enters == 1)
            // A variadic call's %al: the caller's count of vector registers (doubles passed).
            #expect(seen.pointee.rax_count > 0 && seen.pointee.rax_count <= 8)
            sum.remove()
            #expect(at_call_vsum() == expected)
        }
    }

    @Test func swiftFunctionsWithTheCConventionUseTheContexts() throws {
        let counts = ThreadCounts()
        var functions = Self.countingFunctions
        functions.context = counts.context
        let token = try Hook.attach(on: Self.slot(\.add), functions: functions)
        #expect(at_call_add(5, 6) == 11 + 50)
        #expect(at_call_add(1, 1) == 2 + 10)
        #expect(counts.enters.load(ordering: .relaxed) == 2 && counts.leaves.load(ordering: .relaxed) == 2)
        #expect(counts.lastResult.load(ordering: .relaxed) == 2)
        token.remove()
        #expect(at_call_add(5, 6) == 11)
        #expect(counts.enters.load(ordering: .relaxed) == 2)
    }

    @Test func anEnterFunctionAloneLeavesTheReturnAddress() throws {
        var seen = at_functions_seen()
        try withUnsafeMutablePointer(to: &seen) { seen in
            let token = try Hook.attach(
                on: Self.slot(\.add),
                functions: AttachFunctions(onEnter: at_functions_enter, onLeave: nil, context: seen))
            defer { token.remove() }
            #expect(at_call_add(3, 4) == 107)
            #expect(seen.pointee.enters == 1 && seen.pointee.leaves == 0)
            // The return address at entry is the caller's own (no thunk in its place before).
            #expect(seen.pointee.enter_return != 0)
        }
    }

    @Test func aFunctionThatReturnsTwiceRunsTheEnterFunctionOnly() throws {
        var seen = at_functions_seen()
        try withUnsafeMutablePointer(to: &seen) { seen in
            let token = try Hook.attach(
                on: Self.slot(\.setjmper),
                functions: AttachFunctions(onEnter: at_functions_enter, onLeave: at_functions_leave, context: seen))
            defer { token.remove() }
            for _ in 0..<3 {
                #expect(at_call_setjmp_twice() == 207)
            }
            #expect(seen.pointee.enters == 3 && seen.pointee.leaves == 0)
            #expect(seen.pointee.enter_function == UInt64(UInt(bitPattern: at_setjmp_address())))
        }
    }

    @Test func badInputIsRefusedAsForClosures() throws {
        let functions = AttachFunctions(onEnter: at_functions_enter, onLeave: nil, context: nil)
        let limited = try #require(throws: HookError.self) {
            try Hook.attach(on: Self.slot(\.add), options: .onInstallingThreadOnly, functions: functions)
        }
        #expect(limited.code == .unsupportedCallerLimit)
        let misaligned = UnsafeMutableRawPointer(bitPattern: UInt(bitPattern: at_slots_get()) + 1)!
        #expect(throws: HookError.self) {
            try Hook.attach(on: FunctionSlot(misaligned), functions: functions)
        }
        #expect(at_call_add(1, 2) == 3)
    }

    /// Calls through an import-table entry of the fixture library, attached as a group whose
    /// functions come per symbol; a symbol given no functions is attached with none.
    @Test func anImportTableGroupWithFunctionsCountsOneThreadsCalls() throws {
        let library = FixtureTableTests.ImportAttachTests.library
        let length = try FixtureTableTests.ImportAttachTests.length()
        let counts = ThreadCounts()
        var functions = Self.countingFunctions
        functions.context = counts.context
        let group = try ImportTable.attach(symbols: ["strlen", "memcmp"], in: .object(library)) { symbol in
            symbol == "strlen" ? functions : nil
        }
        #expect(!group.tokens.isEmpty)
        // strlen("attached") is 8; the scratch (the string's address times ten) is added to the
        // result, so the caller sees more than 8.
        #expect(length("attached") != 8)
        #expect(counts.enters.load(ordering: .relaxed) == 1 && counts.leaves.load(ordering: .relaxed) == 1)
        #expect(counts.lastResult.load(ordering: .relaxed) == 8)
        group.remove()
        #expect(length("attached") == 8)
        #expect(counts.enters.load(ordering: .relaxed) == 1)
    }
}
