import CSQLite
import CTestSupport
import Foundation
import Synchronization
import Testing

@testable import FFIHook
@testable import FFIHookCore

/// Calls counted per symbol, from blocks on any thread.
final class SymbolCounts: Sendable {
    private let counts = Locked<[String: Int]>([:])
    func add(_ symbol: String) { counts.withLock { $0[symbol, default: 0] += 1 } }
    var all: [String: Int] { counts.withLock { $0 } }
}

extension FixtureTableTests {
    /// Groups of symbols: one verb, one token, and blocks that know which symbol and which
    /// object's entry each call came through.
    @Suite struct ImportGroupTests {
        static let fullRELRO = "libImportFixture.so"
        static let scope = ImportScope.object(fullRELRO)
        static let strlen = try! ImportSymbol("strlen", signature: Signature("Q*"))
        static let atoi = try! ImportSymbol("atoi", signature: Signature("i*"))

        /// The fixture's functions that call strlen (JUMP_SLOT) and atoi (GLOB_DAT).
        func fixture() throws -> (length: ImportFixtures.Length, parse: ImportFixtures.Parse) {
            let library = try ImportFixtures.open(Self.fullRELRO)
            return (
                try ImportFixtures.function("cimportfixture_length", in: library, as: ImportFixtures.Length.self),
                try ImportFixtures.function("cimportfixture_parse", in: library, as: ImportFixtures.Parse.self)
            )
        }

        /// The words the fixture's entries of strlen and atoi hold now.
        func entryValues() -> [UInt] {
            ["strlen", "atoi"].flatMap { symbol in
                ImportFixtures.entries(of: symbol, in: Self.scope).map { ImportWalk.value(at: $0.slot) }
            }
        }

        /// Profiling the SQLite calls of a small workload with one group: the calls counted
        /// per symbol are the calls the workload makes.
        @Test func profilingSQLiteWithOneGroup() throws {
            let symbols = try [
                ImportSymbol("sqlite3_open", signature: Signature("i*^^v")),
                ImportSymbol("sqlite3_exec", signature: Signature("i^v*^?^v^*")),
                ImportSymbol("sqlite3_prepare_v2", signature: Signature("i^v*i^^v^*")),
                ImportSymbol("sqlite3_bind_int", signature: Signature("i^vii")),
                ImportSymbol("sqlite3_bind_text", signature: Signature("i^vi*i^?")),
                ImportSymbol("sqlite3_step", signature: Signature("i^v")),
                ImportSymbol("sqlite3_reset", signature: Signature("i^v")),
                ImportSymbol("sqlite3_column_int", signature: Signature("i^vi")),
                ImportSymbol("sqlite3_column_text", signature: Signature("*^vi")),
                ImportSymbol("sqlite3_finalize", signature: Signature("i^v")),
                ImportSymbol("sqlite3_close", signature: Signature("i^v")),
            ]
            // Other tests may use SQLite on other threads meanwhile: count this thread's calls.
            let thread = UInt(pthread_self())
            let counts = SymbolCounts()
            let objects = EventLog()
            let group = try ImportTable.before(symbols: symbols, in: .mainProgram) { call, entry in
                guard UInt(pthread_self()) == thread else { return }
                counts.add(entry.symbol)
                if entry.symbol == "sqlite3_open" { objects.record(entry.isInMainProgram ? "main" : entry.objectName) }
            }
            defer { group.remove() }
            #expect(group.tokens.count >= symbols.count)

            var opened: OpaquePointer?
            #expect(sqlite3_open(":memory:", &opened) == SQLITE_OK)
            let database = try #require(opened)
            #expect(sqlite3_exec(database, "CREATE TABLE t(id INTEGER, name TEXT)", nil, nil, nil) == SQLITE_OK)
            var insert: OpaquePointer?
            #expect(sqlite3_prepare_v2(database, "INSERT INTO t VALUES(?, ?)", -1, &insert, nil) == SQLITE_OK)
            for id in 0..<5 {
                "row \(id)".withCString { name in
                    #expect(sqlite3_bind_int(insert, 1, Int32(id)) == SQLITE_OK)
                    #expect(sqlite3_bind_text(insert, 2, name, -1, nil) == SQLITE_OK)
                    #expect(sqlite3_step(insert) == SQLITE_DONE)
                    #expect(sqlite3_reset(insert) == SQLITE_OK)
                }
            }
            #expect(sqlite3_finalize(insert) == SQLITE_OK)
            var select: OpaquePointer?
            #expect(sqlite3_prepare_v2(database, "SELECT id, name FROM t ORDER BY id", -1, &select, nil) == SQLITE_OK)
            var rows: [String] = []
            while sqlite3_step(select) == SQLITE_ROW {
                let id = sqlite3_column_int(select, 0)
                rows.append("\(id) " + String(cString: sqlite3_column_text(select, 1)))
            }
            #expect(sqlite3_finalize(select) == SQLITE_OK)
            #expect(sqlite3_close(database) == SQLITE_OK)

            #expect(rows == (0..<5).map { "\($0) row \($0)" })
            #expect(
                counts.all == [
                    "sqlite3_open": 1, "sqlite3_exec": 1, "sqlite3_prepare_v2": 2, "sqlite3_bind_int": 5,
                    "sqlite3_bind_text": 5, "sqlite3_step": 11, "sqlite3_reset": 5, "sqlite3_column_int": 5,
                    "sqlite3_column_text": 5, "sqlite3_finalize": 2, "sqlite3_close": 1,
                ])
            #expect(objects.all == ["main"])
            #expect(group.remove())
            #expect(sqlite3_open(":memory:", &opened) == SQLITE_OK)
            #expect(sqlite3_close(opened) == SQLITE_OK)
            #expect(counts.all["sqlite3_open"] == 1)
        }

        /// One instead block for two functions, told apart by the entry: a `JUMP_SLOT` for
        /// strlen and a `GLOB_DAT` for atoi, both in the fixture.
        @Test func theBlockKnowsItsSymbolAndEntry() throws {
            let (length, parse) = try fixture()
            let original = entryValues()
            let seen = EventLog()
            let group = try ImportTable.instead(symbols: [Self.strlen, Self.atoi], in: Self.scope) { call, entry in
                seen.record("\(entry.symbol) \(entry.kind) \(entry.objectName)")
                call.callOriginal()
                if entry.symbol == "atoi" { call.setReturnValue(call.returnValue(as: Int32.self) * 100) }
            }
            #expect(group.tokens.count == 2)
            #expect(length("four") == 4)
            #expect(parse("7") == 700)
            #expect(
                seen.all == ["strlen JUMP_SLOT \(Self.fullRELRO)", "atoi GLOB_DAT \(Self.fullRELRO)"])
            #expect(group.remove())
            #expect(entryValues() == original)
            #expect(parse("7") == 7)
        }

        /// A block that runs on several threads at once reads, each call, the symbol of that
        /// call's entry.
        @Test func blocksOnSeveralThreadsReadTheirOwnSymbol() throws {
            let (length, parse) = try fixture()
            let counts = SymbolCounts()
            let group = try ImportTable.after(symbols: [Self.strlen, Self.atoi], in: Self.scope) { call, entry in
                // The result says which function ran: strlen("12345") is 5, atoi("42") 42.
                let right =
                    entry.symbol == "strlen"
                    ? call.returnValue(as: Int.self) == 5 : call.returnValue(as: Int32.self) == 42
                counts.add(right ? entry.symbol : "wrong \(entry.symbol)")
            }
            defer { group.remove() }
            DispatchQueue.concurrentPerform(iterations: 8) { index in
                for _ in 0..<500 {
                    if index % 2 == 0 { _ = length("12345") } else { _ = parse("42") }
                }
            }
            #expect(counts.all == ["strlen": 2000, "atoi": 2000])
        }

        /// A group limited to the installing thread, or to a scope's task, counts only those
        /// calls: the limit holds for every symbol of the group.
        @Test func aGroupTakesTheCallerLimits() async throws {
            let (length, parse) = try fixture()
            let counts = SymbolCounts()
            let threadGroup = try ImportTable.before(
                symbols: [Self.strlen, Self.atoi], in: Self.scope, options: .onInstallingThreadOnly
            ) { _, entry in counts.add(entry.symbol) }
            _ = length("12345")
            _ = parse("42")
            let done = DispatchSemaphore(value: 0)
            Thread {
                _ = length("12345")
                _ = parse("42")
                done.signal()
            }.start()
            done.wait()
            threadGroup.remove()
            #expect(counts.all == ["strlen": 1, "atoi": 1])

            let taskCounts = SymbolCounts()
            nonisolated(unsafe) let (otherLength, otherParse) = (length, parse)
            try await Hook.scoped {
                try ImportTable.before(
                    symbols: [Self.strlen, Self.atoi], in: Self.scope, options: .inCurrentTaskOnly
                ) { _, entry in taskCounts.add(entry.symbol) }
            } during: {
                _ = length("12345")
                await Task.detached {
                    _ = otherLength("12345")
                    _ = otherParse("42")
                }.value
                _ = parse("42")
            }
            #expect(taskCounts.all == ["strlen": 1, "atoi": 1])
            #expect(throws: HookError.self) {
                try ImportTable.before(symbols: [Self.strlen], in: Self.scope, options: .inCurrentTaskOnly) { _, _ in }
            }
        }

        @Test func aSymbolWithoutAnEntryRefusesTheWholeGroup() throws {
            let (length, _) = try fixture()
            let original = entryValues()
            let missing = try ImportSymbol("cimport_nothing_imports_this", signature: Signature("v^v"))
            let runs = Counter()
            let error = #expect(throws: HookError.self) {
                try ImportTable.before(symbols: [Self.strlen, Self.atoi, missing], in: Self.scope) { _, _ in
                    runs.increment()
                }
            }
            #expect(error?.code == .symbolNotImported)
            #expect(error?.symbol == "cimport_nothing_imports_this")
            #expect(error?.signature == missing.signature)
            #expect(error?.message.contains(#"no object matching "libImportFixture.so" imports"#) == true)
            #expect(entryValues() == original)
            #expect(length("none") == 4)
            #expect(runs.count == 0)
        }

        /// A symbol of the list that another hook holds with other types: the refusal comes
        /// after the first symbol was hooked, which is taken out again.
        @Test func aFailureHalfwayTakesOutWhatWasHooked() throws {
            let (length, parse) = try fixture()
            let original = entryValues()
            let other = try ImportTable.before(symbol: "atoi", in: Self.scope, signature: Signature("qqq")) { _ in }
            defer { other.remove() }
            let runs = Counter()
            let error = #expect(throws: HookError.self) {
                try ImportTable.before(symbols: [Self.strlen, Self.atoi], in: Self.scope) { _, _ in runs.increment() }
            }
            #expect(error?.code == .signatureMismatch)
            #expect(error?.symbol == "atoi")
            #expect(error?.signature == Self.atoi.signature)
            #expect(entryValues()[0] == original[0])
            #expect(length("half") == 4)
            #expect(parse("5") == 5)
            #expect(runs.count == 0)
        }

        @Test func aSymbolListedTwice() throws {
            let (length, _) = try fixture()
            let original = entryValues()
            let runs = Counter()
            let group = try ImportTable.before(symbols: [Self.strlen, Self.strlen], in: Self.scope) { _, _ in
                runs.increment()
            }
            #expect(group.tokens.count == 1)
            #expect(length("twice") == 5)
            #expect(runs.count == 1)
            group.remove()

            // Spellings a slot accepts together (a pointer for the size_t, or a signed size)
            // are one symbol too, as when installed one after the other.
            let spellings = try [
                Self.strlen, ImportSymbol("strlen", signature: Signature("q*")),
                ImportSymbol("strlen", signature: Signature("^v^v")),
            ]
            let alike = try ImportTable.before(symbols: spellings, in: Self.scope) { _, _ in runs.increment() }
            #expect(alike.tokens.count == 1)
            #expect(length("again") == 5)
            #expect(runs.count == 2)
            alike.remove()

            let otherTypes = try ImportSymbol("strlen", signature: Signature("i*"))
            let error = #expect(throws: HookError.self) {
                try ImportTable.before(symbols: [Self.atoi, Self.strlen, otherTypes], in: Self.scope) { _, _ in }
            }
            #expect(error?.code == .signatureMismatch)
            #expect(error?.symbol == "strlen")
            #expect(entryValues() == original)
        }

        /// The group's hooks and another hook on one of its entries, removed in either order.
        @Test(arguments: [true, false])
        func removalInAnyOrder(groupFirst: Bool) throws {
            let (length, parse) = try fixture()
            let original = entryValues()
            let log = EventLog()
            let group = try ImportTable.before(symbols: [Self.strlen, Self.atoi], in: Self.scope) { _, entry in
                log.record("group \(entry.symbol)")
            }
            let single = try ImportTable.after(symbol: "atoi", in: Self.scope, signature: Signature("i*")) { _ in
                log.record("single atoi")
            }
            #expect(parse("1") == 1)
            #expect(log.all == ["group atoi", "single atoi"])
            // The group's atoi hook alone, then the rest in the order asked.
            let atoiToken = try #require(group.tokens.last)
            #expect(atoiToken.remove())
            #expect(parse("2") == 2)
            #expect(length("ab") == 2)
            #expect(log.all == ["group atoi", "single atoi", "single atoi", "group strlen"])
            if groupFirst {
                #expect(group.remove())
                #expect(single.remove())
            } else {
                #expect(single.remove())
                #expect(group.remove())
            }
            #expect(!group.remove())
            #expect(entryValues() == original)
            #expect(parse("3") == 3)
            #expect(log.all.count == 4)
        }

        /// `.once` holds for the whole group: one run for the first call of any symbol.
        @Test func onceHoldsForTheWholeGroup() throws {
            let (length, parse) = try fixture()
            let original = entryValues()
            let seen = EventLog()
            let group = try ImportTable.instead(symbols: [Self.strlen, Self.atoi], in: Self.scope, options: .once) {
                call, entry in
                seen.record(entry.symbol)
                call.setReturnValue(-1 as Int32)
            }
            #expect(parse("9") == -1)
            #expect(length("abc") == 3)
            #expect(parse("9") == 9)
            #expect(seen.all == ["atoi"])
            #expect(!group.isActive)
            #expect(entryValues() == original)
        }

        /// Runs `body` with the full-RELRO fixture's `dlopen` (called through its own import
        /// entry) and the path of a copy of the later fixture under `name`: an object no test
        /// has loaded yet. The copy is deleted after.
        func withLaterFixtureCopy(
            named name: String, _ body: (ImportFixtures.Open, String) throws -> Void
        ) throws {
            let library = try ImportFixtures.open(Self.fullRELRO)
            let open = try ImportFixtures.function("cimportfixture_open", in: library, as: ImportFixtures.Open.self)
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ffihook-\(name)-\(getpid())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let copy = directory.appendingPathComponent("\(name).so").path
            try FileManager.default.copyItem(atPath: ImportFixtures.path("libLaterImportFixture.so"), toPath: copy)
            try body(open, copy)
        }

        /// A group that follows later loads: the entries of an object loaded after the install
        /// join the group, and its calls reach the block with that object's entry.
        @Test func aGroupFollowsLaterLoads() throws {
            try withLaterFixtureCopy(named: "libLaterGroupCopy") { open, copy in try followsLaterLoads(open, copy) }
        }

        func followsLaterLoads(_ open: ImportFixtures.Open, _ copy: String) throws {
            let missing = try ImportSymbol("cimport_nothing_imports_this", signature: Signature("v"))

            let seen = EventLog()
            let group = try ImportTable.before(symbols: [Self.atoi, Self.strlen, missing], in: .allIncludingLaterLoads)
            {
                call, entry in
                if entry.objectPath == copy
                    || String(cString: call.argument(0, as: UnsafePointer<CChar>.self)) == "4711"
                {
                    seen.record("\(entry.symbol) \(entry.kind) \(entry.objectName)")
                }
            }
            defer { group.remove() }
            let before = group.tokens.count
            #expect(before >= 2)

            let later = try #require(open(copy, RTLD_NOW))
            let parse = try ImportFixtures.function("cimportlater_parse", in: later, as: ImportFixtures.Parse.self)
            #expect(group.tokens.count == before + 1)
            #expect(parse("4711") == 4712)
            #expect(
                seen.all == ["atoi GLOB_DAT libLaterGroupCopy.so"]
                    || seen.all == ["atoi JUMP_SLOT libLaterGroupCopy.so"])

            #expect(group.remove())
            #expect(parse("4711") == 4712)
            #expect(seen.all.count == 1)
            let entry = try #require(try ImportTable.bindings(of: "atoi", in: .object(copy)).first)
            #expect(entry.state == .bound(function: ImportFixtures.resolved("atoi")))
        }

        /// A group that follows later loads with `dlopen` among its own symbols: the entries that
        /// its blocks and the following both need are hooked for both, and an object loaded
        /// later joins the group.
        @Test func aGroupWithDlopenAmongItsSymbolsFollowsLaterLoads() throws {
            try withLaterFixtureCopy(named: "libLaterDlopenCopy") { open, copy in try followsWithDlopen(open, copy) }
        }

        func followsWithDlopen(_ open: ImportFixtures.Open, _ copy: String) throws {
            let me = at_gettid()
            let names = Mutex<[String]>([])
            // The group's walks pin objects with dlopen(RTLD_NOLOAD): only loads are counted.
            let group = try ImportTable.attach(symbols: ["dlopen", "atoi"], in: .allIncludingLaterLoads) { name in
                (
                    onEnter: { call in
                        guard call.threadID == me else { return }
                        if name == "dlopen" && Int32(truncatingIfNeeded: call.integerArgument(1)) & RTLD_NOLOAD != 0 {
                            return
                        }
                        names.withLock { $0.append(name) }
                    }, onLeave: nil
                )
            }
            defer { group.remove() }
            let later = try #require(open(copy, RTLD_NOW))
            let parse = try ImportFixtures.function("cimportlater_parse", in: later, as: ImportFixtures.Parse.self)
            #expect(names.withLock { $0 } == ["dlopen"])
            #expect(parse("4711") == 4712)
            #expect(names.withLock { $0 } == ["dlopen", "atoi"])
            #expect(group.remove())
            #expect(parse("4711") == 4712)
            #expect(names.withLock { $0.count } == 2)
        }

        /// The walk that follows a load is the library's own work: the calls it makes (it pins
        /// each object with dlopen and RTLD_NOLOAD, prepares closures with libffi) go straight
        /// to their functions, and a group attached to them sees only the program's calls.
        @Test func theFollowingWalksOwnCallsAreNotThePrograms() throws {
            try withLaterFixtureCopy(named: "libLaterOwnCallsCopy") { open, copy in
                let me = at_gettid()
                let calls = Mutex<[Int32]>([])
                let group = try ImportTable.attach(symbols: ["dlopen"], in: .allIncludingLaterLoads) { _ in
                    (
                        onEnter: { call in
                            guard call.threadID == me else { return }
                            calls.withLock { $0.append(Int32(truncatingIfNeeded: call.integerArgument(1))) }
                        }, onLeave: nil
                    )
                }
                defer { group.remove() }
                calls.withLock { $0.removeAll() }
                let before = try Hook.statistics
                let later = try #require(open(copy, RTLD_NOW))
                _ = later
                #expect(calls.withLock { $0 } == [RTLD_NOW])
                let after = try Hook.statistics
                let library = after.libraryPassedCallCount - before.libraryPassedCallCount
                // The library's own code is linked into this test's executable. Under a
                // sanitizer the executable defines dlopen itself (its interceptor), so the
                // walk's calls reach no import entry and no group sees them to pass them on.
                if try !ImportTable.bindings(of: "dlopen", in: .mainProgram).isEmpty {
                    #expect(library > 0)
                }
                #expect(after.passedThroughCallCount - before.passedThroughCallCount >= library)
            }
        }

        @Test func anEmptyListAndAnUnknownObject() throws {
            let empty = try ImportTable.before(symbols: [], in: Self.scope) { _, _ in }
            #expect(empty.tokens.isEmpty)
            #expect(!empty.isActive)
            let object = #expect(throws: HookError.self) {
                try ImportTable.before(symbols: [Self.strlen], in: .object("libNoSuchObject.so")) { _, _ in }
            }
            #expect(object?.code == .objectNotFound)
            #expect(object?.object == "libNoSuchObject.so")
        }

        /// A hooked call of a group allocates nothing, its block's reading of the entry
        /// included: counted by a group on the allocator, in a child process whose other
        /// threads are idle. Not under ThreadSanitizer, whose allocator cannot be hooked; under
        /// AddressSanitizer the executable defines malloc, which no import table then sees.
        @Test(
            .disabled(if: ProcessLifeTests.underThreadSanitizer, "the allocator cannot be hooked under ThreadSanitizer")
        )
        func aGroupsHookedCallAllocatesNothing() async {
            await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
                try FixtureTableTests.ImportGroupTests.countAllocationsOfGroupCalls()
            }
        }

        /// The thread whose allocations are counted (0 for none).
        final class CountedThread: Sendable {
            let id = Atomic<UInt>(0)
        }

        static func countAllocationsOfGroupCalls() throws {
            ProcessLifeTests.startChild()
            let check = { (condition: Bool, message: String) in ProcessLifeTests.check(condition, message) }
            let library = dlopen(ImportFixtures.path(fullRELRO), RTLD_NOW)
            check(library != nil, "opening the fixture")
            let length = unsafeBitCast(dlsym(library, "cimportfixture_length"), to: ImportFixtures.Length.self)
            let parse = unsafeBitCast(dlsym(library, "cimportfixture_parse"), to: ImportFixtures.Parse.self)
            let lengths = Counter()
            let parses = Counter()
            let group = try ImportTable.before(symbols: [Self.strlen, Self.atoi], in: Self.scope) { _, entry in
                if entry.symbol == "atoi" && entry.kind == .globalData {
                    parses.increment()
                } else if entry.symbol == "strlen" && entry.objectName == fullRELRO {
                    lengths.increment()
                }
            }
            for _ in 0..<10 {
                _ = length("warm")
                _ = parse("1")
            }
            let counted = CountedThread()
            let allocations = Counter()
            let allocator = try ImportTable.after(
                symbols: [
                    ImportSymbol("malloc", signature: Signature("^vQ")),
                    ImportSymbol("calloc", signature: Signature("^vQQ")),
                    ImportSymbol("realloc", signature: Signature("^v^vQ")),
                ],
                in: .all
            ) { _, _ in
                if counted.id.load(ordering: .relaxed) == UInt(pthread_self()) { allocations.increment() }
            }
            // C strings made before: passing a Swift string would convert it on each call.
            let abc = strdup("abc")
            let twelve = strdup("12")
            defer {
                free(abc)
                free(twelve)
            }
            // Without the group's hooks, then with them.
            var total = 0
            func run() {
                counted.id.store(UInt(pthread_self()), ordering: .relaxed)
                for _ in 0..<1000 {
                    total += length(abc) + Int(parse(twelve))
                }
                counted.id.store(0, ordering: .relaxed)
            }
            check(group.remove(), "removing the group for the baseline")
            run()
            let baseline = allocations.count
            let hooked = try ImportTable.before(symbols: [Self.strlen, Self.atoi], in: Self.scope) { _, entry in
                if entry.symbol == "atoi" && entry.kind == .globalData {
                    parses.increment()
                } else if entry.symbol == "strlen" && entry.objectName == fullRELRO {
                    lengths.increment()
                }
            }
            run()
            let duringCalls = allocations.count - baseline
            // The count sees this thread's allocations: an array of its own is one.
            counted.id.store(UInt(pthread_self()), ordering: .relaxed)
            let array = [Int](repeating: total, count: 64 + Int(parse("0")))
            counted.id.store(0, ordering: .relaxed)
            let forArray = allocations.count - duringCalls - baseline
            check(allocator.remove(), "removing the allocator group")
            check(hooked.remove(), "removing the group")
            check(total == 30_000 && array.count == 64, "the calls' results")
            check(lengths.count == 1010 && parses.count == 1011, "the blocks ran: \(lengths.count), \(parses.count)")
            check(baseline == 0, "\(baseline) allocations in 1000 calls of each function without hooks")
            if !ProcessLifeTests.underAddressSanitizer {
                check(forArray >= 1, "an array's allocation is counted (\(forArray))")
                check(duringCalls == 0, "\(duringCalls) allocations in 1000 calls of each symbol")
            }
        }
    }
}
