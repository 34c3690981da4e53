import CFFIHookSupport
import CTestSupport
import FFIHookCore
import Foundation
import Synchronization
import TestHookLock
import Testing

@testable import FFIHook

/// The layout of the C fixture table.
let fixtureLayout = TableLayout<ct_fix_table>([
    .init("add", \.add, FixtureSignature.add),
    .init("mix", \.mix, FixtureSignature.mix),
    .init("notify", \.notify, FixtureSignature.notify),
    .init("offset", \.offset, FixtureSignature.offset),
    .init("negate", \.negate, FixtureSignature.negate),
    .init("countdown", \.countdown, FixtureSignature.countdown),
])

extension FixtureTableTests {
    /// Hooking a whole C struct of callbacks at once.
    @Suite struct TableHookTests {
        init() {
            ct_fix_reset()
        }

        @Test func everySlotOfATableWithOneToken() throws {
            let table = ct_fix_table_get()!
            let before = table.pointee
            let log = EventLog()
            let group = try Hook.install(on: table, layout: fixtureLayout, position: .after) { slot, _ in
                log.record(slot.name)
            }
            #expect(group.tokens.count == 6)
            #expect(group.skippedFields.isEmpty)
            _ = ct_fix_call_add(1, 2)
            ct_fix_call_notify(3)
            _ = ct_fix_call_mix(1, 2, 3, 4)
            _ = ct_fix_call_offset(ct_fix_point(x: 1, y: 1), 1)
            _ = ct_fix_call_negate(4)
            _ = ct_fix_call_countdown(1)
            #expect(log.all == ["add", "notify", "mix", "offset", "negate", "countdown", "countdown"])
            #expect(group.remove())
            #expect(!group.isActive)
            #expect(!group.remove())
            #expect(memcmp(table, [before], MemoryLayout<ct_fix_table>.size) == 0)
        }

        @Test func beforeInsteadAndAfterOnATable() throws {
            let table = ct_fix_table_get()!
            let log = EventLog()
            let layout = TableLayout<ct_fix_table>([.init("add", \.add, FixtureSignature.add)])
            let groups = [
                try Hook.before(on: table, layout: layout) { field, _ in log.record("before \(field.name)") },
                try Hook.instead(on: table, layout: layout) { _, call in
                    call.callOriginal()
                    call.setReturnValue(call.returnValue(as: Int32.self) * 10)
                },
                try Hook.after(on: table, layout: layout) { field, call in
                    log.record("after \(field.name) \(call.returnValue(as: Int32.self))")
                },
            ]
            #expect(ct_fix_call_add(1, 2) == 30)
            #expect(log.all == ["before add", "after add 30"])
            #expect(Set(groups).count == 3)
            #expect(groups.allSatisfy { $0.remove() })
            #expect(ct_fix_call_add(1, 2) == 3)
        }

        @Test func emptySlotsAreSkipped() throws {
            let table = ct_fix_table_get()!
            table.pointee.mix = nil
            let group = try Hook.install(on: table, layout: fixtureLayout, position: .before) { _, _ in }
            defer { group.remove() }
            #expect(group.skippedFields == ["mix"])
            #expect(table.pointee.mix == nil)
            #expect(group.tokens.count == 5)
        }

        @Test func allOrNothing() throws {
            struct Wrapper {
                var table: ct_fix_table
                var computed: ct_fix_table { table }
            }
            let table = ct_fix_table_get()!
            let before = table.pointee
            // A slot that cannot be hooked (a different signature on a slot already hooked)
            // after others that can: the ones installed first are taken out again.
            let existing = try Hook.before(on: fixtureSlot(\.negate), signature: FixtureSignature.negate) { _ in }
            defer { existing.remove() }
            let mismatched = TableLayout<ct_fix_table>([
                .init("add", \.add, FixtureSignature.add),
                .init("notify", \.notify, FixtureSignature.notify),
                .init("negate", \.negate, try Signature("ddd")),
            ])
            let error = #expect(throws: HookError.self) {
                try Hook.install(on: table, layout: mismatched, position: .before) { _, _ in }
            }
            #expect(error?.is(.signatureMismatch(installed: "cc")) == true)
            #expect(
                table.pointee.add.map { unsafeBitCast($0, to: UInt.self) }
                    == before.add.map { unsafeBitCast($0, to: UInt.self) })
            #expect(
                table.pointee.notify.map { unsafeBitCast($0, to: UInt.self) }
                    == before.notify.map { unsafeBitCast($0, to: UInt.self) })
        }
    }

    /// Slots in read-only or unmapped memory.
    @Suite struct SlotProtectionTests {
        static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

        /// A fresh page holding `ct_fix_add` in its first slot, made read-only.
        static func readOnlyPage() -> UnsafeMutableRawPointer {
            let page = mmap(nil, pageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
            page.storeBytes(of: addOriginalAddress, as: UInt.self)
            mprotect(page, pageSize, PROT_READ)
            return page
        }

        /// The kernel's map of a page, read with system calls alone (`ffh_mapping_of`, which
        /// runs where a hooked `fopen` or `malloc` must not): the range, protection and file of
        /// anonymous memory, of a file's mapping and of the C library's code; nothing where no
        /// mapping is. In a process of its own: any thread's next mapping of a page may fill the
        /// page the test unmaps.
        @Test func theMapOfAPageIsReadWithSystemCallsAlone() async {
            await #expect(processExitsWith: .success) { try SlotProtectionTests.readTheMapOfAPage() }
        }

        static func readTheMapOfAPage() throws {
            let size = Self.pageSize
            let region = try #require(mmap(nil, size * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
            defer { munmap(region, size * 2) }
            let base = UInt(bitPattern: region)
            // Three mappings: writable, read-only, none.
            #expect(mprotect(region + size, size, PROT_READ) == 0)
            #expect(munmap(region + 2 * size, size) == 0)
            var mapping = ffh_mapping()
            #expect(ffh_mapping_of(base + 8, &mapping) == 1)
            #expect(mapping.start <= base && mapping.end == base + UInt(size))
            #expect(mapping.protection == PROT_READ | PROT_WRITE && mapping.file_backed == 0)
            #expect(ffh_mapping_of(base + UInt(size) + 100, &mapping) == 1)
            #expect(mapping.start == base + UInt(size) && mapping.end == base + UInt(2 * size))
            #expect(mapping.protection == PROT_READ && mapping.file_backed == 0)
            #expect(ffh_mapping_of(base + UInt(2 * size), &mapping) == 0)

            let path = FileManager.default.temporaryDirectory.appendingPathComponent("mapped-\(getpid())").path
            try #require(FileManager.default.createFile(atPath: path, contents: Data(count: size)))
            defer { unlink(path) }
            let descriptor = open(path, O_RDONLY)
            defer { close(descriptor) }
            let file = try #require(mmap(nil, size, PROT_READ, MAP_PRIVATE, descriptor, 0))
            defer { munmap(file, size) }
            #expect(ffh_mapping_of(UInt(bitPattern: file) + 16, &mapping) == 1)
            #expect(
                mapping.start == UInt(bitPattern: file) && mapping.protection == PROT_READ && mapping.file_backed == 1)

            let found: UnsafeMutableRawPointer? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "strlen")
            let pointer = try #require(found)
            let code = UInt(bitPattern: pointer)
            #expect(ffh_mapping_of(code, &mapping) == 1)
            #expect(mapping.protection & PROT_EXEC != 0 && mapping.file_backed == 1)
            #expect(mapping.start <= code && code < mapping.end)
        }

        /// A read-only page of a file that no loaded object holds is not lifted, even when
        /// asked: such a page is, as often as not, an object the loader is loading or unloading
        /// (mapped, not yet relocated or already unmapped in part), whose protection is the
        /// loader's to change: made read-only again under a loader that relocated a fresh copy
        /// at that place, it faulted the loader.
        @Test func aReadOnlyPageOfAFileNoLoadedObjectHoldsIsNotLifted() throws {
            let size = Self.pageSize
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("table-\(getpid())").path
            var contents = Data(count: size)
            contents.withUnsafeMutableBytes { $0.storeBytes(of: addOriginalAddress, as: UInt.self) }
            try #require(FileManager.default.createFile(atPath: path, contents: contents))
            defer { unlink(path) }
            let descriptor = open(path, O_RDONLY)
            defer { close(descriptor) }
            let file = try #require(mmap(nil, size, PROT_READ, MAP_PRIVATE, descriptor, 0))
            defer { munmap(file, size) }
            let error = #expect(throws: HookError.self) {
                try Hook.before(on: FunctionSlot(file), signature: FixtureSignature.add, options: .liftsPageProtection)
                {
                    _ in
                }
            }
            #expect(error?.code == .protectionChangeFailed)
            #expect(file.load(as: UInt.self) == addOriginalAddress)
            #expect(SlotMemory.protection(of: UInt(bitPattern: file))?.writable == false)
        }

        @Test func aReadOnlySlotIsRefusedWithoutTheOption() throws {
            let page = Self.readOnlyPage()
            defer { munmap(page, Self.pageSize) }
            let error = #expect(throws: HookError.self) {
                try Hook.before(on: FunctionSlot(page), signature: FixtureSignature.add) { _ in }
            }
            #expect(error?.code == .readOnlySlot)
            #expect(error?.description.contains("liftsPageProtection") == true)
        }

        @Test func aReadOnlySlotIsHookedWhenAskedAndItsProtectionRestored() throws {
            let page = Self.readOnlyPage()
            defer { munmap(page, Self.pageSize) }
            let counter = Counter()
            let token = try Hook.before(
                on: FunctionSlot(page), signature: FixtureSignature.add, options: .liftsPageProtection
            ) { _ in counter.increment() }
            #expect(SlotMemory.protection(of: UInt(bitPattern: page))?.writable == false)
            let slot = page.assumingMemoryBound(to: AddFunction?.self)
            #expect(ct_fix_call_add_through(slot, 3) == 6)
            #expect(counter.count == 3)
            #expect(token.remove())
            #expect(page.load(as: UInt.self) == addOriginalAddress)
            // Read-only again: at once, or when another thread's group of import-table writes
            // ends, if one was under way (the removal's write shares its changes of
            // protection, see SlotMemory.keepingPagesWritable; CI once saw the page writable
            // right after the removal). A page that stays writable for a second fails.
            let address = UInt(bitPattern: page)
            var protection = SlotMemory.protection(of: address)
            for _ in 0..<200 where protection?.writable != false {
                usleep(5000)
                protection = SlotMemory.protection(of: address)
            }
            #expect(protection?.writable == false)
        }

        /// A slot write made while another thread writes a group of import-table entries does
        /// not join that group's changes of protection (``HookOptions/liftsPageProtection``):
        /// its page is read-only again as soon as its slot is written, the group still running.
        @Test func aRemovalDuringAnotherThreadsGroupWriteRestoresItsPageAtOnce() throws {
            let page = Self.readOnlyPage()
            defer { munmap(page, Self.pageSize) }
            let address = UInt(bitPattern: page)
            let token = try Hook.before(
                on: FunctionSlot(page), signature: FixtureSignature.add, options: .liftsPageProtection
            ) { _ in }
            Self.duringAnotherThreadsGroupWrite {
                #expect(token.remove())
                #expect(page.load(as: UInt.self) == addOriginalAddress)
                #expect(SlotMemory.protection(of: address)?.writable == false)
            }
            let protection = SlotMemory.protection(of: address)
            #expect(protection?.writable == false)
            #expect(protection?.readable == true)
        }

        /// A read-only slot hooked in a group's writes (its page kept writable until they end),
        /// whose page is unmapped and mapped again as code before they end (another object
        /// loaded at the address): the end of the writes leaves the new mapping's protection
        /// alone, and removal its bytes, even where they hold the closure's address.
        @Test func aPageMappedAgainDuringAGroupWriteKeepsItsProtection() throws {
            let page = Self.readOnlyPage()
            defer { munmap(page, Self.pageSize) }
            let address = UInt(bitPattern: page)
            var hooked: HookToken?
            var closure: UInt = 0
            try SlotMemory.keepingPagesWritable {
                let token = try Hook.before(
                    on: FunctionSlot(page), signature: FixtureSignature.add, options: .liftsPageProtection
                ) { _ in }
                hooked = token
                closure = page.load(as: UInt.self)
                #expect(closure != addOriginalAddress)
                #expect(SlotMemory.protection(of: address)?.writable == true)
                // (MAP_FIXED replaces the mapping at once: unmapped first, the page could be another
                // thread's mapping before it is mapped again, and that mapping would be replaced.)
                let again = mmap(
                    page, Self.pageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
                try #require(again == page)
                page.storeBytes(of: closure, as: UInt.self)
                mprotect(page, Self.pageSize, PROT_READ | PROT_EXEC)
            }
            let token = try #require(hooked)
            let afterGroup = try #require(SlotMemory.protection(of: address))
            #expect(afterGroup.executable && afterGroup.readable && !afterGroup.writable)
            #expect(token.remove())
            let afterRemoval = try #require(SlotMemory.protection(of: address))
            #expect(afterRemoval.executable && afterRemoval.readable && !afterRemoval.writable)
            #expect(page.load(as: UInt.self) == closure)
        }

        /// A library's read-only table hooked in a group's writes (its page kept writable until
        /// they end), the library unloaded before they end and its page mapped again writable,
        /// as a fresh copy of a library loaded at its place is while the loader relocates it:
        /// the end of the writes leaves that page writable (made read-only, the loader's
        /// relocation faulted: a traced process whose threads reload libraries crashed as the
        /// tracer left). The page's object is told apart from what is mapped there later by the
        /// loader's own lookup of finished objects. In a process of its own: the library's
        /// pages, once unloaded, may be any thread's next mapping, which the test's would replace.
        @Test func aPageOfAnUnloadedLibraryMappedAgainWritableKeepsItsProtection() async {
            await #expect(processExitsWith: .success) { try SlotProtectionTests.mapAnUnloadedLibrarysPageAgain() }
        }

        static func mapAnUnloadedLibrarysPageAgain() throws {
            let libraries = try ThrowawayLibraries("settled")
            defer { libraries.remove() }
            let library = try libraries.build(
                "libsettled.so",
                source: """
                    static int seven(void) { return 7; }
                    int (*const settled_table[1])(void) = { seven };
                    """, flags: "-Wl,-z,relro,-z,now")
            let handle = try #require(dlopen(library, RTLD_NOW | RTLD_LOCAL))
            let slot = try #require(dlsym(handle, "settled_table"))
            let address = UInt(bitPattern: slot)
            let page = try #require(UnsafeMutableRawPointer(bitPattern: address & ~(UInt(Self.pageSize) - 1)))
            #expect(SlotMemory.protection(of: address)?.writable == false)
            var hooked: HookToken?
            try SlotMemory.keepingPagesWritable {
                hooked = try Hook.before(
                    on: FunctionSlot(slot), signature: Signature("i"), options: .liftsPageProtection
                ) { _ in }
                #expect(SlotMemory.protection(of: address)?.writable == true)
                #expect(dlclose(handle) == 0)
                try #require(isUnloadedSoon(library))
                let again = mmap(
                    page, Self.pageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
                try #require(again == page)
            }
            defer { munmap(page, Self.pageSize) }
            let protection = try #require(SlotMemory.protection(of: address))
            #expect(protection.readable && protection.writable)
            // The removal writes nothing there (the word is not the hook's).
            _ = try #require(hooked).remove()
            #expect(page.load(fromByteOffset: Int(address & (UInt(Self.pageSize) - 1)), as: UInt.self) == 0)
        }

        /// A session gives a page of a loaded object its protection back under the loader's
        /// list lock, the one `dl_iterate_phdr` holds while its callback runs and `dlclose` holds
        /// from an object's unmapping to its removal: while another thread's callback runs, the
        /// page stays writable; once it returns, the page is read-only again (given back by the
        /// library's restorer thread, the walk lasting longer than a write waits for the list,
        /// see ``SlotMemory/restore(_:_:heldBy:)``). (Changed without
        /// that lock, a restore could find the object's instance, be overtaken by an unload and a
        /// load of a fresh copy at its place, and make the fresh copy's table read-only while the
        /// loader relocated it.)
        @Test func aSessionGivesAnObjectsPageItsProtectionBackUnderTheLoadersListLock() throws {
            #expect(ffh_elf_knows_list_lock() == 1)
            let libraries = try ThrowawayLibraries("listlock")
            defer { libraries.remove() }
            let library = try libraries.build(
                "liblistlock.so",
                source: """
                    static int eight(void) { return 8; }
                    int (*const listlock_table[1])(void) = { eight };
                    """, flags: "-Wl,-z,relro,-z,now")
            let handle = try #require(dlopen(library, RTLD_NOW | RTLD_LOCAL))
            defer { dlclose(handle) }
            let slot = try #require(dlsym(handle, "listlock_table"))
            let address = UInt(bitPattern: slot)
            #expect(SlotMemory.protection(of: address)?.writable == false)

            final class Walk: @unchecked Sendable {
                let inside = DispatchSemaphore(value: 0)
                let over = DispatchSemaphore(value: 0)
                let address: UInt
                /// What the walk's callback saw of the page just before it returned.
                var writableAtItsEnd: Bool?
                init(address: UInt) { self.address = address }
            }
            typealias Visit = @convention(c) (UnsafeMutableRawPointer?, Int, UnsafeMutableRawPointer?) -> Int32
            typealias Iterate = @convention(c) (Visit, UnsafeMutableRawPointer?) -> Int32
            // (Not in Swift's view of the C library: link.h is not part of it.)
            let iterate = unsafeBitCast(
                try #require(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "dl_iterate_phdr")), to: Iterate.self)
            let walk = Walk(address: address)
            let walker = Thread {
                _ = iterate(
                    { _, _, context in
                        let walk = Unmanaged<Walk>.fromOpaque(context!).takeUnretainedValue()
                        walk.inside.signal()
                        usleep(200_000)
                        walk.writableAtItsEnd = SlotMemory.protection(of: walk.address)?.writable
                        return 1
                    }, Unmanaged.passUnretained(walk).toOpaque())
                walk.over.signal()
            }
            var token: HookToken?
            try SlotMemory.keepingPagesWritable {
                token = try Hook.before(
                    on: FunctionSlot(slot), signature: Signature("i"), options: .liftsPageProtection
                ) {
                    _ in
                }
                walker.start()
                walk.inside.wait()
            }
            // The session has ended: its restore waits for the walk.
            walk.over.wait()
            #expect(walk.writableAtItsEnd == true)
            #expect(ImportFixtures.isReadOnlyAtRest(address))
            _ = try #require(token).remove()
            #expect(SlotMemory.protection(of: address)?.writable == false)
        }

        /// A page that another thread's session keeps writable, unmapped and mapped again
        /// read-only while that session lasts (as when a library is unloaded and another loaded
        /// at its address): the new page is not the session's, and a write to it lifts its
        /// protection as for any read-only page (it was written as kept writable, and faulted).
        @Test func aPageMappedAgainWhileAnotherThreadsSessionLastsIsLiftedForItsWrite() throws {
            let page = Self.readOnlyPage()
            defer { munmap(page, Self.pageSize) }
            let inSession = DispatchSemaphore(value: 0)
            let done = DispatchSemaphore(value: 0)
            let ended = DispatchSemaphore(value: 0)
            let first = UInt(bitPattern: page)
            let session = Thread {
                SlotMemory.keepingPagesWritable {
                    let token = try? Hook.before(
                        on: FunctionSlot(address: first), signature: FixtureSignature.add, options: .liftsPageProtection
                    ) { _ in }
                    inSession.signal()
                    done.wait()
                    _ = token?.remove()
                }
                ended.signal()
            }
            session.start()
            inSession.wait()
            #expect(SlotMemory.protection(of: first)?.writable == true)
            // (MAP_FIXED replaces the mapping at once: unmapped first, the page could be another
            // thread's mapping before it is mapped again, and that mapping would be replaced.)
            let again = mmap(
                page, Self.pageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
            let other = page + 64
            other.storeBytes(of: addOriginalAddress, as: UInt.self)
            mprotect(page, Self.pageSize, PROT_READ)
            var result: Result<HookToken, HookError>
            do throws(HookError) {
                result = .success(
                    try Hook.before(
                        on: FunctionSlot(other), signature: FixtureSignature.add, options: .liftsPageProtection
                    ) {
                        _ in
                    })
            } catch {
                result = .failure(error)
            }
            done.signal()
            ended.wait()
            #expect(again == page)
            let token = try result.get()
            #expect(other.load(as: UInt.self) != addOriginalAddress)
            #expect(token.remove())
            #expect(other.load(as: UInt.self) == addOriginalAddress)
            #expect(SlotMemory.protection(of: first)?.writable == false)
        }

        /// Slot writes of one thread while another thread's sessions of writes to the same
        /// read-only page begin and end: the end of a session (which gives the page its
        /// protection back) never falls between the change of protection a write was promised and
        /// the write, so every install and removal goes through.
        @Test func writesWhileAnotherThreadsSessionsEndAllGoThrough() throws {
            let page = Self.readOnlyPage()
            defer { munmap(page, Self.pageSize) }
            let other = page + 64
            mprotect(page, Self.pageSize, PROT_READ | PROT_WRITE)
            other.storeBytes(of: addOriginalAddress, as: UInt.self)
            mprotect(page, Self.pageSize, PROT_READ)
            let stop = Atomic<Bool>(false)
            let sessionFailures = Atomic<Int>(0)
            let ended = DispatchSemaphore(value: 0)
            let first = UInt(bitPattern: page)
            let sessions = Thread {
                while !stop.load(ordering: .relaxed) {
                    SlotMemory.keepingPagesWritable {
                        do {
                            let token = try Hook.before(
                                on: FunctionSlot(address: first), signature: FixtureSignature.add,
                                options: .liftsPageProtection
                            ) { _ in }
                            if !token.remove() { sessionFailures.add(1, ordering: .relaxed) }
                        } catch {
                            sessionFailures.add(1, ordering: .relaxed)
                        }
                    }
                }
                ended.signal()
            }
            sessions.start()
            var failures: [String] = []
            for _ in 0..<3000 {
                do {
                    let token = try Hook.before(
                        on: FunctionSlot(other), signature: FixtureSignature.add, options: .liftsPageProtection
                    ) { _ in }
                    if !token.remove() { failures.append("a removal did nothing") }
                } catch {
                    failures.append("\(error)")
                }
            }
            stop.store(true, ordering: .relaxed)
            ended.wait()
            #expect(failures.isEmpty, "\(failures.count) failed, the first: \(failures.first ?? "")")
            #expect(sessionFailures.load(ordering: .relaxed) == 0)
            #expect(other.load(as: UInt.self) == addOriginalAddress)
            #expect(page.load(as: UInt.self) == addOriginalAddress)
            // A page a session lifted gets its protection back when the sessions of all threads
            // have ended, another test's too (tests run in parallel): wait for that, a while.
            var writable = SlotMemory.protection(of: UInt(bitPattern: page))?.writable
            for _ in 0..<500 where writable != false {
                usleep(10_000)
                writable = SlotMemory.protection(of: UInt(bitPattern: page))?.writable
            }
            #expect(writable == false)
        }

        /// Runs `body` while another thread keeps the pages its slot writes lift writable (as a
        /// group of import-table entries does), and returns once that thread's writes ended.
        static func duringAnotherThreadsGroupWrite(_ body: () throws -> Void) rethrows {
            let inside = DispatchSemaphore(value: 0)
            let done = DispatchSemaphore(value: 0)
            let ended = DispatchSemaphore(value: 0)
            let group = Thread {
                SlotMemory.keepingPagesWritable {
                    inside.signal()
                    done.wait()
                }
                ended.signal()
            }
            group.start()
            inside.wait()
            defer {
                done.signal()
                ended.wait()
            }
            try body()
        }

        /// A slot whose page is made read-only after its hook went in: removing the hook
        /// leaves the slot as it is (the page cannot be written), its closure passing calls
        /// through to the original for good; the closure is not reused for another slot,
        /// whose hooks calls through this one would otherwise run.
        @Test func aSlotMadeReadOnlyAfterItsHookKeepsAPassThrough() throws {
            let page = mmap(nil, Self.pageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
            defer { munmap(page, Self.pageSize) }
            page.storeBytes(of: addOriginalAddress, as: UInt.self)
            let slot = page.assumingMemoryBound(to: AddFunction?.self)
            let token = try Hook.instead(on: FunctionSlot(page), signature: FixtureSignature.add) { call in
                call.setReturnValue(Int32(999))
            }
            #expect(ct_fix_call_add_through(slot, 3) == 3 * 999)
            mprotect(page, Self.pageSize, PROT_READ)
            #expect(token.remove())
            #expect(ct_fix_call_add_through(slot, 3) == 6)
            // Slots hooked afterwards get closures of their own.
            let others = (0..<8).map { _ -> UnsafeMutablePointer<AddFunction?> in
                let other = UnsafeMutablePointer<AddFunction?>.allocate(capacity: 1)
                other.initialize(to: unsafeBitCast(addOriginalAddress, to: AddFunction?.self))
                return other
            }
            defer { for other in others { other.deallocate() } }
            let tokens = try others.map { other in
                try Hook.instead(on: FunctionSlot(UnsafeMutableRawPointer(other)), signature: FixtureSignature.add) {
                    call in call.setReturnValue(Int32(-7))
                }
            }
            #expect(ct_fix_call_add_through(slot, 3) == 6)
            #expect(ct_fix_call_add_through(others[0], 3) == 3 * -7)
            for token in tokens { token.remove() }
            try Hook.waitForReclamation()
        }

        /// A "slot" inside a function's instructions is refused even with
        /// `.liftsPageProtection`, and the code is left as it was.
        @Test func aSlotInCodeIsRefusedEvenWhenProtectionMayBeLifted() throws {
            let code = try #require(UnsafeMutableRawPointer(bitPattern: addOriginalAddress))
            let aligned = UnsafeMutableRawPointer(bitPattern: (UInt(bitPattern: code) + 7) & ~7)!
            let before = aligned.load(as: UInt.self)
            let error = #expect(throws: HookError.self) {
                try Hook.before(
                    on: FunctionSlot(aligned), signature: FixtureSignature.add, options: .liftsPageProtection
                ) { _ in }
            }
            guard let reason = error?.message, error?.code == .invalidSlot else {
                Issue.record("expected invalidSlot, got \(String(describing: error))")
                return
            }
            #expect(reason.contains("executable code"))
            #expect(aligned.load(as: UInt.self) == before)
            // Without the option the error is the same: suggesting the option would not help.
            let plain = #expect(throws: HookError.self) {
                try Hook.before(on: FunctionSlot(aligned), signature: FixtureSignature.add) { _ in }
            }
            #expect(plain?.code == .invalidSlot)
            #expect(plain?.description.contains("liftsPageProtection") == false)
        }

        /// A read-only slot whose page was unmapped and mapped again as code (another object
        /// loaded at the address): removal leaves the page executable and its bytes alone,
        /// even where they happen to hold the closure's address.
        @Test func removalNeverTakesAwayExecutePermission() throws {
            let page = Self.readOnlyPage()
            let token = try Hook.before(
                on: FunctionSlot(page), signature: FixtureSignature.add, options: .liftsPageProtection
            ) { _ in }
            let closure = page.load(as: UInt.self)
            #expect(closure != addOriginalAddress)
            // (Replaced at once, not unmapped first: see aPageMappedAgainDuringAGroupWriteKeepsItsProtection.)
            let remapped = mmap(
                page, Self.pageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
            try #require(remapped == page)
            defer { munmap(page, Self.pageSize) }
            page.storeBytes(of: closure, as: UInt.self)
            mprotect(page, Self.pageSize, PROT_READ | PROT_EXEC)
            #expect(token.remove())
            let protection = try #require(SlotMemory.protection(of: UInt(bitPattern: page)))
            #expect(protection.executable && protection.readable && !protection.writable)
            #expect(page.load(as: UInt.self) == closure)
        }

        /// A slot where no memory is mapped: a page far below where the kernel places mappings it
        /// is not told where to put (a page just unmapped is the next page-sized mapping of any
        /// thread, the library's own included: unmapped here, as the first hook of a process,
        /// the hook went in).
        @Test func anUnmappedSlotIsAnErrorNotACrash() throws {
            let page = try #require(UnsafeMutableRawPointer(bitPattern: 0x2000))
            try #require(pf_address_is_mapped(page) == 0)
            let error = #expect(throws: HookError.self) {
                try Hook.instead(on: FunctionSlot(page), signature: FixtureSignature.add) { _ in }
            }
            #expect(error?.code == .unmappedSlot)
        }

        /// A slot on a page made inaccessible (PROT_NONE) is refused with the unmapped slot's
        /// code, but its message says the page is mapped, lifting the protection or not; once
        /// the page is readable and writable again, the hook goes in.
        @Test func aSlotOnAnInaccessiblePageIsRefusedAsSuch() throws {
            let page = mmap(nil, Self.pageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
            defer { munmap(page, Self.pageSize) }
            let function = unsafeBitCast(ct_fix_add as @convention(c) (Int32, Int32) -> Int32, to: UInt.self)
            page.storeBytes(of: function, as: UInt.self)
            mprotect(page, Self.pageSize, PROT_NONE)
            for options in [[], .liftsPageProtection] as [HookOptions] {
                let error = #expect(throws: HookError.self) {
                    try Hook.instead(on: FunctionSlot(page), signature: FixtureSignature.add, options: options) { _ in }
                }
                #expect(error?.code == .unmappedSlot)
                #expect(error?.message.contains("mapped but can be neither read nor written (PROT_NONE)") == true)
            }
            mprotect(page, Self.pageSize, PROT_READ | PROT_WRITE)
            let token = try Hook.before(on: FunctionSlot(page), signature: FixtureSignature.add) { _ in }
            #expect(page.load(as: UInt.self) != function)
            #expect(token.remove())
            #expect(page.load(as: UInt.self) == function)
        }
    }
}
