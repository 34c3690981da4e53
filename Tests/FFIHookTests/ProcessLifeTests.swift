import CFFIHookSupport
import CTestSupport
import FFIHook
import FFIHookCore
import Foundation
import Synchronization
import Testing

/// Hooks through the events of a process's life that the call path does not see coming: a
/// library unloaded under its hooks, the allocator hooked underneath the hook machinery,
/// signal handlers, fork, longjmp and pthread_exit.
///
/// Each test runs in a child process that first arms a watchdog (`alarm`), so that a crash or
/// a hang ends the child with a signal and fails the test instead of the run. A failed check
/// ends the child with exit code 1 after naming the check on standard error and in a file
/// that the failed expectation quotes; with PROCESS_LIFE_TRACE=1 in the environment, passed
/// checks are listed there too, which places a crash or a hang after the last one listed.
@Suite(.serialized) final class ProcessLifeTests {
    init() {
        try? FileManager.default.removeItem(atPath: Self.reportPath(for: getpid()))
    }

    deinit {
        try? FileManager.default.removeItem(atPath: Self.reportPath(for: getpid()))
    }

    // MARK: - Unloaded libraries

    /// A hook on a table in a library that is unloaded before the hook is removed: removing
    /// it must not touch the unmapped slot, and still counts as the removal.
    @Test func removingAHookWhoseSlotWasUnloaded() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.removeAHookWhoseSlotWasUnloaded()
        }
    }

    /// Import-table hooks in a library that is unloaded before the group is removed: a
    /// writable `JUMP_SLOT` entry (`getpid`, lazy binding) and a read-only `GLOB_DAT` entry
    /// (`strlen`, partial RELRO). The removal takes no fault (the writable entry's guarded
    /// exchange took one).
    @Test func removingImportTableHooksOfAnUnloadedLibrary() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.removeImportTableHooksOfAnUnloadedLibrary()
        }
    }

    /// Attaches to import-table entries of a library that is unloaded before the group is
    /// removed: the removal writes nothing and takes no fault (the fault guard's write into the
    /// unmapped table took a SIGSEGV for each entry, and a signal sent to the process meanwhile
    /// went to the thread that took it).
    @Test func removingAttachesToAnUnloadedLibraryTakesNoFault() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.removeAttachesOfAnUnloadedLibrary()
        }
    }

    /// A group that follows later loads keeps following them after a library it covered is
    /// unloaded: the same library loaded again (often at the same address, where the registry
    /// still knows the old entries) and another library loaded after it are both hooked.
    @Test func laterLoadsAreFollowedAfterAnUnload() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.followLoadsAfterAnUnload()
        }
    }

    /// Two threads load and unload the same library through a hooked `dlopen` at the same
    /// time, two hundred times each (forty under ThreadSanitizer): whichever thread's walk hooks the new entries, each
    /// `dlopen` returns only once the library it loaded is hooked.
    @Test func loadsOnSeveralThreadsAreHookedBeforeDlopenReturns() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.followLoadsOnSeveralThreads()
        }
    }

    /// fork while another thread is in the middle of a walk that follows its `dlopen` (held
    /// there after claiming an entry): the child, where that thread does not exist, follows
    /// its own loads.
    @Test(
        .disabled(
            if: ProcessLifeTests.underThreadSanitizer,
            "the Swift runtime's lazy globals are not fork-safe under ThreadSanitizer"))
    func aChildForkedDuringAWalkFollowsItsLoads() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.forkDuringAWalk()
        }
    }

    // MARK: - The allocator

    /// malloc, calloc, realloc and free hooked in every object while four threads allocate:
    /// each thread's first call is a hooked malloc, every allocation of a known size is seen
    /// exactly once, and installing and removing the hooks while the threads run neither
    /// deadlocks nor crashes. Not under ThreadSanitizer, whose allocator runs instrumented code
    /// for a thread before the sanitizer has set the thread up, which a hook on it reaches.
    @Test(.disabled(if: ProcessLifeTests.underThreadSanitizer, "the allocator cannot be hooked under ThreadSanitizer"))
    func hookingTheAllocatorInEveryObject() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.hookTheAllocatorInEveryObject()
        }
    }

    /// A block on the allocator that removes hooks, or installs one, when it runs for an
    /// allocation the library makes inside its own install on the same thread: the removal
    /// takes effect as the install releases the lock, the install and a read of the statistics
    /// are refused with `calledFromHookBlock`, and nothing waits for a lock its own thread holds.
    @Test(.disabled(if: ProcessLifeTests.underThreadSanitizer, "the allocator cannot be hooked under ThreadSanitizer"))
    func allocatorBlocksChangeHooksInsideTheLibrarysOwnInstall() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.changeHooksFromAllocatorBlocks()
        }
    }

    /// A process that loads the library while it has one thread is registered for membarrier
    /// as it loads (the kernel then does it at once; with a second thread it first waits for
    /// a grace period, about 10 ms, which the first hook paid): before any hook, the expedited
    /// barrier is already allowed. Where the kernel offers none, registering now fails too.
    @Test func theProcessIsRegisteredForMembarrierAsTheLibraryLoads() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            ProcessLifeTests.startChild()
            let before = ffh_membarrier()
            ProcessLifeTests.check(
                before == 0 || ffh_membarrier_register() != 0,
                "the expedited memory barrier before any hook (registering now succeeded)")
        }
    }

    // MARK: - Signal handlers

    /// A signal handler calls through a hooked slot on a thread that installs and removes
    /// hooks on another slot in a loop (and never calls a hooked function otherwise): each
    /// call returns the hooked result, and nothing deadlocks. Eight fresh threads, so that
    /// a handler's call is often the thread's first hooked call, made while the thread is
    /// inside an install or a removal.
    @Test func signalHandlersCallHookedSlotsOnAThreadChangingHooks() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.callFromSignalHandlersOnAThreadChangingHooks()
        }
    }

    /// A signal handler's hooked call is the first hooked call of its thread, which is busy
    /// in malloc and free when the signal arrives; forty fresh threads.
    @Test func aSignalHandlersCallIsItsThreadsFirstHookedCall() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.callFromSignalHandlersOnFreshThreads()
        }
    }

    /// A signal handler that interrupts a block of a slot and calls through the same slot:
    /// a re-entrant call, so the block (without `.allowsReentry`) is skipped and the handler
    /// gets the original's result; the interrupted call then finishes with the hooked result.
    @Test func aSignalHandlerReentersTheSlotWhoseBlockItInterrupted() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.reenterFromASignalHandler()
        }
    }

    /// Threads whose first hooked call comes when no thread record can be mapped (the
    /// address space is full): each call still reaches the original with its arguments,
    /// without the blocks, and the hooks stay usable once memory is back. Not under the
    /// sanitizers, whose runtimes map memory of their own for a thread's first steps.
    @Test(
        .disabled(
            if: ProcessLifeTests.underAddressSanitizer || ProcessLifeTests.underThreadSanitizer,
            "the sanitizers' runtimes need to map memory while the address space is full"))
    func callsThatGetNoThreadRecordPassThrough() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.callWithoutThreadRecords()
        }
    }

    // MARK: - fork

    /// fork while two other threads are inside hooked calls (one in the original, one in a
    /// block): in the child, calls, installs, removals and waiting for reclamation work.
    @Test(
        .disabled(
            if: ProcessLifeTests.underThreadSanitizer,
            "the Swift runtime's lazy globals are not fork-safe under ThreadSanitizer"))
    func forkWhileOtherThreadsAreInsideHookedCalls() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.forkWhileOtherThreadsAreInsideHookedCalls()
        }
    }

    /// fork, twenty times, while another thread installs and removes hooks in a loop: the
    /// child's first install, calls, removals and waiting for reclamation work.
    @Test(
        .disabled(
            if: ProcessLifeTests.underThreadSanitizer,
            "the Swift runtime's lazy globals are not fork-safe under ThreadSanitizer"))
    func forkWhileAnotherThreadChangesHooks() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.forkWhileAnotherThreadChangesHooks()
        }
    }

    /// fork, a hundred times, while another thread attaches to a slot and removes the attach in
    /// a loop: the child's hooks and attaches go in and come out. The locks of the installed
    /// attaches and of the pages kept writable were not taken across fork: a child forked while
    /// the other thread held one waited for it for ever (3 to 11 children in 100).
    @Test(
        .disabled(
            if: ProcessLifeTests.underThreadSanitizer,
            "the Swift runtime's lazy globals are not fork-safe under ThreadSanitizer"))
    func forkWhileAnotherThreadChangesAttaches() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.forkWhileAnotherThreadChangesAttaches()
        }
    }

    /// A process forked from a forked child, with later loads followed: in each, the gate that
    /// keeps a fork from happening during another thread's walk of the loaded objects is open
    /// (the child's copy stayed shut, taken by the parent's thread, and its own fork waited
    /// 100 ms for it).
    @Test(
        .disabled(
            if: ProcessLifeTests.underThreadSanitizer,
            "the Swift runtime's lazy globals are not fork-safe under ThreadSanitizer"))
    func aForkInAForkedChildFindsTheWalkGateOpen() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.forkInAForkedChild()
        }
    }

    // MARK: - Calls that never return

    /// An original that longjmps out of a call through before and after hooks: afterwards
    /// the thread is outside any hooked call, on it and from other threads.
    @Test func waitingForReclamationAfterALongjmpPastBeforeAndAfterHooks() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.waitAfterALongjmp(throughAnInsteadHook: false)
        }
    }

    /// The same through an instead hook whose block calls the original.
    @Test func waitingForReclamationAfterALongjmpPastAnInsteadHook() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.waitAfterALongjmp(throughAnInsteadHook: true)
        }
    }

    /// After a longjmp out of a hooked call, later calls on that thread through the same slot
    /// are ordinary calls again: their blocks run (they are not taken for re-entry).
    @Test func hooksStillRunOnAThreadAfterALongjmp() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.callAgainAfterALongjmp()
        }
    }

    /// A table made inaccessible (PROT_NONE) when its hook is removed is still mapped: the
    /// removal keeps the slot's closure as a pass-through (it may still be in the slot once
    /// the table is accessible again) instead of giving it to another slot.
    @Test func aTableMadeInaccessibleKeepsItsClosureWhenItsHookIsRemoved() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.removeFromAnInaccessibleTable()
        }
    }

    /// Where glibc runs on x86-64, the library found its thread's cleanup list when it loaded,
    /// and hooked calls register their cleanup with three stores instead of calls into glibc
    /// (whose entries a program may hook).
    #if arch(x86_64)
        @Test func hookedCallsRegisterTheirCleanupInline() {
            #expect(ThreadState.canRegisterCleanupInline)
        }
    #endif

    /// The longjmp cases with each hooked call's cleanup registered through glibc's own
    /// functions, as where the cleanup list's place is not known.
    @Test func longjmpsPastHooksWithTheCleanupRegisteredThroughGlibc() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            ThreadState.registersCleanupInline(false)
            try ProcessLifeTests.waitAfterALongjmp(throughAnInsteadHook: true)
            try ProcessLifeTests.callAgainAfterALongjmp()
        }
    }

    /// A helper thread's hooked call whose original ends the thread with pthread_exit, while
    /// a removal waits for that call: afterwards waiting for reclamation returns.
    @Test func waitingForReclamationAfterAHookedCallEndsItsThread() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try ProcessLifeTests.waitAfterAHookedCallEndsItsThread()
        }
    }
}

// MARK: - Test bodies (run in the child processes)

extension ProcessLifeTests {
    typealias IntFunction = @convention(c) (Int32) -> Int32

    static let intToInt = try! Signature("ii")

    /// The slot of one field of the C process-fixture table.
    static func slot(_ field: KeyPath<pf_table, IntFunction?>) -> FunctionSlot {
        FunctionSlot.field(field, of: pf_table_get())
    }

    /// The same field as a typed pointer, for the C callers.
    static func pointer(_ field: KeyPath<pf_table, IntFunction?>) -> UnsafeMutablePointer<IntFunction?> {
        let offset = MemoryLayout<pf_table>.offset(of: field)!
        return (UnsafeMutableRawPointer(pf_table_get()!) + offset).assumingMemoryBound(to: IntFunction?.self)
    }

    /// Whether a field of the table holds `function`.
    static func slot(_ field: KeyPath<pf_table, IntFunction?>, holds function: IntFunction) -> Bool {
        unsafeBitCast(pf_table_get().pointee[keyPath: field], to: UInt.self) == unsafeBitCast(function, to: UInt.self)
    }

    /// Where a child process of the test process `parent` reports failed checks.
    static func reportPath(for parent: pid_t) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("ffi-hook-process-life-\(parent).log").path
    }

    /// What the child process of the last exit test reported (read once, in the test process).
    static func childReport() -> Comment? {
        let path = reportPath(for: getpid())
        defer { try? FileManager.default.removeItem(atPath: path) }
        guard let report = try? String(contentsOfFile: path, encoding: .utf8), !report.isEmpty else { return nil }
        return Comment(rawValue: report)
    }

    /// Starts an exit test's child process: arms the watchdog and sends reports of failed
    /// checks where the test process reads them.
    static func startChild() {
        pf_report_to(reportPath(for: getppid()))
        armWatchdog()
    }

    /// Kills the process with SIGALRM if it is still running after `seconds`. The body of an
    /// exit test may run on a worker thread that blocks SIGALRM (and SIGUSR1 and SIGUSR2,
    /// which the tests send): they are unblocked on this thread first, so that a forked child,
    /// made of this thread alone, can be stopped too.
    static func armWatchdog(seconds: UInt32 = 60, forked: Bool = false) {
        check(pf_unblock_test_signals() == 0, "unblocking the test's signals", forked: forked)
        alarm(seconds)
    }

    /// Ends the process with exit code 1 unless `condition` holds, naming the check; a forked
    /// child ends with `_exit`, running nothing of its parent's at exit.
    static func check(
        _ condition: Bool, _ message: @autoclosure () -> String, forked: Bool = false, line: Int = #line
    ) {
        guard !condition else {
            if tracesChecks { pf_report("ProcessLifeTests.swift:\(line): passed: \(message())") }
            return
        }
        fail(message(), forked: forked, line: line)
    }

    /// Whether passed checks are reported too (set PROCESS_LIFE_TRACE=1), which places a crash
    /// or a hang after the last one reported.
    static let tracesChecks = getenv("PROCESS_LIFE_TRACE") != nil

    /// Ends the process with exit code 1, naming the failed check on standard error.
    static func fail(_ message: String, forked: Bool = false, line: Int = #line) -> Never {
        pf_report("ProcessLifeTests.swift:\(line): check failed: \(message)")
        if forked { pf_exit_now(1) }
        exit(1)
    }

    /// Ends a forked child: 0 when `body` ran to the end, 1 when it threw.
    static func runForkedChild(_ body: () throws -> Void) -> Never {
        armWatchdog(seconds: 30, forked: true)  // alarms are not inherited across fork
        do {
            try body()
        } catch {
            pf_report("ProcessLifeTests.swift: the forked child threw \(error)")
            pf_exit_now(1)
        }
        pf_exit_now(0)
    }

    /// Waits for a forked child and checks that it exited with 0.
    static func checkForkedChild(_ child: pid_t) {
        check(child > 0, "fork")
        let status = pf_wait(child)
        check(status == 0, "the forked child exits with 0 (wait status \(status))")
    }

    /// Calls `Hook.waitForReclamation()` and checks that it returned without throwing.
    static func waitForReclamation(_ what: String, line: Int = #line) {
        do {
            try Hook.waitForReclamation()
        } catch {
            fail("waitForReclamation \(what) threw \(error)", line: line)
        }
    }

    // MARK: Unloaded libraries

    static let processFixture = "libProcessFixture.so"

    typealias TableGetter = @convention(c) () -> UnsafeMutableRawPointer?
    typealias PidFunction = @convention(c) () -> Int32

    /// Opens the process fixture library and checks that nothing keeps it loaded for good.
    static func openProcessFixture() -> UnsafeMutableRawPointer {
        let path = ImportFixtures.path(processFixture)
        check(pf_library_is_loaded(path) == 0, "\(processFixture) is not loaded yet")
        guard let handle = dlopen(path, RTLD_NOW) else {
            fail("\(processFixture) must be built: \(String(cString: dlerror()))")
        }
        check(pf_library_is_nodelete(handle) == 0, "\(processFixture) is not marked DF_1_NODELETE")
        return handle
    }

    /// Closes the process fixture library and checks that it is unloaded.
    static func closeProcessFixture(_ handle: UnsafeMutableRawPointer) {
        check(dlclose(handle) == 0, "dlclose")
        check(pf_library_is_loaded(ImportFixtures.path(processFixture)) == 0, "unloaded by dlclose")
    }

    /// A function of the opened process fixture library.
    static func function<Function>(_ name: String, in handle: UnsafeMutableRawPointer, as type: Function.Type)
        -> Function
    {
        guard let address = dlsym(handle, name) else { fail("\(name) not found") }
        return unsafeBitCast(address, to: type)
    }

    static func removeAHookWhoseSlotWasUnloaded() throws {
        startChild()
        let library = openProcessFixture()
        let table = function("cprocessfixture_table_get", in: library, as: TableGetter.self)()!
        let call = function("cprocessfixture_call", in: library, as: IntFunction.self)
        let runs = Counter()
        let token = try Hook.after(on: FunctionSlot(table), signature: intToInt) { call in
            runs.increment()
            call.setReturnValue(call.returnValue(as: Int32.self) + 1000)
        }
        check(call(5) == 1015, "the hooked call")
        check(runs.count == 1, "the block ran once")
        closeProcessFixture(library)
        check(pf_address_is_mapped(table) == 0, "the table's page is unmapped")

        // The slot's memory is gone: removal must not write it, and it is the first removal.
        check(token.remove(), "the first removal returns true")
        check(!token.remove(), "a second removal returns false")
        check(!token.isActive, "the token is inactive")
        waitForReclamation("after the removal")

        // Loaded again (perhaps at the same address), the library's table has its own
        // original and is hooked afresh.
        let again = openProcessFixture()
        let newTable = function("cprocessfixture_table_get", in: again, as: TableGetter.self)()!
        let newCall = function("cprocessfixture_call", in: again, as: IntFunction.self)
        let triple = function("cprocessfixture_triple", in: again, as: IntFunction.self)
        let holdsTriple = {
            newTable.load(as: UInt.self) == unsafeBitCast(triple, to: UInt.self)
        }
        check(holdsTriple(), "the reloaded table holds its original")
        check(newCall(5) == 15, "the reloaded library's call")
        let newToken = try Hook.after(on: FunctionSlot(newTable), signature: intToInt) { call in
            call.setReturnValue(call.returnValue(as: Int32.self) + 2000)
        }
        check(newCall(5) == 2015, "the reloaded library's hooked call")
        check(newToken.remove(), "removing the new hook")
        check(holdsTriple(), "the reloaded table has its original back")
        check(newCall(5) == 15, "the reloaded library's call after the removal")
        closeProcessFixture(again)
        waitForReclamation("at the end")
    }

    static func removeImportTableHooksOfAnUnloadedLibrary() throws {
        startChild()
        let library = openProcessFixture()
        let pid = function("cprocessfixture_pid", in: library, as: PidFunction.self)
        let length = function("cprocessfixture_length", in: library, as: ImportFixtures.Length.self)
        let pids = Counter()
        let lengths = Counter()
        let pidGroup = try ImportTable.hook(
            symbol: "getpid", in: .object(processFixture), signature: Signature("i"), position: .after
        ) { _ in
            pids.increment()
        }
        let lengthGroup = try ImportTable.hook(
            symbol: "strlen", in: .object(processFixture), signature: Signature("Q*"), position: .before
        ) { _ in
            lengths.increment()
        }
        check(pidGroup.tokens.count == 1 && lengthGroup.tokens.count == 1, "one entry of each symbol")
        check(pid() == getpid(), "getpid through the hooked entry")
        check(length("unloaded") == 8, "strlen through the hooked entry")
        check(pids.count == 1 && lengths.count == 1, "the blocks ran once each")
        closeProcessFixture(library)
        check(
            pf_address_is_mapped(unsafeBitCast(pid, to: UnsafeRawPointer.self)) == 0, "the library's code is unmapped")

        // The entries' memory is gone: removal must not write it, nor try to.
        let faults = ffh_guard_faults_taken()
        check(pidGroup.remove(), "removing the getpid group returns true")
        check(lengthGroup.remove(), "removing the strlen group returns true")
        check(ffh_guard_faults_taken() == faults, "the removals took \(ffh_guard_faults_taken() - faults) faults")
        check(!pidGroup.remove() && !lengthGroup.remove(), "second removals return false")
        waitForReclamation("after the removals")
    }

    static func removeAttachesOfAnUnloadedLibrary() throws {
        startChild()
        let library = openProcessFixture()
        let pid = function("cprocessfixture_pid", in: library, as: PidFunction.self)
        let length = function("cprocessfixture_length", in: library, as: ImportFixtures.Length.self)
        let calls = Counter()
        let group = try ImportTable.attach(symbols: ["getpid", "strlen"], in: .object(processFixture)) { _ in
            ({ _ in calls.increment() }, nil)
        }
        check(group.tokens.count == 2, "one entry of each symbol")
        check(pid() == getpid() && length("unloaded") == 8, "the calls through the attached entries")
        check(calls.count == 2, "the blocks ran once each")
        closeProcessFixture(library)
        check(
            pf_address_is_mapped(unsafeBitCast(pid, to: UnsafeRawPointer.self)) == 0, "the library's code is unmapped")
        let faults = ffh_guard_faults_taken()
        check(group.remove(), "removing the group returns true")
        check(ffh_guard_faults_taken() == faults, "the removal took \(ffh_guard_faults_taken() - faults) faults")
        check(!group.remove(), "a second removal returns false")
        waitForReclamation("after the removal")
    }

    static func followLoadsAfterAnUnload() throws {
        startChild()
        // Libraries are loaded through a library's own import of dlopen: under the
        // sanitizers the test executable defines dlopen itself, so its calls to it go
        // through no import table.
        guard let loader = dlopen(ImportFixtures.path("libImportFixture.so"), RTLD_NOW),
            let openAddress = dlsym(loader, "cimportfixture_open")
        else { fail("the import fixture must be built") }
        let load = unsafeBitCast(openAddress, to: ImportFixtures.Open.self)
        let strlens = Counter()
        let atois = Counter()
        let lengthGroup = try ImportTable.hook(
            symbol: "strlen", in: .allIncludingLaterLoads, signature: Signature("Q*"), position: .before
        ) { call in
            if String(cString: call.argument(0, as: UnsafePointer<CChar>.self)) == "followed" { strlens.increment() }
        }
        let parseGroup = try ImportTable.hook(
            symbol: "atoi", in: .allIncludingLaterLoads, signature: Signature("i*"), position: .before
        ) { call in
            if String(cString: call.argument(0, as: UnsafePointer<CChar>.self)) == "4711" { atois.increment() }
        }
        let path = ImportFixtures.path(processFixture)
        let tokensBefore = lengthGroup.tokens.count
        for round in 1...3 {
            check(pf_library_is_loaded(path) == 0, "\(processFixture) is not loaded before round \(round)")
            guard let library = load(path, RTLD_NOW) else { fail("loading \(processFixture)") }
            let length = function("cprocessfixture_length", in: library, as: ImportFixtures.Length.self)
            check(length("followed") == 8, "strlen through the library loaded in round \(round)")
            check(strlens.count == round, "the block ran for the library loaded in round \(round): \(strlens.count)")
            closeProcessFixture(library)
        }
        // Another library, loaded after the unloads.
        let laterPath = ImportFixtures.path("libLaterImportFixture.so")
        check(dlopen(laterPath, RTLD_NOW | RTLD_NOLOAD) == nil, "the later fixture is not loaded yet")
        guard let later = load(laterPath, RTLD_NOW) else { fail("the later fixture must be built") }
        let parse = function("cimportlater_parse", in: later, as: ImportFixtures.Parse.self)
        check(parse("4711") == 4712, "atoi through the library loaded after the unloads")
        check(atois.count == 1, "the atoi block ran for the library loaded after the unloads")
        // The walk for that load dropped the hooks of the unloaded library's entries.
        let laterEntries = ImportFixtures.entries(of: "strlen", in: .object("libLaterImportFixture.so")).count
        check(
            lengthGroup.tokens.count == tokensBefore + laterEntries,
            "the group holds no hook of an unloaded library: \(lengthGroup.tokens.count) tokens, \(tokensBefore) + \(laterEntries) expected"
        )
        check(lengthGroup.remove() && parseGroup.remove(), "removing both groups returns true")
        check(parse("4711") == 4712 && atois.count == 1, "no block after the removal")
        waitForReclamation("after the removals")
    }

    /// `cimportfixture_open`: dlopen called from a library's own import of it.
    static func fixtureLoader() -> ImportFixtures.Open {
        guard let loader = dlopen(ImportFixtures.path("libImportFixture.so"), RTLD_NOW),
            let openAddress = dlsym(loader, "cimportfixture_open")
        else { fail("the import fixture must be built") }
        return unsafeBitCast(openAddress, to: ImportFixtures.Open.self)
    }

    static func followLoadsOnSeveralThreads() throws {
        startChild()
        let load = fixtureLoader()
        let counts = [Counter(), Counter()]
        let markers = ["thread-0", "thread-1"]
        let group = try ImportTable.hook(
            symbol: "strlen", in: .allIncludingLaterLoads, signature: Signature("Q*"), position: .before
        ) { call in
            let text = String(cString: call.argument(0, as: UnsafePointer<CChar>.self))
            if let index = markers.firstIndex(of: text) { counts[index].increment() }
        }
        let misses = Counter()
        let path = ImportFixtures.path(processFixture)
        // Under ThreadSanitizer each load is many times slower.
        let rounds = underThreadSanitizer ? 40 : 200
        let threads = (0..<2).map { index in
            JoinableThread {
                for _ in 0..<rounds {
                    guard let library = load(path, RTLD_NOW) else { fail("loading \(processFixture)") }
                    let length = function("cprocessfixture_length", in: library, as: ImportFixtures.Length.self)
                    let before = counts[index].count
                    _ = length(markers[index])
                    if counts[index].count != before + 1 { misses.increment() }
                    dlclose(library)
                }
            }
        }
        for thread in threads { thread.join() }
        check(
            misses.count == 0, "every call right after a dlopen was hooked: \(misses.count) of \(2 * rounds) were not")
        check(group.remove(), "removing the group")
        waitForReclamation("after the removal")
    }

    static func forkDuringAWalk() throws {
        startChild()
        check(pf_hold_init() == 0, "the hold pipe")
        let load = fixtureLoader()
        // The walker is held where a walk binds a lazily bound entry (the fixture's getpid,
        // loaded with RTLD_LAZY) after claiming it, outside the registry's lock: by the
        // library's observer of that moment (the walk is the library's own work, which no
        // hook of the program's sees).
        ffh_elf_set_resolve_observer(pf_hold_resolving)
        defer { ffh_elf_set_resolve_observer(nil) }
        let pids = Counter()
        let group = try ImportTable.hook(
            symbol: "getpid", in: .allIncludingLaterLoads, signature: Signature("i"), position: .after
        ) { _ in
            pids.increment()
        }
        let path = ImportFixtures.path(processFixture)
        let loading = JoinableThread {
            pf_hold_set_walker()
            // Lazily, so that the fixture's getpid entry waits to be bound by the walk.
            guard let library = load(path, RTLD_LAZY) else { fail("loading \(processFixture) on the walker") }
            dlclose(library)
        }
        pf_hold_wait_arrivals(1)
        let child = pf_fork()
        if child == 0 {
            runForkedChild {
                guard let library = load(path, RTLD_NOW) else { fail("loading in the child", forked: true) }
                let pid = function("cprocessfixture_pid", in: library, as: PidFunction.self)
                let before = pids.count
                let value = pid()
                check(pids.count == before + 1, "the child's load was followed", forked: true)
                check(value == getpid(), "getpid through the fixture in the child", forked: true)
                check(group.remove(), "removals in the child", forked: true)
            }
        }
        let status = child > 0 ? pf_wait(child) : -1
        pf_hold_release(1)
        loading.join()
        check(status == 0, "the forked child exits with 0 (wait status \(status))")
        check(group.remove(), "removals in the parent")
        waitForReclamation("in the parent")
    }

    // MARK: The allocator

    /// What the allocator hooks saw: calls with the fixture's size, and frees of its marked blocks.
    final class AllocationCounts: Sendable {
        let mallocs = Counter()
        let callocs = Counter()
        let reallocs = Counter()
        let markedFrees = Counter()
    }

    /// Hooks malloc, calloc, realloc and free in every loaded object.
    static func hookTheAllocator(counting counts: AllocationCounts) throws -> [HookGroupToken] {
        let size = UInt64(PF_MAGIC_SIZE)
        return [
            try ImportTable.hook(symbol: "malloc", in: .all, signature: Signature("^vQ"), position: .after) { call in
                if call.argument(0, as: UInt64.self) == size { counts.mallocs.increment() }
            },
            try ImportTable.hook(symbol: "calloc", in: .all, signature: Signature("^vQQ"), position: .after) { call in
                if call.argument(0, as: UInt64.self) == 1 && call.argument(1, as: UInt64.self) == size {
                    counts.callocs.increment()
                }
            },
            try ImportTable.hook(symbol: "realloc", in: .all, signature: Signature("^v^vQ"), position: .after) { call in
                if call.argument(1, as: UInt64.self) == size { counts.reallocs.increment() }
            },
            // Before the original: the block is still allocated, and its first word readable.
            try ImportTable.hook(symbol: "free", in: .all, signature: Signature("v^v"), position: .before) { call in
                if pf_alloc_is_marked(call.argument(0, as: UnsafeRawPointer?.self)) != 0 {
                    counts.markedFrees.increment()
                }
            },
        ]
    }

    static func changeHooksFromAllocatorBlocks() throws {
        startChild()
        pf_reset()
        final class Box: Sendable {
            let group = Mutex<HookGroupToken?>(nil)
            let outcome = Mutex<String?>(nil)
            let countdown = Atomic<Int>(0)
        }
        // Made before the allocator is hooked: a block must not be the first to need the C
        // table's type metadata or a lazy global, which the Swift runtime makes under a lock
        // it holds while allocating (the block would wait for itself).
        let churn = slot(\.churn)
        let probe = slot(\.probe)
        let signature = intToInt
        let mallocSignature = try Signature("^vQ")
        var outcomes: [String] = []
        // The block acts on the n-th allocation after it is armed, for n = 1, 2, ...: some of
        // those are allocations the probe's install makes while it holds the library's lock.
        for countdown in 1...40 {
            let box = Box()
            let group = try ImportTable.hook(symbol: "malloc", in: .all, signature: mallocSignature, position: .after) {
                _ in
                guard box.countdown.subtract(1, ordering: .relaxed).newValue == 0 else { return }
                // Removes its own group, and tries to install a hook meanwhile.
                let removed = box.group.withLock { $0 }?.remove() == true
                var outcome = "removed \(removed), "
                do {
                    let token = try Hook.before(on: churn, signature: signature) { _ in }
                    token.remove()
                    outcome += "installed"
                } catch let error as HookError {
                    outcome += error.code == .calledFromHookBlock ? "refused" : "\(error)"
                } catch {
                    outcome += "\(error)"
                }
                // Reading the statistics is refused where an install is.
                do throws(HookError) {
                    _ = try Hook.statistics
                    outcome += ", read"
                } catch {
                    outcome += error.code == .calledFromHookBlock ? ", refused" : ", \(error)"
                }
                box.outcome.withLock { $0 = outcome }
            }
            box.group.withLock { $0 = group }
            box.countdown.store(countdown, ordering: .relaxed)
            let token = try Hook.before(on: probe, signature: signature) { _ in }
            check(token.remove(), "removing the probe hook, countdown \(countdown)")
            box.countdown.store(-1, ordering: .relaxed)
            if let outcome = box.outcome.withLock({ $0 }) {
                check(!group.isActive, "the allocator group removed itself, countdown \(countdown)")
                outcomes.append(outcome)
            } else {
                group.remove()
            }
            box.group.withLock { $0 = nil }
        }
        check(
            outcomes.allSatisfy { $0 == "removed true, refused, refused" || $0 == "removed true, installed, read" },
            "outcomes: \(outcomes)")
        check(
            outcomes.contains("removed true, refused, refused"),
            "a block ran inside the install's own work: \(outcomes)")
        waitForReclamation("after the allocator groups")
    }

    /// Whether the process runs under AddressSanitizer, whose runtime the executable holds.
    static let underAddressSanitizer = dlsym(nil, "__asan_init") != nil

    /// Whether the process runs under ThreadSanitizer. There the Swift runtime takes a lock on
    /// every use of a lazy global, even an initialised one, so a fork while another thread uses
    /// one leaves the child waiting for that lock for ever.
    static let underThreadSanitizer = dlsym(nil, "__tsan_init") != nil

    static func hookTheAllocatorInEveryObject() throws {
        startChild()
        let counts = AllocationCounts()

        // Installed before the threads start and removed after they end: every allocation of
        // the fixture's size is seen exactly once. Each thread's first call is a hooked malloc.
        let groups = try hookTheAllocator(counting: counts)
        check(pf_alloc_start(4, 2000, 0) == 0, "starting the threads")
        let iterations = pf_alloc_stop()
        for group in groups { check(group.remove(), "removing an allocator group") }
        waitForReclamation("after the first phase")
        check(iterations == 8000, "the threads ran \(iterations) iterations")
        // Under AddressSanitizer the executable defines malloc itself, so the fixture's calls
        // (compiled into the executable) do not go through an import table: nothing to count.
        if !Self.underAddressSanitizer {
            check(counts.mallocs.count == iterations, "malloc: \(counts.mallocs.count) of \(iterations)")
            check(counts.callocs.count == iterations, "calloc: \(counts.callocs.count) of \(iterations)")
            check(counts.reallocs.count == iterations, "realloc: \(counts.reallocs.count) of \(iterations)")
            check(
                counts.markedFrees.count == 3 * iterations, "free: \(counts.markedFrees.count) of \(3 * iterations)")
        }

        // Installed and removed five times while the threads allocate (they run until stopped).
        let during = AllocationCounts()
        check(pf_alloc_start(4, 200, 1) == 0, "starting the threads again")
        pf_alloc_wait_running()
        for _ in 0..<5 {
            for group in try hookTheAllocator(counting: during) {
                check(group.remove(), "removing an allocator group while the threads run")
            }
        }
        let more = pf_alloc_stop()
        waitForReclamation("after the second phase")
        check(during.mallocs.count <= more, "malloc: \(during.mallocs.count) seen, \(more) made")
        check(during.markedFrees.count <= 3 * more, "free: \(during.markedFrees.count) seen, \(3 * more) made")
        check(SlotRegistry.shared.pendingReclamationCount == 0, "nothing waits for reclamation")
    }

    // MARK: Signal handlers

    /// Installs the SIGUSR1 and SIGUSR2 handlers and an after hook on the `probe` slot that
    /// adds 1000; returns its token.
    static func hookTheProbe() throws -> HookToken {
        pf_reset()
        check(pf_signal_install() == 0, "installing the signal handlers")
        let token = try Hook.after(on: slot(\.probe), signature: intToInt) { call in
            call.setReturnValue(call.returnValue(as: Int32.self) + 1000)
        }
        pf_signal_expect(PF_PROBE_ARGUMENT + 1 + 1000)
        // One call from this thread first, outside any handler: the first run of a block's
        // Invocation accessors may make the Swift runtime look up generic metadata, which
        // allocates. What the handlers then test is the hook engine's own call path.
        check(pf_call_slot(pointer(\.probe), 1) == 1002, "a call through the probe slot")
        return token
    }

    static func callFromSignalHandlersOnAThreadChangingHooks() throws {
        startChild()
        let probe = try hookTheProbe()
        var sent: UInt = 0
        for _ in 0..<8 {
            let stop = Flag()
            let changes = Counter()
            // Installs and removes hooks on the `churn` slot and calls nothing hooked itself.
            let changer = JoinableThread {
                while !stop.isSet {
                    do {
                        let token = try Hook.before(on: slot(\.churn), signature: intToInt) { _ in }
                        token.remove()
                    } catch {
                        fail("installing on the churn slot threw \(error)")
                    }
                    changes.increment()
                }
            }
            while changes.count == 0 { sched_yield() }
            for _ in 0..<40 {
                sent += 1
                check(pf_signal_send_and_wait(changer.handle, sent) == 0, "pthread_kill")
            }
            stop.set()
            changer.join()
        }
        check(pf_signal_handled() == sent, "handled \(pf_signal_handled()) of \(sent) signals")
        check(pf_signal_matched() == sent, "\(pf_signal_matched()) of \(sent) handler calls returned the hooked result")
        check(probe.remove(), "removing the probe hook")
        waitForReclamation("at the end")
    }

    static func callFromSignalHandlersOnFreshThreads() throws {
        startChild()
        let probe = try hookTheProbe()
        for _ in 0..<40 {
            check(pf_signal_busy_round() == 0, "a round on a fresh thread")
        }
        check(pf_signal_handled() == 40, "handled \(pf_signal_handled()) of 40 signals")
        check(pf_signal_matched() == 40, "\(pf_signal_matched()) of 40 handler calls returned the hooked result")
        check(probe.remove(), "removing the probe hook")
        waitForReclamation("at the end")
    }

    static func reenterFromASignalHandler() throws {
        startChild()
        let probe = try hookTheProbe()
        let runs = Counter()
        let token = try Hook.instead(on: slot(\.reenter), signature: intToInt) { call in
            runs.increment()
            // SIGUSR2's handler runs here, on this thread, inside this block, and calls
            // through the `reenter` slot with PF_REENTER_ARGUMENT: a re-entrant call, so this
            // block (no .allowsReentry) is skipped and the original answers it.
            pf_signal_raise_reentry()
            call.callOriginal()
            call.setReturnValue(call.returnValue(as: Int32.self) * 1000)
        }
        for round in 1...10 {
            check(pf_call_slot(pointer(\.reenter), 3) == 4000, "the interrupted call's hooked result")
            check(pf_reentry_handled() == UInt(round), "the handler ran")
            check(pf_reentry_result() == PF_REENTER_ARGUMENT + 1, "the handler got the original's result")
        }
        check(runs.count == 10, "the block ran once per outer call: \(runs.count)")
        check(token.remove() && probe.remove(), "removing the hooks")
        waitForReclamation("at the end")
    }

    static func callWithoutThreadRecords() throws {
        startChild()
        pf_reset()
        let runs = Counter()
        let token = try Hook.after(on: slot(\.churn), signature: intToInt) { call in
            runs.increment()
            call.setReturnValue(call.returnValue(as: Int32.self) + 1000)
        }
        // Forty holders, one after the other, claim as many records, which leaves fewer than
        // a mapping's worth (fourteen) free; the late threads call one at a time, each
        // staying alive, so the later ones find no record and cannot map one.
        let late = 40
        var results = [Int32](repeating: 0, count: late)
        let status = pf_call_without_thread_records(pointer(\.churn), 2, 40, Int32(late), &results)
        check(status == 0, "the threads and the address-space limit were set up")
        check(results.allSatisfy { $0 == 3 || $0 == 1003 }, "every late call returned a right result: \(results)")
        let passedThrough = results.count { $0 == 3 }
        check(passedThrough >= 1, "some late calls had no record: \(results)")
        check(runs.count == 40 + late - passedThrough, "the block ran for each call that had a record")
        check(pf_call_slot(pointer(\.churn), 2) == 1003, "a hooked call once memory is back")
        check(token.remove(), "removing the hook")
        waitForReclamation("after the removal")
        check(pf_call_slot(pointer(\.churn), 2) == 3, "the original after the removal")
    }

    // MARK: fork

    static func forkWhileOtherThreadsAreInsideHookedCalls() throws {
        startChild()
        pf_reset()
        check(pf_hold_init() == 0, "the hold pipe")
        let holdHook = try Hook.after(on: slot(\.hold), signature: intToInt) { call in
            call.setReturnValue(call.returnValue(as: Int32.self) + 100)
        }
        let churnHook = try Hook.before(on: slot(\.churn), signature: intToInt) { call in
            if call.argument(0, as: Int32.self) == PF_HOLD { pf_hold_here() }
        }
        // One thread held in the original under an after hook, one held inside a before block.
        let inOriginal = pf_caller_start(pointer(\.hold), PF_HOLD)
        let inBlock = pf_caller_start(pointer(\.churn), PF_HOLD)
        check(inOriginal != nil && inBlock != nil, "starting the callers")
        pf_hold_wait_arrivals(2)

        let child = pf_fork()
        if child == 0 {
            runForkedChild {
                check(pf_call_slot(pointer(\.hold), 1) == 102, "a call through the hooked hold slot", forked: true)
                check(pf_call_slot(pointer(\.churn), 1) == 2, "a call through the hooked churn slot", forked: true)
                let probeHook = try Hook.after(on: slot(\.probe), signature: intToInt) { call in
                    call.setReturnValue(call.returnValue(as: Int32.self) + 1000)
                }
                check(pf_call_slot(pointer(\.probe), 1) == 1002, "a call through a new hook", forked: true)
                check(probeHook.remove() && holdHook.remove() && churnHook.remove(), "removals", forked: true)
                check(slot(\.hold, holds: pf_hold_original), "the hold slot has its original back", forked: true)
                check(slot(\.churn, holds: pf_churn_original), "the churn slot has its original back", forked: true)
                check(slot(\.probe, holds: pf_probe_original), "the probe slot has its original back", forked: true)
                try Hook.waitForReclamation()
                check(SlotRegistry.shared.pendingReclamationCount == 0, "nothing waits for reclamation", forked: true)
            }
        }
        let status = child > 0 ? pf_wait(child) : -1
        pf_hold_release(2)
        check(pf_caller_join(inOriginal) == PF_HOLD + 1 + 100, "the call held in the original")
        check(pf_caller_join(inBlock) == PF_HOLD + 1, "the call held in the block")
        check(status == 0, "the forked child exits with 0 (wait status \(status))")
        check(holdHook.remove() && churnHook.remove(), "removals in the parent")
        waitForReclamation("in the parent")
        check(SlotRegistry.shared.pendingReclamationCount == 0, "nothing waits for reclamation in the parent")
    }

    static func forkWhileAnotherThreadChangesHooks() throws {
        try forkWhileAnotherThreadChanges(forks: 20) {
            try Hook.before(on: slot(\.churn), signature: intToInt) { _ in }.remove()
        } inChild: {
            let churnHook = try Hook.after(on: slot(\.churn), signature: intToInt) { call in
                call.setReturnValue(call.returnValue(as: Int32.self) + 1000)
            }
            check(pf_call_slot(pointer(\.churn), 1) == 1002, "a call through the churn slot", forked: true)
            check(churnHook.remove(), "the churn slot's removal", forked: true)
            try Hook.waitForReclamation()
        }
    }

    static func forkWhileAnotherThreadChangesAttaches() throws {
        try forkWhileAnotherThreadChanges(forks: 100) {
            try Hook.attach(on: slot(\.churn), onEnter: { _ in }).remove()
        } inChild: {
            let enters = Counter()
            let attach = try Hook.attach(on: slot(\.churn), onEnter: { _ in enters.increment() })
            check(pf_call_slot(pointer(\.churn), 1) == 2, "a call through the attach", forked: true)
            check(enters.count == 1, "the attach's enter block ran", forked: true)
            check(attach.remove(), "the attach's removal", forked: true)
        }
    }

    /// Forks `forks` times while another thread runs `change` on the churn slot in a loop (each
    /// fork after one more change); each child installs a hook on the probe slot, calls it, runs
    /// `inChild`, removes the hook and checks the probe slot has its original back.
    static func forkWhileAnotherThreadChanges(
        forks: Int, _ change: @escaping @Sendable () throws -> Void, inChild: () throws -> Void
    ) throws {
        startChild()
        pf_reset()
        let stop = Flag()
        let changes = Counter()
        let changer = JoinableThread {
            while !stop.isSet {
                do {
                    try change()
                } catch {
                    fail("changing the churn slot threw \(error)")
                }
                changes.increment()
            }
        }
        for _ in 0..<forks {
            let before = changes.count
            while changes.count <= before { sched_yield() }
            let child = pf_fork()
            if child == 0 {
                runForkedChild {
                    let probeHook = try Hook.after(on: slot(\.probe), signature: intToInt) { call in
                        call.setReturnValue(call.returnValue(as: Int32.self) + 1000)
                    }
                    check(pf_call_slot(pointer(\.probe), 1) == 1002, "a call through a new hook", forked: true)
                    try inChild()
                    check(probeHook.remove(), "the probe slot's removal", forked: true)
                    check(slot(\.probe, holds: pf_probe_original), "the probe slot has its original back", forked: true)
                }
            }
            checkForkedChild(child)
        }
        stop.set()
        changer.join()
        waitForReclamation("in the parent")
    }

    static func forkInAForkedChild() throws {
        startChild()
        let pids = Counter()
        let group = try ImportTable.hook(
            symbol: "getpid", in: .allIncludingLaterLoads, signature: Signature("i"), position: .after
        ) { _ in
            pids.increment()
        }
        check(ffh_elf_gate_is_open() != 0, "the gate is open in the parent")
        let child = pf_fork()
        if child == 0 {
            runForkedChild {
                check(ffh_elf_gate_is_open() != 0, "the gate is open in the child", forked: true)
                let grandchild = pf_fork()
                if grandchild == 0 {
                    runForkedChild {
                        check(ffh_elf_gate_is_open() != 0, "the gate is open in the grandchild", forked: true)
                        check(group.remove(), "removal in the grandchild", forked: true)
                    }
                }
                check(grandchild > 0 && pf_wait(grandchild) == 0, "the grandchild exits with 0", forked: true)
                check(ffh_elf_gate_is_open() != 0, "the gate is open in the child after its fork", forked: true)
                check(group.remove(), "removal in the child", forked: true)
            }
        }
        checkForkedChild(child)
        check(ffh_elf_gate_is_open() != 0, "the gate is open in the parent after its fork")
        check(group.remove(), "removal in the parent")
    }

    // MARK: Calls that never return

    static func removeFromAnInaccessibleTable() throws {
        startChild()
        let page = 4096
        guard let table = mmap(nil, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            table != MAP_FAILED
        else { fail("mmap") }
        let slot = table.bindMemory(to: AddFunction?.self, capacity: 1)
        slot.initialize(to: ct_fix_add)
        let token = try Hook.instead(on: FunctionSlot(slot), signature: FixtureSignature.add) { call in
            call.setReturnValue(Int32(1000))
        }
        check(slot.pointee!(2, 3) == 1000, "the hooked call")
        check(mprotect(table, page, PROT_NONE) == 0, "mprotect PROT_NONE")
        check(token.remove(), "the removal")
        check(mprotect(table, page, PROT_READ | PROT_WRITE) == 0, "mprotect PROT_READ | PROT_WRITE")
        // The slot still holds the closure, which passes calls through to the original.
        check(address(in: slot) != addOriginalAddress, "the slot still holds the closure")
        check(slot.pointee!(2, 3) == 5, "a call through the kept closure reaches the original")
        // Another slot hooked now does not get that closure.
        try Hook.waitForReclamation()
        let other = makeAddSlot()
        let otherToken = try Hook.after(on: FunctionSlot(other), signature: FixtureSignature.add) { call in
            call.setReturnValue(call.returnValue(as: Int32.self) + 7000)
        }
        check(address(in: other) != address(in: slot), "another slot gets a closure of its own")
        check(slot.pointee!(2, 3) == 5, "the first table's calls still reach its original")
        check(other.pointee!(2, 3) == 7005, "the other slot's hook")
        check(otherToken.remove(), "the other removal")
        other.deallocate()
    }

    static func waitAfterALongjmp(throughAnInsteadHook: Bool) throws {
        startChild()
        pf_reset()
        let runs = Counter()
        let tokens: [HookToken]
        if throughAnInsteadHook {
            // The jump skips the instead block's Swift frames, and with them the releases
            // they would have made: LeakSanitizer would report those at exit.
            pf_expect_leaks()
            tokens = [
                try Hook.instead(on: slot(\.jump), signature: intToInt) { call in
                    runs.increment()
                    call.callOriginal()
                    call.setReturnValue(call.returnValue(as: Int32.self) + 100)
                }
            ]
        } else {
            tokens = [
                try Hook.before(on: slot(\.jump), signature: intToInt) { _ in runs.increment() },
                try Hook.after(on: slot(\.jump), signature: intToInt) { call in
                    call.setReturnValue(call.returnValue(as: Int32.self) + 100)
                },
            ]
        }
        check(pf_call_jump(0) == 101, "a call that returns")
        // The original longjmps to pf_call_jump's setjmp, past the hook's frames.
        check(pf_call_jump(7) == -7, "a call that jumps")
        check(runs.count == 2, "the block ran for both calls: \(runs.count)")
        check(pf_call_jump(8) == -8 && pf_call_jump(9) == -9, "more calls that jump")

        // The thread that jumped is no longer inside a hooked call: waiting must neither throw
        // (as from inside a block) nor wait for itself. Called directly from the frame that
        // made the calls that jumped, the way a C caller's error path would.
        do {
            try Hook.waitForReclamation()
        } catch {
            fail("waitForReclamation on the thread that jumped threw \(error)")
        }
        // Then a removal does not wait for the abandoned calls, from another thread either.
        let extra = try Hook.before(on: slot(\.churn), signature: intToInt) { _ in }
        check(extra.remove(), "removing a hook after the jumps")
        let waited = Flag()
        let waiter = JoinableThread {
            do {
                try Hook.waitForReclamation()
                waited.set()
            } catch {
                fail("waitForReclamation on another thread threw \(error)")
            }
        }
        waiter.join()
        check(waited.isSet, "waited on another thread")

        for token in tokens { check(token.remove(), "removing a jump hook") }
        waitForReclamation("after removing the jump hooks")
        check(SlotRegistry.shared.pendingReclamationCount == 0, "nothing waits for reclamation")
        check(slot(\.jump, holds: pf_jump_original), "the jump slot has its original back")
    }

    static func callAgainAfterALongjmp() throws {
        startChild()
        pf_reset()
        // The jumps skip an instead block's Swift frames (see waitAfterALongjmp).
        pf_expect_leaks()
        let befores = Counter()
        let insteads = Counter()
        let before = try Hook.before(on: slot(\.jump), signature: intToInt) { _ in befores.increment() }
        let after = try Hook.after(on: slot(\.jump), signature: intToInt) { call in
            call.setReturnValue(call.returnValue(as: Int32.self) + 100)
        }
        let instead = try Hook.instead(on: slot(\.jump), signature: intToInt) { call in
            insteads.increment()
            call.callOriginal()
        }
        check(pf_call_jump(7) == -7, "a call that jumps")
        check(befores.count == 1 && insteads.count == 1, "the blocks ran for the call that jumped")
        for round in 2...4 {
            check(pf_call_jump(0) == 101, "a call after the jump runs the after block")
            check(befores.count == round && insteads.count == round, "the blocks ran again: round \(round)")
        }
        check(pf_call_jump(9) == -9, "another call that jumps")
        check(pf_call_jump(0) == 101, "a call after the second jump runs the after block")
        check(befores.count == 6 && insteads.count == 6, "the blocks ran for every call")
        check(before.remove() && after.remove() && instead.remove(), "removals")
        check(pf_call_jump(0) == 1, "a call after the removals reaches the original alone")
    }

    static func waitAfterAHookedCallEndsItsThread() throws {
        startChild()
        pf_reset()
        check(pf_hold_init() == 0, "the hold pipe")
        let after = try Hook.after(on: slot(\.leave), signature: intToInt) { call in
            call.setReturnValue(call.returnValue(as: Int32.self) + 100)
        }
        let extra = try Hook.before(on: slot(\.leave), signature: intToInt) { _ in }
        // The helper's call holds in the original, then the original calls pthread_exit.
        let helper = pf_caller_start(pointer(\.leave), PF_HOLD)
        check(helper != nil, "starting the helper")
        pf_hold_wait_arrivals(1)
        // Removed while the helper is inside the call: reclaiming it waits for the helper.
        check(extra.remove(), "removing a hook while the helper is inside the call")
        pf_hold_release(1)
        check(pf_caller_join(helper) == PF_THREAD_EXITED, "the helper ended in pthread_exit")

        waitForReclamation("after the helper ended")
        check(pf_call_slot(pointer(\.leave), 1) == 102, "a call through the hooked slot")
        check(after.remove(), "removing the after hook")
        waitForReclamation("after the last removal")
        check(SlotRegistry.shared.pendingReclamationCount == 0, "nothing waits for reclamation")
        check(slot(\.leave, holds: pf_leave_original), "the leave slot has its original back")
    }
}

/// A flag one thread sets and others read.
private final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}

/// A POSIX thread that runs a Swift closure; its handle is what pthread_kill takes.
final class JoinableThread: Sendable {
    let handle: pthread_t

    private final class Body: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    init(_ body: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var handle = pthread_t()
        let status = pthread_create(
            &handle, nil,
            { context in
                Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            }, context)
        precondition(status == 0, "pthread_create failed: \(status)")
        self.handle = handle
    }

    func join() {
        pthread_join(handle, nil)
    }
}
