import CTestSupport
import CZlib
import FFIHook
import FFIHookCore
import Foundation
import Synchronization
import XCTest

@testable import FFIHookInline

#if canImport(Glibc)
    import Glibc
#endif

/// What a signal handler saw (written only by the handler, read after it ran).
nonisolated(unsafe) var handlerResult: Int64 = 0

/// Inline hooks meeting the rest of the process: fork, signal handlers, an import-table hook
/// of the same function, a function the library calls itself, an object unloaded under a hook.
final class InlineProcessTests: XCTestCase {
    func testAForkedChildRunsTheHookAndRemovesItInItsOwnCopy() throws {
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
        XCTAssertEqual(waitpid(child, &status, 0), child)
        XCTAssertEqual(status, 0, "the child's checks failed: \(status >> 8)")
        // The parent's hook and code are untouched.
        XCTAssertTrue(function.isPatched)
        XCTAssertEqual(codeBytes(function.address, 16), patched)
        XCTAssertEqual(ct_inline_direct(1, 1, 0), 42)
        XCTAssertEqual(count.current, 1)
    }

    func testASignalHandlerCallingTheHookedFunctionRunsTheHook() throws {
        let function = try InlineFunction(address: address(of: ct_inline_plain))
        let count = Count()
        let token = try Hook.before(on: function.slot, signature: Signature("qqq")) { _ in count.add() }
        defer { token.remove() }
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in handlerResult = ct_inline_direct(0, 2, 3) }
        var previous = sigaction()
        sigaction(SIGUSR1, &action, &previous)
        defer { sigaction(SIGUSR1, &previous, nil) }
        raise(SIGUSR1)
        XCTAssertEqual(handlerResult, 8)
        XCTAssertEqual(count.current, 1)
    }

    func testAnImportHookAndAnInlineHookOfOneFunctionBothRun() throws {
        let bindings = try ImportTable.bindings(of: "crc32", in: .mainProgram)
        try XCTSkipIf(bindings.isEmpty, "the test executable does not import crc32 here")
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
        XCTAssertEqual(data.withUnsafeBufferPointer { crc32(0, $0.baseAddress, UInt32($0.count)) }, expected)
        XCTAssertEqual(order.withLock { $0 }, ["import", "inline"])
        // Removed in the order they were installed, then the other way: each leaves the other working.
        imported.remove()
        XCTAssertEqual(data.withUnsafeBufferPointer { crc32(0, $0.baseAddress, UInt32($0.count)) }, expected)
        XCTAssertEqual(order.withLock { $0 }, ["import", "inline", "inline"])
        inlined.remove()
        XCTAssertFalse(inline.isPatched)
        XCTAssertEqual(data.withUnsafeBufferPointer { crc32(0, $0.baseAddress, UInt32($0.count)) }, expected)
        XCTAssertEqual(order.withLock { $0 }.count, 3)
    }

    func testMallocHookedInlineWhileTheLibraryAllocates() throws {
        let function = try InlineFunction(symbol: "malloc")
        let sizes = Count()
        let token = try Hook.before(on: function.slot, signature: Signature("^vQ"), options: .onInstallingThreadOnly) {
            call in
            sizes.add(Int(call.argument(0, as: UInt64.self)))
        }
        let pointer = malloc(12345)
        free(pointer)
        XCTAssertGreaterThanOrEqual(sizes.current, 12345)
        // Hooks installed and removed while malloc is hooked: the library allocates itself.
        for _ in 0..<20 {
            let other = try Hook.after(on: function.slot, signature: Signature("^vQ")) { _ in }
            other.remove()
        }
        token.remove()
        XCTAssertFalse(function.isPatched)
        let before = sizes.current
        free(malloc(100))
        XCTAssertEqual(sizes.current, before)
    }

    func testAnUnloadedObjectIsNotWrittenWhenItsHookIsRemoved() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("inline-unload-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = directory.appendingPathComponent("unload.c")
        let library = directory.appendingPathComponent("libinlineunload.so")
        try """
        long inline_unload_twice(long value) { long result = value; for (int i = 0; i < 1; i++) result += value; return result; }
        """.write(to: source, atomically: true, encoding: .utf8)
        let compiler = Process()
        compiler.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        compiler.arguments = ["cc", "-O1", "-shared", "-fPIC", "-o", library.path, source.path]
        try compiler.run()
        compiler.waitUntilExit()
        try XCTSkipIf(compiler.terminationStatus != 0, "no C compiler")
        guard let handle = dlopen(library.path, RTLD_NOW | RTLD_LOCAL) else {
            return XCTFail(String(cString: dlerror()))
        }
        let function = try InlineFunction(symbol: "inline_unload_twice", in: library.path)
        let count = Count()
        let token = try Hook.before(on: function.slot, signature: Signature("qq")) { _ in count.add() }
        let twice = function.address.assumingMemoryBound(to: UInt8.self)
        let call = unsafeBitCast(twice, to: (@convention(c) (Int) -> Int).self)
        XCTAssertEqual(call(21), 42)
        XCTAssertEqual(count.current, 1)
        XCTAssertEqual(dlclose(handle), 0)
        // The object is gone (or its code is not ours any more): removal writes nothing there.
        token.remove()
        XCTAssertFalse(function.isPatched)
    }
}
