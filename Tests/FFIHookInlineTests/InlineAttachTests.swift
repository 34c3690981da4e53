internal import CFFIHookSupport
import CTestSupport
import FFIHook
import Foundation
import Synchronization
import Testing

@testable import FFIHookInline

extension InlineSuites {
    /// Attach without a signature on functions patched inline: called directly by compiled
    /// code, with the jump written on attach and taken out on removal.
    @Suite struct InlineAttachTests {
        @Test func directCallsOfEachFixtureRunEnterAndLeave() throws {
            for fixture in InlineHookTests.fixtures {
                let expected = fixture.inputs.map { ct_inline_direct(fixture.which, $0, 3) }
                let function = try InlineFunction(address: fixture.address)
                let before = codeBytes(fixture.address, function.overwrittenLength)
                let enters = Count()
                let leaves = Count()
                let isInt = fixture.signature == "ii"
                let firstArguments = Mutex<[Int64]>([])
                let token = try Hook.attach(on: function.slot) { call in
                    let first = call.integerArgument(0)
                    firstArguments.withLock {
                        $0.append(isInt ? Int64(Int32(truncatingIfNeeded: first)) : Int64(bitPattern: first))
                    }
                    enters.add()
                } onLeave: { call in
                    leaves.add()
                    if isInt {
                        let value = Int32(truncatingIfNeeded: call.returnValue) + 1000
                        call.returnValue = UInt64(UInt32(bitPattern: value))
                    } else {
                        call.returnValue &+= 1000
                    }
                }
                #expect(function.isPatched, Comment(rawValue: fixture.name))
                let attached = fixture.inputs.map { ct_inline_direct(fixture.which, $0, 3) }
                #expect(attached == expected.map { $0 + 1000 }, Comment(rawValue: fixture.name))
                #expect(enters.current == fixture.inputs.count && leaves.current == fixture.inputs.count)
                #expect(firstArguments.withLock { $0 } == fixture.inputs, Comment(rawValue: fixture.name))
                #expect(token.remove())
                #expect(!function.isPatched, Comment(rawValue: fixture.name))
                #expect(codeBytes(fixture.address, function.overwrittenLength) == before)
                #expect(
                    fixture.inputs.map { ct_inline_direct(fixture.which, $0, 3) } == expected,
                    Comment(rawValue: fixture.name))
            }
        }

        /// The C library's `_setjmp`, patched and attached with both blocks, called directly and
        /// returned to twice (the second time by `longjmp`): it runs `onEnter` only, and both
        /// returns reach the caller. In a child: the patch is on the whole process's `_setjmp`.
        @Test func setjmpAttachedInlineReturnsTwice() async {
            await #expect(processExitsWith: .success) {
                let function = try InlineFunction(address: UnsafeRawPointer(at_setjmp_address()!))
                let enters = Count()
                let leaves = Count()
                let token = try Hook.attach(on: function.slot) { _ in
                    enters.add()
                } onLeave: { _ in
                    leaves.add()
                }
                guard function.isPatched else { exit(2) }
                for _ in 0..<3 where at_call_setjmp_twice_direct() != 207 { exit(3) }
                guard enters.current >= 3, leaves.current == 0 else { exit(4) }
                token.remove()
                guard at_call_setjmp_twice_direct() == 207 else { exit(5) }
            }
        }

        @Test func attachAndAHookOfOneFunctionBothRun() throws {
            let function = try InlineFunction(symbol: "getpid")
            let events = Mutex<[String]>([])
            let me = UInt(pthread_self())
            let pid = getpid()
            let hook = try Hook.after(on: function.slot, signature: Signature("i")) { _ in
                if UInt(pthread_self()) == me { events.withLock { $0.append("hook") } }
            }
            let attach = try Hook.attach(on: function.slot) { _ in
                if UInt(pthread_self()) == me { events.withLock { $0.append("enter") } }
            } onLeave: { call in
                if UInt(pthread_self()) == me {
                    #expect(Int32(truncatingIfNeeded: call.returnValue) == pid)
                    events.withLock { $0.append("leave") }
                }
            }
            _ = getpid()
            // The attach went in under the hook (as a replacement does): the hook's original
            // is the attach stub.
            #expect(events.withLock { $0 } == ["enter", "leave", "hook"])
            hook.remove()
            #expect(function.isPatched)
            attach.remove()
            #expect(!function.isPatched)
        }

        /// Calls of the C functions below: 1 an enter, 1000 a leave.
        static let functionCalls = Atomic<Int>(0)

        /// The registers a direct call of ct_ipra_leaf left other than ct_ipra_call loaded them
        /// (rdi: its argument; rax: its result, `expected`), by name.
        static func registersChangedAcrossTheCall(_ argument: Int32, expected: Int32) -> [String] {
            registersChanged(through: ct_ipra_call, argument, result: .int(expected))
        }

        /// What a leaf of the fixtures returns: in eax, nothing (rax kept: it holds the
        /// address of ct_ipra_pattern), or a double in the low half of xmm0 (its high half kept).
        enum LeafResult {
            case int(Int32)
            case void
            case double(Double)
        }

        /// The registers a direct call by `caller` (ct_ipra_call or one of its forms for the other
        /// leaves) left other than the caller loaded them, by name; the result's register as
        /// `result` says.
        static func registersChanged(
            through caller: (Int32, UnsafeMutablePointer<UInt64>?, UnsafeMutablePointer<UInt8>?) -> Void,
            _ argument: Int32, result: LeafResult
        ) -> [String] {
            var registers = [UInt64](repeating: 0, count: 9)
            var vectors = [UInt8](repeating: 0, count: 256)
            caller(argument, &registers, &vectors)
            let pattern = withUnsafeBytes(of: ct_ipra_pattern) { Array($0) }
            let words = withUnsafeBytes(of: ct_ipra_pattern) { Array($0.bindMemory(to: UInt64.self)) }
            var changed: [String] = []
            let loaded: [UInt64] = [
                words[32], words[33], words[34], UInt64(UInt32(bitPattern: argument)), words[35], words[36],
                words[37], words[38],
            ]
            for (index, name) in ["rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11"].enumerated() {
                // rdi as the argument's 32 bits (the caller set edi, which clears the upper half).
                let value = name == "rdi" ? registers[index] & 0xFFFF_FFFF : registers[index]
                if value != loaded[index] { changed.append(name) }
            }
            var expectedVectors = pattern[0..<256].map { $0 }
            switch result {
            case .int(let expected):
                if Int32(truncatingIfNeeded: registers[8]) != expected { changed.append("eax") }
            case .void:
                if registers[8] != ct_ipra_pattern_address() { changed.append("rax") }
            case .double(let expected):
                if registers[8] != ct_ipra_pattern_address() { changed.append("rax") }
                withUnsafeBytes(of: expected.bitPattern) { expectedVectors.replaceSubrange(0..<8, with: $0) }
            }
            for index in 0..<16
            where Array(vectors[index * 16..<index * 16 + 16]) != Array(expectedVectors[index * 16..<index * 16 + 16]) {
                changed.append("xmm\(index)")
            }
            return changed
        }

        /// The low half of xmm0 as ct_ipra_call_double passes it to ct_ipra_leaf_double.
        static var doubleArgument: Double {
            withUnsafeBytes(of: ct_ipra_pattern) { Double(bitPattern: $0.load(as: UInt64.self)) }
        }

        /// A caller that keeps values in registers the function does not write, across a direct
        /// call (as GCC's -fipa-ra has the callers of a function that binds locally do: a static
        /// or hidden function), finds them as it left them through an inline attach: with both
        /// blocks (the leave block through the side stack), with an enter block alone, with C
        /// functions as blocks, and in a batch. The attach's stub, entry, cell and return path
        /// wrote r10, r11, rdi, rsi, r9 and xmm4 to xmm15 before: the caller got wrong values.
        @Test func callersKeepTheRegistersTheFunctionLeavesAlone() throws {
            try #require(Self.registersChangedAcrossTheCall(20, expected: 21) == [])
            let function = try InlineFunction(address: address(of: ct_ipra_leaf))
            let enters = Count()
            let leaves = Count()
            var tokens: [(String, HookToken)] = []
            tokens.append(
                (
                    "both blocks",
                    try Hook.attach(on: function.slot) { _ in
                        enters.add()
                    } onLeave: { _ in
                        leaves.add()
                    }
                ))
            #expect(Self.registersChangedAcrossTheCall(20, expected: 21) == [], "both blocks")
            #expect(enters.current == 1 && leaves.current == 1)
            tokens.removeLast().1.remove()
            tokens.append(("an enter block", try Hook.attach(on: function.slot, onEnter: { _ in enters.add() })))
            #expect(Self.registersChangedAcrossTheCall(30, expected: 31) == [], "an enter block alone")
            #expect(enters.current == 2 && leaves.current == 1)
            tokens.removeLast().1.remove()
            let functions = AttachFunctions(
                onEnter: { _, _ in InlineAttachTests.functionCalls.add(1, ordering: .relaxed) },
                onLeave: { _, _ in InlineAttachTests.functionCalls.add(1000, ordering: .relaxed) }, context: nil)
            let before = Self.functionCalls.load(ordering: .relaxed)
            tokens.append(("C functions", try Hook.attach(on: function.slot, functions: functions)))
            #expect(Self.registersChangedAcrossTheCall(40, expected: 41) == [], "C functions as blocks")
            #expect(Self.functionCalls.load(ordering: .relaxed) == before + 1001)
            tokens.removeLast().1.remove()
            // A leave block that changes the result: the result register takes its value, the
            // others stay.
            let changing = try Hook.attach(on: function.slot) { _ in
            } onLeave: { call in
                call.returnValue += 100
            }
            #expect(Self.registersChangedAcrossTheCall(50, expected: 151) == [], "a leave block changing the result")
            changing.remove()
            let batch = try InlineBatch(addresses: [address(of: ct_ipra_leaf), address(of: ct_inline_rip)])
            let group = try Hook.attach(on: batch) { _ in ({ _ in enters.add() }, { _ in leaves.add() }) }
            #expect(group.refusals.isEmpty)
            #expect(Self.registersChangedAcrossTheCall(60, expected: 61) == [], "a batch's attach")
            #expect(group.remove())
            #expect(!function.isPatched)
            #expect(Self.registersChangedAcrossTheCall(70, expected: 71) == [])
        }

        /// A caller that keeps vectors whole in every vector register across a direct call (one
        /// built with `-mavx` or `-mavx512f` and GCC's -fipa-ra) finds every lane as it left it
        /// through an inline attach whose blocks run code that writes every lane of every
        /// vector register (as the C library's string functions do on a machine with AVX). In a
        /// process of its own: the test sets how wide the entries keep the registers (every
        /// width this machine has, and the xmm halves alone to see the lanes lost without the
        /// wider saves), which would change it under other tests' attached calls.
        @Test func callersKeepWholeVectorRegistersAcrossAnAttach() async {
            await #expect(processExitsWith: .success) { try InlineAttachTests.keepVectorsWhole() }
        }

        /// How many of the first `width` bytes of each of the sixteen vector registers the
        /// wide caller stored differ from the pattern it loaded.
        static func wideRegistersChanged(width: Int) -> Int {
            var vectors = [UInt8](repeating: 0, count: 1024)
            if width == 64 { ct_ipra_call_zmm(5, &vectors) } else { ct_ipra_call_ymm(5, &vectors) }
            return withUnsafeBytes(of: ct_ipra_wide_pattern) { pattern in
                (0..<16).reduce(0) { changed, register in
                    changed + (0..<width).filter { vectors[register * 64 + $0] != pattern[register * 64 + $0] }.count
                }
            }
        }

        static func keepVectorsWhole() throws {
            // A machine without AVX has no lanes above the xmm registers' to lose.
            guard vf_has_avx() != 0 else { return }
            let widest = Int(ffh_attach_vector_width())
            #expect(wideRegistersChanged(width: 32) == 0, "unhooked")
            let function = try InlineFunction(address: address(of: ct_ipra_leaf))
            let calls = Count()
            for width in [64, 32] where width <= widest {
                #expect(Int(ffh_attach_set_vector_width(Int32(width))) == width)
                let token = try Hook.attach(on: function.slot) { _ in
                    vf_clobber()
                    calls.add()
                } onLeave: { _ in
                    vf_clobber()
                    calls.add()
                }
                #expect(wideRegistersChanged(width: width) == 0, "\(width)-byte saves")
                token.remove()
            }
            // Without the wider saves, the blocks' code leaves its ones in the upper lanes.
            #expect(ffh_attach_set_vector_width(16) == 16)
            let token = try Hook.attach(on: function.slot, onEnter: { _ in vf_clobber() }, onLeave: nil)
            #expect(wideRegistersChanged(width: 32) > 0, "the xmm halves alone")
            token.remove()
            ffh_attach_set_vector_width(Int32(widest))
            #expect(calls.current == 2 * (widest == 64 ? 2 : 1))
        }

        /// The same callers through hooks with a signature (before, instead, after; with an
        /// `Invocation` and typed; a block that changes the argument, an instead block that
        /// does not call the original), for a function returning an int, nothing, or a double
        /// in xmm0: every register but the result's comes back as the caller left it, the
        /// result's high half too. The closure entry wrote r10, r11 and whatever its C code
        /// chose (rdi, rsi, rcx, r8, r9, vector registers) before.
        @Test func signatureHooksKeepTheRegistersTheFunctionLeavesAlone() throws {
            try #require(Self.registersChangedAcrossTheCall(20, expected: 21) == [])
            let function = try InlineFunction(address: address(of: ct_ipra_leaf))
            let runs = Count()
            var token = try Hook.before(on: function.slot, signature: Signature("ii")) { _ in runs.add() }
            #expect(Self.registersChangedAcrossTheCall(20, expected: 21) == [], "a before block")
            let after = try Hook.after(on: function.slot, signature: Signature("ii")) { call in
                call.setReturnValue(call.returnValue(as: Int32.self) + 100)
            }
            #expect(Self.registersChangedAcrossTheCall(30, expected: 131) == [], "an after block changing the result")
            after.remove()
            token.remove()
            token = try Hook.before(on: function.slot, signature: Signature("ii")) { call in
                call.setArgument(0, to: Int32(1000))
            }
            // The function gets the new argument; the caller's rdi is what it passed.
            #expect(Self.registersChangedAcrossTheCall(40, expected: 1001) == [], "a block changing the argument")
            token.remove()
            token = try Hook.instead(on: function.slot, signature: Signature("ii")) { call in
                call.callOriginal()
                runs.add()
            }
            #expect(Self.registersChangedAcrossTheCall(50, expected: 51) == [], "an instead block calling the original")
            token.remove()
            token = try Hook.instead(on: function.slot, signature: Signature("ii")) { call in
                call.setReturnValue(Int32(7))
            }
            #expect(Self.registersChangedAcrossTheCall(60, expected: 7) == [], "an instead block alone")
            token.remove()
            token = try Hook.after(on: function.slot, arguments: Int32.self, returning: Int32.self) { result, _ in
                result * 2
            }
            #expect(Self.registersChangedAcrossTheCall(70, expected: 142) == [], "a typed after block")
            token.remove()
            token = try Hook.instead(on: function.slot, arguments: Int32.self, returning: Int32.self) { original, x in
                original(x) + 1
            }
            #expect(Self.registersChangedAcrossTheCall(80, expected: 82) == [], "a typed instead block")
            token.remove()
            // No hook left: the closure stays in the function and jumps on.
            #expect(Self.registersChangedAcrossTheCall(90, expected: 91) == [], "a closure with no hooks")
            #expect(runs.current == 3)

            let void = try InlineFunction(address: address(of: ct_ipra_leaf_void))
            token = try Hook.before(on: void.slot, signature: Signature("vi")) { _ in runs.add() }
            #expect(Self.registersChanged(through: ct_ipra_call_void, 11, result: .void) == [], "a void function")
            #expect(ct_ipra_last_seen() == 11 && runs.current == 4)
            token.remove()

            let double = try InlineFunction(address: address(of: ct_ipra_leaf_double))
            token = try Hook.after(on: double.slot, signature: Signature("dd")) { call in
                call.setReturnValue(call.returnValue(as: Double.self) + 1)
            }
            let expected = Self.doubleArgument * 0.5 + 1
            #expect(
                Self.registersChanged(through: ct_ipra_call_double, 12, result: .double(expected)) == [],
                "a function returning a double")
            token.remove()
            #expect(
                Self.registersChanged(through: ct_ipra_call_double, 13, result: .double(Self.doubleArgument * 0.5))
                    == [])

            let batch = try InlineBatch(addresses: [address(of: ct_ipra_leaf), address(of: ct_inline_rip)])
            let group = try Hook.before(on: batch, signature: Signature("ii")) { _, _ in runs.add() }
            #expect(Self.registersChangedAcrossTheCall(100, expected: 101) == [], "a batch's hooks")
            #expect(runs.current == 5)
            group.remove()
        }

        /// A C++ exception thrown inside a function patched inline with a signature hook, and
        /// caught by its caller: the unwinder walks through the preserving entry (whose frame
        /// begins below the record its trampoline pushed) and its landing pad to the caller's
        /// handler; the after block runs for the calls that return. In a child: libgcc aborts
        /// on a frame whose unwind information is wrong.
        @Test func aCppExceptionThroughASignatureHookOfAnInlineFunction() async {
            await #expect(processExitsWith: .success) {
                at_reset()
                let afters = Count()
                let thrower = unsafeBitCast(at_throw as @convention(c) (Int) -> Void, to: UnsafeRawPointer.self)
                guard let function = try? InlineFunction(address: thrower),
                    let token = try? Hook.after(on: function.slot, signature: Signature("vq"), { _ in afters.add() })
                else { exit(2) }
                for round in 1...100 {
                    guard at_call_catching(round) == 1000 + round else { exit(3) }
                    guard at_call_catching(0) == -1 else { exit(4) }
                }
                guard afters.current == 100 else { exit(5) }
                token.remove()
                exit(0)
            }
        }
    }
}
