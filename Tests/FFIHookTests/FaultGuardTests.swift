import CTestSupport
import FFIHookCore
import Foundation
import Synchronization
import Testing

@testable import FFIHook

/// The fault guard: the library's reads and compare-and-swaps of memory it does not own
/// cannot crash the process, even when the owner unmaps that memory during the access, and
/// every other fault still reaches whatever the program (or a sanitizer) installed for it.
///
/// Each test runs in a child process with a watchdog (`alarm`), so that a crash or a hang
/// ends the child and fails the test rather than the run; a failed check ends the child with
/// exit code 1 after naming the check on standard error and in a file the test quotes.
@Suite(.serialized) final class FaultGuardTests {
    init() {
        try? FileManager.default.removeItem(atPath: Self.reportPath(for: getpid()))
    }

    deinit {
        try? FileManager.default.removeItem(atPath: Self.reportPath(for: getpid()))
    }

    // MARK: - Guarded accesses

    /// A compare-and-swap and a read on a writable page work; on a read-only page the
    /// exchange reports the slot unwritable and the read works; on an unmapped page both
    /// report failure, and the process goes on.
    @Test func guardedAccessesOnWritableReadOnlyAndUnmappedPages() async {
        await #expect(processExitsWith: .success, FaultGuardTests.childReport()) {
            try FaultGuardTests.accessPagesOfEveryKind()
        }
    }

    // MARK: - Faults that are not the guard's

    /// A NULL dereference after the guard is installed still ends the process with SIGSEGV
    /// (the guard restores the default action and the fault repeats); under a sanitizer, its
    /// own handler (which the guard covers) reports the fault.
    @Test func aFaultElsewhereStillEndsTheProcess() async throws {
        let sanitized = ProcessLifeTests.underAddressSanitizer || ProcessLifeTests.underThreadSanitizer
        let result = await #expect(
            processExitsWith: sanitized ? .failure : .signal(SIGSEGV), observing: [\.standardErrorContent]
        ) {
            FaultGuardTests.faultAfterTheGuard()
        }
        let output = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(output.contains("the guard is installed"), "\(output)")
        if sanitized {
            #expect(output.contains("SEGV on unknown address"), "\(output)")
        }
    }

    /// A SIGSEGV handler the program installed before the guard gets the faults that are not
    /// the guard's, with their address, and none of the guard's own.
    @Test func aHandlerInstalledBeforeTheGuardGetsTheOtherFaults() async {
        await #expect(processExitsWith: .success, FaultGuardTests.childReport()) {
            try FaultGuardTests.chainToAnEarlierHandler()
        }
    }

    /// A call the library's own work makes (a walk's `dlopen` through a program's hook) goes
    /// straight through, unless a signal handler that interrupted the work makes it; the
    /// handler is found by its signal frame on the stack. A frame a returned handler left in
    /// stack memory that a later function takes without writing it (the fault guard's, a
    /// stop's) is not a running handler's: it made such calls run the program's blocks.
    @Test func aSignalFrameLeftInTheStackIsNotARunningHandlers() async {
        await #expect(processExitsWith: .success, FaultGuardTests.childReport()) {
            FaultGuardTests.startChild()
            FaultGuardTests.check(
                ff_interrupted_below_running_handler() == 1, "a running handler's frame is found")
            FaultGuardTests.check(ff_interrupted_below_left_frame() == 0, "a returned handler's frame is not")
        }
    }

    /// A handler installed with SA_RESETHAND before the guard gets the first fault that is not
    /// the guard's, and the next one meets the default action, as without the guard.
    @Test func aResettingHandlerGetsOneFault() async {
        await #expect(processExitsWith: .signal(SIGSEGV), FaultGuardTests.childReport()) {
            FaultGuardTests.faultTwiceUnderAResettingHandler()
        }
    }

    /// A program that set SIGSEGV to SIG_IGN before the guard still dies of a fault, as the
    /// kernel makes it without the guard (a fault cannot be ignored).
    @Test func anIgnoredFaultStillEndsTheProcess() async {
        await #expect(processExitsWith: .signal(SIGSEGV), FaultGuardTests.childReport()) {
            FaultGuardTests.faultWhileIgnoringFaults()
        }
    }

    /// A SIGSEGV handler the program installs after the guard: the next guarded access puts
    /// the guard back on top and still reports the unmapped page, and the program's handler
    /// gets the other faults.
    @Test func aHandlerInstalledAfterTheGuardIsCovered() async {
        await #expect(processExitsWith: .success, FaultGuardTests.childReport()) {
            try FaultGuardTests.coverALaterHandler()
        }
    }

    /// A handler installed after the guard that passes faults on to the action it replaced
    /// (the guard), as crash reporters do: once the guard is back on top, a fault that is not
    /// the guard's runs that handler once, and goes on from the guard to what was installed
    /// before both (the default action, or a sanitizer's handler), not back and forth.
    @Test func aLaterHandlerThatPassesFaultsOnRunsOnce() async throws {
        let sanitized = ProcessLifeTests.underAddressSanitizer || ProcessLifeTests.underThreadSanitizer
        let result = await #expect(
            processExitsWith: sanitized ? .failure : .signal(SIGSEGV), observing: [\.standardErrorContent]
        ) {
            FaultGuardTests.faultUnderAChainingHandler()
        }
        let output = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(output.contains("the guard is back on top"), "\(output)")
        #expect(output.contains("the chaining handler ran: call 1"), "\(output)")
        #expect(!output.contains("the chaining handler ran: call 2"), "\(output)")
    }

    // MARK: - Tables unmapped under their hooks

    /// Threads call through tables whose `.once` hooks remove themselves as they run, while
    /// another thread unmaps each table as soon as the callers have read it: the deferred
    /// removals meet slots unmapped before or during their write-back, round after round
    /// (fewer under ThreadSanitizer), and the process neither crashes nor loses a call.
    @Test func unmappingTablesWhileOnceHooksRemoveThemselves() async {
        await #expect(processExitsWith: .success, FaultGuardTests.childReport()) {
            try FaultGuardTests.unmapTablesUnderOnceHooks()
        }
    }
}

// MARK: - Test bodies (run in the child processes)

extension FaultGuardTests {
    static let intToInt = try! Signature("ii")
    static let pageSize = UInt(sysconf(Int32(_SC_PAGESIZE)))

    /// Where a child of the test process `parent` reports failed checks.
    static func reportPath(for parent: pid_t) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("ffi-hook-fault-guard-\(parent).log").path
    }

    /// What the child process of the last exit test reported (read once, in the test process).
    static func childReport() -> Comment? {
        let path = reportPath(for: getpid())
        defer { try? FileManager.default.removeItem(atPath: path) }
        guard let report = try? String(contentsOfFile: path, encoding: .utf8), !report.isEmpty else { return nil }
        return Comment(rawValue: report)
    }

    /// Starts a child: reports go where the test process reads them, a watchdog ends a hang,
    /// and a crash leaves no core file.
    static func startChild(seconds: UInt32 = 60) {
        pf_report_to(reportPath(for: getppid()))
        var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = withUnsafePointer(to: &noCore) { setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), $0) }
        ProcessLifeTests.armWatchdog(seconds: seconds)
    }

    /// Ends the child with exit code 1 unless `condition` holds, naming the check. With
    /// FAULT_GUARD_TRACE=1 in the environment passed checks are reported too, which places a
    /// crash or a hang after the last one reported.
    static func check(_ condition: Bool, _ message: @autoclosure () -> String, line: Int = #line) {
        guard !condition else {
            if getenv("FAULT_GUARD_TRACE") != nil { pf_report("FaultGuardTests.swift:\(line): passed: \(message())") }
            return
        }
        pf_report("FaultGuardTests.swift:\(line): check failed: \(message())")
        exit(1)
    }

    static func accessPagesOfEveryKind() throws {
        startChild()
        guard let page = ff_map_page(PROT_READ | PROT_WRITE) else { return check(false, "mmap") }
        let address = UInt(bitPattern: page)
        page.storeBytes(of: 7, as: UInt.self)

        check(SlotMemory.exchange(address, expected: 7, desired: 9) == .replaced, "exchange on a writable page")
        check(page.load(as: UInt.self) == 9, "the word was written")
        check(SlotMemory.exchange(address, expected: 7, desired: 11) == .heldOther, "exchange of another word")
        check(page.load(as: UInt.self) == 9, "the word was left alone")
        check(SlotMemory.load(address) == 9, "guarded read on a writable page")
        check(SlotMemory.faultGuardIsInstalled, "the guard is installed")

        check(ff_protect_page(page, PROT_READ) == 0, "mprotect")
        check(SlotMemory.exchange(address, expected: 9, desired: 13) == .unwritable, "exchange on a read-only page")
        check(SlotMemory.load(address) == 9, "guarded read on a read-only page")

        check(ff_protect_page(page, PROT_NONE) == 0, "mprotect")
        check(SlotMemory.load(address) == nil, "guarded read on an inaccessible page")
        check(SlotMemory.exchange(address, expected: 9, desired: 13) == .unwritable, "exchange on it")
        // A slot there: hooking it is refused, not a crash.
        do {
            _ = try Hook.before(on: FunctionSlot(address: address), signature: intToInt) { _ in }
            check(false, "hooking an inaccessible slot must throw")
        } catch {
            check(error.code == .unmappedSlot, "hooking an inaccessible slot: \(error)")
        }

        // A page nothing can map (below the kernel's lowest address for mappings): a page
        // just unmapped may be mapped again at once by another thread of the process.
        let unmapped: UInt = 0x2000
        check(pf_address_is_mapped(UnsafeRawPointer(bitPattern: unmapped)) == 0, "the page is unmapped")
        check(SlotMemory.exchange(unmapped, expected: 9, desired: 13) == .unwritable, "exchange on an unmapped page")
        check(SlotMemory.load(unmapped) == nil, "guarded read on an unmapped page")
        check(!SlotMemory.isReadable(unmapped), "an unmapped page is not readable")
        check(ff_unmap_page(page) == 0, "munmap")
        // An address no page can have (not canonical): a general protection fault.
        check(SlotMemory.load(0x8000_0000_0000_0000) == nil, "guarded read of a non-canonical address")
        check(
            SlotMemory.exchange(0x8000_0000_0000_0000, expected: 0, desired: 1) == .unwritable,
            "exchange at a non-canonical address")
    }

    static func faultAfterTheGuard() {
        startChild()
        check(SlotMemory.load(UInt(bitPattern: ff_map_page(PROT_NONE))) == nil, "a guarded read that faults")
        check(SlotMemory.faultGuardIsInstalled, "the guard is installed")
        pf_report("the guard is installed")
        ff_write_through_null()
        pf_report("the NULL write did not end the process")
        exit(0)
    }

    static func chainToAnEarlierHandler() throws {
        startChild()
        check(ff_install_user_handler() == 0, "sigaction")
        // Kept mapped, without access: an unmapped page may be mapped again by anyone.
        guard let page = ff_map_page(PROT_NONE) else { return check(false, "mmap") }
        let address = UInt(bitPattern: page)
        check(SlotMemory.exchange(address, expected: 0, desired: 1) == .unwritable, "exchange on an inaccessible page")
        check(SlotMemory.faultGuardIsInstalled, "the guard is installed over the program's handler")
        check(ff_user_handler_calls() == 0, "the guard's own fault did not reach the program's handler")
        let touched = ff_touch(page)
        check(
            touched == 1,
            "the program's handler got a fault that was not the guard's, with its address (\(touched), "
                + "\(ff_user_handler_calls()) calls)")
        check(ff_user_handler_calls() == 1, "once")
        check(SlotMemory.load(address) == nil, "the guard still works")
        check(ff_user_handler_calls() == 1, "and keeps its faults to itself")
        // The program's handler left by siglongjmp; the next fault, from the same place on
        // the stack, reaches it again.
        for round in 2...3 {
            check(ff_touch(page) == 1, "the program's handler got fault \(round)")
            check(ff_user_handler_calls() == round, "\(round) calls")
        }
    }

    static func faultTwiceUnderAResettingHandler() {
        startChild()
        check(ff_install_resetting_user_handler() == 0, "sigaction")
        guard let page = ff_map_page(PROT_NONE) else { return check(false, "mmap") }
        check(SlotMemory.load(UInt(bitPattern: page)) == nil, "a guarded read that faults")
        check(SlotMemory.faultGuardIsInstalled, "the guard is installed over the program's handler")
        check(ff_user_handler_calls() == 0, "the guard's own fault did not reach the program's handler")
        check(ff_touch(page) == 1, "the program's handler got the first fault")
        check(SlotMemory.load(UInt(bitPattern: page)) == nil, "the guard still works")
        _ = ff_touch(page)
        check(false, "the second fault did not end the process (\(ff_user_handler_calls()) handler calls)")
    }

    static func faultWhileIgnoringFaults() {
        startChild()
        check(ff_ignore_faults() == 0, "signal")
        guard let page = ff_map_page(PROT_NONE) else { return check(false, "mmap") }
        check(SlotMemory.load(UInt(bitPattern: page)) == nil, "a guarded read that faults")
        check(SlotMemory.faultGuardIsInstalled, "the guard is installed")
        ff_write_through_null()
        check(false, "the NULL write did not end the process")
    }

    static func coverALaterHandler() throws {
        startChild()
        guard let page = ff_map_page(PROT_NONE) else { return check(false, "mmap") }
        let address = UInt(bitPattern: page)
        check(SlotMemory.load(address) == nil, "a guarded read that faults")
        check(SlotMemory.faultGuardIsInstalled, "the guard is installed")
        check(ff_install_user_handler() == 0, "sigaction")
        check(!SlotMemory.faultGuardIsInstalled, "the program's handler replaced the guard")
        check(SlotMemory.exchange(address, expected: 0, desired: 1) == .unwritable, "exchange on an inaccessible page")
        check(SlotMemory.faultGuardIsInstalled, "the guard is back on top")
        check(ff_user_handler_calls() == 0, "the guard's own fault did not reach the program's handler")
        check(ff_touch(page) == 1, "the program's handler got a fault that was not the guard's, with its address")
        check(ff_user_handler_calls() == 1, "once")
    }

    static func faultUnderAChainingHandler() {
        startChild()
        guard let page = ff_map_page(PROT_NONE) else { return check(false, "mmap") }
        check(SlotMemory.load(UInt(bitPattern: page)) == nil, "a guarded read that faults")
        check(ff_install_chaining_handler() == 0, "sigaction")
        check(SlotMemory.load(UInt(bitPattern: page)) == nil, "a guarded read after the program's handler")
        check(SlotMemory.faultGuardIsInstalled, "the guard is back on top")
        pf_report("the guard is back on top")
        ff_write_through_null()
        pf_report("the NULL write did not end the process")
        exit(0)
    }

    static func unmapTablesUnderOnceHooks() throws {
        startChild(seconds: 240)
        let rounds = ProcessLifeTests.underThreadSanitizer ? 60 : 400
        let slots = 64
        let callers = 2
        let fired = Atomic<Int>(0)
        for round in 0..<rounds {
            guard let table = ff_table_map(Int32(slots)) else { return check(false, "mmap, round \(round)") }
            let base = UnsafeMutableRawPointer(table)
            var tokens: [HookToken] = []
            for index in 0..<slots {
                let slot = FunctionSlot(base + index * MemoryLayout<UInt>.stride)
                tokens.append(
                    try Hook.before(on: slot, signature: intToInt, options: .once) { _ in
                        fired.add(1, ordering: .relaxed)
                    })
            }
            // The unmap comes at a different point of the removals from round to round.
            let delay = Int32(round % 32) * 4000
            let sum = ff_race_round(table, Int32(slots), Int32(callers), delay)
            // Every slot is called once, with its index: the original adds one.
            check(sum == slots * (slots + 1) / 2, "round \(round): every call reached the original")
            check(pf_address_is_mapped(table) == 0, "round \(round): the table is unmapped")
            for token in tokens {
                _ = token.remove()
                check(!token.isActive, "round \(round): the token is inactive")
            }
        }
        check(fired.load(ordering: .relaxed) == rounds * slots, "each once hook ran exactly once")
        do {
            try Hook.waitForReclamation()
        } catch {
            check(false, "waitForReclamation threw \(error)")
        }
    }
}
