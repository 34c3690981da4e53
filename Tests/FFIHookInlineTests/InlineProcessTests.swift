import CTestSupport
import CZlib
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

/// What a signal handler saw (written only by the handler, read after it ran).
nonisolated(unsafe) var handlerResult: Int64 = 0

/// Inline hooks meeting the rest of the process: fork, signal handlers, an import-table hook
/// of the same function, a function the library calls itself, an object unloaded under a hook.
extension InlineSuites {
    @Suite struct InlineProcessTests {
        /// Whether the process runs under ThreadSanitizer, whose lazy globals of the Swift
        /// runtime take a lock: a child forked while another thread holds one waits for it for
        /// ever.
        static let underThreadSanitizer = dlsym(nil, "__tsan_init") != nil
        /// Whether the process runs under AddressSanitizer, whose start of a thread calls its
        /// allocator's entry points (`malloc`, `free`) before the thread's own code runs.
        static let underAddressSanitizer = dlsym(nil, "__asan_init") != nil

        @Test(
            .disabled(
                if: InlineProcessTests.underThreadSanitizer,
                "the Swift runtime's lazy globals are not fork-safe under ThreadSanitizer"))
        func aForkedChildRunsTheHookAndRemovesItInItsOwnCopy() throws {
            let function = try InlineFunction(address: address(of: ct_inline_rip))
            let count = Count()
            let token = try Hook.before(on: function.slot, signature: Signature("qq")) { _ in count.add() }
            defer { token.remove() }
            let patched = codeBytes(function.address, 16)
            let child = fork()
            if child == 0 {
                // The child: the hook runs, its removal writes the child's copy of the code back.
                var code: Int32 = 0
                if ct_inline_direct(1, 1, 0) != 42 { code |= 1 }
                if count.current != 1 { code |= 2 }
                token.remove()
                if function.isPatched { code |= 4 }
                if ct_inline_direct(1, 1, 0) != 42 || count.current != 1 { code |= 8 }
                _exit(code)
            }
            var status: Int32 = 0
            #expect(waitpid(child, &status, 0) == child)
            #expect(status == 0, "the child's checks failed: \(status >> 8)")
            // The parent's hook and code are untouched.
            #expect(function.isPatched)
            #expect(codeBytes(function.address, 16) == patched)
            #expect(ct_inline_direct(1, 1, 0) == 42)
            #expect(count.current == 1)
        }

        @Test func aSignalHandlerCallingTheHookedFunctionRunsTheHook() throws {
            let function = try InlineFunction(address: address(of: ct_inline_plain))
            let count = Count()
            let token = try Hook.before(on: function.slot, signature: Signature("qqq")) { _ in count.add() }
            defer { token.remove() }
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { _ in handlerResult = ct_inline_direct(0, 2, 3) }
            var previous = sigaction()
            sigaction(SIGWINCH, &action, &previous)
            defer { sigaction(SIGWINCH, &previous, nil) }
            // Tests run on worker threads that block most signals: let this one through here.
            var unblock = sigset_t()
            var saved = sigset_t()
            sigemptyset(&unblock)
            sigaddset(&unblock, SIGWINCH)
            pthread_sigmask(SIG_UNBLOCK, &unblock, &saved)
            defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
            raise(SIGWINCH)
            #expect(handlerResult == 8)
            #expect(count.current == 1)
        }

        /// Whether the test executable imports crc32 (it does, from libz.so.1).
        static let importsCRC32 = (try? ImportTable.bindings(of: "crc32", in: .mainProgram).isEmpty == false) ?? false

        @Test(.enabled(if: importsCRC32, "the test executable does not import crc32 here"))
        func anImportHookAndAnInlineHookOfOneFunctionBothRun() throws {
            let order = Mutex<[String]>([])
            let inline = try InlineFunction(symbol: "crc32", in: "libz.so.1")
            let signature = try Signature("QQ*I")
            let data: [UInt8] = Array("inline and import".utf8)
            let expected = data.withUnsafeBufferPointer { crc32(0, $0.baseAddress, UInt32($0.count)) }
            let imported = try ImportTable.before(symbol: "crc32", in: .mainProgram, signature: signature) { _ in
                order.withLock { $0.append("import") }
            }
            let inlined = try Hook.before(on: inline.slot, signature: signature) { _ in
                order.withLock { $0.append("inline") }
            }
            #expect(data.withUnsafeBufferPointer { crc32(0, $0.baseAddress, UInt32($0.count)) } == expected)
            #expect(order.withLock { $0 } == ["import", "inline"])
            // Removed in the order they were installed, then the other way: each leaves the other working.
            imported.remove()
            #expect(data.withUnsafeBufferPointer { crc32(0, $0.baseAddress, UInt32($0.count)) } == expected)
            #expect(order.withLock { $0 } == ["import", "inline", "inline"])
            inlined.remove()
            #expect(!(inline.isPatched))
            #expect(data.withUnsafeBufferPointer { crc32(0, $0.baseAddress, UInt32($0.count)) } == expected)
            #expect(order.withLock { $0 }.count == 3)
        }

        @Test func mallocHookedInlineWhileTheLibraryAllocates() throws {
            let function = try InlineFunction(symbol: "malloc")
            let sizes = Count()
            let token = try Hook.before(
                on: function.slot, signature: Signature("^vQ"), options: .onInstallingThreadOnly
            ) {
                call in
                sizes.add(Int(call.argument(0, as: UInt64.self)))
            }
            let pointer = malloc(12345)
            free(pointer)
            #expect(sizes.current >= 12345)
            // Hooks installed and removed while malloc is hooked: the library allocates itself.
            for _ in 0..<20 {
                let other = try Hook.after(on: function.slot, signature: Signature("^vQ")) { _ in }
                other.remove()
            }
            token.remove()
            #expect(!(function.isPatched))
            let before = sizes.current
            free(malloc(100))
            #expect(sizes.current == before)
        }

        @Test func anUnloadedObjectIsNotWrittenWhenItsHookIsRemoved() throws {
            let source = """
                long inline_unload_twice(long value) { long result = value; for (int i = 0; i < 1; i++) result += value; return result; }
                """
            try withBuiltLibrary("inlineunload", source: source) { library in
                let handle = try #require(dlopen(library, RTLD_NOW | RTLD_LOCAL))
                let function = try InlineFunction(symbol: "inline_unload_twice", in: library)
                let count = Count()
                let token = try Hook.before(on: function.slot, signature: Signature("qq")) { _ in count.add() }
                let twice = function.address.assumingMemoryBound(to: UInt8.self)
                let call = unsafeBitCast(twice, to: (@convention(c) (Int) -> Int).self)
                #expect(call(21) == 42)
                #expect(count.current == 1)
                #expect(dlclose(handle) == 0)
                // The object is gone (or its code is not ours any more): removal writes nothing there.
                token.remove()
                #expect(!(function.isPatched))
            }
        }

        /// A program that loads and unloads a library while a tracer attaches a group to each
        /// load: the groups of unloaded copies are removed after later batches were planned
        /// (which forget the unloaded copies' plans) and while the library is loaded again,
        /// perhaps where it was. Each removal ends its hooks, writes nothing where the old copy
        /// or its slab was, and leaves the current copy's hooks running; the last removal
        /// leaves the code as the file has it.
        @Test func groupsOfUnloadedCopiesAreRemovedAfterLaterPlannings() throws {
            let functions = (0..<6).map { "long reload_\($0)(long value) { return value * \($0 + 2) + \($0); }" }
            try withBuiltLibrary("inlinereload", source: functions.joined(separator: "\n")) { library in
                let count = Count()
                var groups: [HookGroupToken] = []
                var original: [UInt8] = []
                var handle: UnsafeMutableRawPointer? = nil
                for round in 0..<4 {
                    let loaded = try #require(dlopen(library, RTLD_NOW | RTLD_LOCAL))
                    handle = loaded
                    let batch = try InlineBatch(library: library)
                    #expect(batch.functions.count == 6)
                    let five = try #require(batch.functions.first { $0.name == "reload_5" })
                    if round == 0 { original = codeBytes(five.address, 16) }
                    groups.append(try Hook.attach(on: batch) { _ in ({ _ in count.add() }, nil) })
                    let call = unsafeBitCast(five.address, to: (@convention(c) (Int) -> Int).self)
                    #expect(call(10) == 75)
                    #expect(count.current == round + 1)
                    if round < 3 {
                        #expect(dlclose(loaded) == 0)
                        // Another test's walk of the loaded objects (tests run in parallel) may
                        // hold the copy for a moment: the next round is to load a new one.
                        #expect(isUnloadedSoon(library))
                    }
                    // A batch of another library: it forgets the plans of the copy just unloaded.
                    _ = try InlineBatch(symbols: ["crc32"], in: "libz.so.1")
                    try Hook.waitForReclamation()
                }
                let current = try #require(handle)
                let symbol = try #require(dlsym(current, "reload_5"))
                let five = unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int).self)
                for group in groups.dropLast() { group.remove() }
                #expect(groups.dropLast().allSatisfy { !$0.isActive })
                // The copy loaded now keeps its hooks.
                #expect(five(10) == 75)
                #expect(count.current == 5)
                #expect(groups.last!.remove())
                #expect(five(10) == 75)
                #expect(count.current == 5)
                #expect(codeBytes(UnsafeRawPointer(symbol), 16) == original)
                #expect(dlclose(current) == 0)
            }
        }
    }
}
