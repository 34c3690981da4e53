internal import CFFIHookSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Reading and writing slots in memory the library does not own, what the process's memory
/// map says about the page that holds a slot, and writing a slot whose page is read-only.
///
/// A slot's owner may unmap or protect its memory at any moment, even while the library
/// reads or writes it, so every read and compare-and-swap of a slot goes through here, under
/// the fault guard (`ffh_guard.h`): a fault at that access becomes a failed result instead of
/// a crash. The registry refuses a slot that is not writable, or lifts the protection when
/// the caller asked for that (`HookOptions.liftsPageProtection`), for example for a `const`
/// table the loader made read-only, or an import table under full RELRO.
enum SlotMemory {
    /// A mapping's protection.
    struct Protection: Equatable {
        var readable: Bool
        var writable: Bool
        var executable: Bool

        var flags: Int32 {
            (readable ? PROT_READ : 0) | (writable ? PROT_WRITE : 0) | (executable ? PROT_EXEC : 0)
        }
    }

    /// The protection of the mapping that contains `address`, or `nil` when none does.
    static func protection(of address: UInt) -> Protection? {
        MemoryMapping.containing(address).map {
            Protection(readable: $0.readable, writable: $0.writable, executable: $0.executable)
        }
    }

    /// Whether the word at `address` can be read: a read that cannot fault (see ``load(_:)``).
    static func isReadable(_ address: UInt) -> Bool {
        load(address) != nil
    }

    /// Whether a mapping still covers `address`, whatever its protection: memory made
    /// inaccessible (PROT_NONE) is mapped, and may be made accessible again with what it held.
    static func isMapped(_ address: UInt) -> Bool {
        ffh_is_mapped(UnsafeRawPointer(bitPattern: address)) != 0
    }

    /// Why the word at `address` cannot be read: nothing is mapped there, or its page has no
    /// access at all (PROT_NONE).
    static func unreadable(_ address: UInt) -> HookError.Problem {
        isMapped(address) ? .inaccessibleSlot : .unmappedSlot
    }

    /// The word at `address`, or `nil` when it cannot be read (unmapped): read under the
    /// fault guard, so that an owner unmapping the memory at that moment makes it `nil`
    /// rather than a crash.
    static func load(_ address: UInt) -> UInt? {
        var value: UInt = 0
        return ffh_read_word(UnsafeRawPointer(bitPattern: address), &value) == 0 ? value : nil
    }

    /// What a compare-and-swap on a slot did.
    enum Exchange: Equatable {
        /// The slot held the expected word and now holds the new one.
        case replaced
        /// The slot held another word, left as it was.
        case heldOther
        /// The slot cannot be written: unmapped or read-only (at the moment of the write).
        case unwritable
    }

    /// Replaces the word at `address` with `desired` if it holds `expected`, under the fault
    /// guard: memory unmapped or protected by its owner, even at that very moment, gives
    /// ``Exchange/unwritable`` instead of a crash.
    static func exchange(_ address: UInt, expected: UInt, desired: UInt) -> Exchange {
        switch ffh_exchange_if_writable(UnsafeMutableRawPointer(bitPattern: address), expected, desired) {
        case 1: .replaced
        case 0: .heldOther
        default: .unwritable
        }
    }

    /// Whether the fault guard is the process's SIGSEGV and SIGBUS handler now (after the
    /// first guarded access installed it); false where the platform has no guard.
    static var faultGuardIsInstalled: Bool { ffh_guard_is_installed() != 0 }

    /// Whether the word at `address` can be written, without changing it: read, then
    /// exchanged with itself, both under the fault guard (an exchange that finds another word
    /// has written nothing, and proves the page writable too). False for memory that is
    /// unmapped or not writable.
    static func isWritable(_ address: UInt) -> Bool {
        // Under a snapshot of the memory map (a walk over import tables), a page the snapshot
        // says is read-only is not probed: the probe would fault.
        if let mapping = MemoryMapping.snapshotted(address), !mapping.writable { return false }
        guard let value = load(address) else { return false }
        return exchange(address, expected: value, desired: value) != .unwritable
    }

    /// Whether the word at `address` is writable outside the sessions of
    /// ``keepingPagesWritable(_:)``: a read-only page that a session keeps writable for now is
    /// not. Asked under the sessions' lock, which every change of protection made here holds,
    /// so no write of another thread shows its page writable for a moment.
    static func isWritableAtRest(_ address: UInt) -> Bool {
        writablePages.withLock { session in
            session.forgetPagesOfParent()
            if let kept = session.kept(address & ~(pageSize - 1)) { return kept.writable }
            return isWritable(address)
        }
    }

    /// The protection of the page of `address` outside the sessions of
    /// ``keepingPagesWritable(_:)``; nil when it is not mapped. The memory map is read outside
    /// the sessions' lock (a hook on the functions reading it must not meet the lock held), so
    /// it may show a page that another thread lifts for one write at that moment as writable:
    /// whether the page is writable is ``isWritableAtRest(_:)``'s to say.
    static func protectionAtRest(of address: UInt) -> Protection? {
        let kept = writablePages.withLock { session -> Protection? in
            session.forgetPagesOfParent()
            return session.kept(address & ~(pageSize - 1))
        }
        return kept ?? protection(of: address)
    }

    /// Runs `body` as one fault-guard session on this thread: its guarded accesses ask the
    /// kernel whether the guard is still the process's fault handler once, at the first,
    /// instead of at each. For short stretches of work (one install, one removal).
    static func guardingFaults<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        ffh_guard_session_begin()
        defer { ffh_guard_session_end() }
        return try body()
    }

    /// The size of a page.
    static let pageSize = UInt(sysconf(Int32(_SC_PAGESIZE)))

    /// Runs `body` with the page of `address` made writable, then restores `protection`.
    /// Returns `nil` without running `body` when the protection cannot be changed. On a thread
    /// inside ``keepingPagesWritable(_:)``, a page stays writable until the sessions end: one
    /// change of protection each way per page, however many of its slots are written. On any
    /// other thread, a page that sessions keep writable is written as it is, and any other page
    /// is made writable for this write only.
    ///
    /// `body` (a compare-and-swap) runs under the sessions' lock, as every change of protection
    /// made here does: no write of another thread, alone or in a session, and no end of a
    /// session can make the page read-only again between this change and this write.
    ///
    /// A page the sessions keep that cannot be written (unmapped, or mapped again, since they
    /// lifted it) is forgotten, and ``Exchange/unwritable`` returned: the protection given was
    /// the old page's, and the caller asks again.
    ///
    /// A page gets its protection back only while the instance of the object that held it when
    /// it was lifted still does (``SettledObject``), looked up and changed under the loader's
    /// list lock (see ``restore(_:_:heldBy:)``): the object may be unloaded meanwhile and a
    /// fresh copy mapped at its place, whose tables the loader writes until it protects them
    /// itself; a page made read-only under it faulted the loader. When that lock stays busy
    /// longer than a write waits for it (another thread's `dl_iterate_phdr` callback, whose
    /// holder may wait for the sessions' lock), the page is left to the restorer thread
    /// (``startRestorerIfNeeded()``), and counts as kept until it is given back. A page that
    /// no object the loader is done with holds is written as it is when it is writable now,
    /// and is lifted only when it is memory of no file (a table the program mapped): a file's
    /// page there is an object the loader is loading or unloading (or a file the program
    /// mapped), whose protection is the loader's to change, and `nil` is returned.
    static func withWritablePage(
        _ address: UInt, restoring protection: Protection, _ body: () -> Exchange
    ) -> Exchange? {
        let pageAddress = address & ~(pageSize - 1)
        let page = UnsafeMutableRawPointer(bitPattern: pageAddress)
        var writable = protection
        writable.writable = true
        writable.readable = true
        let object = SettledObject(holding: pageAddress)
        // Set where pages may wait for the restorer: this write gave one its protection back
        // (or left it to the restorer), or wrote one that waits (whose restorer may not have
        // started: no thread could be made, or this is a fork's child).
        var restorerMayBeWanted = false
        defer { if restorerMayBeWanted { startRestorerIfNeeded() } }
        return writablePages.withLock { session -> Exchange? in
            session.forgetPagesOfParent()
            // A table's slots come in runs on one page: the last page needs no lookup.
            if session.lastPage == pageAddress || session.kept(pageAddress) != nil {
                restorerMayBeWanted = !session.unrestored.isEmpty
                let exchange = body()
                if exchange != .unwritable {
                    if session.pages[pageAddress] != nil { session.lastPage = pageAddress }
                    return exchange
                }
                // Not the page the sessions lifted any more: unmapped, and maybe mapped again,
                // while they last (a library unloaded, another loaded at its address). Forgotten:
                // the caller asks for the protection of what is there now.
                session.pages[pageAddress] = nil
                session.objects[pageAddress] = nil
                if session.unrestored.removeValue(forKey: pageAddress) != nil { ffh_elf_forget_waiting(pageAddress) }
                session.lastPage = 0
                return exchange
            }
            // Memory of no object the loader is done with: what the kernel maps there now, read
            // with system calls alone (no function a program may hook, no allocation, so under
            // the lock), once the page is not one the sessions keep.
            var mapping = ffh_mapping()
            let mapped = object == nil ? ffh_mapping_of(pageAddress, &mapping) : -1
            if mapped == 1 && mapping.protection & PROT_WRITE != 0 { return body() }
            // Unmapped now; or a file's pages that no object the loader is done with holds: an
            // object being loaded or unloaded (the loader protects its pages itself, and it may
            // be unloaded, and a fresh copy mapped at its place, at any moment), or a file the
            // program mapped; or code. Not lifted.
            if mapped == 0 || (mapped == 1 && (mapping.file_backed != 0 || mapping.protection & PROT_EXEC != 0)) {
                return nil
            }
            guard session.owners.contains(UInt(pthread_self())) else {
                guard mprotect(page, Int(pageSize), writable.flags) == 0 else { return nil }
                defer {
                    session.restore(pageAddress, protection, heldBy: object)
                    restorerMayBeWanted = true
                }
                return body()
            }
            guard mprotect(page, Int(pageSize), writable.flags) == 0 else { return nil }
            session.pages[pageAddress] = protection
            session.objects[pageAddress] = object
            session.lastPage = pageAddress
            return body()
        }
    }

    /// An instance of a loaded object that the loader is done with (``ffh_elf_settled_object``):
    /// its link map and the range of its mapping.
    struct SettledObject {
        let instance: ffh_elf_instance

        /// The object that holds `address`, if the loader is done loading it.
        init?(holding address: UInt) {
            var instance = ffh_elf_instance()
            guard ffh_elf_settled_object(address, &instance) != 0 else { return nil }
            self.instance = instance
        }
    }

    /// Gives the page at `page` its protection back, if `object` (the instance of an object
    /// that held it when it was lifted) still holds it: looked up and changed under the
    /// loader's list lock (``ffh_elf_protect_instance``), so that no unload and load on another
    /// thread can put a fresh copy of an object there between the look and the change. A page
    /// lifted while no object the loader was done with held it (memory of no file: a table the
    /// program mapped) gets its protection back while it is still memory of no file, and as
    /// writable as it was left.
    ///
    /// False when the loader's list stayed busy (a thread in a `dl_iterate_phdr` callback, which
    /// may wait for a lock the caller holds): nothing was changed, and the page is the
    /// restorer's to give back (``WritablePages/unrestored``).
    fileprivate static func restore(_ page: UInt, _ protection: Protection, heldBy object: SettledObject?) -> Bool {
        guard let object else {
            var mapping = ffh_mapping()
            let mapped = ffh_mapping_of(page, &mapping)
            guard mapped == -1 || (mapped == 1 && mapping.file_backed == 0 && mapping.protection & PROT_WRITE != 0)
            else { return true }
            mprotect(UnsafeMutableRawPointer(bitPattern: page), Int(pageSize), protection.flags)
            return true
        }
        return withUnsafePointer(to: object.instance) {
            ffh_elf_protect_instance(page, Int(pageSize), protection.flags, $0) != -2
        }
    }

    /// The pages made writable for slots written during ``keepingPagesWritable(_:)``, with the
    /// protection each gets back at its end.
    private struct WritablePages {
        /// The threads running one (a thread once per session: they nest; the last to end
        /// restores).
        var owners: [UInt] = []
        var pages: [UInt: Protection] = [:]
        /// The object that held each of `pages` as it was lifted, where the loader was done
        /// with one.
        var objects: [UInt: SettledObject] = [:]
        /// The page of the last write, one of `pages` (0: none).
        var lastPage: UInt = 0
        /// Pages lifted for writes whose protection could not be given back then, the loader's
        /// list being held longer than a write waits for it, with that protection and their
        /// object (always one: only an object's pages need the list): the restorer gives it
        /// back. Until then each counts as kept, like `pages`: read-only at rest, and written
        /// as it is. A page forgotten for good would stay writable, and every later write
        /// would take it for writable at rest.
        /// `noted`: whether the C side holds it too (``ffh_elf_note_waiting``, which holds a
        /// few dozen), for a fork's child to give back as it starts.
        var unrestored: [UInt: (protection: Protection, object: SettledObject, noted: Bool)] = [:]
        /// The process that noted the pages of ``unrestored`` (see ``forgetPagesOfParent()``).
        var unrestoredIn: pid_t = 0
        /// The process whose restorer thread runs (0: none; a fork's child has none).
        var restorer: pid_t = 0

        /// In a fork's child, forgets the waiting pages its parent noted that the C side gave
        /// back as the child started: no restorer is needed for them (one started for them in
        /// a child whose loader list stayed locked, by a parent's thread walking it, waited for
        /// ever, holding the walk gate's read side, which the child's own forks then waited
        /// for). Pages the C side could not note stay, for the child's restorer.
        mutating func forgetPagesOfParent() {
            guard !unrestored.isEmpty, unrestoredIn != ffh_getpid() else { return }
            unrestored = unrestored.filter { !$0.value.noted }
            unrestoredIn = ffh_getpid()
            restorer = 0
        }

        /// The protection a kept or unrestored page gets back, nil for any other page.
        func kept(_ page: UInt) -> Protection? {
            if !pages.isEmpty, let protection = pages[page] { return protection }
            if !unrestored.isEmpty, let entry = unrestored[page] { return entry.protection }
            return nil
        }

        /// Gives `page` its protection back (``SlotMemory/restore(_:_:heldBy:)``), or leaves it
        /// to the restorer.
        mutating func restore(_ page: UInt, _ protection: Protection, heldBy object: SettledObject?) {
            guard !SlotMemory.restore(page, protection, heldBy: object), let object else { return }
            forgetPagesOfParent()
            unrestoredIn = ffh_getpid()
            let noted = withUnsafePointer(to: object.instance) {
                ffh_elf_note_waiting(page, Int(SlotMemory.pageSize), protection.flags, $0) != 0
            }
            unrestored[page] = (protection, object, noted)
        }

        /// Whether pages wait for a restorer and none runs in this process.
        var needsRestorer: Bool { !unrestored.isEmpty && restorer != ffh_getpid() }
    }

    /// Taken across fork (a child forked while another thread held it waited for it for
    /// ever): inside the registry's lock (a slot written during an install), and around reads
    /// of the memory map, whose lock ranks after it.
    private static let writablePages: Locked<WritablePages> = {
        let lock = Locked(WritablePages())
        lock.protectAcrossFork(rank: SlotRegistry.forkRank + 3)
        return lock
    }()

    /// Runs `body` keeping every read-only page that a slot write of this thread lifts writable
    /// until the sessions of all threads end, then gives each its protection back: for work
    /// that writes many slots of the same pages (a group's import-table entries), which would
    /// otherwise change a page's protection twice per slot. Writes of other threads meanwhile
    /// lift their own pages for their own writes only (see ``withWritablePage(_:restoring:_:)``).
    /// A page whose protection changed meanwhile (unmapped and mapped again, say) is left as
    /// it is.
    static func keepingPagesWritable<Result, Failure: Error>(
        _ body: () throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let thread = UInt(pthread_self())
        writablePages.withLock { $0.owners.append(thread) }
        defer {
            // A page unmapped meanwhile and mapped again (another object loaded at its address)
            // is not the session's any more: only a page that still has the protection the
            // session gave it gets its own back (the session's pages looked up fresh, together:
            // before the lock, which a hook on the functions reading the memory map, where the
            // kernel cannot be asked, must not meet held).
            let pages = writablePages.withLock { $0.owners.count == 1 ? Array($0.pages.keys) : [] }
            let read = pages.isEmpty ? [:] : MemoryMapping.current(at: pages)
            // Under the lock, as every change of protection here: a write of another thread
            // cannot find its page made read-only between its own change and its write.
            writablePages.withLock { session in
                if let place = session.owners.lastIndex(of: thread) { session.owners.remove(at: place) }
                guard session.owners.isEmpty else { return }
                defer {
                    session.pages = [:]
                    session.objects = [:]
                    session.lastPage = 0
                }
                guard !session.pages.isEmpty else { return }
                for (page, protection) in session.pages {
                    var lifted = protection
                    lifted.readable = true
                    lifted.writable = true
                    // (Another session may have added a page since the look above.)
                    guard let mapping = read[page] ?? MemoryMapping.containing(page), mapping.protection == lifted.flags
                    else { continue }
                    session.restore(page, protection, heldBy: session.objects[page])
                }
            }
            startRestorerIfNeeded()
        }
        return try body()
    }

    /// Starts the restorer when pages wait for it and none runs: a thread of its own, which
    /// holds no lock of the library's and so may wait for the loader's list (whose holder may
    /// wait for one of them), then gives each waiting page its protection back while the
    /// object that held it when it was lifted still does and the page is still as writable as
    /// it was left; then ends. Called with no lock of this file held.
    private static func startRestorerIfNeeded() {
        // A fork's child, which has no restorer, gives the waiting pages back as it starts
        // (``ffh_elf_note_waiting``), with the handlers that keep walks across forks.
        ffh_elf_guard_walks_across_fork()
        let start = writablePages.withLock { session -> Bool in
            session.forgetPagesOfParent()
            guard session.needsRestorer else { return false }
            session.restorer = ffh_getpid()
            return true
        }
        guard start else { return }
        var thread = pthread_t()
        let status = pthread_create(
            &thread, nil,
            { _ in
                // The library's own work, to the thread's end: its calls of functions the program
                // hooked (the loader's lock, mprotect, usleep; free as the thread ends) run no
                // blocks.
                ffh_thread_become_library_own()
                SlotMemory.restoreWaitingPages()
                return nil
            }, nil)
        if status == 0 { pthread_detach(thread) }
        // No thread: the next write that lifts a page or writes a waiting one, or the next
        // session end, tries again.
        if status != 0 { writablePages.withLock { $0.restorer = 0 } }
    }

    /// The restorer's work (``startRestorerIfNeeded()``): the loader's list first, waited for,
    /// then the sessions' lock, only tried (a thread holding it may be trying the list), until
    /// no page waits. A page gets its protection back late, after any number of unloads and
    /// loads: only where the object holding it now maps it read-only by its own program
    /// headers (``ffh_elf_protect_instance_locked``), never over another file's writable data
    /// loaded at its place.
    private static func restoreWaitingPages() {
        while true {
            ffh_elf_lock_list()
            let done = writablePages.withLockIfAvailable { session -> Bool in
                for (page, entry) in session.unrestored {
                    withUnsafePointer(to: entry.object.instance) {
                        _ = ffh_elf_restore_late(page, Int(pageSize), entry.protection.flags, $0)
                    }
                }
                session.unrestored = [:]
                ffh_elf_forget_waiting(0)
                session.restorer = 0
                return true
            }
            ffh_elf_unlock_list()
            if done == true { return }
            usleep(1000)
        }
    }
}
