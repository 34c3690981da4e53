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
    }
}
