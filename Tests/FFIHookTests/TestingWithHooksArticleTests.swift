import CTestSupport
import FFIHook
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The recipes of the article on testing with hooks (TestingWithHooks.md), as it shows them:
/// each sample there is the body of a test here.
@Suite struct TestingWithHooksArticleTests {
    /// A file the tests may open, made for this process.
    static let readable: String = {
        let path = FileManager.default.temporaryDirectory.path + "/ffh-article-\(getpid())"
        _ = FileManager.default.createFile(atPath: path, contents: Data("hello".utf8))
        return path
    }()

    // MARK: - open

    @Test func openFailsForOnePath() throws {
        let denied = Self.readable
        let openShape = try Signature(variadic: "i*ii", fixedArgumentCount: 2)
        let (descriptor, error) = try Hook.scoped {
            try ImportTable.instead(
                symbol: "open", in: .object("libswiftGlibc.so"), signature: openShape, options: .inCurrentTaskOnly
            ) { call in
                let path = String(cString: call.argument(0, as: UnsafePointer<CChar>.self))
                if path == denied {
                    errno = EACCES
                    call.setReturnValue(Int32(-1))
                } else {
                    call.callOriginal()
                }
            }
        } during: {
            let descriptor = open(denied, O_RDONLY)
            return (descriptor, errno)
        }
        #expect(descriptor == -1)
        #expect(error == EACCES)

        // Outside the scope the file opens again.
        let again = open(denied, O_RDONLY)
        #expect(again >= 0)
        close(again)
    }

    /// The Swift overlay's `open` calls C's from libswiftGlibc.so: a hook on the main
    /// program's entries does not see it.
    @Test func theMainProgramsEntriesMissSwiftsOpen() throws {
        let openShape = try Signature(variadic: "i*ii", fixedArgumentCount: 2)
        let seen = Atomic<Int>(0)
        do {
            try Hook.scoped {
                try ImportTable.before(
                    symbol: "open", in: .mainProgram, signature: openShape, options: .inCurrentTaskOnly
                ) { _ in seen.add(1, ordering: .relaxed) }
            } during: {
                close(open(Self.readable, O_RDONLY))
            }
        } catch let error as HookError {
            #expect(error.code == .symbolNotImported)
        }
        #expect(seen.load(ordering: .relaxed) == 0)
    }

    /// The README's example of a fault for one test.
    @Test func theReadmeExample() async throws {
        // open() fails with EACCES for this test's calls only, until the body returns or throws.
        let shape = try Signature(variadic: "i*ii", fixedArgumentCount: 2)
        let descriptor = try Hook.scoped {
            try ImportTable.instead(symbol: "open", in: .all, signature: shape, options: .inCurrentTaskOnly) { call in
                errno = EACCES
                call.setReturnValue(Int32(-1))
            }
        } during: {
            open("/etc/hostname", O_RDONLY)  // -1; other tests running meanwhile open files as usual
        }
        #expect(descriptor == -1)
        let again = open("/etc/hostname", O_RDONLY)
        #expect(again >= 0)
        close(again)
    }

    // MARK: - write

    /// Whether this executable calls `symbol` through its import table: a sanitizer's
    /// runtime linked into it defines `malloc` and `write` itself, and then the test's calls
    /// go through no import entry that a hook could rebind.
    static func importsItself(_ symbol: String) -> Bool {
        (try? ImportTable.bindings(of: symbol, in: .mainProgram))?.isEmpty == false
    }

    @Test(
        .enabled(if: importsItself("write"), "the executable defines write (a sanitizer's runtime)"))
    func aShortWriteThenEIO() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer {
            close(ends[0])
            close(ends[1])
        }
        let target = ends[1]
        let calls = Atomic<Int>(0)
        let written = try Hook.scoped {
            try ImportTable.instead(
                symbol: "write", in: .all, signature: Signature("qi^vQ"), options: .inCurrentTaskOnly
            ) { call in
                guard call.argument(0, as: Int32.self) == target else { return call.callOriginal() }
                if calls.add(1, ordering: .relaxed).newValue == 1 {
                    // The first write takes only half of what it was given.
                    call.setArgument(2, to: call.argument(2, as: Int.self) / 2)
                    call.callOriginal()
                } else {
                    errno = EIO
                    call.setReturnValue(-1)
                }
            }
        } during: {
            let bytes: [UInt8] = Array("abcdefgh".utf8)
            let first = write(target, bytes, bytes.count)
            let second = write(target, bytes, bytes.count)
            return (first, second, errno)
        }
        #expect(written == (4, -1, EIO))
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(read(ends[0], &buffer, 16) == 4)
        #expect(Array(buffer.prefix(4)) == Array("abcd".utf8))
    }

    // MARK: - malloc

    @Test(
        .enabled(if: importsItself("malloc"), "the executable defines malloc (a sanitizer's runtime)"))
    func mallocReturnsNullForOneSize() throws {
        let (failed, served) = try Hook.scoped {
            try ImportTable.instead(
                symbol: "malloc", in: .all, signature: Signature("^vQ"), options: .inCurrentTaskOnly
            ) { call in
                if call.argument(0, as: Int.self) == 1_234_567 {
                    call.setReturnValue(UnsafeMutableRawPointer?.none)
                } else {
                    call.callOriginal()
                }
            }
        } during: {
            let failed = malloc(1_234_567)
            let served = malloc(1_234_568)
            free(served)
            return (failed, served)
        }
        #expect(failed == nil)
        #expect(served != nil)
    }
}

/// Two tests that run at the same time, each failing `open` for a path of its own: with the
/// task limit, each sees only its own fault.
@Suite struct ParallelFaultInjectionTests {
    /// Makes the two tests wait for each other, so that their hooks are installed at the
    /// same time (a run that holds only one of them goes on alone after a while).
    static let arrived = Atomic<Int>(0)
    static let finished = Atomic<Int>(0)

    static func meet(_ counter: borrowing Atomic<Int>) async {
        counter.add(1, ordering: .acquiringAndReleasing)
        var waited = 0
        while counter.load(ordering: .acquiring) < 2 && waited < 2000 {
            try? await Task.sleep(for: .milliseconds(1))
            waited += 1
        }
    }

    static let first = TestingWithHooksArticleTests.readable + "-first"
    static let second = TestingWithHooksArticleTests.readable + "-second"

    init() {
        for path in [Self.first, Self.second] { _ = FileManager.default.createFile(atPath: path, contents: Data()) }
    }

    /// What `open` gives for `mine` and `theirs` while this test's fault is injected for
    /// `mine`, many times over.
    static func injectFault(on mine: String, whileOpening theirs: String) async throws -> (mine: Int32, theirs: Bool) {
        let openShape = try Signature(variadic: "i*ii", fixedArgumentCount: 2)
        return try await Hook.scoped {
            try ImportTable.instead(
                symbol: "open", in: .all, signature: openShape, options: .inCurrentTaskOnly
            ) { call in
                if String(cString: call.argument(0, as: UnsafePointer<CChar>.self)) == mine {
                    errno = EACCES
                    call.setReturnValue(Int32(-1))
                } else {
                    call.callOriginal()
                }
            }
        } during: {
            await meet(arrived)
            var mineFailed: Int32 = 0
            var theirsOpened = true
            for _ in 0..<200 {
                let descriptor = open(mine, O_RDONLY)
                if descriptor == -1 && errno == EACCES { mineFailed += 1 } else { close(descriptor) }
                let other = open(theirs, O_RDONLY)
                if other >= 0 { close(other) } else { theirsOpened = false }
                await Task.yield()
            }
            await meet(finished)
            return (mineFailed, theirsOpened)
        }
    }

    @Test func theFirstTestSeesOnlyItsFault() async throws {
        let result = try await Self.injectFault(on: Self.first, whileOpening: Self.second)
        #expect(result.mine == 200 && result.theirs)
    }

    @Test func theSecondTestSeesOnlyItsFault() async throws {
        let result = try await Self.injectFault(on: Self.second, whileOpening: Self.first)
        #expect(result.mine == 200 && result.theirs)
    }
}
