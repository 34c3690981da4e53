import CTestSupport
import Foundation
import FFIHook
import FFIHookCore
import Synchronization
import XCTest

@testable import FFIHookInline

#if canImport(Glibc)
    import Glibc
#endif

/// A counter blocks can bump from any thread.
final class Count: Sendable {
    private let value = Atomic<Int>(0)
    func add(_ amount: Int = 1) { value.add(amount, ordering: .relaxed) }
    var current: Int { value.load(ordering: .relaxed) }
}

/// The bytes at `address`.
func codeBytes(_ address: UnsafeRawPointer, _ count: Int) -> [UInt8] {
    Array(UnsafeRawBufferPointer(start: address, count: count))
}

/// The address of a C function of one or two 64-bit integers, or one 32-bit integer.
func address(of function: @convention(c) (Int64) -> Int64) -> UnsafeRawPointer {
    unsafeBitCast(function, to: UnsafeRawPointer.self)
}
func address(of function: @convention(c) (Int64, Int64) -> Int64) -> UnsafeRawPointer {
    unsafeBitCast(function, to: UnsafeRawPointer.self)
}
func address(of function: @convention(c) (Int32) -> Int32) -> UnsafeRawPointer {
    unsafeBitCast(function, to: UnsafeRawPointer.self)
}

final class InlineHookTests: XCTestCase {
    // MARK: - Real functions

    func testGetpidCallsReachAnAfterHookAndTheBytesComeBack() throws {
        let pid = getpid()
        let function = try InlineFunction(symbol: "getpid")
        XCTAssertEqual(function.name, "getpid")
        let before = codeBytes(function.address, 16)
        XCTAssertFalse(function.isPatched)
        let count = Count()
        let seen = Count()
        let token = try Hook.after(on: function.slot, signature: Signature("i"), options: .onInstallingThreadOnly) {
            call in
            count.add()
            seen.add(Int(call.returnValue(as: Int32.self)))
        }
        XCTAssertTrue(function.isPatched)
        XCTAssertNotEqual(codeBytes(function.address, 16), before)
        for _ in 0..<3 { XCTAssertEqual(getpid(), pid) }
        XCTAssertEqual(count.current, 3)
        XCTAssertEqual(seen.current, 3 * Int(pid))
        token.remove()
        XCTAssertFalse(function.isPatched)
        XCTAssertEqual(codeBytes(function.address, 16), before)
        XCTAssertEqual(getpid(), pid)
        XCTAssertEqual(count.current, 3)
    }

    func testTheOriginalIsCallableWithoutAPatch() throws {
        let function = try InlineFunction(symbol: "getpid")
        let original = function.original(as: (@convention(c) () -> Int32).self)
        XCTAssertEqual(original(), getpid())
    }

    func testTwoPlansOfOneFunctionShareOnePatch() throws {
        let one = try InlineFunction(symbol: "getpid")
        let two = try InlineFunction(address: one.address)
        XCTAssertEqual(one, two)
        XCTAssertEqual(one.slot, two.slot)
        XCTAssertEqual(try FunctionSlot.inline("getpid"), one.slot)
    }

    // MARK: - Each relocation case, called directly

    /// Fixture number, name, address, signature, inputs. The test executable does not export
    /// its functions, so they are given by address.
    static var fixtures: [(which: Int32, name: String, address: UnsafeRawPointer, signature: String, inputs: [Int64])] {
        [
            (0, "ct_inline_plain", address(of: ct_inline_plain), "qqq", [0, 4, -7]),
            (1, "ct_inline_rip", address(of: ct_inline_rip), "qq", [0, 1, 100]),
            (2, "ct_inline_jmp8", address(of: ct_inline_jmp8), "qq", [0, 9]),
            (3, "ct_inline_jcc8", address(of: ct_inline_jcc8), "qq", [3, 10, 11]),
            (4, "ct_inline_call", address(of: ct_inline_call), "qq", [0, 5]),
            (5, "ct_inline_loop", address(of: ct_inline_loop), "qq", [1, 2, 9]),
            (6, "ct_inline_jrcxz", address(of: ct_inline_jrcxz), "qq", [0, 1]),
            (7, "ct_inline_endbr", address(of: ct_inline_endbr), "qq", [0, 8]),
            (9, "ct_inline_tiny", address(of: ct_inline_tiny), "ii", [0, 5, -3]),
        ]
    }

    func testDirectCallsOfEachFixtureRunAnInsteadHook() throws {
        for fixture in Self.fixtures {
            let expected = fixture.inputs.map { ct_inline_direct(fixture.which, $0, 3) }
            let function = try InlineFunction(address: fixture.address)
            let isInt = fixture.signature == "ii"
            let token = try Hook.instead(on: function.slot, signature: Signature(fixture.signature)) { call in
                call.callOriginal()
                if isInt {
                    call.setReturnValue(call.returnValue(as: Int32.self) + 1000)
                } else {
                    call.setReturnValue(call.returnValue(as: Int64.self) + 1000)
                }
            }
            let hooked = fixture.inputs.map { ct_inline_direct(fixture.which, $0, 3) }
            XCTAssertEqual(hooked, expected.map { $0 + 1000 }, fixture.name)
            token.remove()
            XCTAssertFalse(function.isPatched, fixture.name)
            XCTAssertEqual(fixture.inputs.map { ct_inline_direct(fixture.which, $0, 3) }, expected, fixture.name)
        }
    }

    func testABranchBackIntoTheOverwrittenBytesIsRefused() throws {
        XCTAssertThrowsError(try InlineFunction(address: address(of: ct_inline_backward))) { error in
            let error = error as! HookError
            XCTAssertEqual(error.code, .unhookableFunction)
            XCTAssertEqual(error.symbol, "ct_inline_backward")
            XCTAssertTrue(error.message.contains("at offset 8 branches to offset 2"), error.message)
        }
        XCTAssertEqual(ct_inline_direct(8, 4, 0), 10)
    }

    func testAnAddressOutsideCodeIsRefused() throws {
        var word = 0
        try withUnsafeMutablePointer(to: &word) { pointer in
            XCTAssertThrowsError(try InlineFunction(address: UnsafeRawPointer(pointer))) { error in
                XCTAssertEqual((error as! HookError).code, .unhookableFunction)
            }
        }
        XCTAssertThrowsError(try InlineFunction(symbol: "no_such_function_anywhere")) { error in
            XCTAssertEqual((error as! HookError).code, .symbolNotFound)
        }
    }

    // MARK: - Replacement

    nonisolated(unsafe) static var replacedOriginal: (@convention(c) (Int64, Int64) -> Int64)?

    func testAReplacementCallsTheTrampolineAsItsOriginal() throws {
        let function = try InlineFunction(address: address(of: ct_inline_plain))
        let replacement: @convention(c) (Int64, Int64) -> Int64 = { a, b in
            InlineHookTests.replacedOriginal!(a, b) * 10
        }
        let token = try Hook.replace(on: function.slot, with: replacement)
        Self.replacedOriginal = token.original(as: (@convention(c) (Int64, Int64) -> Int64).self)
        XCTAssertEqual(token.original, function.original)
        XCTAssertTrue(function.isPatched)
        XCTAssertEqual(ct_inline_direct(0, 1, 2), 50)
        token.remove()
        XCTAssertFalse(function.isPatched)
        XCTAssertEqual(ct_inline_direct(0, 1, 2), 5)
    }

    // MARK: - Threads

    func testThreadsSpinningInsideTheOverwrittenBytesAreMoved() throws {
        let function = try InlineFunction(address: address(of: ct_inline_spin))
        let stop = Atomic<Bool>(false)
        let failures = Count()
        let calls = Count()
        let threads = (0..<2).map { _ in
            Thread {
                var round: Int64 = 0
                while !stop.load(ordering: .relaxed) {
                    round += 1
                    if ct_inline_spin(200_000, round) != round + 1 { failures.add() }
                    calls.add()
                }
            }
        }
        threads.forEach { $0.start() }
        let blocks = Count()
        for _ in 0..<100 {
            let token = try Hook.before(on: function.slot, signature: Signature("qqq")) { _ in blocks.add() }
            usleep(200)
            token.remove()
        }
        stop.store(true, ordering: .relaxed)
        while calls.current == 0 || threads.contains(where: { !$0.isFinished }) { usleep(1000) }
        XCTAssertEqual(failures.current, 0)
        XCTAssertGreaterThan(function.inline.movedThreads.load(ordering: .relaxed), 0)
        XCTAssertFalse(function.isPatched)
    }

    func testFourThreadsCallingWhileTheHookComesAndGoesSeeExactCounts() throws {
        try fourThreadsCalling(cycles: 200, keptPatched: false)
    }

    func testFourThreadsCallingAFunctionKeptPatchedWhileTheHookComesAndGoes() throws {
        try fourThreadsCalling(cycles: 2000, keptPatched: true)
    }

    func testAFunctionKeptPatchedPassesCallsThroughAndComesBackOnUnpatch() throws {
        let function = try InlineFunction(address: address(of: ct_inline_jcc8))
        let before = codeBytes(function.address, 16)
        try function.patch()
        XCTAssertTrue(function.isPatched)
        XCTAssertTrue(function.isKeptPatched)
        XCTAssertNotEqual(codeBytes(function.address, 16), before)
        XCTAssertEqual(ct_inline_direct(3, 3, 0), 2)
        XCTAssertEqual(ct_inline_direct(3, 12, 0), 1)
        let count = Count()
        let token = try Hook.before(on: function.slot, signature: Signature("qq")) { _ in count.add() }
        XCTAssertEqual(ct_inline_direct(3, 3, 0), 2)
        token.remove()
        XCTAssertTrue(function.isPatched)
        XCTAssertEqual(ct_inline_direct(3, 3, 0), 2)
        XCTAssertEqual(count.current, 1)
        try function.unpatch()
        XCTAssertFalse(function.isPatched)
        XCTAssertFalse(function.isKeptPatched)
        XCTAssertEqual(codeBytes(function.address, 16), before)
    }

    func fourThreadsCalling(cycles: Int, keptPatched: Bool) throws {
        let function = try InlineFunction(address: address(of: ct_inline_plain))
        if keptPatched { try function.patch() }
        defer { if keptPatched { try? function.unpatch() } }
        let stop = Atomic<Bool>(false)
        let failures = Count()
        let hookedResults = Count()
        let finished = Count()
        for _ in 0..<4 {
            Thread {
                while !stop.load(ordering: .relaxed) {
                    var hooked: Int64 = 0
                    if ct_inline_plain_loop(1000, &hooked) != 1000 { failures.add() }
                    hookedResults.add(Int(hooked))
                }
                finished.add()
            }.start()
        }
        let blocks = Count()
        for _ in 0..<cycles {
            let token = try Hook.instead(on: function.slot, signature: Signature("qqq")) { call in
                call.callOriginal()
                call.setReturnValue(call.returnValue(as: Int64.self) + 1000)
                blocks.add()
            }
            token.remove()
        }
        stop.store(true, ordering: .relaxed)
        while finished.current < 4 { usleep(1000) }
        XCTAssertEqual(failures.current, 0)
        XCTAssertEqual(blocks.current, hookedResults.current)
        XCTAssertEqual(function.isPatched, keptPatched)
        XCTAssertEqual(ct_inline_direct(0, 1, 2), 5)
    }
}
