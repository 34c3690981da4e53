import CFFIHookPatch
import CTestSupport
import FFIHook
import FFIHookCore
import Foundation
import Synchronization
import TestHookLock
import Testing

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

/// The suites that hook the fixtures, getpid, malloc, memset and crc32 inline, one test at a
/// time: several tests hook the same functions, and every hook of a function is seen by
/// every caller in the process.
@Suite(.serialized, .sharedProcessHooks) enum InlineSuites {}

/// The bytes at `address`.
func codeBytes(_ address: UnsafeRawPointer, _ count: Int) -> [UInt8] {
    Array(UnsafeRawBufferPointer(start: address, count: count))
}

/// Builds `source` (C) with the system's compiler into a shared library `name` in a temporary
/// directory of its own, and runs `body` with the library's path; the directory goes after.
func withBuiltLibrary<Result>(_ name: String, source: String, _ body: (String) throws -> Result) throws -> Result {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(getpid())")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let file = directory.appendingPathComponent("\(name).c")
    let library = directory.appendingPathComponent("lib\(name).so")
    try source.write(to: file, atomically: true, encoding: .utf8)
    try #require(system("cc -O1 -shared -fPIC -o '\(library.path)' '\(file.path)'") == 0, "cc could not build \(name)")
    return try body(library.path)
}

/// The address of a C function of one or two 64-bit integers, one 32-bit integer, or a double.
func address(of function: @convention(c) (Int64) -> Int64) -> UnsafeRawPointer {
    unsafeBitCast(function, to: UnsafeRawPointer.self)
}
func address(of function: @convention(c) (Int64, Int64) -> Int64) -> UnsafeRawPointer {
    unsafeBitCast(function, to: UnsafeRawPointer.self)
}
func address(of function: @convention(c) (Int32) -> Int32) -> UnsafeRawPointer {
    unsafeBitCast(function, to: UnsafeRawPointer.self)
}
func address(of function: @convention(c) (Int32) -> Void) -> UnsafeRawPointer {
    unsafeBitCast(function, to: UnsafeRawPointer.self)
}
func address(of function: @convention(c) (Double) -> Double) -> UnsafeRawPointer {
    unsafeBitCast(function, to: UnsafeRawPointer.self)
}

extension InlineSuites {
    @Suite struct InlineHookTests {
        // MARK: - Real functions

        @Test func getpidCallsReachAnAfterHookAndTheBytesComeBack() throws {
            let pid = getpid()
            let function = try InlineFunction(symbol: "getpid")
            #expect(function.name == "getpid")
            let before = codeBytes(function.address, 16)
            #expect(!(function.isPatched))
            let count = Count()
            let seen = Count()
            let token = try Hook.after(on: function.slot, signature: Signature("i"), options: .onInstallingThreadOnly) {
                call in
                count.add()
                seen.add(Int(call.returnValue(as: Int32.self)))
            }
            #expect(function.isPatched)
            #expect(codeBytes(function.address, 16) != before)
            for _ in 0..<3 { #expect(getpid() == pid) }
            #expect(count.current == 3)
            #expect(seen.current == 3 * Int(pid))
            token.remove()
            #expect(!(function.isPatched))
            #expect(codeBytes(function.address, 16) == before)
            #expect(getpid() == pid)
            #expect(count.current == 3)
        }

        @Test func theOriginalIsCallableWithoutAPatch() throws {
            let function = try InlineFunction(symbol: "getpid")
            let original = function.original(as: (@convention(c) () -> Int32).self)
            #expect(original() == getpid())
        }

        @Test func twoPlansOfOneFunctionShareOnePatch() throws {
            let one = try InlineFunction(symbol: "getpid")
            let two = try InlineFunction(address: one.address)
            #expect(one == two)
            #expect(one.slot == two.slot)
            #expect(try FunctionSlot.inline("getpid") == one.slot)
        }

        // MARK: - Each relocation case, called directly

        /// Fixture number, name, address, signature, inputs. The test executable does not export
        /// its functions, so they are given by address.
        static var fixtures:
            [(which: Int32, name: String, address: UnsafeRawPointer, signature: String, inputs: [Int64])]
        {
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

        @Test func directCallsOfEachFixtureRunAnInsteadHook() throws {
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
                #expect(hooked == expected.map { $0 + 1000 }, Comment(rawValue: fixture.name))
                token.remove()
                #expect(!(function.isPatched), Comment(rawValue: fixture.name))
                #expect(
                    fixture.inputs.map { ct_inline_direct(fixture.which, $0, 3) } == expected,
                    Comment(rawValue: fixture.name))
            }
        }

        @Test func aBranchBackIntoTheOverwrittenBytesIsRefused() throws {
            let error = #expect(throws: HookError.self) { try InlineFunction(address: address(of: ct_inline_backward)) }
            if let error {
                #expect(error.code == .unhookableFunction)
                #expect(error.symbol == "ct_inline_backward")
                #expect(error.message.contains("at offset 8 branches to offset 2"), Comment(rawValue: error.message))
            }
            #expect(ct_inline_direct(8, 4, 0) == 10)
        }

        @Test func aCallWhoseReturnAddressTheJumpWouldOverwriteIsRefused() throws {
            let callreg = unsafeBitCast(
                ct_inline_callreg as @convention(c) ((@convention(c) () -> Int64)?) -> Int64, to: UnsafeRawPointer.self)
            let error = #expect(throws: HookError.self) { try InlineFunction(address: callreg) }
            if let error {
                #expect(error.code == .unhookableFunction)
                #expect(error.message.contains("`call rdi` at offset 0"), Comment(rawValue: error.message))
                #expect(error.message.contains("(offset 2)"), Comment(rawValue: error.message))
            }
        }

        /// `call $+5; pop rax`: the trampoline pushes the original's return address, so the
        /// function computes the same through the patch.
        @Test func thePositionThunkIsHooked() throws {
            typealias Nullary = @convention(c) () -> Int64
            #expect(ct_inline_thunk() == 0)
            let thunk = unsafeBitCast(ct_inline_thunk as Nullary, to: UnsafeRawPointer.self)
            let function = try InlineFunction(address: thunk)
            let calls = Count()
            let token = try Hook.after(on: function.slot, signature: Signature("q"), options: .onInstallingThreadOnly) {
                _ in calls.add()
            }
            #expect(function.isPatched)
            #expect(ct_inline_thunk() == 0)
            #expect(function.original(as: Nullary.self)() == 0)
            token.remove()
            #expect(calls.current == 1)
            #expect(!function.isPatched)
        }

        @Test func anAddressInsideAFunctionIsRefused() throws {
            let inside = address(of: ct_inline_plain) + 1
            let error = #expect(throws: HookError.self) { try InlineFunction(address: inside) }
            #expect(error?.code == .unhookableFunction)
            #expect(
                error?.message.contains("inside `ct_inline_plain` at offset 1") == true,
                Comment(rawValue: error?.message ?? ""))
        }

        @Test func anIFUNCResolverByAddressIsRefusedAndItsSymbolHooksTheImplementation() throws {
            var resolver: UInt = 0
            var size: UInt64 = 0
            var type: UInt8 = 0
            #expect(ct_dynsym_lookup("libc.so.6", "memset", &resolver, &size, &type) == 1)
            #expect(type == 10)  // STT_GNU_IFUNC
            let error = #expect(throws: HookError.self) {
                try InlineFunction(address: UnsafeRawPointer(bitPattern: resolver)!)
            }
            #expect(error?.code == .unhookableFunction)
            #expect(error?.message.contains("IFUNC") == true, Comment(rawValue: error?.message ?? ""))
            let memsetFunction = try InlineFunction(symbol: "memset", in: "libc.so.6")
            #expect(UInt(bitPattern: memsetFunction.address) != resolver)
            let bytes = Count()
            let token = try Hook.before(
                on: memsetFunction.slot, signature: Signature("^v^viQ"), options: .onInstallingThreadOnly
            ) { call in
                bytes.add(Int(call.argument(2, as: UInt64.self)))
            }
            var buffer = [UInt8](repeating: 0, count: 300)
            buffer.withUnsafeMutableBytes { _ = memset($0.baseAddress!, 7, 300) }
            token.remove()
            #expect(buffer == [UInt8](repeating: 7, count: 300))
            #expect(bytes.current >= 300)
        }

        @Test func aStaticFunctionKnownOnlyToSymtabIsHooked() throws {
            let function = try InlineFunction(
                address: unsafeBitCast(ct_symbol_static_function(), to: UnsafeRawPointer.self))
            #expect(function.name == "ct_symbol_static_triple")
            let token = try Hook.instead(on: function.slot, signature: Signature("qq")) { call in
                call.callOriginal()
                call.setReturnValue(call.returnValue(as: Int64.self) + 1)
            }
            defer { token.remove() }
            #expect(ct_symbol_static_function()!(5) == 17)
        }

        @Test func anAddressOutsideCodeIsRefused() throws {
            var word = 0
            let address = withUnsafeMutablePointer(to: &word) { UnsafeRawPointer($0) }
            let outside = #expect(throws: HookError.self) { try InlineFunction(address: address) }
            #expect(outside?.code == .unhookableFunction)
            let missing = #expect(throws: HookError.self) { try InlineFunction(symbol: "no_such_function_anywhere") }
            #expect(missing?.code == .symbolNotFound)
        }

        @Test func aOnceHookRunsOnceAndItsRemovalTakesTheJumpOut() throws {
            let function = try InlineFunction(address: address(of: ct_inline_jmp8))
            let before = codeBytes(function.address, 16)
            let count = Count()
            _ = try Hook.before(on: function.slot, signature: Signature("qq"), options: .once) { _ in count.add() }
            #expect(ct_inline_direct(2, 1, 0) == 4)
            #expect(ct_inline_direct(2, 2, 0) == 5)
            #expect(count.current == 1)
            // The removal finishes on the calling thread once the lock is free, or at the next write.
            try Hook.waitForReclamation()
            #expect(!function.isPatched)
            #expect(codeBytes(function.address, 16) == before)
        }

        // MARK: - Replacement

        nonisolated(unsafe) static var replacedOriginal: (@convention(c) (Int64, Int64) -> Int64)?

        @Test func aReplacementCallsTheTrampolineAsItsOriginal() throws {
            let function = try InlineFunction(address: address(of: ct_inline_plain))
            let replacement: @convention(c) (Int64, Int64) -> Int64 = { a, b in
                InlineHookTests.replacedOriginal!(a, b) * 10
            }
            let token = try Hook.replace(on: function.slot, with: replacement)
            Self.replacedOriginal = token.original(as: (@convention(c) (Int64, Int64) -> Int64).self)
            #expect(token.original == function.original)
            #expect(function.isPatched)
            #expect(ct_inline_direct(0, 1, 2) == 50)
            token.remove()
            #expect(!(function.isPatched))
            #expect(ct_inline_direct(0, 1, 2) == 5)
        }

        // MARK: - Threads

        @Test func threadsSpinningInsideTheOverwrittenBytesAreMoved() throws {
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
            for thread in threads { thread.start() }
            let blocks = Count()
            for _ in 0..<100 {
                let token = try Hook.before(on: function.slot, signature: Signature("qqq")) { _ in blocks.add() }
                usleep(200)
                token.remove()
            }
            stop.store(true, ordering: .relaxed)
            while calls.current == 0 || threads.contains(where: { !$0.isFinished }) { usleep(1000) }
            #expect(failures.current == 0)
            #expect(function.movedThreads > 0)
            #expect(!(function.isPatched))
        }

        /// A thread asleep in a system call with the stop signal blocked (every signal but
        /// SIGSEGV and SIGBUS, as a thread made by a worker of libdispatch inherits) is stopped
        /// too: were it only passed over as asleep, the call could return while code is written
        /// and the thread run the bytes being written. It parks where it sleeps, and its call
        /// goes on afterwards as if nothing happened (no EINTR).
        @Test func aThreadAsleepWithTheStopSignalBlockedIsStoppedToo() throws {
            var pipe: [Int32] = [0, 0]
            try #require(Glibc.pipe(&pipe) == 0)
            defer {
                close(pipe[0])
                close(pipe[1])
            }
            let reader = pipe[0]
            let thread = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
            thread.initialize(to: 0)
            defer { thread.deallocate() }
            let threadAddress = UInt(bitPattern: thread)
            let result = Mutex<Int?>(nil)
            Thread {
                let read = ct_blocked_read(reader, UnsafeMutablePointer(bitPattern: threadAddress))
                result.withLock { $0 = read }
            }.start()
            // Until the thread sleeps in its read (system call 0).
            var asleep = false
            for _ in 0..<2000 where !asleep {
                let id = ct_load_thread_id(thread)
                if id != 0, let text = try? String(contentsOfFile: "/proc/self/task/\(id)/syscall", encoding: .utf8) {
                    asleep = text.hasPrefix("0 ")
                }
                if !asleep { usleep(1000) }
            }
            try #require(asleep)
            let places = try #require(PatchWriter.parkedInstructionPointers())
            // Parked at its system call (after it, or back on it to restart it).
            let call = UInt(ct_blocked_read_syscall_address())
            #expect(places.contains { $0 >= call && $0 <= call + 2 })
            #expect(write(pipe[1], "x", 1) == 1)
            while result.withLock({ $0 }) == nil { usleep(1000) }
            #expect(result.withLock { $0 } == 1)
        }

        /// A thread that blocks every signal but the faults and says so
        /// (``ffh_patch_thread_takes_faults_only``, as the tracer's own threads do) is asked by
        /// SIGSEGV at once: three stops park it asleep in its read without looking at it in /proc,
        /// where the same thread that does not say so is looked at in each of them (after a
        /// wait for the stop signal it never takes).
        @Test func aThreadThatTakesOnlyFaultsAndSaysSoIsAskedBySIGSEGVAtOnce() async {
            await #expect(processExitsWith: .success) { try InlineHookTests.stopAThreadThatTakesOnlyFaults() }
        }

        static func stopAThreadThatTakesOnlyFaults() throws {
            var looks: [UInt64] = []
            for says in [true, false] {
                var pipe: [Int32] = [0, 0]
                try #require(Glibc.pipe(&pipe) == 0)
                let reader = pipe[0]
                let thread = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
                thread.initialize(to: 0)
                let threadAddress = UInt(bitPattern: thread)
                let result = Mutex<Int?>(nil)
                Thread {
                    let id = UnsafeMutablePointer<Int32>(bitPattern: threadAddress)
                    let read =
                        says
                        ? ct_blocked_read_saying(reader, id, ffh_patch_thread_takes_faults_only)
                        : ct_blocked_read(reader, id)
                    result.withLock { $0 = read }
                }.start()
                var asleep = false
                for _ in 0..<2000 where !asleep {
                    let id = ct_load_thread_id(thread)
                    if id != 0,
                        let text = try? String(contentsOfFile: "/proc/self/task/\(id)/syscall", encoding: .utf8)
                    {
                        asleep = text.hasPrefix("0 ")
                    }
                    if !asleep { usleep(1000) }
                }
                try #require(asleep)
                _ = ffh_patch_inspections(ct_load_thread_id(thread))
                let call = UInt(ct_blocked_read_syscall_address())
                for _ in 0..<3 {
                    let places = try #require(PatchWriter.parkedInstructionPointers())
                    #expect(places.contains { $0 >= call && $0 <= call + 2 }, "says \(says)")
                }
                looks.append(ffh_patch_inspections(0))
                #expect(write(pipe[1], "x", 1) == 1)
                while result.withLock({ $0 }) == nil { usleep(1000) }
                #expect(result.withLock { $0 } == 1)
                close(pipe[0])
                close(pipe[1])
                thread.deallocate()
            }
            #expect(
                looks[0] < 3 && looks[1] >= 3, "looks at the thread in /proc: \(looks[0]) saying so, \(looks[1]) not")
        }

        /// A thread that blocks every signal, SIGSEGV included, and never enters a system call
        /// cannot be stopped or placed: the hook is refused after 2 s, and the error names the
        /// thread, its name and what was seen of it. Nothing is written.
        @Test func aThreadNoRequestReachesIsNamedWhenTheStopGivesUp() throws {
            let function = try InlineFunction(address: address(of: ct_inline_jcc8))
            let before = codeBytes(function.address, 16)
            let spinner = try #require(ct_deaf_spinner_start())
            let thread = ct_deaf_spinner_thread(spinner)
            var failure: (any Error)?
            do {
                let token = try Hook.before(on: function.slot, signature: Signature("qq")) { _ in }
                token.remove()
            } catch {
                failure = error
            }
            ct_deaf_spinner_stop(spinner)
            let message = String(describing: try #require(failure))
            #expect(message.contains("thread \(thread) (ct-deaf-spin) did not stop within 2 s"), "\(message)")
            #expect(message.contains("it blocks every signal, SIGSEGV included"), "\(message)")
            #expect(!(function.isPatched))
            #expect(codeBytes(function.address, 16) == before)
            #expect(ct_inline_direct(3, 3, 0) == 2)
        }

        @Test func fourThreadsCallingWhileTheHookComesAndGoesSeeExactCounts() throws {
            try fourThreadsCalling(cycles: 200, keptPatched: false)
        }

        @Test func fourThreadsCallingAFunctionKeptPatchedWhileTheHookComesAndGoes() throws {
            try fourThreadsCalling(cycles: 2000, keptPatched: true)
        }

        @Test func aFunctionKeptPatchedPassesCallsThroughAndComesBackOnUnpatch() throws {
            let function = try InlineFunction(address: address(of: ct_inline_jcc8))
            let before = codeBytes(function.address, 16)
            try function.patch()
            #expect(function.isPatched)
            #expect(function.isKeptPatched)
            #expect(codeBytes(function.address, 16) != before)
            #expect(ct_inline_direct(3, 3, 0) == 2)
            #expect(ct_inline_direct(3, 12, 0) == 1)
            let count = Count()
            let token = try Hook.before(on: function.slot, signature: Signature("qq")) { _ in count.add() }
            #expect(ct_inline_direct(3, 3, 0) == 2)
            token.remove()
            #expect(function.isPatched)
            #expect(ct_inline_direct(3, 3, 0) == 2)
            #expect(count.current == 1)
            try function.unpatch()
            #expect(!(function.isPatched))
            #expect(!(function.isKeptPatched))
            #expect(codeBytes(function.address, 16) == before)
        }

        /// Whether `error` is a stop that gave up on a thread, under ThreadSanitizer.
        static func stopGaveUpUnderThreadSanitizer(_ error: any Error) -> Bool {
            InlineProcessTests.underThreadSanitizer && "\(error)".contains("did not stop within 2 s")
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
            // The callers stop on every way out: a hook that fails must not leave them calling
            // the fixture through the suites that follow.
            defer {
                stop.store(true, ordering: .relaxed)
                while finished.current < 4 { usleep(1000) }
            }
            let blocks = Count()
            for _ in 0..<cycles {
                let token: HookToken
                do {
                    token = try Hook.instead(on: function.slot, signature: Signature("qqq")) { call in
                        call.callOriginal()
                        call.setReturnValue(call.returnValue(as: Int64.self) + 1000)
                        blocks.add()
                    }
                } catch let error where Self.stopGaveUpUnderThreadSanitizer(error) {
                    // Under ThreadSanitizer a stop gave up on one thread once (CI, the only
                    // failure in about a dozen passes; not reproduced since). The error names
                    // the thread and what was seen of it: kept in the log as a known issue
                    // there, a failure everywhere else.
                    withKnownIssue("a stop under ThreadSanitizer gave up on a thread", isIntermittent: true) {
                        throw error
                    }
                    break
                }
                token.remove()
            }
            stop.store(true, ordering: .relaxed)
            while finished.current < 4 { usleep(1000) }
            #expect(failures.current == 0)
            #expect(blocks.current == hookedResults.current)
            #expect(function.isPatched == keptPatched)
            #expect(ct_inline_direct(0, 1, 2) == 5)
        }
    }
}
