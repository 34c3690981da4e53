import CTestSupport
import FFIHook
import FFIHookCore
import Foundation
import Synchronization
import Testing

/// Every C function the library itself calls, hooked in every loaded object while hooks
/// come and go: the library must not call itself through a door the program can rewrite.
///
/// The list comes from the binary, not from memory: the undefined symbols of the library's
/// object files (beside the test executable, where the build left them) that the test
/// executable imports through its dynamic symbol table. Each gets a child process that hooks
/// it with ``ImportTable/after(symbol:in:signature:options:_:)`` in scope ``ImportScope/all``
/// and a counting block, then installs and removes an instead hook 300 times on a slot that
/// another thread calls through, checks every result, waits for reclamation, and forks a
/// child that installs and removes a hook of its own.
@Suite struct LibraryFunctionHookTests {
    /// Every function the library imports has an entry in the table, and the reading found
    /// the imports at all.
    @Test func theTableNamesEveryFunctionTheLibraryImports() throws {
        let imports = try LibraryImports.functions()
        let missing = imports.filter { Self.signatures[$0] == nil }.sorted()
        #expect(
            missing.isEmpty,
            "the library imports \(missing.joined(separator: ", ")): give each a signature in LibraryFunctionHookTests.signatures (or say why it is no C function)"
        )
        // The reading found them (sanitizers define the C library's functions they intercept
        // in the executable, which then does not import them; the Swift runtime's stay).
        #expect(imports.count > 10 && imports.contains("swift_retain"))
    }

    /// The library's C functions, one child process each.
    @Test(
        .disabled(
            if: ProcessLifeTests.underThreadSanitizer,
            "the Swift runtime's lazy globals are not fork-safe under ThreadSanitizer"),
        arguments: LibraryImports.hookable(from: signatures))
    func hookedInEveryObjectWhileHooksComeAndGo(symbol: String) async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) { [symbol] in
            try LibraryFunctionHookTests.hookAndRunTheScenario(symbol: symbol)
        }
    }

    /// libc's `syscall`, which the library no longer calls but the Swift runtime, Dispatch
    /// and Foundation do (futex waits among them), hooked in every object with the variadic
    /// signature a user would give it, while the scenario runs.
    @Test(.disabled(if: ProcessLifeTests.underThreadSanitizer, "the Swift runtime's lazy globals are not fork-safe"))
    func syscallHookedWithItsVariadicSignature() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try LibraryFunctionHookTests.hookAndRunTheScenario(
                symbol: "syscall", signature: Signature(variadic: "qqqqqqq", fixedArgumentCount: 1))
        }
    }

    /// A block on `malloc`, hooked in every object, that installs and removes a hook and asks
    /// for a call interface whenever it runs during an install: the installs it interrupts
    /// (inside the interning table's lock, among others) and its own finish, or its own
    /// install is refused with `calledFromHookBlock` where the registry's lock is held,
    /// instead of the thread waiting for a lock it holds.
    @Test(.disabled(if: ProcessLifeTests.underThreadSanitizer, "the allocator cannot be hooked under ThreadSanitizer"))
    func blocksOnTheAllocatorInstallDuringInstalls() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try LibraryFunctionHookTests.installFromAllocatorBlocksDuringInstalls()
        }
    }

    /// The call path's own work reaches no function the program hooked: with every function
    /// the library imports hooked in every object at once, hooked calls with before, instead
    /// and after blocks that do nothing run none of those hooks' blocks (an optimised build's
    /// call path calls none of them; an unoptimised one's calls reach their originals
    /// directly); a call the program makes itself runs them. Then with the before and after
    /// blocks alone, which the C call path runs calling each block itself: the same, and a
    /// block's own call of a hooked function runs its hook.
    @Test(.disabled(if: ProcessLifeTests.underThreadSanitizer, "the Swift runtime's calls are instrumented"))
    func theCallPathRunsNoBlockOfTheFunctionsTheLibraryImports() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            try LibraryFunctionHookTests.runTheCallPathUnderHooks()
        }
    }
}

extension LibraryFunctionHookTests {
    static func runTheCallPathUnderHooks() throws {
        typealias Life = ProcessLifeTests
        do {
            Life.startChild()
            pf_reset()
            let slot = Life.slot(\.churn)
            let hooks = [
                try Hook.before(on: slot, signature: Life.intToInt) { _ in },
                try Hook.instead(on: slot, signature: Life.intToInt) { call in call.callOriginal() },
                try Hook.after(on: slot, signature: Life.intToInt) { _ in },
            ]
            // Calls made inside the C loop only: the process's other threads (the test
            // library's, the runtime's) make calls of their own meanwhile.
            var groups: [HookGroupToken] = []
            for symbol in LibraryImports.hookable(from: signatures) {
                guard let entry = signatures[symbol], let encoding = entry else { continue }
                groups.append(
                    try ImportTable.after(symbol: symbol, in: .all, signature: Signature(encoding)) { _ in
                        if pf_is_repeating() != 0 { LibraryFunctionHookTests.calls.add(1, ordering: .relaxed) }
                    })
            }
            Life.check(groups.count > 40, "\(groups.count) functions hooked")
            // The first calls are left out: the Swift runtime makes what they use on first use.
            Life.check(pf_call_slot_repeatedly(Life.pointer(\.churn), 100) == 0, "the first hooked calls")
            let pointer = Life.pointer(\.churn)
            calls.store(0, ordering: .relaxed)
            let wrong = pf_call_slot_repeatedly(pointer, 1000)
            let seen = calls.load(ordering: .relaxed)
            Life.check(wrong == 0, "the hooked calls' results")
            Life.check(seen == 0, "no block of the library's functions ran for the call path (\(seen) ran)")
            // The program's own sched_yield, from inside the loop's mark: the hook runs (a
            // function sanitizers do not take over).
            pf_yield_repeating()
            Life.check(calls.load(ordering: .relaxed) >= 1, "the block ran for the program's own sched_yield")
            // Before and after blocks alone: the C call path runs the call and calls each block
            // itself. Its own work runs none of the hooks either; a block's calls run them.
            Life.check(hooks[1].remove(), "the instead block's removal")
            let yielding = try Hook.before(on: slot, signature: Life.intToInt) { _ in pf_yield_if_asked() }
            Life.check(pf_call_slot_repeatedly(pointer, 100) == 0, "the first calls with before and after blocks")
            calls.store(0, ordering: .relaxed)
            Life.check(pf_call_slot_repeatedly(pointer, 1000) == 0, "the results with before and after blocks")
            let seenPlain = calls.load(ordering: .relaxed)
            Life.check(seenPlain == 0, "no block of the library's functions ran for the C path (\(seenPlain) ran)")
            // As many of the hook's blocks as for the same call made outside a block.
            pf_yield_repeating()
            let outside = calls.load(ordering: .relaxed)
            pf_ask_to_yield(1)
            Life.check(pf_call_slot(pointer, 1) == 2, "a call whose before block yields")
            pf_ask_to_yield(0)
            let inside = calls.load(ordering: .relaxed) - outside
            Life.check(
                outside >= 1 && inside == outside,
                "sched_yield's blocks ran for the before block's call (\(inside) ran; \(outside) outside a block)")
            Life.check(yielding.remove(), "the yielding block's removal")
            // Typed blocks, which the C path calls with the arguments' addresses, storing the
            // result they return (a word here) itself.
            let wide = FunctionSlot(pf_wide_slot())
            let typed = [
                try Hook.before(on: wide, arguments: Int64.self, Int64.self, returning: Int64.self) { _, _ in },
                try Hook.after(on: wide, arguments: Int64.self, Int64.self, returning: Int64.self) { result, _, _ in
                    result
                },
            ]
            Life.check(pf_call_wide_slot_repeatedly(100) == 0, "the first calls with typed blocks")
            calls.store(0, ordering: .relaxed)
            Life.check(pf_call_wide_slot_repeatedly(1000) == 0, "the results with typed blocks")
            let seenTyped = calls.load(ordering: .relaxed)
            Life.check(seenTyped == 0, "no block of the library's functions ran for typed blocks (\(seenTyped) ran)")
            for hook in typed { Life.check(hook.remove(), "a typed block's removal") }
            for hook in [hooks[0], hooks[2]] { Life.check(hook.remove(), "a removal") }
            for group in groups { Life.check(group.remove(), "a group's removal") }
        } catch {
            Life.fail("threw \(error)")
        }
    }
}

// MARK: - The scenario (in the child processes)

extension LibraryFunctionHookTests {
    /// What the counting blocks count.
    static let calls = Atomic<Int>(0)
    /// Whether the allocator's block installs (set for the length of each install it should
    /// interrupt: it runs for every allocation the install makes, its own excepted).
    static let armed = Atomic<Bool>(false)
    /// Installs the allocator's block made, and installs refused with `calledFromHookBlock`.
    static let nestedInstalls = Atomic<Int>(0)
    static let refusedInstalls = Atomic<Int>(0)

    static func installFromAllocatorBlocksDuringInstalls() throws {
        typealias Life = ProcessLifeTests
        Life.startChild()
        pf_reset()
        // What the block does is done once before: a block on the allocator must not be the
        // first code to use a type, whose metadata the Swift runtime makes under a lock it
        // holds while it allocates (see Threads and Removal).
        let probe = Life.slot(\.probe)
        let shape = try Signature("iiiiq")
        _ = try CallInterface.shared(for: shape)
        try Hook.before(on: probe, signature: Life.intToInt) { _ in }.remove()
        let group = try ImportTable.after(symbol: "malloc", in: .all, signature: Signature("^vQ")) { _ in
            guard LibraryFunctionHookTests.armed.load(ordering: .relaxed) else { return }
            do {
                let token = try Hook.before(on: probe, signature: Life.intToInt) { _ in }
                _ = token.remove()
                LibraryFunctionHookTests.nestedInstalls.add(1, ordering: .relaxed)
            } catch let error as HookError where error.code == .calledFromHookBlock {
                LibraryFunctionHookTests.refusedInstalls.add(1, ordering: .relaxed)
            } catch {
                Life.fail("the block's install threw \(error)")
            }
            _ = try? CallInterface.shared(for: shape)
        }
        for round in 0..<40 {
            // A signature of its own each round, so that the install interns a new interface.
            let encoding = "i" + String(repeating: "i", count: 1 + round % 6) + String(repeating: "d", count: round / 6)
            let signature = try Signature(encoding)
            armed.store(true, ordering: .relaxed)
            let token = try Hook.before(on: Life.slot(\.churn), signature: signature) { _ in }
            armed.store(false, ordering: .relaxed)
            Life.check(token.remove(), "removal \(round)")
        }
        armed.store(false, ordering: .relaxed)
        let made = nestedInstalls.load(ordering: .relaxed)
        let refused = refusedInstalls.load(ordering: .relaxed)
        Life.check(made > 0, "the blocks installed hooks (\(made) made, \(refused) refused)")
        Life.check(pf_call_slot(Life.pointer(\.churn), 1) == 2, "the slot's original")
        Life.check(group.remove(), "the group's removal")
    }

    static func hookAndRunTheScenario(symbol: String, signature given: Signature? = nil) throws {
        typealias Life = ProcessLifeTests
        Life.startChild()
        let signature: Signature
        if let given {
            signature = given
        } else {
            guard let entry = signatures[symbol], let encoding = entry else { Life.fail("\(symbol) has no signature") }
            signature = try Signature(encoding)
        }
        pf_reset()
        let group = try ImportTable.after(symbol: symbol, in: .all, signature: signature) { _ in
            calls.add(1, ordering: .relaxed)
        }

        // A hook whose result the checks can see.
        let probe = try Hook.after(on: Life.slot(\.probe), signature: Life.intToInt) { call in
            call.setReturnValue(call.returnValue(as: Int32.self) + 100)
        }
        Life.check(pf_call_slot(Life.pointer(\.probe), 1) == 102, "a call through a hooked slot")

        // Instead hooks come and go while another thread calls through the slot.
        guard let spinner = pf_spinner_start(Life.pointer(\.churn), 7) else { Life.fail("starting the caller") }
        for round: Int32 in 0..<300 {
            let token = try Hook.instead(on: Life.slot(\.churn), signature: Life.intToInt) { call in
                call.callOriginal()
            }
            Life.check(pf_call_slot(Life.pointer(\.churn), round) == round + 1, "a call through the instead hook")
            Life.check(token.remove(), "removal \(round)")
        }
        var spun = 0
        let wrong = pf_spinner_stop(spinner, &spun)
        Life.check(wrong == 0 && spun > 0, "\(wrong) of \(spun) calls through the changing slot were wrong")
        Life.check(Life.slot(\.churn, holds: pf_churn_original), "the churn slot has its original back")
        Life.waitForReclamation("after the churn")
        Life.check(SlotRegistry.shared.pendingReclamationCount == 0, "nothing waits for reclamation")

        // A forked child hooks and calls, then removes.
        let child = pf_fork()
        if child == 0 {
            Life.runForkedChild {
                Life.check(pf_call_slot(Life.pointer(\.probe), 2) == 103, "the inherited hook", forked: true)
                let token = try Hook.before(on: Life.slot(\.churn), signature: Life.intToInt) { _ in }
                Life.check(pf_call_slot(Life.pointer(\.churn), 3) == 4, "a hook installed in the child", forked: true)
                Life.check(token.remove() && probe.remove(), "removals in the child", forked: true)
                Life.check(Life.slot(\.probe, holds: pf_probe_original), "the probe slot restored", forked: true)
                try Hook.waitForReclamation()
            }
        }
        Life.checkForkedChild(child)
        Life.check(probe.remove() && group.remove(), "removals")
        Life.check(Life.slot(\.probe, holds: pf_probe_original), "the probe slot has its original back")
        Life.waitForReclamation("at the end")
    }
}

// MARK: - Reading the imports

/// The C functions the library's objects import, read from the build.
enum LibraryImports {
    /// The library's modules whose objects count.
    static let modules = ["CFFIHookSupport", "FFIHookCore", "FFIHook", "CFFIHookObjC", "FFIHookObjC"]

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The functions the library's objects leave undefined and the test executable imports
    /// from shared objects: the ones a process-wide import-table hook reaches. Swift
    /// functions (mangled names) and the sanitizers' runtimes are left out.
    static func functions() throws -> Set<String> {
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let directory = URL(fileURLWithPath: executable).deletingLastPathComponent()
        var objects: [String] = []
        for module in modules {
            let folder = directory.appendingPathComponent("\(module).build")
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
            objects += names.filter { $0.hasSuffix(".o") }.map { folder.appendingPathComponent($0).path }
        }
        guard objects.count >= modules.count else {
            throw Failure(description: "the library's object files are not beside \(executable)")
        }
        let undefined = Set(
            try run("nm", ["-u", "--format=just-symbols"] + objects).split(separator: "\n").map(String.init))
        var imported = Set<String>()
        for line in try run("readelf", ["--dyn-syms", "--wide", executable]).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 8, fields[3] == "FUNC", fields[6] == "UND" else { continue }
            let name = fields[7].split(separator: "@").first.map(String.init) ?? ""
            imported.insert(name)
        }
        let sanitizers = ["__asan_", "__lsan_", "__tsan_", "__ubsan_", "__sanitizer_"]
        return undefined.intersection(imported).filter { name in
            !name.hasPrefix("$s") && !sanitizers.contains { name.hasPrefix($0) }
        }
    }

    /// The imported functions the table gives a C signature, sorted; what cannot be read is
    /// left to ``LibraryFunctionHookTests/theTableNamesEveryFunctionTheLibraryImports()``.
    static func hookable(from table: [String: String?]) -> [String] {
        ((try? functions()) ?? []).filter { table[$0] != nil && table[$0]! != nil }.sorted()
    }

    /// Runs a command found on the PATH (its arguments are paths and options without
    /// spaces) and returns its standard output. popen, not Foundation's Process, which leaves
    /// an allocation behind that LeakSanitizer reports.
    static func run(_ tool: String, _ arguments: [String]) throws -> String {
        let command = ([tool] + arguments).joined(separator: " ") + " 2>/dev/null"
        guard let stream = popen(command, "r") else { throw Failure(description: "\(tool) could not be started") }
        var output = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&chunk, 1, chunk.count, stream)
            if count <= 0 { break }
            output += chunk[0..<count]
        }
        guard pclose(stream) == 0 else {
            throw Failure(description: "\(tool) \(arguments.prefix(3).joined(separator: " ")) failed")
        }
        return String(decoding: output, as: UTF8.self)
    }
}
