import CFFIHookSupport
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

extension InlineSuites {
    /// Batches: many functions planned at once, hooked with one group token, every patch
    /// written in one stop of the threads and taken out in one.
    @Suite struct InlineBatchTests {
        /// The first bytes of every function of `batch`.
        static func bytes(of batch: InlineBatch) -> [[UInt8]] {
            batch.functions.map { codeBytes($0.address, 16) }
        }

        @Test func everyZlibExportIsPlannedAndOneStopPatchesAndOneUnpatchesThemAll() throws {
            let input = zlibInput()
            let expected = try zlibRoundTrip(input)
            let zlib = try InlineBatch(library: "libz.so.1")
            #expect(zlib.refusals.isEmpty, "\(zlib.refusals)")
            #expect(zlib.functions.count >= 80)
            #expect(zlib.functions.contains { $0.name == "crc32" })
            let original = Self.bytes(of: zlib)
            let stops = PatchWriter.stopCount
            let refused = try zlib.patch()
            #expect(refused.isEmpty)
            #expect(PatchWriter.stopCount == stops + 1)
            #expect(zlib.functions.allSatisfy { $0.isPatched })
            #expect(zip(zlib.functions, original).allSatisfy { codeBytes($0.address, 16) != $1 })
            #expect(try zlibRoundTrip(input) == expected)
            try zlib.unpatch()
            #expect(PatchWriter.stopCount == stops + 2)
            #expect(!zlib.functions.contains { $0.isPatched })
            #expect(Self.bytes(of: zlib) == original)
        }

        /// An IFUNC whose resolver chooses another object's code (libc's `gettimeofday` and
        /// `time` choose the vDSO's, where the kernel provides one) is refused as an indirect
        /// function whose code is elsewhere, naming that object, not as a function of an
        /// unloaded object.
        @Test func anIFUNCThatChoosesAnotherObjectsCodeIsRefusedAsSuch() throws {
            let libc = try #require(dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD))
            defer { dlclose(libc) }
            let batch = try InlineBatch(library: "libc.so.6") { $0 == "gettimeofday" || $0 == "time" }
            /// The load bias of the object that holds `address`.
            func bias(of address: UnsafeMutableRawPointer) -> UInt {
                var bias: UInt = 0
                var dynamic: UInt = 0
                #expect(ffh_elf_object_at(UInt(bitPattern: address), &bias, &dynamic) != 0)
                return bias
            }
            let libcBias = bias(of: try #require(dlsym(libc, "malloc")))
            for name in ["gettimeofday", "time"] {
                if bias(of: try #require(dlsym(libc, name))) == libcBias {
                    // This libc chose code of its own: planned like any other.
                    #expect(batch.functions.contains { $0.name == name }, "\(batch.refusals)")
                    continue
                }
                let refusal = try #require(batch.refusals.first { $0.name == name }, "\(batch.functions)")
                #expect(refusal.reason == .indirectFunction, "\(refusal)")
                #expect(refusal.error.message.contains("IFUNC"), "\(refusal.error.message)")
                #expect(refusal.error.message.contains("vdso"), "\(refusal.error.message)")
                #expect(!refusal.error.message.contains("unloaded"), "\(refusal.error.message)")
            }
        }

        /// A batch that chooses its functions by name plans those alone, a function with
        /// several names when one of them is chosen (libc's memcmp is also bcmp), and the same
        /// plans as a whole-library batch for them.
        @Test func aBatchChoosingByNamePlansOnlyThoseFunctions() throws {
            let zlib = try InlineBatch(library: "libz.so.1") { $0 == "crc32" || $0 == "adler32" }
            #expect(zlib.functions.map(\.name).sorted() == ["adler32", "crc32"])
            #expect(zlib.refusals.isEmpty)
            let whole = try InlineBatch(library: "libz.so.1")
            #expect(zlib.functions.allSatisfy { chosen in whole.functions.contains { $0.address == chosen.address } })
            let libc = try #require(dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD))
            defer { dlclose(libc) }
            let memcmp = try #require(dlsym(libc, "memcmp"))
            let compare = try InlineBatch(library: "libc.so.6") { $0 == "memcmp" }
            #expect(compare.functions.count + compare.refusals.count == 1)
            #expect(compare.functions.allSatisfy { $0.address == UnsafeRawPointer(memcmp) })
            let none = try InlineBatch(library: "libz.so.1") { _ in false }
            #expect(none.functions.isEmpty && none.refusals.isEmpty)
        }

        /// A function chosen by any one of its names is named as the whole library's batch
        /// names it (its plainest name, ``BatchTargets/AliasRank``), the names not chosen
        /// counted too: `memcmp` and `bcmp` choose one function, `__libc_malloc` malloc, an
        /// IFUNC's name its implementation (memcpy's two versions, two).
        @Test func aFunctionChosenByAnAliasIsNamedAsTheWholeLibraryNamesIt() throws {
            let whole = try InlineBatch(library: "libc.so.6")
            let names = Dictionary(whole.functions.map { (UInt(bitPattern: $0.address), $0.name) }) { first, _ in first
            }
            var planned: [String: [String]] = [:]
            for name in ["bcmp", "memcmp", "index", "strchr", "__libc_malloc", "malloc", "memmove", "memcpy", "strlen"]
            {
                let chosen = try InlineBatch(library: "libc.so.6") { $0 == name }
                #expect(!chosen.functions.isEmpty || !chosen.refusals.isEmpty, "\(name)")
                planned[name] = chosen.functions.map(\.name)
                for function in chosen.functions {
                    #expect(names[UInt(bitPattern: function.address)] == function.name, "\(name)")
                }
            }
            #expect(planned["bcmp"] == planned["memcmp"] && planned["bcmp"]?.count == 1)
            #expect(planned["__libc_malloc"] == ["malloc"] && planned["malloc"] == ["malloc"])
            #expect(planned["index"] == planned["strchr"] && planned["index"]?.count == 1)
        }

        @Test func anAttachOnEveryFunctionCountsEachOneAndOneStopRemovesThem() throws {
            let input = zlibInput()
            let expected = try zlibRoundTrip(input)
            let zlib = try InlineBatch(library: "libz.so.1")
            let original = Self.bytes(of: zlib)
            let counts = Dictionary(uniqueKeysWithValues: zlib.functions.map { ($0.name, Count()) })
            let left = Count()
            let stops = PatchWriter.stopCount
            let group = try Hook.attach(on: zlib) { function in
                let count = counts[function.name]!
                return ({ _ in count.add() }, { _ in left.add() })
            }
            #expect(PatchWriter.stopCount == stops + 1)
            #expect(group.tokens.count == zlib.functions.count)
            #expect(group.refusals.isEmpty)
            let outcome = try zlibRoundTrip(input)
            #expect(outcome == expected)
            // The round trip's own calls, and zlib's calls of its own exports inside them.
            #expect(counts["deflate"]!.current > 0)
            #expect(counts["inflate"]!.current > 0)
            #expect(counts["crc32"]!.current > 0)
            #expect(counts["deflateInit_"]!.current == 1 || counts["deflateInit2_"]!.current >= 1)
            let entered = counts.values.reduce(0) { $0 + $1.current }
            #expect(left.current == entered)
            #expect(group.remove())
            #expect(PatchWriter.stopCount == stops + 2)
            #expect(Self.bytes(of: zlib) == original)
            let after = entered
            _ = try zlibRoundTrip(input)
            #expect(counts.values.reduce(0) { $0 + $1.current } == after)
        }

        @Test func signatureHooksOnAListOfSymbolsLearnTheirFunction() throws {
            let batch = try InlineBatch(
                symbols: ["crc32", "adler32", "no_such_function_here", "crc32\0adler32"], in: "libz.so.1")
            #expect(batch.functions.map(\.name).sorted() == ["adler32", "crc32"])
            #expect(batch.refusals.map(\.reason) == [.symbolNotFound, .symbolNotFound])
            #expect(Set(batch.refusals.map(\.name)) == ["no_such_function_here", "crc32\0adler32"])
            let seen = Mutex<[String: Int]>([:])
            let group = try Hook.after(on: batch, signature: Signature("QQ^CI")) { call, function in
                let length = Int(call.argument(2, as: UInt32.self))
                seen.withLock { $0[function.name, default: 0] += length }
            }
            let data: [UInt8] = Array("hello, batch".utf8)
            let crc = data.withUnsafeBufferPointer { crc32(0, $0.baseAddress, UInt32($0.count)) }
            let adler = data.withUnsafeBufferPointer { adler32(1, $0.baseAddress, UInt32($0.count)) }
            // (What Python's zlib.crc32 and zlib.adler32 give for these bytes: the hooks pass the
            // calls through unchanged.)
            #expect(crc == 0x3dd7_31ad)
            #expect(adler == 0x1cab_0463)
            #expect(seen.withLock { $0 } == ["crc32": data.count, "adler32": data.count])
            group.remove()
            #expect(!batch.functions.contains { $0.isPatched })
        }

        @Test func refusalsNameEachFunctionAndWhyAndAllOrNothingThrowsTheFirst() throws {
            let plain = address(of: ct_inline_plain)
            let inside = plain + 1
            var data: Int64 = 0
            let notCode = withUnsafeMutablePointer(to: &data) { UnsafeRawPointer($0) }
            let batch = try InlineBatch(addresses: [plain, inside, notCode])
            #expect(batch.functions.map(\.address) == [plain])
            let reasons = Dictionary(uniqueKeysWithValues: batch.refusals.map { ($0.address!, $0.reason) })
            #expect(reasons[notCode] == .notCode)
            #expect(reasons[inside] == .notAFunctionStart)
            #expect(throws: HookError.self) {
                try InlineBatch(addresses: [plain, notCode], options: .allOrNothing)
            }
            #expect(throws: HookError.self) { try InlineBatch(library: "libno-such-library.so.7") }
        }

        /// The library's own functions, and the trampolines in its slabs, are refused: a hook on
        /// one would run inside every hooked call before the call could be told apart.
        /// Options no function of the batch accepts throw, as for one function, rather than give
        /// an empty group; and no patch stays.
        @Test func anInstallEveryFunctionRefusesForOneReasonThrowsIt() throws {
            let batch = try InlineBatch(addresses: [address(of: ct_inline_rip), address(of: ct_inline_call)])
            let error = try #require(throws: HookError.self) {
                try Hook.attach(on: batch, options: .onInstallingThreadOnly, onEnter: { _ in })
            }
            #expect(error.code == .unsupportedCallerLimit)
            #expect(batch.functions.allSatisfy { !$0.isPatched })
            // So does an empty batch, as one function would.
            #expect(throws: HookError.self) {
                try Hook.attach(on: InlineBatch([]), options: .inCurrentTaskOnly, onEnter: { _ in })
            }
            // A batch with nothing to hook gives an empty group.
            let empty = try Hook.attach(on: batch) { _ in (nil, nil) }
            #expect(empty.tokens.isEmpty && empty.refusals.isEmpty)
        }

        /// A group removed by several threads at once is removed once: one call returns true.
        @Test func aGroupRemovedByManyThreadsAtOnceSaysSoOnce() throws {
            let batch = try InlineBatch(addresses: [
                address(of: ct_inline_rip), address(of: ct_inline_call), address(of: ct_inline_jmp8),
                address(of: ct_inline_jcc8),
            ])
            for _ in 0..<20 {
                let group = try Hook.attach(on: batch, onEnter: { _ in })
                #expect(group.tokens.count == 4)
                let removals = Atomic<Int>(0)
                DispatchQueue.concurrentPerform(iterations: 4) { _ in
                    if group.remove() { removals.add(1, ordering: .relaxed) }
                }
                #expect(removals.load(ordering: .relaxed) == 1)
                #expect(!group.isActive && batch.functions.allSatisfy { !$0.isPatched })
            }
        }

        @Test func theLibrarysOwnCodeIsRefused() throws {
            let available = unsafeBitCast(
                ffh_attach_available as @convention(c) () -> Int32, to: UnsafeRawPointer.self)
            let release = unsafeBitCast(ffh_release_free_memory as @convention(c) () -> Void, to: UnsafeRawPointer.self)
            let plain = try InlineFunction(address: address(of: ct_inline_plain))
            let batch = try InlineBatch(addresses: [available, release, plain.original])
            #expect(batch.functions.isEmpty)
            #expect(batch.refusals.map(\.reason) == [.libraryCode, .libraryCode, .libraryCode])
            #expect(batch.refusals.first { $0.address == available }?.name == "ffh_attach_available")
            let error = try #require(throws: HookError.self) { try InlineFunction(address: available) }
            #expect(error.message.contains("library's own code"))
            #expect(throws: HookError.self) { try InlineFunction(address: plain.original) }
            // The code the engine makes for hooks and attaches on slots.
            let slot = UnsafeMutablePointer<@convention(c) (Int64, Int64) -> Int64>.allocate(capacity: 1)
            defer { slot.deallocate() }
            slot.initialize(to: ct_inline_plain)
            // (An attach goes in under a hook: the stub first.)
            let attach = try Hook.attach(on: FunctionSlot(slot), onEnter: { _ in })
            let stub = unsafeBitCast(slot.pointee, to: UnsafeRawPointer.self)
            let hook = try Hook.before(on: FunctionSlot(slot), signature: Signature("qqq")) { _ in }
            let closure = unsafeBitCast(slot.pointee, to: UnsafeRawPointer.self)
            #expect(stub != closure)
            let engine = try InlineBatch(addresses: [closure, stub])
            #expect(engine.refusals.map(\.reason) == [.libraryCode, .libraryCode])
            hook.remove()
            attach.remove()
        }

        /// The library's Swift code goes by its mangled names: its modules' functions, and the
        /// specializations, thunks and witnesses made for its types and its C types; other
        /// modules' names that only look alike are not its own.
        @Test func theLibrarysSwiftCodeIsKnownByItsMangledNames() {
            let own = [
                "$s7FFIHook4HookO6attach2on7options7onEnter0F5LeaveAA0B5TokenCAA12FunctionSlotV_AA0B7OptionsVyAA0D7ContextVcSgyAA05LeaveN0VcSgtKFZ",
                "$sSay7FFIHook11AttachStubsV4StubVGIgo_AFIegr_TR",
                "$ss4Int8V7FFIHook10CEncodableAAsACP8encodingSSvgZTW",
                "$sSo10ffh_attachVMa",
                "$s13FFIHookInline11BranchSweepV5sweepyyF",
                "ffh_attach_enter",
            ]
            let others = [
                "$s12FFIHookTests0A5SuiteV4testyyF", "$s17FFIHookExtensionsV1fyyF", "$sSS5countSivg", "malloc",
            ]
            for name in own { #expect(LibraryCode.reason(name: name) != nil, "\(name)") }
            for name in others { #expect(LibraryCode.reason(name: name) == nil, "\(name)") }
        }

        /// The parts gcc and LLVM split off a function are named by `cold` after a dot, last or
        /// followed by more; names that only hold the word, or start with it, are functions.
        @Test func thePartsSplitOffAFunctionAreKnownByTheirNames() {
            for name in ["f.cold", "f.cold.1", "f.part.0.cold", "main.cold.17", "f..cold", "f.cold."] {
                #expect(BatchTargets.isSplitOffPart(name), "\(name)")
            }
            for name in ["cold", "cold.f", "f", "f.coldest", "f.colder.1", "f_cold", "f.isra.0", "", "."] {
                #expect(!BatchTargets.isSplitOffPart(name), "\(name)")
            }
        }

        /// A library of `functions` functions `NAME_k(value)` (returning `value * (k + 2) + k`),
        /// compiled into a directory of its own; the directory and the library's file.
        static func library(named name: String, functions: Int) throws -> (directory: URL, library: URL) {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("inline-\(name)-\(getpid())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let source = directory.appendingPathComponent("\(name).c")
            let library = directory.appendingPathComponent("libinline\(name).so")
            let code = (0..<functions).map { "long \(name)_\($0)(long value) { return value * \($0 + 2) + \($0); }" }
            try code.joined(separator: "\n").write(to: source, atomically: true, encoding: .utf8)
            try #require(system("cc -O1 -shared -fPIC -o '\(library.path)' '\(source.path)'") == 0)
            return (directory, library)
        }

        /// Functions listed while their library was loaded and planned after it was unloaded
        /// (another thread's `dlclose` between the two) are refused as not in code, their object
        /// gone, without their addresses being read: those hold nothing then (a read faults),
        /// or the code of a library loaded there since, which must not be planned as theirs.
        @Test func functionsOfALibraryUnloadedAfterTheyWereListedAreRefusedUnread() throws {
            let (directory, library) = try Self.library(named: "listed", functions: 6)
            defer { try? FileManager.default.removeItem(at: directory) }
            // (Of the same layout: loaded where the first one was, its key is the first one's.)
            let (otherDirectory, other) = try Self.library(named: "after", functions: 6)
            defer { try? FileManager.default.removeItem(at: otherDirectory) }
            let handle = try #require(dlopen(library.path, RTLD_NOW | RTLD_LOCAL))
            let found = try BatchTargets.exports(of: library.path, locals: false)
            #expect(found.targets.count == 6)
            #expect(dlclose(handle) == 0)
            try #require(isUnloadedSoon(library.path))
            // Another library loaded meanwhile, often where the first one was.
            let second = try #require(dlopen(other.path, RTLD_NOW | RTLD_LOCAL))
            defer { dlclose(second) }
            let (results, _) = InlinePlanner.plan(found.targets)
            #expect(results.count == 6)
            for result in results {
                switch result {
                case .success(let plan):
                    Issue.record("planned: plan \(plan.index) of its slab")
                case .failure(let refusal):
                    #expect(refusal.reason == .notCode)
                    #expect(refusal.error.message.contains("its object was unloaded"), "\(refusal.error.message)")
                }
            }
        }

        /// A library's slab goes with the library: the next batch planned after `dlclose` forgets
        /// its plans, and its memory is unmapped once no hooked call can be inside it.
        @Test func anUnloadedLibrarysSlabIsUnmapped() throws {
            let (directory, library) = try Self.library(named: "slab", functions: 20)
            defer { try? FileManager.default.removeItem(at: directory) }
            let handle = try #require(dlopen(library.path, RTLD_NOW | RTLD_LOCAL))
            var base: UInt = 0
            var slab: CodeSlab?
            do {
                let batch = try InlineBatch(library: library.path)
                #expect(batch.functions.count == 20 && batch.refusals.isEmpty)
                try batch.patch()
                slab = try #require(batch.functions.first?.plan.slab)
                #expect(batch.functions.allSatisfy { $0.plan.slab === slab })
                base = slab!.base
                let three = unsafeBitCast(
                    try #require(dlsym(handle, "slab_3")), to: (@convention(c) (Int) -> Int).self)
                #expect(three(10) == 53)
                try batch.unpatch()
            }
            #expect(ffh_is_mapped(UnsafeRawPointer(bitPattern: base)) != 0)
            #expect(dlclose(handle) == 0)
            // The next batch notices the library is gone.
            _ = try InlineBatch(symbols: ["crc32"], in: "libz.so.1")
            try Hook.waitForReclamation()
            #expect(slab?.wasUnmapped == true)
        }

        /// A function's code holds what it was planned for (its patch while patched) until its
        /// library is unloaded; a copy loaded again (at the same address or not) is not it.
        @Test func aFunctionOfAnUnloadedLibraryNoLongerHoldsItsCode() throws {
            let (directory, library) = try Self.library(named: "held", functions: 4)
            defer { try? FileManager.default.removeItem(at: directory) }
            var handle = try #require(dlopen(library.path, RTLD_NOW | RTLD_LOCAL))
            let batch = try InlineBatch(library: library.path)
            #expect(batch.functions.count == 4)
            #expect(batch.functions.allSatisfy { $0.holdsItsCode })
            try batch.patch()
            #expect(batch.functions.allSatisfy { $0.holdsItsCode })
            try batch.unpatch()
            #expect(batch.functions.allSatisfy { $0.holdsItsCode })
            try batch.patch()
            #expect(dlclose(handle) == 0)
            try #require(isUnloadedSoon(library.path))
            #expect(!batch.functions.contains { $0.holdsItsCode })
            // Loaded again: its code is a new copy, unpatched, wherever it lies.
            handle = try #require(dlopen(library.path, RTLD_NOW | RTLD_LOCAL))
            defer { dlclose(handle) }
            #expect(!batch.functions.contains { $0.holdsItsCode })
            // Taken out: there is nothing to take out (its code is gone), and its slab goes.
            try batch.unpatch()
            #expect(!batch.functions.contains { $0.isPatched })
            let again = try InlineBatch(library: library.path)
            #expect(again.functions.allSatisfy { $0.holdsItsCode })
            let three = unsafeBitCast(try #require(dlsym(handle, "held_3")), to: (@convention(c) (Int) -> Int).self)
            #expect(three(10) == 53)
        }

        /// A slab that no batch, function, slot or hook refers to any more, with none of its
        /// functions patched, is unmapped at a later planning; one whose functions are still
        /// hooked or kept patched is not.
        @Test func aSlabNothingReferstoGoesAtTheNextPlanning() throws {
            let (directory, library) = try Self.library(named: "drop", functions: 8)
            defer { try? FileManager.default.removeItem(at: directory) }
            let handle = try #require(dlopen(library.path, RTLD_NOW | RTLD_LOCAL))
            defer { dlclose(handle) }
            let five = unsafeBitCast(try #require(dlsym(handle, "drop_5")), to: (@convention(c) (Int) -> Int).self)
            func planSomethingElse() throws { _ = try InlineBatch(symbols: ["crc32"], in: "libz.so.1") }

            // Hooked: the group's hooks keep the slab after the batch is gone.
            let count = Count()
            var slab: CodeSlab?
            var group: HookGroupToken? = try {
                let batch = try InlineBatch(library: library.path)
                slab = batch.functions.first?.plan.slab
                return try Hook.attach(on: batch) { _ in ({ _ in count.add() }, nil) }
            }()
            let hooked = try #require(slab)
            try planSomethingElse()
            try Hook.waitForReclamation()
            #expect(!hooked.wasUnmapped)
            #expect(five(10) == 75 && count.current == 1)
            group?.remove()
            group = nil
            try Hook.waitForReclamation()
            try planSomethingElse()
            try Hook.waitForReclamation()
            #expect(hooked.wasUnmapped)
            #expect(five(10) == 75 && count.current == 1)

            // Kept patched: the slab stays, and the function keeps working.
            let pinned = try {
                let batch = try InlineBatch(library: library.path)
                try batch.patch()
                return try #require(batch.functions.first?.plan.slab)
            }()
            #expect(pinned !== hooked)
            try planSomethingElse()
            try Hook.waitForReclamation()
            #expect(!pinned.wasUnmapped)
            #expect(five(10) == 75)
            let again = try InlineBatch(library: library.path)
            #expect(again.functions.allSatisfy { $0.isPatched && $0.isKeptPatched })
            try again.unpatch()
        }

        /// A function exported under several names is named by the one a program calls: glibc
        /// exports malloc also as `__libc_malloc`, fopen as `_IO_fopen` and the weak `fopen64`,
        /// getpid as the global `__getpid` beside the weak `getpid`.
        @Test func aFunctionWithAliasesIsNamedByItsPlainestName() throws {
            let libc = try InlineBatch(library: "libc.so.6")
            let names = Dictionary(libc.functions.map { (UInt(bitPattern: $0.address), $0.name) }) { first, _ in first }
            // libc's own definitions: under a sanitizer the process's first malloc is its own.
            let handle = try #require(dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD))
            defer { dlclose(handle) }
            for name in ["malloc", "fopen", "getpid", "free", "open", "fallocate", "ffsl"] {
                let address = try #require(dlsym(handle, name))
                // (A function that starts with `endbr64` is patched after it.)
                #expect((names[UInt(bitPattern: address)] ?? names[UInt(bitPattern: address) + 4]) == name)
                // A batch of addresses names them the same way.
                let alone = try InlineBatch(addresses: [UnsafeRawPointer(address)])
                #expect(alone.functions.map(\.name) == [name])
                #expect(try InlineFunction(address: UnsafeRawPointer(address)).name == name)
            }
        }

        /// A batch's sweep of its library's code runs on a thread of its own beside the planning
        /// of its functions; that thread's calls of hooked functions are the library's own work,
        /// to the thread's end (the C library frees its buffers as it ends), so a program's
        /// attach on the allocator sees none of them (a block that waited for a lock the planning
        /// thread holds would stop the batch). In a child: the attach is on the whole process's
        /// `malloc` and `free`. (Not `free` under ThreadSanitizer, whose own end of a thread
        /// faults on a hooked `free`, any thread's; not under AddressSanitizer, whose start of a
        /// thread calls its `malloc` before the thread runs any of the library's code.)
        @Test(
            .disabled(
                if: InlineProcessTests.underAddressSanitizer,
                "AddressSanitizer's start of a thread calls its malloc before the thread's own code"))
        func theSweepsThreadCallsHookedFunctionsAsTheLibrary() async {
            await #expect(processExitsWith: .success) { try InlineBatchTests.planWithTheAllocatorAttached() }
        }

        static func planWithTheAllocatorAttached() throws {
            let planner = UInt(pthread_self())
            let elsewhere = Count()
            let mine = Count()
            // Held by the planning thread while it plans; a block on another thread waits for it.
            let held = Mutex<Void>(())
            var tokens: [HookToken] = []
            var names = ["malloc"]
            if !InlineProcessTests.underThreadSanitizer { names.append("free") }
            for name in names {
                let function = try InlineFunction(symbol: name)
                tokens.append(
                    try Hook.attach(on: function.slot) { _ in
                        if UInt(pthread_self()) == planner {
                            mine.add()
                        } else {
                            elsewhere.add()
                            // (Tried only: a wait here would stop the batch for ever.)
                            _ = held.withLockIfAvailable { _ in }
                        }
                    })
            }
            // Calls of its own go through the attach: the count is live.
            free(Glibc.malloc(24))
            #expect(mine.current >= 1)
            let libc = try held.withLock { _ in try InlineBatch(library: "libc.so.6") }
            for token in tokens { token.remove() }
            #expect(libc.functions.count > 1000)
            #expect(elsewhere.current == 0)
        }

        /// When no thread can be made for a batch's sweep, the planning thread makes the sweep
        /// itself, with the same result: in two children, one whose threads cannot start (a
        /// seccomp filter refuses `clone`, as a sandbox may), the C
        /// library's batch plans the same functions and refuses the same ones for the same
        /// reasons (those a branch from elsewhere lands in among them, which only the sweep
        /// finds).
        @Test func aBatchWhoseSweepGetsNoThreadPlansTheSame() async throws {
            let results = [
                await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                    try InlineBatchTests.planLibcPrinting(threads: true)
                },
                await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                    try InlineBatchTests.planLibcPrinting(threads: false)
                },
            ]
            let outputs = results.map { result in
                String(decoding: result?.standardOutputContent ?? [], as: UTF8.self).split(separator: "\n")
                    .filter { $0.hasPrefix("plan ") }
            }
            #expect(outputs[0].count > 1000)
            #expect(outputs[0].contains { $0.contains("branchIntoPatch") })
            #expect(outputs[0] == outputs[1])
        }

        /// The child's work: with `threads` false, a new thread cannot start
        /// (``ct_threads_cannot_start()``). A helper's work then runs on
        /// the thread that waits for it; else on another. Prints the C library's batch, a line
        /// for each function planned and each refused.
        static func planLibcPrinting(threads: Bool) throws {
            if !threads { #expect(ct_threads_cannot_start() == 0) }
            let caller = at_gettid()
            let ranOn = Atomic<Int32>(0)
            let helper = HelperThread { ranOn.store(at_gettid(), ordering: .relaxed) }
            helper.wait()
            #expect((ranOn.load(ordering: .relaxed) == caller) == !threads)
            let libc = try InlineBatch(library: "libc.so.6")
            var lines = libc.functions.map { "plan \($0.name)" }
            lines += libc.refusals.map { "plan refused \($0.name) \($0.reason)" }
            print(lines.sorted().joined(separator: "\n"))
            fflush(nil)
        }

        /// A function the batch of its library refuses for a branch from elsewhere in the library
        /// into its first bytes (glibc's memmove, which mempcpy jumps three bytes into) is refused
        /// when planned alone too, before and after the batch, and so is its alias.
        @Test func aFunctionPlannedAloneIsCheckedForBranchesFromItsNeighbours() throws {
            let libc = try InlineBatch(library: "libc.so.6")
            let outside = libc.refusals.filter { $0.reason == .branchIntoPatch && $0.error.message.contains("outside") }
            // (The batch's sweep, made beside its planning, found them.)
            #expect(!outside.isEmpty, "\(libc.refusals)")
            for refusal in outside {
                let address = try #require(refusal.address)
                #expect(throws: HookError.self, "\(refusal.name)") { try InlineFunction(address: address) }
                #expect(throws: HookError.self, "\(refusal.name)") {
                    try InlineFunction(symbol: refusal.name, in: "libc.so.6")
                }
                let again = try InlineBatch(addresses: [address])
                #expect(again.functions.isEmpty && again.refusals.first?.reason == .branchIntoPatch)
            }
            // The ones accepted alone are accepted by the batch again, and the other way round.
            for function in libc.functions.prefix(50) {
                let alone = try InlineFunction(address: function.address)
                #expect(alone == function)
            }
        }

        @Test func fourThreadsCallingWhileABatchIsHookedAndUnhookedSeeExactCounts() throws {
            let batch = try InlineBatch(addresses: [address(of: ct_inline_plain), address(of: ct_inline_rip)])
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
            let entered = Count()
            let stops = PatchWriter.stopCount
            for _ in 0..<50 {
                let attached = try Hook.attach(on: batch) { _ in entered.add() }
                let group = try Hook.instead(on: batch, signature: Signature("qqq")) { call, function in
                    call.callOriginal()
                    guard function.name == "ct_inline_plain" else { return }
                    call.setReturnValue(call.returnValue(as: Int64.self) + 1000)
                    blocks.add()
                }
                group.remove()
                attached.remove()
            }
            stop.store(true, ordering: .relaxed)
            while finished.current < 4 { usleep(1000) }
            // One stop to patch the two functions and one to take them out, per cycle.
            #expect(PatchWriter.stopCount - stops == 100)
            #expect(failures.current == 0)
            #expect(blocks.current == hookedResults.current)
            #expect(!batch.functions.contains { $0.isPatched })
        }

        /// What the test's C-convention functions count: one thread's calls.
        final class ThreadCalls: @unchecked Sendable {
            let thread = Int64(at_gettid())
            let enters = Atomic<Int>(0)
            let leaves = Atomic<Int>(0)
            var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }
            static func from(_ context: UnsafeMutableRawPointer?) -> ThreadCalls {
                Unmanaged<ThreadCalls>.fromOpaque(context!).takeUnretainedValue()
            }
        }

        /// A batch attached with blocks written as C functions: the functions it gives them to
        /// run them once a call, results untouched; one given none is not attached to.
        @Test func aBatchAttachedWithFunctionsCountsEachCallOfTheFunctionsGivenThem() throws {
            let plain = (ct_inline_rip(5), ct_inline_call(5))
            let rip = address(of: ct_inline_rip)
            let batch = try InlineBatch(addresses: [rip, address(of: ct_inline_call)])
            let calls = ThreadCalls()
            let functions = AttachFunctions(
                onEnter: { context, frame in
                    let calls = ThreadCalls.from(context)
                    if Int64(EnterContext(unsafeFrame: frame!).threadID) == calls.thread {
                        calls.enters.add(1, ordering: .relaxed)
                    }
                },
                onLeave: { context, frame in
                    let calls = ThreadCalls.from(context)
                    if Int64(LeaveContext(unsafeFrame: frame!).threadID) == calls.thread {
                        calls.leaves.add(1, ordering: .relaxed)
                    }
                }, context: calls.context)
            let group = try Hook.attach(on: batch) { function in function.address == rip ? functions : nil }
            #expect(group.tokens.count == 1)
            for _ in 0..<3 {
                #expect(ct_inline_rip(5) == plain.0 && ct_inline_call(5) == plain.1)
            }
            #expect(calls.enters.load(ordering: .relaxed) == 3 && calls.leaves.load(ordering: .relaxed) == 3)
            #expect(group.remove())
            #expect(ct_inline_rip(5) == plain.0)
            #expect(calls.enters.load(ordering: .relaxed) == 3)
            #expect(!batch.functions.contains { $0.isPatched })
        }
    }
}
