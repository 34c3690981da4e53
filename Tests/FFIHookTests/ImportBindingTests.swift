import Foundation
import Synchronization
import TestHookLock
import Testing

@testable import FFIHook
@testable import FFIHookCore

extension FixtureTableTests {
    /// Where a symbol is imported: the entries of each loaded object, what they hold, and the
    /// error that names the objects importing a symbol outside the scope asked for.
    @Suite struct ImportBindingTests {
        static let fullRELRO = "libImportFixture.so"
        static let overlay = "libswiftGlibc.so"

        /// The file name of the mapped file that holds `address`, as the kernel lists the
        /// process's mappings (`/proc/self/maps`).
        static func fileName(ofObjectAt address: UInt) -> String? {
            // Read to the end: String(contentsOfFile:) stops after the first read, one page
            // of a file whose size the kernel gives as zero.
            guard let file = FileHandle(forReadingAtPath: "/proc/self/maps"),
                let data = try? file.readToEnd()
            else { return nil }
            try? file.close()
            let maps = String(decoding: data, as: UTF8.self)
            for line in maps.split(separator: "\n") {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                let range = fields.first?.split(separator: "-") ?? []
                guard fields.count >= 6, range.count == 2, let low = UInt(range[0], radix: 16),
                    let high = UInt(range[1], radix: 16), low <= address && address < high
                else { continue }
                return fields[5].split(separator: "/").last.map(String.init)
            }
            return nil
        }

        @Test func bindingsNameTheObjectTheRelocationAndTheVersion() throws {
            let library = try ImportFixtures.open(Self.fullRELRO)
            let parse = try ImportFixtures.function("cimportfixture_parse", in: library, as: ImportFixtures.Parse.self)
            let bindings = try ImportTable.bindings(of: "atoi", in: .object(Self.fullRELRO))
            let binding = try #require(bindings.first)
            #expect(bindings.count == 1)
            let entry = binding.entry
            #expect(entry.symbol == "atoi")
            #expect(entry.kind == .globalData)
            #expect(entry.version == "GLIBC_2.2.5")
            #expect(entry.objectName == Self.fullRELRO)
            #expect(entry.objectPath == ImportFixtures.path(Self.fullRELRO))
            #expect(entry.objectSoname == nil)
            #expect(!entry.isInMainProgram)
            #expect(entry.scope == .object(Self.fullRELRO))
            // The walk of the hooks finds the same entry.
            #expect(ImportFixtures.entries(of: "atoi", in: .object(Self.fullRELRO)).map(\.slot) == [entry.slot.address])
            #expect(binding.state == .bound(function: ImportFixtures.resolved("atoi")))
            #expect(binding.value == ImportFixtures.resolved("atoi"))
            // libc.so.6, or the executable where a sanitizer's runtime intercepts atoi.
            let home = try #require(Self.fileName(ofObjectAt: ImportFixtures.resolved("atoi")))
            #expect(binding.functionObject == home)
            #expect(!binding.isHooked)
            #expect(binding.description.hasPrefix("\"atoi@GLIBC_2.2.5\" GLOB_DAT entry 0x"))
            #expect(
                binding.description.hasSuffix(
                    "in \(Self.fullRELRO): bound to 0x\(String(binding.value, radix: 16)) in \(home)"))

            let group = try ImportTable.before(symbol: "atoi", in: .object(Self.fullRELRO), signature: Signature("i*"))
            { _ in }
            let hooked = try #require(try ImportTable.bindings(of: "atoi", in: .object(Self.fullRELRO)).first)
            #expect(hooked.isHooked)
            #expect(hooked.state == .hooked(original: ImportFixtures.resolved("atoi")))
            #expect(hooked.value == ImportWalk.value(at: entry.slot.address))
            #expect(hooked.value != ImportFixtures.resolved("atoi"))
            #expect(hooked.function == ImportFixtures.resolved("atoi"))
            #expect(hooked.functionObject == home)
            #expect(parse("3") == 3)
            group.remove()
            let restored = try #require(try ImportTable.bindings(of: "atoi", in: .object(Self.fullRELRO)).first)
            #expect(restored.state == .bound(function: ImportFixtures.resolved("atoi")))
        }

        /// A copy of the lazy fixture, fresh: its entry of atol is not bound until the first
        /// call, and reading the bindings does not bind it.
        @Test func aLazyEntryIsShownUnboundUntilItsFirstCall() throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "ffihook-bindings-\(getpid())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let copy = directory.appendingPathComponent("libLazyBindingCopy.so").path
            try FileManager.default.copyItem(atPath: ImportFixtures.path("libLazyImportFixture.so"), toPath: copy)
            let library = try #require(dlopen(copy, RTLD_LAZY | RTLD_LOCAL))
            defer { dlclose(library) }
            let parse = try ImportFixtures.function("cimportlazy_parse", in: library, as: ImportFixtures.ParseLong.self)

            let before = try #require(try ImportTable.bindings(of: "atol", in: .object(copy)).first)
            #expect(before.entry.kind == .jumpSlot)
            #expect(before.entry.objectPath == copy)
            if getenv("LD_BIND_NOW") == nil {
                #expect(before.state == .unbound)
                #expect(before.function == nil)
                #expect(before.functionObject == nil)
                #expect(before.description.hasSuffix(": not bound yet (lazy)"))
                #expect(before.value != ImportFixtures.resolved("atol"))
                // Still unbound: the query changes nothing.
                #expect(try ImportTable.bindings(of: "atol", in: .object(copy)).first?.state == .unbound)
            }
            #expect(parse("41") == 41)
            let after = try #require(try ImportTable.bindings(of: "atol", in: .object(copy)).first)
            #expect(after.state == .bound(function: ImportFixtures.resolved("atol")))
            #expect(after.functionObject == Self.fileName(ofObjectAt: ImportFixtures.resolved("atol")))
        }

        /// Binding a lazy entry before hooking it leaves the library that defines the function
        /// unloadable: the `dlclose` of the only object that needs it unloads it, as without the
        /// hook. (Looked up by this library's own code, the definition got a dependency of the
        /// test program's on it, and with it the loader's mark that it is never unloaded.)
        @Test(arguments: [RTLD_LAZY | RTLD_GLOBAL, RTLD_LAZY | RTLD_LOCAL])
        func aLazyEntryBoundForAHookLeavesItsDefinitionUnloadable(mode: Int32) throws {
            let libraries = try ThrowawayLibraries("unloadable-\(mode)")
            defer { libraries.remove() }
            let definer = try libraries.build(
                "libunloadable_definer.so", source: "int unloadable_triple(int value) { return value * 3; }")
            let user = try libraries.build(
                "libunloadable_user.so",
                source:
                    "int unloadable_triple(int);\nint unloadable_user(int value) { return unloadable_triple(value) + 1; }",
                flags: "-Wl,-z,lazy -L$DIR -l:libunloadable_definer.so -Wl,-rpath,$DIR")
            let handle = try #require(dlopen(user, mode))
            let call = try #require(dlsym(handle, "unloadable_user"))
            let function = unsafeBitCast(call, to: (@convention(c) (Int32) -> Int32).self)
            let calls = AttachTests.Counter()
            let group = try ImportTable.attach(symbol: "unloadable_triple", in: .object(user)) { _ in
                calls.add()
            }
            #expect(function(4) == 13)
            #expect(calls.count == 1)
            group.remove()
            #expect(function(5) == 16)
            #expect(calls.count == 1)
            #expect(dlclose(handle) == 0)
            #expect(
                isUnloadedSoon(definer),
                "the definition is still loaded after the dlclose of the only object that needs it")
        }

        /// Runs `body` with the path of a copy of a fixture library that another thread loads
        /// and unloads meanwhile (pausing `pause` microseconds between loads); returns how many
        /// times it was loaded, and expects it unloaded at the end.
        static func whileAnotherThreadLoadsAndUnloads(
            named name: String, pause: UInt32, _ body: (String) throws -> Void
        ) throws -> Int {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ffihook-\(name)-\(getpid())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let copy = directory.appendingPathComponent("lib\(name).so").path
            try FileManager.default.copyItem(atPath: ImportFixtures.path("libLazyImportFixture.so"), toPath: copy)
            let done = Atomic<Bool>(false)
            let loads = Counter()
            let loader = Thread {
                while !done.load(ordering: .acquiring) {
                    if let handle = dlopen(copy, RTLD_LAZY | RTLD_LOCAL) {
                        loads.increment()
                        dlclose(handle)
                    }
                    if pause > 0 { usleep(pause) }
                }
            }
            loader.start()
            defer {
                done.store(true, ordering: .releasing)
                while !loader.isFinished { usleep(1000) }
                // Unloaded at the end (a walk under AddressSanitizer on a busy machine was seen to
                // hold it over a second).
                #expect(isUnloadedSoon(copy))
            }
            try body(copy)
            return loads.count
        }

        /// Listing while another thread loads and unloads an object that imports the symbol:
        /// each list holds the object's entry or not, whole, and nothing faults.
        @Test func listingWhileAnotherThreadLoadsAndUnloads() throws {
            // The loader's lock is not fair: the loads pause to leave the lister a moment to take it.
            // (Under ThreadSanitizer, whose dlopen and dlclose take hundreds of times longer, a
            // tenth of the lists: a minute of the serialized fixture suites otherwise.)
            let lists = ProcessLifeTests.underThreadSanitizer ? 10 : 100
            let loads = try Self.whileAnotherThreadLoadsAndUnloads(named: "LazyChurnCopy", pause: 100) { copy in
                for _ in 0..<lists {
                    let copies = try ImportTable.bindings(of: "atol").filter { $0.entry.objectPath == copy }
                    #expect(copies.count <= 1)
                    for binding in copies {
                        #expect(binding.entry.kind == .jumpSlot)
                        #expect(binding.entry.version == "GLIBC_2.2.5")
                    }
                }
            }
            #expect(loads > 0)
        }

        /// Looking up the object that holds an address while another thread loads and unloads a
        /// library: the lookup reads an object's program headers (in its own memory) only once it
        /// is pinned. An address no object holds is compared with every object, the churned one
        /// included; reading the headers of one unloaded after the list was taken crashed (seen
        /// under ThreadSanitizer, where the inline planner looks up every branch target).
        @Test func lookingUpAnAddressWhileAnotherThreadLoadsAndUnloads() throws {
            let nowhere = UInt(bitPattern: malloc(16))
            defer { free(UnsafeMutableRawPointer(bitPattern: nowhere)) }
            // A function no sanitizer intercepts, and the file the kernel maps it from.
            let function = UInt(bitPattern: try #require(dlsym(nil, "gnu_get_libc_version")))
            let file = try #require(Self.fileName(ofObjectAt: function))
            var found = 0
            var paths: Set<String> = []
            // (A tenth under ThreadSanitizer, as above.)
            let lookups = ProcessLifeTests.underThreadSanitizer ? 300 : 3_000
            let loads = try Self.whileAnotherThreadLoadsAndUnloads(named: "LookupChurnCopy", pause: 0) { _ in
                for _ in 0..<lookups {
                    #expect(ImportWalk.withLoadedObject(containing: nowhere) { $0 == nil })
                    if let path = ImportWalk.withLoadedObject(containing: function, { $0?.path }) {
                        paths.insert(path)
                        found += 1
                    }
                }
            }
            #expect(paths.map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().lastPathComponent } == [file])
            #expect(loads > 0)
            #expect(found == lookups)
        }

        @Test func theScopeChoosesTheObjects() throws {
            _ = try ImportFixtures.open(Self.fullRELRO)
            let all = try ImportTable.bindings(of: "open")
            #expect(all.contains { $0.entry.objectName == Self.fullRELRO })
            #expect(all.contains { $0.entry.objectName == Self.overlay })
            #expect(try ImportTable.bindings(of: "open", in: .allIncludingLaterLoads).count == all.count)
            let overlay = try ImportTable.bindings(of: "open", in: .object(Self.overlay))
            #expect(!overlay.isEmpty)
            #expect(
                overlay.allSatisfy { $0.entry.objectName == Self.overlay && $0.entry.scope == .object(Self.overlay) })
            let main = try ImportTable.bindings(of: "getpid", in: .mainProgram)
            #expect(!main.isEmpty)
            #expect(main.allSatisfy { $0.entry.isInMainProgram && $0.entry.scope == .mainProgram })
            #expect(try ImportTable.bindings(of: "cimport_nothing_imports_this").isEmpty)
            let unknown = #expect(throws: HookError.self) {
                try ImportTable.bindings(of: "open", in: .object("libNoSuchObject.so"))
            }
            #expect(unknown?.code == .objectNotFound)
            #expect(unknown?.symbol == "open")
            // A query hooks nothing, and its error says what it could not do.
            #expect(unknown?.description.hasPrefix(#"cannot list the import entries of "open": "#) == true)
        }

        /// Swift code calls `open` through the Glibc overlay's wrapper (C's `open` is
        /// variadic, which Swift cannot call): its import entry is the overlay's, and a hook
        /// there sees the call. Here as fault injection: one path fails with -1.
        @Test func swiftsOpenIsCalledFromTheGlibcOverlay() throws {
            let denied = "/ffihook-denied-\(getpid())"
            let attempts = Counter()
            let group = try ImportTable.instead(
                symbol: "open", in: .object(Self.overlay), signature: Signature(variadic: "i*iI", fixedArgumentCount: 2)
            ) { call in
                if String(cString: call.argument(0, as: UnsafePointer<CChar>.self)) == denied {
                    attempts.increment()
                    call.setReturnValue(-1 as Int32)
                } else {
                    call.callOriginal()
                }
            }
            defer { group.remove() }
            #expect(open(denied, O_RDONLY) == -1)
            #expect(attempts.count == 1)
            let descriptor = open("/dev/null", O_RDONLY)
            #expect(descriptor >= 0)
            close(descriptor)
            #expect(attempts.count == 1)
        }

        /// C functions that Swift code calls through the Glibc overlay: each with its
        /// signature (the shape with one variadic argument) and a Swift call of it.
        static let overlayCalls: [(symbol: String, signature: Signature, call: @Sendable () -> Bool)] = [
            (
                "fcntl", try! Signature(variadic: "iiiq", fixedArgumentCount: 2),
                {
                    let descriptor = open("/dev/null", O_RDONLY)
                    defer { close(descriptor) }
                    return fcntl(descriptor, F_GETFD) >= 0
                }
            ),
            (
                "openat", try! Signature(variadic: "ii*iI", fixedArgumentCount: 3),
                {
                    let descriptor = openat(AT_FDCWD, "/dev/null", O_RDONLY)
                    defer { close(descriptor) }
                    return descriptor >= 0
                }
            ),
        ]

        /// The issue's case, with the overlay's functions that the test program does not import
        /// itself (its C support code imports `open`; a sanitizer's runtime in the executable
        /// imports or defines others): hooking one in the main program is refused with an error
        /// that names the overlay and its scope, and the scope named catches Swift's call.
        @Test func theErrorNamesTheObjectsThatImportTheSymbol() throws {
            let candidates = try Self.overlayCalls.filter {
                try ImportTable.bindings(of: $0.symbol, in: .mainProgram).isEmpty
            }
            try #require(
                !candidates.isEmpty, "the main program imports every one of \(Self.overlayCalls.map(\.symbol))")
            let thread = UInt(pthread_self())
            for (symbol, signature, swiftCall) in candidates {
                let error = #expect(throws: HookError.self) {
                    try ImportTable.instead(symbol: symbol, in: .mainProgram, signature: signature) { _ in }
                }
                #expect(error?.code == .symbolNotImported)
                #expect(error?.symbol == symbol)
                let message = try #require(error?.message)
                #expect(
                    message.hasPrefix(
                        #"the main program does not import "\#(symbol)" (it has no JUMP_SLOT or GLOB_DAT entry for it); it is imported by libswiftGlibc.so (a Swift overlay, through which Swift code calls it)"#
                    ), "\(message)")
                #expect(
                    message.contains(#"hook it in .object("libswiftGlibc.so") for Swift code's calls, or in .all"#),
                    "\(message)")
                #expect(
                    error?.description.hasPrefix(#"cannot hook "\#(symbol)" with signature "\#(signature.encoding)""#)
                        == true)

                let calls = Counter()
                let group = try ImportTable.after(symbol: symbol, in: .object(Self.overlay), signature: signature) {
                    _ in
                    if UInt(pthread_self()) == thread { calls.increment() }
                }
                #expect(swiftCall(), "\(symbol)")
                group.remove()
                #expect(calls.count == 1, "\(symbol)")
            }
        }

        @Test func aSymbolNoObjectImportsSaysWhereItsCallsMayBe() throws {
            for scope in [ImportScope.all, .mainProgram, .object("libswiftCore.so")] {
                let error = #expect(throws: HookError.self) {
                    try ImportTable.hook(
                        symbol: "cimport_nothing_imports_this", in: scope, signature: Signature("v"), position: .after
                    ) { _ in }
                }
                #expect(error?.code == .symbolNotImported)
                #expect(error?.symbol == "cimport_nothing_imports_this")
                let message = error?.message ?? ""
                #expect(message.contains("inside the object that defines it, or through pointers (from dlsym"))
                #expect(message.contains("no loaded object imports"), "\(message)")
            }
        }

        /// The message names a few importing objects, Swift's overlays first, then counts the
        /// rest, and suggests the scope that catches them.
        @Test func theMessageListsAFewObjectsAndCountsTheRest() {
            let many = HookError(
                slot: nil, signature: nil,
                problem: .symbolNotImported(
                    "open", scope: .object("libz.so.1"),
                    importers: ["libc.so.6", "libA.so", "libB.so", "libswiftGlibc.so", "libC.so", "libD.so"]))
            #expect(
                many.message
                    == #"no object matching "libz.so.1" imports "open" (it has no JUMP_SLOT or GLOB_DAT entry for it); "#
                    + "it is imported by libswiftGlibc.so (a Swift overlay, through which Swift code calls it), "
                    + "libc.so.6, libA.so, libB.so and 2 more: "
                    + #"hook it in .object("libswiftGlibc.so") for Swift code's calls, or in .all for every object's"#)
            let one = HookError(
                slot: nil, signature: nil,
                problem: .symbolNotImported("inflate", scope: .mainProgram, importers: ["libpng16.so.16"]))
            #expect(
                one.message
                    == #"the main program does not import "inflate" (it has no JUMP_SLOT or GLOB_DAT entry for it); "#
                    + #"it is imported by libpng16.so.16: hook it in .object("libpng16.so.16")"#)
            let two = HookError(
                slot: nil, signature: nil,
                problem: .symbolNotImported("inflate", scope: .mainProgram, importers: ["libA.so", "libB.so"]))
            #expect(
                two.message.hasSuffix(
                    "it is imported by libA.so and libB.so: hook it in .all, or in .object(_:) with one of them"))
            #expect(one.symbol == "inflate")
            // The main program is named as such, and caught by .mainProgram, not by its file name.
            let main = HookError(
                slot: nil, signature: nil,
                problem: .symbolNotImported(
                    "inflate", scope: .object("libz.so.1"), importers: [HookError.mainProgramImporter]))
            #expect(main.message.hasSuffix("it is imported by the main program: hook it in .mainProgram"))
            let mainAndOne = HookError(
                slot: nil, signature: nil,
                problem: .symbolNotImported(
                    "inflate", scope: .object("libz.so.1"), importers: [HookError.mainProgramImporter, "libA.so"]))
            #expect(
                mainAndOne.message.hasSuffix(
                    "it is imported by the main program and libA.so: hook it in .all, or in .mainProgram or .object(_:) with one of them"
                ))
        }
    }
}
