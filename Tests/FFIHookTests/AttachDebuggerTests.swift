import CTestSupport
import FFIHook
import Foundation
import Testing

/// What a debugger sees of an attached call: gdb, running this test binary, stops inside an
/// attached function whose return address is the thread's return thunk, and its backtrace goes
/// through the thunk (named by the object the library hands gdb's JIT interface) to the real
/// caller.
@Suite struct AttachDebuggerTests {
    /// The environment variable that enables ``anAttachedCallStopsUnderGDB()``, in the copy of
    /// the test binary that gdb runs.
    static let childVariable = "FFI_HOOK_ATTACH_GDB_CHILD"

    /// `gdb`'s path, from `PATH`; nil when there is none.
    static let gdb: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/gdb" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// Whether this process is the copy that gdb runs.
    static let isChild = ProcessInfo.processInfo.environment[childVariable] != nil

    /// gdb runs this binary, filtered to ``anAttachedCallStopsUnderGDB()``, stops at its trap
    /// and prints the backtrace: the attached function, the frame of the thunk's symbol, then
    /// the function that made the call.
    @Test(.enabled(if: gdb != nil, "gdb is not on PATH"))
    func gdbBacktraceGoesThroughTheReturnThunkToTheCaller() throws {
        let binary = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let output = try Self.runGDB(
            arguments: [
                "-batch", "-nx",
                // No downloads of debug information; keep the address space as it is (a
                // container may refuse to change it).
                "-iex", "set debuginfod enabled off",
                "-ex", "set disable-randomization off",
                "-ex", "run",
                "-ex", "bt",
                "--args", binary, "--testing-library", "swift-testing",
                "--filter", "AttachDebuggerTests/anAttachedCallStopsUnderGDB",
            ])
        let frames = output.split(separator: "\n").filter { $0.hasPrefix("#") }
        let thunk = frames.firstIndex { $0.contains("swift_ffi_hook_return_thunk") }
        #expect(output.contains("SIGTRAP"), "gdb did not stop at the trap:\n\(output)")
        #expect(frames.contains { $0.contains("at_trapper") }, "no frame of the attached function:\n\(output)")
        #expect(thunk != nil, "no frame names the return thunk:\n\(output)")
        if let thunk {
            #expect(
                thunk + 1 < frames.count && frames[thunk + 1].contains("at_call_trapper"),
                "the frame after the thunk is not the real caller:\n\(output)")
        }
    }

    /// The copy of the test binary that gdb runs: attaches to the trapper, whose original raises
    /// SIGTRAP inside the attached call, where gdb stops. Enabled only there.
    @Test(.enabled(if: isChild, "runs only in the copy of the test binary that gdb runs"))
    func anAttachedCallStopsUnderGDB() throws {
        at_reset()
        let slot = FunctionSlot.field(\.trapper, of: at_slots_get())
        let token = try Hook.attach(on: slot, onEnter: { _ in }, onLeave: { _ in })
        defer { token.remove() }
        #expect(at_call_trapper(1) == 2)
    }

    /// Runs gdb with `arguments` and the child's variable set, and returns what it printed
    /// (standard output and error, through a temporary file), less its complaints about the
    /// binary's debug information. Ends gdb after two minutes. Spawned with C calls, as
    /// `FixtureLibraries` spawns the compiler, with no signal blocked.
    static func runGDB(arguments: [String]) throws -> String {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("ffi-hook-gdb-\(getpid()).log").path
        defer { unlink(log) }
        var environment = ProcessInfo.processInfo.environment
        environment[childVariable] = "1"
        let argv = ([gdb!] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // A dispatch worker, which runs the test, blocks every signal; gdb waits for SIGCHLD.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var signals = sigset_t()
        sigemptyset(&signals)
        posix_spawnattr_setsigmask(&attributes, &signals)
        sigfillset(&signals)
        posix_spawnattr_setsigdefault(&attributes, &signals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var child: pid_t = 0
        let status = posix_spawn(&child, gdb!, &actions, &attributes, argv, envp)
        guard status == 0 else { throw POSIXError(POSIXErrorCode(rawValue: status) ?? .EIO) }
        let deadline = Date().addingTimeInterval(120)
        var exitStatus: Int32 = 0
        while waitpid(child, &exitStatus, WNOHANG) == 0 {
            if Date() > deadline {
                kill(child, SIGKILL)
                waitpid(child, &exitStatus, 0)
                Issue.record("gdb ran for more than two minutes")
                break
            }
            usleep(50_000)
        }
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return output.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("During symbol reading") }.joined(separator: "\n")
    }
}
