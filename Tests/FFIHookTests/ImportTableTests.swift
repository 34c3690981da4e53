import CFFIHookSupport
import CTestSupport
import Foundation
import Synchronization
import Testing

@testable import FFIHook
@testable import FFIHookCore

/// The import-table fixture libraries, which the tests build (see ``FixtureLibraries``) and
/// open with dlopen, never linking them.
enum ImportFixtures {
    /// `size_t cimportfixture_length(const char *)`, `size_t (*)(const char *)` as strlen.
    typealias Length = @convention(c) (UnsafePointer<CChar>?) -> Int
    /// `int (*)(const char *)` as atoi.
    typealias Parse = @convention(c) (UnsafePointer<CChar>?) -> Int32
    /// `long (*)(const char *)` as atol.
    typealias ParseLong = @convention(c) (UnsafePointer<CChar>?) -> Int
    /// `void *cimportfixture_open(const char *, int)`.
    typealias Open = @convention(c) (UnsafePointer<CChar>?, Int32) -> UnsafeMutableRawPointer?

    /// The path of a fixture library (see ``FixtureLibraries``).
    static func path(_ name: String) -> String {
        FixtureLibraries.path(name)
    }

    /// Opens a fixture library (it stays loaded: its entries may still hold dormant hooks).
    static func open(_ name: String, flags: Int32 = RTLD_NOW) throws -> UnsafeMutableRawPointer {
        let handle = dlopen(path(name), flags)
        return try #require(handle, "\(name) must be built: \(String(cString: dlerror()))")
    }

    /// A function of an opened fixture library.
    static func function<Function>(_ name: String, in handle: UnsafeMutableRawPointer, as type: Function.Type)
        throws -> Function
    {
        let address = try #require(dlsym(handle, name), "\(name) not found")
        return unsafeBitCast(address, to: type)
    }

    /// The import-table entries of `symbol` in the loaded objects of `scope`.
    static func entries(of symbol: String, in scope: ImportScope) -> [ImportWalk.Entry] {
        ImportWalk.withLoadedObjects { objects in
            objects.filter { ImportWalk.isInScope($0, scope) }.flatMap { ImportWalk.entries(of: symbol, in: $0) }
        }
    }

    /// The address the global scope binds `symbol` to, as the dynamic loader does.
    static func resolved(_ symbol: String) -> UInt {
        UInt(bitPattern: dlsym(nil, symbol))
    }

    /// Whether the page of `address` is mapped read-only (as full RELRO leaves the GOT).
    static func isReadOnly(_ address: UInt) -> Bool {
        SlotMemory.protection(of: address).map { $0.readable && !$0.writable } ?? false
    }

    /// Whether the page of `address` is read-only once writes in progress are done: suites
    /// running beside these hook imports in every object, this library's included, and their
    /// writes lift its page's protection while they last. A page left writable stays so for
    /// the two seconds this waits.
    static func isReadOnlyAtRest(_ address: UInt) -> Bool {
        for _ in 0..<200 {
            if isReadOnly(address) { return true }
            usleep(10_000)
        }
        return false
    }

    /// Runs `body` while another thread holds the loader's list of objects (inside a
    /// `dl_iterate_phdr` callback) for `milliseconds` (1.3 seconds: longer than a write waits for it).
    /// Returns whether the list was held throughout (a test in a process of its own checks).
    @discardableResult
    static func whileTheLoaderListIsHeld(milliseconds: UInt32 = 1300, _ body: () throws -> Void) rethrows -> Bool {
        let inside = UnsafeMutablePointer<Atomic<Int32>>.allocate(capacity: 1)
        defer { inside.deallocate() }
        inside.initialize(to: Atomic(0))
        let address = UInt(bitPattern: inside)
        let holder = JoinableThread {
            ct_hold_loader_list(milliseconds, UnsafeMutablePointer<Int32>(bitPattern: address))
        }
        defer { holder.join() }
        while inside.pointee.load(ordering: .acquiring) == 0 { usleep(1000) }
        try body()
        let held = inside.pointee.load(ordering: .acquiring) == 1
        #expect(held, "the list was held throughout")
        return held
    }
}

/// What `replacedParse` calls as the original (a C function captures nothing).
private let replacedParseOriginal = Atomic<UInt>(0)

/// An atol replacement: the original's result plus 1000.
private let replacedParse: ImportFixtures.ParseLong = { text in
    unsafeBitCast(replacedParseOriginal.load(ordering: .acquiring), to: ImportFixtures.ParseLong.self)(text) + 1000
}
private let replacedParseAddress = unsafeBitCast(replacedParse, to: UInt.self)

extension FixtureTableTests {
    /// Hooking a function as called from loaded objects, through their import tables.
    @Suite struct ImportTableTests {
        static let fullRELRO = "libImportFixture.so"
        static let lazy = "libLazyImportFixture.so"
        static let later = "libLaterImportFixture.so"

        /// A group of many symbols (each object's entries read once, into an index by symbol;
        /// each read-only page made writable once for the whole group) attaches the entries one
        /// symbol at a time would, and leaves the import table read-only (full RELRO) after
        /// its install and after its removal.
        @Test func aGroupOfManySymbolsAttachesTheirEntriesAndLeavesTheTableReadOnly() throws {
            let library = try ImportFixtures.open(Self.fullRELRO)
            let length = try ImportFixtures.function(
                "cimportfixture_length", in: library, as: ImportFixtures.Length.self)
            let me = at_gettid()
            let entry = try #require(ImportFixtures.entries(of: "strlen", in: .object(Self.fullRELRO)).first)
            let original = ImportWalk.value(at: entry.slot)
            let names = ["strlen", "memcpy", "memset", "malloc", "free", "strcmp", "printf", "abort", "no_such_symbol"]
            let calls = AttachTests.Counter()
            let group = try ImportTable.attach(symbols: names, in: .object(Self.fullRELRO)) { name in
                let enter: EnterBlock = { call in
                    if name == "strlen" && call.threadID == me { calls.add() }
                }
                return (enter, nil)
            }
            #expect(ImportFixtures.isReadOnlyAtRest(entry.slot))
            #expect(ImportWalk.value(at: entry.slot) != original)
            #expect(length("grouped") == 7)
            #expect(calls.count == 1)
            let oneByOne = names.reduce(0) { $0 + ImportFixtures.entries(of: $1, in: .object(Self.fullRELRO)).count }
            #expect(group.tokens.count == oneByOne)
            group.remove()
            #expect(ImportFixtures.isReadOnlyAtRest(entry.slot))
            #expect(ImportWalk.value(at: entry.slot) == original)
            #expect(length("grouped") == 7)
            #expect(calls.count == 1)
        }

        /// A group is attached all or nothing: one entry that cannot be attached to (a weak
        /// symbol nothing defines, whose entry holds NULL) fails the whole group with an error
        /// that names its symbol, and every other entry of the group holds what it held.
        @Test func aGroupWithAnEntryThatHoldsNothingAttachesNothing() throws {
            let library = try ImportFixtures.open(Self.fullRELRO)
            let length = try ImportFixtures.function(
                "cimportfixture_length", in: library, as: ImportFixtures.Length.self)
            let scope = ImportScope.object(Self.fullRELRO)
            let empty = try #require(ImportFixtures.entries(of: "__gmon_start__", in: scope).first)
            #expect(ImportWalk.value(at: empty.slot) == 0)
            // Enough symbols for the group to read each object's relocations into an index.
            let names = ["strlen", "fcntl", "snprintf", "ioctl", "dlopen", "open", "atoi", "__gmon_start__", "free"]
            let entries = names.flatMap { ImportFixtures.entries(of: $0, in: scope) }
            let before = entries.map { ImportWalk.value(at: $0.slot) }
            let me = at_gettid()
            let calls = AttachTests.Counter()
            do {
                _ = try ImportTable.attach(symbols: names, in: scope) { name in
                    let enter: EnterBlock = { call in
                        if name == "strlen" && call.threadID == me { calls.add() }
                    }
                    return (enter, nil)
                }
                Issue.record("a group with an entry that holds NULL was attached")
            } catch {
                #expect(error.code == .emptySlot)
                #expect(error.symbol == "__gmon_start__")
            }
            #expect(entries.map { ImportWalk.value(at: $0.slot) } == before)
            #expect(ImportFixtures.isReadOnlyAtRest(empty.slot))
            #expect(length("untouched") == 9)
            #expect(calls.count == 0)
            // The group without it attaches, and leaves as it came.
            let group = try ImportTable.attach(symbols: names.filter { $0 != "__gmon_start__" }, in: scope) { name in
                let enter: EnterBlock = { call in
                    if name == "strlen" && call.threadID == me { calls.add() }
                }
                return (enter, nil)
            }
            #expect(length("attached") == 8)
            #expect(calls.count == 1)
            group.remove()
            #expect(entries.map { ImportWalk.value(at: $0.slot) } == before)
        }

        /// The index a group reads each object's relocations into answers every symbol as a
        /// scan of the object's tables for that symbol alone does: the same entries (address,
        /// relocation, version), in the same order, for every symbol of every loaded object,
        /// and none for names no object imports.
        @Test func theEntryIndexAnswersAsTheScanDoes() throws {
            // (Not the lazy fixture: opening it here would bind its entries before its own test.)
            _ = try ImportFixtures.open(Self.fullRELRO)
            ImportWalk.withLoadedObjects { objects in
                let index = ImportWalk.EntryIndex()
                var asked = 0
                for (place, object) in objects.enumerated() {
                    let symbols = Set(Self.symbolsNamed(in: object))
                    for symbol in symbols.sorted() + ["no_such_symbol_anywhere", ""] {
                        let scanned = ImportWalk.entries(of: symbol, in: object)
                        let indexed = index.entries(of: symbol, in: [object])
                        #expect(indexed.map(\.object) == Array(repeating: 0, count: indexed.count))
                        #expect(
                            indexed.map { "\($0.entry.slot) \($0.entry.kind) \($0.entry.version ?? "-")" }
                                == scanned.map { "\($0.slot) \($0.kind) \($0.version ?? "-")" },
                            "\(symbol) in \(object.path) (object \(place))")
                        asked += 1
                    }
                }
                // Asked of all objects at once, each answer carries its object's place.
                let everywhere = index.entries(of: "strlen", in: objects)
                let oneByOne = objects.indices.flatMap { place in
                    ImportWalk.entries(of: "strlen", in: objects[place]).map { (place, $0.slot) }
                }
                #expect(everywhere.map(\.object) == oneByOne.map(\.0))
                #expect(everywhere.map(\.entry.slot) == oneByOne.map(\.1))
                #expect(!everywhere.isEmpty && asked > 100)
            }
        }

        /// An index made for a set of names (as a walk for a library's functions makes one)
        /// keeps only their entries, yet answers every name as a scan does: its own names from
        /// the index, the others (filtered out) by a scan of each object for them alone.
        @Test func anIndexForSomeNamesAnswersEveryNameAsTheScanDoes() throws {
            _ = try ImportFixtures.open(Self.fullRELRO)
            ImportWalk.withLoadedObjects { objects in
                let symbols = objects.map { Set(Self.symbolsNamed(in: $0)).sorted() }
                // Every third name of each object, and a name no object imports.
                let chosen = Set(symbols.flatMap { names in names.enumerated().filter { $0.offset % 3 == 0 }.map(\.1) })
                let index = ImportWalk.EntryIndex(symbols: chosen.union(["no_such_symbol_anywhere"]))
                var asked = (chosen: 0, other: 0)
                // (Every tenth name: each is scanned for in every object, which takes time.)
                let asking = Set(symbols.joined()).sorted().enumerated().filter { $0.offset % 10 == 0 }.map(\.1)
                for symbol in asking + ["no_such_symbol_anywhere", "strlen"] {
                    Self.expectIndex(index, answers: symbol, in: objects)
                    if chosen.contains(symbol) { asked.chosen += 1 } else { asked.other += 1 }
                }
                #expect(asked.chosen > 10 && asked.other > 20)
            }
        }

        /// An index for a few names (read by comparing names, not hashes) answers for them, and
        /// for any other name, as a scan of each object does; and it keeps those names' entries
        /// alone, as the inverted walk of a group reads them.
        @Test func anIndexForAFewNamesAnswersEveryNameAsTheScanDoes() throws {
            _ = try ImportFixtures.open(Self.fullRELRO)
            ImportWalk.withLoadedObjects { objects in
                let few = ["strlen", "dlopen", "malloc", "no_such_symbol_anywhere"]
                let index = ImportWalk.EntryIndex(names: few)
                #expect(index.isFiltered)
                let asking = few + ["free", "memcpy", "abort", "pthread_create"]
                for symbol in asking {
                    Self.expectIndex(index, answers: symbol, in: objects)
                }
                #expect(index.entries(of: "strlen", in: objects).count > 0)
                for object in objects {
                    var kept: [String] = []
                    _ = index.forEachIndexedEntry(of: object) { name, _, _ in kept.append(String(cString: name)) }
                    #expect(kept.allSatisfy(few.contains), "\(object.path)")
                    #expect(kept.count == few.map { ImportWalk.entries(of: $0, in: object).count }.reduce(0, +))
                }
            }
        }

        /// Expects `index` to answer for `symbol` with the entries a scan of each of `objects`
        /// finds, in the same order, with the same kinds and versions.
        static func expectIndex(_ index: ImportWalk.EntryIndex, answers symbol: String, in objects: [LoadedObject]) {
            let indexed = index.entries(of: symbol, in: objects)
            let scanned = objects.indices.flatMap { place in
                ImportWalk.entries(of: symbol, in: objects[place]).map { (place, $0) }
            }
            #expect(
                indexed.map { "\($0.object) \($0.entry.slot) \($0.entry.kind) \($0.entry.version ?? "-")" }
                    == scanned.map { "\($0.0) \($0.1.slot) \($0.1.kind) \($0.1.version ?? "-")" },
                "\(symbol)")
        }

        /// Every symbol an object's JUMP_SLOT and GLOB_DAT entries name, from a scan of them all.
        static func symbolsNamed(in object: LoadedObject) -> [String] {
            var capacity = 64
            var all: [ffh_elf_entry] = []
            while true {
                all = [ffh_elf_entry](repeating: ffh_elf_entry(), count: capacity)
                let total = ffh_elf_find_entries(object.object, nil, &all, capacity)
                if total <= capacity {
                    all.removeSubrange(total...)
                    break
                }
                capacity = total
            }
            return all.compactMap { $0.name.map { String(cString: $0) } }
        }

        @Test func rebindsAJumpSlotUnderFullRELROAndRestoresIt() throws {
            let library = try ImportFixtures.open(Self.fullRELRO)
            let length = try ImportFixtures.function(
                "cimportfixture_length", in: library, as: ImportFixtures.Length.self)
            let entries = ImportFixtures.entries(of: "strlen", in: .object(Self.fullRELRO))
            let entry = try #require(entries.first)
            #expect(entries.count == 1)
            #expect(entry.kind == .jumpSlot)
            let original = ImportWalk.value(at: entry.slot)
            #expect(ImportFixtures.isReadOnlyAtRest(entry.slot))

            let seen = EventLog()
            let group = try ImportTable.hook(
                symbol: "strlen", in: .object(Self.fullRELRO), signature: Signature("Q*"), position: .before
            ) { call in
                seen.record(String(cString: call.argument(0, as: UnsafePointer<CChar>.self)))
            }
            #expect(group.tokens.count == 1)
            #expect(ImportWalk.value(at: entry.slot) != original)
            #expect(ImportFixtures.isReadOnlyAtRest(entry.slot))

            #expect(length("hooked") == 6)
            #expect(seen.all == ["hooked"])
            // Calls that do not come from the fixture library do not go through the hook.
            #expect(strlen("from the tests") == 14)
            let strlenPointer = unsafeBitCast(ImportFixtures.resolved("strlen"), to: ImportFixtures.Length.self)
            #expect(strlenPointer("through a pointer") == 17)
            #expect(seen.all == ["hooked"])

            #expect(group.remove())
            #expect(!group.isActive)
            #expect(ImportWalk.value(at: entry.slot) == original)
            #expect(ImportFixtures.isReadOnlyAtRest(entry.slot))
            #expect(length("after") == 5)
            #expect(seen.all == ["hooked"])
        }

        @Test func rebindsAGlobalDataEntry() throws {
            let library = try ImportFixtures.open(Self.fullRELRO)
            let parse = try ImportFixtures.function("cimportfixture_parse", in: library, as: ImportFixtures.Parse.self)
            let entries = ImportFixtures.entries(of: "atoi", in: .object(Self.fullRELRO))
            let entry = try #require(entries.first)
            #expect(entries.map(\.kind) == [ImportEntry.Kind.globalData])
            let original = ImportWalk.value(at: entry.slot)

            let group = try ImportTable.hook(
                symbol: "atoi", in: .object(Self.fullRELRO), signature: Signature("i*"), position: .instead
            ) { call in
                call.callOriginal()
                call.setReturnValue(call.returnValue(as: Int32.self) * 100)
            }
            #expect(parse("7") == 700)
            #expect(atoi("7") == 7)
            group.remove()
            #expect(parse("7") == 7)
            #expect(ImportWalk.value(at: entry.slot) == original)
            #expect(ImportFixtures.isReadOnlyAtRest(entry.slot))
        }

        @Test func aLazyEntryIsBoundToTheRealFunctionFirst() throws {
            let library = try ImportFixtures.open(Self.lazy, flags: RTLD_LAZY)
            let parse = try ImportFixtures.function("cimportlazy_parse", in: library, as: ImportFixtures.ParseLong.self)
            let entries = ImportFixtures.entries(of: "atol", in: .object(Self.lazy))
            let entry = try #require(entries.first)
            #expect(entries.map(\.kind) == [ImportEntry.Kind.jumpSlot])
            let real = ImportFixtures.resolved("atol")
            // Not yet called: the entry points into the library's own PLT (unless the
            // environment asked for eager binding with LD_BIND_NOW).
            let unbound = ImportWalk.value(at: entry.slot)
            if getenv("LD_BIND_NOW") == nil {
                #expect(unbound != real)
                #expect(SlotMemory.protection(of: unbound)?.executable == true)
                #expect(!ImportFixtures.isReadOnly(entry.slot))
            }

            let calls = Counter()
            let group = try ImportTable.hook(
                symbol: "atol", in: .object(Self.lazy), signature: Signature("q*"), position: .after
            ) { call in
                calls.increment()
                #expect(call.returnValue(as: Int.self) == 12)
            }
            let hooked = ImportWalk.value(at: entry.slot)
            // The original is atol itself: calling it neither recurses into the hook nor
            // makes the loader's resolver overwrite the entry.
            #expect(parse("12") == 12)
            #expect(parse("12") == 12)
            #expect(calls.count == 2)
            #expect(ImportWalk.value(at: entry.slot) == hooked)
            group.remove()
            #expect(ImportWalk.value(at: entry.slot) == real)
            #expect(parse("12") == 12)
            #expect(calls.count == 2)
        }

        @Test func objectsLoadedLaterAreCoveredWhenAsked() throws {
            let library = try ImportFixtures.open(Self.fullRELRO)
            let open = try ImportFixtures.function("cimportfixture_open", in: library, as: ImportFixtures.Open.self)
            let laterPath = ImportFixtures.path(Self.later)
            try #require(dlopen(laterPath, RTLD_NOW | RTLD_NOLOAD) == nil, "\(Self.later) must not be loaded yet")

            let calls = Counter()
            let group = try ImportTable.hook(
                symbol: "atoi", in: .allIncludingLaterLoads, signature: Signature("i*"), position: .before
            ) { call in
                if String(cString: call.argument(0, as: UnsafePointer<CChar>.self)) == "4711" { calls.increment() }
            }
            let before = group.tokens.count
            #expect(before >= 1)  // at least libImportFixture's GLOB_DAT entry

            // A library loads another, through its own import of dlopen.
            let laterLibrary = try #require(open(laterPath, RTLD_NOW))
            let parse = try ImportFixtures.function(
                "cimportlater_parse", in: laterLibrary, as: ImportFixtures.Parse.self)
            #expect(group.tokens.count == before + 1)
            #expect(parse("4711") == 4712)
            #expect(calls.count == 1)

            #expect(group.remove())
            #expect(!group.isActive)
            #expect(parse("4711") == 4712)
            #expect(calls.count == 1)
            let entry = try #require(ImportFixtures.entries(of: "atoi", in: .object(Self.later)).first)
            #expect(ImportWalk.value(at: entry.slot) == ImportFixtures.resolved("atoi"))
        }

        /// Following later loads attaches to `dlopen` (no signature): a hook of `dlopen` with
        /// types of the program's own stays beside it, and both run.
        @Test func aHookOfDlopenWithOtherTypesStaysBesideTheFollowing() throws {
            let library = try ImportFixtures.open(Self.fullRELRO)
            let open = try ImportFixtures.function("cimportfixture_open", in: library, as: ImportFixtures.Open.self)
            let calls = Counter()
            // (This thread's calls: other suites' tests call dlopen meanwhile.)
            let thread = pthread_self()
            let mine = try ImportTable.before(symbol: "dlopen", in: .all, signature: Signature("qqq")) { _ in
                if pthread_self() == thread { calls.increment() }
            }
            defer { mine.remove() }
            let group = try ImportTable.after(symbol: "getpid", in: .allIncludingLaterLoads, signature: Signature("i"))
            {
                _ in
            }
            defer { group.remove() }
            // (The group's own walk pins each object with dlopen, through the entries `mine`
            // hooked: counted from here.)
            let before = calls.count
            #expect(open(ImportFixtures.path(Self.fullRELRO), RTLD_NOW) != nil)
            #expect(calls.count == before + 1)
        }

        /// A library that opens another by its bare name finds it through its own DT_RUNPATH
        /// while `dlopen` is followed for later loads (attached in every object), and attached
        /// by the program too, or hooked with a signature: the loader learns its caller from its
        /// return address, which must be in the library that called, not in the hooking
        /// library's code or a return thunk (there the loader takes the main program, whose
        /// paths do not lead to the fixtures).
        @Test(
            .enabled(
                if: loaderFunctionIsTheCLibrarys("dlopen"), "a sanitizer's dlopen calls the loader from its own code"),
            arguments: ["followed", "attached", "hooked", "hooked alone"])
        func dlopenByBareNameSeesItsCaller(_ how: String) throws {
            _ = ImportFixtures.path("libBareNameFixture.so")  // built beside libImportFixture.so
            let library = try ImportFixtures.open(Self.fullRELRO)
            let open = try ImportFixtures.function("cimportfixture_open", in: library, as: ImportFixtures.Open.self)
            let following: HookGroupToken? =
                how == "hooked alone"
                ? nil
                : try ImportTable.after(symbol: "getpid", in: .allIncludingLaterLoads, signature: Signature("i")) { _ in
                }
            defer { following?.remove() }
            let leaves = Counter()
            // (The bare name's calls alone: the walks of the hooks' own pin objects with dlopen, by
            // path, through entries already hooked, and the blocks may run for those.)
            let watching =
                how == "followed"
                ? nil
                : try Self.countReturns(
                    of: "dlopen", "^v*i", how, into: leaves, firstArgument: "libBareNameFixture.so")
            defer { watching?.remove() }
            let before = leaves.count
            let handle = open("libBareNameFixture.so", RTLD_NOW)
            let failure = handle == nil ? dlerror().map { String(cString: $0) } ?? "" : ""
            #expect(handle != nil, "\(failure)")
            #expect(leaves.count - before == (how == "followed" ? 0 : 1))
            if let handle {
                let value = try ImportFixtures.function(
                    "cbarename_value", in: handle, as: (@convention(c) () -> Int32).self)
                #expect(value() == 31)
                dlclose(handle)
            }
        }

        /// Counts the calling thread's calls of `symbol` as they return, in every object: with
        /// an attach's leave block (`how` "attached") or an after block of a hook with
        /// `signature`. (This thread's alone: other suites' tests call the loader meanwhile.)
        /// With `firstArgument`, only the calls whose first argument is that string.
        static func countReturns(
            of symbol: String, _ signature: String, _ how: String, into counter: Counter, firstArgument: String? = nil
        ) throws -> HookGroupToken {
            let thread = pthread_self()
            let matches: @Sendable (UInt) -> Bool = { argument in
                guard let firstArgument else { return true }
                guard let text = UnsafePointer<CChar>(bitPattern: argument) else { return false }
                return String(cString: text) == firstArgument
            }
            if how == "attached" {
                return try ImportTable.attach(
                    symbol: symbol, in: .all,
                    onEnter: { call in call.scratch = matches(UInt(call.integerArgument(0))) ? 1 : 0 },
                    onLeave: { call in if pthread_self() == thread && call.scratch == 1 { counter.increment() } })
            }
            return try ImportTable.after(symbol: symbol, in: .all, signature: Signature(signature)) { call in
                if pthread_self() == thread && matches(call.argument(0, as: UInt.self)) { counter.increment() }
            }
        }

        /// `dlsym(RTLD_NEXT, …)` from a library, with `dlsym` attached (a leave block) or hooked
        /// with a signature in every object: the loader takes `RTLD_NEXT` as the objects after
        /// the caller it finds by its return address (here the library it links with, which has
        /// `cnext_value`), and fails from a return thunk's address, or finds none after another
        /// caller (the test runner, libffi).
        @Test(
            .enabled(
                if: loaderFunctionIsTheCLibrarys("dlsym"), "a sanitizer's dlsym calls the loader from its own code"),
            arguments: ["attached", "hooked"])
        func dlsymNextSeesItsCaller(_ how: String) throws {
            let library = try ImportFixtures.open("libBareNameFixture.so")
            let next = try ImportFixtures.function(
                "cbarename_next", in: library,
                as: (@convention(c) (UnsafePointer<CChar>?) -> UnsafeMutableRawPointer?).self)
            let calls = Counter()
            let token = try Self.countReturns(of: "dlsym", "^v^v*", how, into: calls)
            defer { token.remove() }
            let before = calls.count
            let found = next("cnext_value")
            let failure = found == nil ? dlerror().map { String(cString: $0) } ?? "" : ""
            #expect(calls.count > before)
            #expect(found != nil, "\(failure)")
            if let found {
                #expect(unsafeBitCast(found, to: (@convention(c) () -> Int32).self)() == 53)
            }
        }

        /// Calls of `dlsym` that pass straight through keep their caller too: while hooks on a
        /// library's `dlsym` entry come and go, its calls meet the entry with no hook yet or
        /// none left, and go to the function directly; the library's `dlsym(RTLD_NEXT, …)` must
        /// still find `cnext_value` in the library after it, every time.
        @Test(
            .enabled(
                if: loaderFunctionIsTheCLibrarys("dlsym"), "a sanitizer's dlsym calls the loader from its own code"),
            arguments: ["hooked", "attached", "instead"])
        func dlsymNextWhileHooksComeAndGoSeesItsCaller(_ how: String) async throws {
            let library = try ImportFixtures.open("libBareNameFixture.so")
            let next = try ImportFixtures.function(
                "cbarename_next", in: library,
                as: (@convention(c) (UnsafePointer<CChar>?) -> UnsafeMutableRawPointer?).self)
            let stop = Atomic<Bool>(false)
            let calls = Counter()
            let misses = Counter()
            let callers = (0..<2).map { _ in
                Thread {
                    while !stop.load(ordering: .relaxed) {
                        calls.increment()
                        if next("cnext_value") == nil { misses.increment() }
                    }
                }
            }
            for caller in callers { caller.start() }
            for _ in 0..<40 {
                let token: HookGroupToken
                let scope = ImportScope.object("libBareNameFixture.so")
                switch how {
                case "attached":
                    token = try ImportTable.attach(symbol: "dlsym", in: scope, onEnter: { _ in }, onLeave: { _ in })
                case "instead":
                    token = try ImportTable.instead(symbol: "dlsym", in: scope, signature: Signature("^v^v*")) {
                        call in call.callOriginal()
                    }
                default:
                    token = try ImportTable.after(symbol: "dlsym", in: scope, signature: Signature("^v^v*")) { _ in }
                }
                usleep(1000)
                token.remove()
            }
            stop.store(true, ordering: .relaxed)
            while callers.contains(where: { !$0.isFinished }) { usleep(1000) }
            #expect(calls.count > 0)
            #expect(misses.count == 0, "\(misses.count) of \(calls.count) calls found nothing")
        }

        /// A block that calls the hooked symbol through another object's entry (here
        /// `String(cString:)`, whose `strlen` goes through the Swift runtime's import table)
        /// is re-entry, as through the same entry: the block runs once per outside call, and a
        /// block that allows re-entry sees the nested call marked as such.
        @Test func aBlockCallingTheSymbolThroughAnotherObjectIsReentry() throws {
            let library = try ImportFixtures.open(Self.fullRELRO)
            let length = try ImportFixtures.function(
                "cimportfixture_length", in: library, as: ImportFixtures.Length.self)
            let marker = "reentered-through-another-object"
            let outer = Counter()
            let nested = Counter()
            // The same block on the fixture's entry and on the Swift runtime's.
            let count: @Sendable (borrowing Invocation) -> Void = { call in
                // Reading the argument as a Swift string calls strlen from the Swift runtime.
                if String(cString: call.argument(0, as: UnsafePointer<CChar>.self)) == marker { outer.increment() }
            }
            var groups: [HookGroupToken] = []
            defer { for group in groups { group.remove() } }
            for object in [Self.fullRELRO, "libswiftCore.so"] {
                groups.append(
                    try ImportTable.hook(
                        symbol: "strlen", in: .object(object), signature: Signature("Q*"), position: .before,
                        count))
            }
            groups.append(
                try ImportTable.hook(
                    symbol: "strlen", in: .object("libswiftCore.so"), signature: Signature("Q*"), position: .after,
                    options: .allowsReentry
                ) { call in
                    if call.isReentrant { nested.increment() }
                })
            #expect(groups.allSatisfy { $0.tokens.count >= 1 })
            #expect(length(marker) == marker.utf8.count)
            #expect(outer.count == 1)
            #expect(nested.count >= 1)
        }

        /// `.once` holds for the whole group: one block run in all, whichever object's entry
        /// the first call comes through, then the group removes itself.
        @Test func onceHoldsForTheWholeGroup() throws {
            let library = try ImportFixtures.open(Self.fullRELRO)
            let length = try ImportFixtures.function(
                "cimportfixture_length", in: library, as: ImportFixtures.Length.self)
            let runs = Counter()
            let group = try ImportTable.hook(
                symbol: "strlen", in: .all, signature: Signature("Q*"), position: .before, options: .once
            ) { _ in
                runs.increment()
            }
            defer { group.remove() }
            #expect(group.tokens.count >= 2)
            // Calls through the fixture's entry and through the Swift runtime's.
            #expect(length("once") == 4)
            #expect("once".withCString { String(cString: $0) }.count == 4)
            #expect(length("twice") == 5)
            // The first call may have come from another thread, which may still be removing.
            var waited = 0
            while group.isActive && waited < 1000 {
                usleep(1000)
                waited += 1
            }
            #expect(!group.isActive)
            #expect(runs.count == 1)
        }

        /// A `.once` instead block on an import-table group: the first call gets the block's
        /// result, later ones the original's.
        @Test func aOnceInsteadBlockLetsLaterCallsReachTheOriginal() throws {
            let library = try ImportFixtures.open(Self.lazy)
            let parse = try ImportFixtures.function("cimportlazy_parse", in: library, as: ImportFixtures.ParseLong.self)
            let group = try ImportTable.hook(
                symbol: "atol", in: .object(Self.lazy), signature: Signature("q*"), position: .instead, options: .once
            ) { call in
                call.setReturnValue(-1 as Int)
            }
            #expect(parse("12") == -1)
            #expect(parse("12") == 12)
            #expect(!group.isActive)
        }

        /// The verbs of slots, for import tables: before, instead and after, in their order.
        @Test func beforeInsteadAndAfterOnAnImportedFunction() throws {
            let library = try ImportFixtures.open(Self.lazy)
            let parse = try ImportFixtures.function("cimportlazy_parse", in: library, as: ImportFixtures.ParseLong.self)
            let log = EventLog()
            let scope = ImportScope.object(Self.lazy)
            let signature = try Signature("q*")
            let groups = [
                try ImportTable.before(symbol: "atol", in: scope, signature: signature) { _ in log.record("before") },
                try ImportTable.instead(symbol: "atol", in: scope, signature: signature) { call in
                    log.record("instead")
                    call.callOriginal()
                    call.setReturnValue(call.returnValue(as: Int.self) + 1)
                },
                try ImportTable.after(symbol: "atol", in: scope, signature: signature) { call in
                    log.record("after \(call.returnValue(as: Int.self))")
                },
            ]
            #expect(parse("12") == 13)
            #expect(log.all == ["before", "instead", "after 13"])
            #expect(groups.allSatisfy { $0.remove() })
            #expect(parse("12") == 12)
        }

        /// Typed blocks, for import tables: the signature derived from the Swift types, or
        /// given and checked against them.
        @Test func typedBlocksOnAnImportedFunction() throws {
            let library = try ImportFixtures.open(Self.lazy)
            let parse = try ImportFixtures.function("cimportlazy_parse", in: library, as: ImportFixtures.ParseLong.self)
            let log = EventLog()
            let scope = ImportScope.object(Self.lazy)
            let text = UnsafePointer<CChar>?.self
            let before = try ImportTable.before(symbol: "atol", in: scope, arguments: text, returning: Int.self) {
                string in
                log.record("before \(String(cString: string!))")
            }
            // A single expression: the one-argument form's block is inferred as written.
            let instead = try ImportTable.instead(symbol: "atol", in: scope, arguments: text, returning: Int.self) {
                original, string in original(string) + 1
            }
            let after = try ImportTable.after(
                symbol: "atol", in: scope, signature: Signature("q^v"), arguments: text, returning: Int.self
            ) { result, _ in
                log.record("after \(result)")
                return result * 2
            }
            let groups = [before, instead, after]
            #expect(parse("12") == 26)
            #expect(log.all == ["before 12", "after 13"])
            // Swift types that disagree with a given signature are refused, and nothing is hooked.
            let refused = #expect(throws: HookError.self) {
                try ImportTable.before(
                    symbol: "atol", in: scope, signature: Signature("q*"), arguments: Double.self, returning: Int.self
                ) { _ in }
            }
            #expect(refused?.code == .invalidSignature)
            #expect(refused?.callInterfaceError?.position == .argument(0))
            #expect(refused?.symbol == "atol")
            #expect(refused?.description.hasPrefix(#"cannot hook "atol" with signature "q*""#) == true)
            #expect(groups.allSatisfy { $0.remove() })
            #expect(parse("12") == 12)
            #expect(log.all == ["before 12", "after 13"])
        }

        @Test func removalRestoresOnlyWhatIsStillOurs() throws {
            let library = try ImportFixtures.open(Self.fullRELRO)
            let length = try ImportFixtures.function(
                "cimportfixture_length", in: library, as: ImportFixtures.Length.self)
            let entry = try #require(ImportFixtures.entries(of: "strlen", in: .object(Self.fullRELRO)).first)
            let original = ImportWalk.value(at: entry.slot)
            let protection = try #require(SlotMemory.protection(of: entry.slot))
            func write(_ value: UInt) {
                _ = SlotMemory.withWritablePage(entry.slot, restoring: protection) {
                    UnsafeMutableRawPointer(bitPattern: entry.slot)!.storeBytes(of: value, as: UInt.self)
                    return .replaced
                }
            }
            let log = EventLog()
            func hook(_ name: String, _ position: HookPosition) throws -> HookGroupToken {
                try ImportTable.hook(
                    symbol: "strlen", in: .object(Self.fullRELRO), signature: Signature("Q*"), position: position
                ) { _ in log.record(name) }
            }

            // Two groups on one entry, removed in install order: the original comes back last.
            let first = try hook("first", .before)
            let second = try hook("second", .after)
            #expect(length("ab") == 2)
            #expect(log.all == ["first", "second"])
            first.remove()
            #expect(ImportWalk.value(at: entry.slot) != original)
            second.remove()
            #expect(ImportWalk.value(at: entry.slot) == original)

            // Someone else rebinds the entry while it is hooked: removal leaves their value.
            let theirs: ImportFixtures.Length = { _ in 99 }
            let theirsAddress = unsafeBitCast(theirs, to: UInt.self)
            let third = try hook("third", .before)
            write(theirsAddress)
            #expect(third.remove())
            #expect(ImportWalk.value(at: entry.slot) == theirsAddress)
            #expect(length("ab") == 99)
            #expect(ImportFixtures.isReadOnlyAtRest(entry.slot))
            write(original)
            #expect(length("ab") == 2)
        }

        /// fishhook-style: a compiled function written into the entries, the original given back.
        @Test func replaceWritesAFunctionIntoTheEntriesAndGivesTheOriginal() throws {
            let library = try ImportFixtures.open(Self.lazy)
            let parse = try ImportFixtures.function("cimportlazy_parse", in: library, as: ImportFixtures.ParseLong.self)
            let group = try ImportTable.replace(symbol: "atol", in: .object(Self.lazy), with: replacedParse)
            replacedParseOriginal.store(UInt(bitPattern: group.original), ordering: .releasing)
            // The lazy entry was bound first: the original is the real atol, not the PLT stub.
            #expect(UInt(bitPattern: group.original) == ImportFixtures.resolved("atol"))
            #expect(group.original(as: ImportFixtures.ParseLong.self)!("5") == 5)
            #expect(parse("12") == 1012)
            let entries = ImportFixtures.entries(of: "atol", in: .object(Self.lazy))
            #expect(group.replacements.count == entries.count)
            #expect(entries.allSatisfy { ImportWalk.value(at: $0.slot) == replacedParseAddress })
            // A hook on the same symbol wraps the replacement.
            let hook = try ImportTable.after(symbol: "atol", in: .object(Self.lazy), signature: Signature("q^v")) {
                call in
                call.setReturnValue(call.returnValue(as: Int.self) + 1)
            }
            #expect(parse("12") == 1013)
            #expect(group.isActive)
            #expect(group.remove())
            #expect(!group.isActive)
            #expect(!group.remove())
            #expect(parse("12") == 13)
            #expect(hook.remove())
            #expect(parse("12") == 12)
        }

        /// A replacement compiled into the object whose entry it fills leads into that object's
        /// code from memory the loader writes, as an entry not bound yet does: it is not taken
        /// for one (a hook installed later bound the entry to the real function, and the
        /// replacement was lost), and the bindings say what it is.
        @Test func aReplacementFromTheObjectItselfIsWrappedByALaterHook() throws {
            let library = try ImportFixtures.open(Self.lazy, flags: RTLD_LAZY)
            let parse = try ImportFixtures.function("cimportlazy_parse", in: library, as: ImportFixtures.ParseLong.self)
            let own = try ImportFixtures.function(
                "cimportlazy_own_atol", in: library, as: ImportFixtures.ParseLong.self)
            let ownAddress = UInt(bitPattern: unsafeBitCast(own, to: UnsafeRawPointer.self))
            let group = try ImportTable.replace(symbol: "atol", in: .object(Self.lazy), with: own)
            defer { group.remove() }
            #expect(parse("5") == 1005)
            let bindings = try ImportTable.bindings(of: "atol", in: .object(Self.lazy))
            #expect(!bindings.isEmpty)
            #expect(bindings.allSatisfy { $0.function == ownAddress && !$0.isHooked }, "\(bindings)")
            let hook = try ImportTable.instead(symbol: "atol", in: .object(Self.lazy), signature: Signature("q*")) {
                call in
                call.callOriginal()
                call.setReturnValue(call.returnValue(as: Int64.self) + 1)
            }
            #expect(parse("5") == 1006)
            #expect(try ImportTable.bindings(of: "atol", in: .object(Self.lazy)).allSatisfy { $0.isHooked })
            #expect(hook.remove())
            #expect(parse("5") == 1005)
            #expect(group.remove())
            #expect(parse("5") == 5)
        }

        @Test func replaceUnderFullRELROKeepsTheTableReadOnly() throws {
            let library = try ImportFixtures.open(Self.fullRELRO)
            let length = try ImportFixtures.function(
                "cimportfixture_length", in: library, as: ImportFixtures.Length.self)
            let entry = try #require(ImportFixtures.entries(of: "strlen", in: .object(Self.fullRELRO)).first)
            let original = ImportWalk.value(at: entry.slot)
            let fortyTwo: ImportFixtures.Length = { _ in 42 }
            let group = try ImportTable.replace(symbol: "strlen", in: .object(Self.fullRELRO), with: fortyTwo)
            #expect(length("abc") == 42)
            #expect(ImportFixtures.isReadOnlyAtRest(entry.slot))
            #expect(UInt(bitPattern: group.original) == original)
            #expect(group.remove())
            #expect(length("abc") == 3)
            #expect(ImportWalk.value(at: entry.slot) == original)
            #expect(ImportFixtures.isReadOnlyAtRest(entry.slot))
        }

        /// A page of an object's table lifted while another thread walks the loader's list of
        /// objects (a `dl_iterate_phdr` callback: a profiler, an unwinder) longer than a write
        /// waits for that list gets its protection back once the walk is over: it was left
        /// writable for good, and every later write took it for writable at rest.
        /// The full-RELRO fixture's `cimportfixture_length`, the fixture opened (and left open)
        /// for it: for a test in a process of its own, which exits when this is nil.
        static func fullRELROLength() -> ImportFixtures.Length? {
            guard let library = try? ImportFixtures.open(fullRELRO) else { return nil }
            return try? ImportFixtures.function("cimportfixture_length", in: library, as: ImportFixtures.Length.self)
        }

        /// In a process of its own: a test beside it whose thread holds a lock of the library's
        /// while it waits for the held list (an unload, a walk) kept this test's write waiting
        /// past the hold, under the address sanitizer.
        @Test(
            .disabled(
                if: ProcessLifeTests.underThreadSanitizer,
                "the thread sanitizer's pthread_create, which starts the restorer here, walks the loader's list the test holds (its symbolizer's list of modules), and waits out the hold"
            ))
        func aPageLiftedWhileTheLoaderListIsHeldGetsItsProtectionBack() async {
            await #expect(processExitsWith: .success) {
                guard let length = Self.fullRELROLength(),
                    let entry = ImportFixtures.entries(of: "strlen", in: .object(Self.fullRELRO)).first,
                    let slot = UnsafeMutableRawPointer(bitPattern: entry.slot)
                else { exit(2) }
                let original = ImportWalk.value(at: entry.slot)
                if !ImportFixtures.isReadOnlyAtRest(entry.slot) { exit(3) }
                let calls = AttachTests.Counter()
                var token: HookToken?
                let heldWhileHooking = ImportFixtures.whileTheLoaderListIsHeld {
                    token = try? Hook.attach(on: FunctionSlot(slot), options: .liftsPageProtection) { _ in
                        calls.add()
                    } onLeave: { _ in
                    }
                }
                guard heldWhileHooking, let token else { exit(4) }
                if !ImportFixtures.isReadOnlyAtRest(entry.slot) { exit(5) }
                if length("abcd") != 4 || calls.count < 1 { exit(6) }
                var removed = false
                let heldWhileRemoving = ImportFixtures.whileTheLoaderListIsHeld { removed = token.remove() }
                guard heldWhileRemoving, removed else { exit(7) }
                if ImportWalk.value(at: entry.slot) != original { exit(8) }
                exit(ImportFixtures.isReadOnlyAtRest(entry.slot) ? 0 : 9)
            }
        }

        /// A page left to the restorer whose thread could not be made (here `pthread_create`
        /// fails while the loader's list is held, as at a thread limit) gets its protection back
        /// at the next write to any slot of the same page: a write to a waiting page starts the
        /// restorer too. In a child (`pthread_create` is replaced in every object for a while).
        @Test(
            .disabled(
                if: ProcessLifeTests.underAddressSanitizer || ProcessLifeTests.underThreadSanitizer,
                "the sanitizers define pthread_create in the test executable, whose calls of it then go through no import table"
            ))
        func aPageWaitingForARestorerThatCouldNotStartIsGivenBackAtTheNextWrite() async {
            await #expect(processExitsWith: .success) {
                guard let length = Self.fullRELROLength(),
                    let first = ImportFixtures.entries(of: "strlen", in: .object(Self.fullRELRO)).first,
                    let second = ImportFixtures.entries(of: "atoi", in: .object(Self.fullRELRO)).first
                else { exit(2) }
                // Both entries on one page.
                guard first.slot / SlotMemory.pageSize == second.slot / SlotMemory.pageSize else { exit(0) }
                let failing = Atomic<Bool>(false)
                let refused = Atomic<Int>(0)
                let replacement: HookGroupToken
                do {
                    replacement = try ImportTable.instead(
                        symbol: "pthread_create", in: .all, signature: Signature("i^v^v^?^v")
                    ) { call in
                        if failing.load(ordering: .acquiring) {
                            refused.add(1, ordering: .relaxed)
                            call.setReturnValue(Int32(EAGAIN))
                        } else {
                            call.callOriginal()
                        }
                    }
                } catch {
                    exit(3)
                }
                func hookAndRemove(_ slot: UInt) {
                    guard let pointer = UnsafeMutableRawPointer(bitPattern: slot),
                        let token = try? Hook.attach(
                            on: FunctionSlot(pointer), options: .liftsPageProtection, onEnter: { _ in }, onLeave: nil)
                    else { exit(4) }
                    token.remove()
                }
                ImportFixtures.whileTheLoaderListIsHeld {
                    failing.store(true, ordering: .releasing)
                    hookAndRemove(first.slot)
                    failing.store(false, ordering: .releasing)
                }
                // The restorer's thread was refused: the page waits, writable.
                if refused.load(ordering: .relaxed) == 0 { exit(5) }
                usleep(100_000)
                if ImportFixtures.isReadOnly(first.slot) { exit(6) }
                hookAndRemove(second.slot)
                if !ImportFixtures.isReadOnlyAtRest(first.slot) { exit(7) }
                replacement.remove()
                exit(length("abc") == 3 ? 0 : 8)
            }
        }

        /// A child forked while a page waits for the restorer (the loader's list held by
        /// another thread) has no restorer thread, and a loader's list that may stay locked for
        /// good: it gives the page its protection back itself as it starts, before it writes
        /// anything. The child only asks the kernel and exits. (In a process of its own, as the
        /// next: a fork there waits for no lock another test's thread holds while it waits for
        /// the loader's list, which held the fork past the hold.)
        @Test(.disabled(if: ProcessLifeTests.underThreadSanitizer, "a child of a fork made while threads run"))
        func aChildForkedWhileAPageWaitsForTheRestorerGivesItBack() async {
            await #expect(processExitsWith: .success) {
                let status = Self.forkWhileAPageWaits {
                    let page = $0 & ~(SlotMemory.pageSize - 1)
                    var mapping = ffh_mapping()
                    return ffh_mapping_of(page, &mapping) == 1 && mapping.protection == PROT_READ ? 0 : 1
                }
                exit(status)
            }
        }

        /// A child forked while a page waits for the restorer starts no restorer for it: the
        /// child gave the page back as it started, and its loader's list may stay locked for
        /// good (a parent's thread held it at the fork, as here), where such a restorer waited
        /// for ever, holding the walk gate's read side (the child's own forks then waited for
        /// it). A session that ends in the child, which starts the restorer when pages wait,
        /// leaves the child with its one thread (status 1 before: a restorer waited).
        @Test(.disabled(if: ProcessLifeTests.underThreadSanitizer, "a child of a fork made while threads run"))
        func aChildForkedWhileAPageWaitsStartsNoRestorerForIt() async {
            await #expect(processExitsWith: .success) {
                let status = Self.forkWhileAPageWaits { _ in
                    guard ct_thread_count() == 1 else { return 2 }
                    SlotMemory.keepingPagesWritable {}
                    // A restorer, had one started, would be waiting for the list by now.
                    usleep(100_000)
                    return ct_thread_count() == 1 ? 0 : 1
                }
                exit(status)
            }
        }

        /// Lifts the full-RELRO fixture's strlen entry for a hook while the loader's list is held,
        /// so that its page waits for the restorer, then forks a child that runs `child` with the
        /// entry's address and exits with what it returns. Returns 0 when the child exited with 0
        /// and the page is read-only at rest after the hold; the child's status plus 10 when it
        /// did not; 2 to 6 when the set-up did not go as planned.
        static func forkWhileAPageWaits(_ child: (UInt) -> Int32) -> Int32 {
            guard (try? ImportFixtures.open(Self.fullRELRO)) != nil,
                let entry = ImportFixtures.entries(of: "strlen", in: .object(Self.fullRELRO)).first,
                let slot = UnsafeMutableRawPointer(bitPattern: entry.slot)
            else { return 2 }
            var status: Int32 = -1
            var waited = false
            let held = ImportFixtures.whileTheLoaderListIsHeld(milliseconds: 2000) {
                guard
                    let token = try? Hook.attach(
                        on: FunctionSlot(slot), options: .liftsPageProtection, onEnter: { _ in }, onLeave: { _ in })
                else { return }
                token.remove()
                waited = !ImportFixtures.isReadOnly(entry.slot)
                let forked = fork()
                if forked == 0 { _exit(child(entry.slot)) }
                waitpid(forked, &status, 0)
            }
            guard held else { return 3 }
            guard waited else { return 4 }
            guard status >= 0, (status & 0x7f) == 0 else { return 5 }
            guard (status >> 8) & 0xff == 0 else { return 10 + (status >> 8) & 0xff }
            return ImportFixtures.isReadOnlyAtRest(entry.slot) ? 0 : 6
        }

        /// The page where the loader's range for the main program begins is the program's: glibc
        /// gives that range from the program's writable segment's first byte, which need not
        /// begin a page (where a gap follows the code), and a lookup of the page's start found
        /// no object. A read-only table on that page of a program was then refused under
        /// ``HookOptions/liftsPageProtection`` ("mprotect failed", with no mprotect made). (Where
        /// this build's range begins a page, the lookups agree trivially.)
        @Test func thePageWhereTheProgramsRangeBeginsIsTheProgramsPage() throws {
            var start: UInt = 0
            var end: UInt = 0
            try #require(ct_main_program_range(&start, &end) == 1)
            var program = ffh_elf_instance()
            try #require(ffh_elf_settled_object(start, &program) == 1)
            var atPage = ffh_elf_instance()
            #expect(ffh_elf_settled_object(start & ~(SlotMemory.pageSize - 1), &atPage) == 1)
            #expect(atPage.map == program.map && atPage.start == program.start && atPage.end == program.end)
            // Below the page, nothing of the program's that range names.
            let below = (start & ~(SlotMemory.pageSize - 1)) &- 1
            var other = ffh_elf_instance()
            #expect(ffh_elf_settled_object(below, &other) == 0 || other.map != program.map || other.start != start)
        }

        /// A page given its protection back late (by the restorer, the loader's list having
        /// been busy) is made read-only only where the object holding it then maps it read-only
        /// by its own program headers: its RELRO range, not its writable data. (The object may
        /// have been unloaded meanwhile and another file loaded at its place, with the same link
        /// map, start and end, whose page there is writable data: made read-only, it faulted.)
        @Test func aLateRestoreLeavesAnObjectsWritableDataWritable() throws {
            let libraries = try ThrowawayLibraries("late-restore")
            defer { libraries.remove() }
            let library = try libraries.build(
                "liblate.so",
                source: """
                    static int eight(void) { return 8; }
                    int (*const late_table[1])(void) = { eight };
                    int late_data[2048] = { 1 };
                    """, flags: "-Wl,-z,relro,-z,now")
            let handle = try #require(dlopen(library, RTLD_NOW | RTLD_LOCAL))
            defer { dlclose(handle) }
            let page = SlotMemory.pageSize
            let tableSymbol: UnsafeMutableRawPointer = try #require(dlsym(handle, "late_table"))
            let dataSymbol: UnsafeMutableRawPointer = try #require(dlsym(handle, "late_data"))
            let table = UInt(bitPattern: tableSymbol) & ~(page - 1)
            // A page wholly inside the 8 KB array.
            let data = (UInt(bitPattern: dataSymbol) + page) & ~(page - 1)
            var instance = ffh_elf_instance()
            try #require(ffh_elf_settled_object(table, &instance) == 1)
            #expect(ImportFixtures.isReadOnly(table))
            #expect(SlotMemory.protection(of: data)?.writable == true)
            try #require(mprotect(UnsafeMutableRawPointer(bitPattern: table), Int(page), PROT_READ | PROT_WRITE) == 0)
            ffh_elf_lock_list()
            let tableChanged = ffh_elf_protect_instance_locked(table, Int(page), PROT_READ, &instance)
            let dataChanged = ffh_elf_protect_instance_locked(data, Int(page), PROT_READ, &instance)
            ffh_elf_unlock_list()
            #expect(tableChanged == 1)
            #expect(ImportFixtures.isReadOnly(table))
            #expect(dataChanged == 0)
            #expect(SlotMemory.protection(of: data)?.writable == true)
        }

        /// The library's own calls must not depend on what the program did to its import
        /// table: with the main program's getpid replaced (the library is linked into it, so
        /// its calls of getpid would go through that entry), removals still write back.
        @Test func replacingGetpidInTheProgramLeavesRemovalsWorking() throws {
            let slot = makeAddSlot()
            defer { slot.deallocate() }
            let wrongPid: @convention(c) () -> Int32 = { 1 }
            let pids = try ImportTable.replace(symbol: "getpid", in: .mainProgram, with: wrongPid)
            let times: @convention(c) (Int32, Int32) -> Int32 = { a, b in a * b }
            let replacement = try Hook.replace(on: FunctionSlot(slot), with: times)
            let hook = try Hook.after(on: FunctionSlot(slot), signature: Signature("iii")) { _ in }
            #expect(hook.remove())
            #expect(replacement.remove())
            let restored = UnsafeRawPointer(slot).load(as: UInt.self) == addOriginalAddress
            #expect(pids.remove())
            #expect(restored)
            #expect(getpid() != 1)
        }

        @Test func whatReplaceCannotDoIsNamed() throws {
            _ = try ImportFixtures.open(Self.fullRELRO)
            let fortyTwo: ImportFixtures.Length = { _ in 42 }
            let later = #expect(throws: HookError.self) {
                try ImportTable.replace(symbol: "strlen", in: .allIncludingLaterLoads, with: fortyTwo)
            }
            #expect(later?.code == .unsupportedScope)
            #expect(later?.symbol == "strlen")
            let object = #expect(throws: HookError.self) {
                try ImportTable.replace(symbol: "strlen", in: .object("libNoSuchObject.so"), with: fortyTwo)
            }
            #expect(object?.code == .objectNotFound)
            #expect(object?.object == "libNoSuchObject.so")
            #expect(object?.symbol == "strlen")
            let symbol = #expect(throws: HookError.self) {
                try ImportTable.replace(symbol: "cimport_nothing_imports_this", in: .all, with: fortyTwo)
            }
            #expect(symbol?.code == .symbolNotImported)
            #expect(symbol?.symbol == "cimport_nothing_imports_this")
            #expect(symbol?.message.hasPrefix(#"no loaded object imports "cimport_nothing_imports_this""#) == true)
            let notAFunction = #expect(throws: HookError.self) {
                try ImportTable.replace(symbol: "strlen", in: .object(Self.fullRELRO), with: 42)
            }
            #expect(notAFunction?.code == .invalidSlot)
        }

        @Test func anUnknownObjectIsNamed() {
            let error = #expect(throws: HookError.self) {
                try ImportTable.hook(
                    symbol: "strlen", in: .object("libNoSuchObject.so"), signature: Signature("Q*"), position: .before
                ) { _ in }
            }
            #expect(error?.is(.objectNotFound("libNoSuchObject.so")) == true)
            #expect(error?.description.contains("libNoSuchObject.so") == true)
        }

        @Test func aSymbolNoObjectImportsIsNamed() throws {
            _ = try ImportFixtures.open(Self.fullRELRO)
            for scope in [ImportScope.all, .object(Self.fullRELRO), .mainProgram] {
                let error = #expect(throws: HookError.self) {
                    try ImportTable.hook(
                        symbol: "cimport_nothing_imports_this", in: scope, signature: Signature("v"), position: .after
                    ) { _ in }
                }
                #expect(
                    error?.is(.symbolNotImported("cimport_nothing_imports_this", scope: scope, importers: [])) == true)
                #expect(error?.description.contains("cimport_nothing_imports_this") == true)
            }
        }

        @Test func readmeExample() throws {
            let seen = EventLog()
            // Every getpid() call the main program makes, and no other object's.
            let group = try ImportTable.hook(
                symbol: "getpid", in: .mainProgram, signature: Signature("i"), position: .after
            ) { call in
                seen.record("getpid returned \(call.returnValue(as: Int32.self))")
            }
            defer { group.remove() }
            let pid = getpid()
            #expect(seen.all == ["getpid returned \(pid)"])
        }
    }
}

/// Whether the loader's function `name` (`dlopen`, `dlsym`) is the C library's own, as the
/// program binds it: a sanitizer's runtime defines one in the executable, which calls the C
/// library's from its own code, so that the loader takes the executable for every caller,
/// hooked or not.
private func loaderFunctionIsTheCLibrarys(_ name: String) -> Bool {
    guard let libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD) else { return false }
    defer { dlclose(libc) }
    return dlsym(nil, name) == dlsym(libc, name)
}
