internal import CTracerJoin

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The exit statuses of `--pid` (64, a usage error, is the wrapper's own).
enum JoinExit: Int32 {
    /// Traced, left, and the report printed (also when the process exited while traced and
    /// wrote its report at exit, or a signal ended it after its report).
    case traced = 0
    /// Something else failed: the process could not load the library, a call in it faulted, a
    /// system call of the tracer's failed.
    case failed = 1
    /// Tracing the process is not permitted (another user's, Yama's ptrace_scope, not
    /// dumpable), or it is traced already (by a debugger, or by ffi-hook-tracer).
    case refused = 2
    /// No such process, or it exited before the report could be had.
    case gone = 3
    /// The process cannot take the library: not a glibc process, no dlopen, not x86-64.
    case unsupported = 4
}

/// `ffi-hook-tracer --pid`: joins process `pid` with the tracer library at `library`, traces
/// for `duration` seconds (or until SIGINT, SIGTERM or SIGHUP, or until the process exits),
/// leaves it, prints the report on standard error and exits.
///
/// The library writes its messages and table to a file in a private directory, which is
/// printed here (so the report looks as it does for a started program); a JSON report is
/// written there too and copied to `json` (`%p` becoming the process ID).
func joinProcess(_ pid: Int32, duration: Double?, library: String) -> Never {
    fhj_block_interrupts()
    // In TMPDIR when it is set, else in /tmp; as an absolute path, which the process joined
    // (whose working directory is its own) must reach too.
    var temporary = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    if let absolute = realpath(temporary, nil) {
        temporary = String(cString: absolute)
        free(absolute)
    }
    removeAbandonedDirectories(in: temporary)
    // Named with this joiner's process ID, by which a later joiner knows it for abandoned.
    var template = Array((temporary + "/ffi-hook-tracer.\(getpid()).XXXXXX").utf8CString)
    guard let made = mkdtemp(&template) else {
        finish(
            .failed, "cannot make a directory for the report in \(temporary): \(String(cString: strerror(errno)))",
            directory: nil)
    }
    let directory = String(cString: made)
    var owner = stat()
    // Run as root on another user's process, the process must still write the report there.
    if geteuid() == 0, stat("/proc/\(pid)", &owner) == 0, owner.st_uid != 0 {
        _ = chown(directory, owner.st_uid, owner.st_gid)
    }
    let output = directory + "/output"
    let jsonCopy = directory + "/report.json"
    let json = getenv("FFI_HOOK_TRACER_JSON").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
    let configuration = joinConfiguration(pid: pid, output: output, json: json == nil ? nil : jsonCopy)
    let name = processName(pid)
    // Said when every try of a join or leave found its thread in the tracer's own work.
    let busy = "process \(pid) (\(name)) was doing the tracer's own work each of the 300 times it was stopped"

    var printed = 0
    // The leave's address is found now, so that the leave calls no loader function in the
    // traced window (its calls would be counted as the program's).
    var leave: UInt64 = 0
    let (joined, joinResult) = call(pid, library: library, entry: "ffi_hook_tracer_join", configuration, leave: &leave)
    printed = printOutput(output, from: printed)
    switch joined {
    case FHJ_OK:
        break
    case FHJ_EXITED:
        // It may have exited after the join had started tracing: its report at exit is printed.
        finish(printed > 0 ? .traced : .gone, nil, directory: directory)
    default:
        finish(exit(for: joined), nil, directory: directory)
    }
    switch joinResult {
    case 0: break
    case 4:
        finish(
            .failed, busy,
            directory: directory)
    case 1:
        finish(
            .refused,
            "process \(pid) (\(name)) is traced by ffi-hook-tracer already (started with it, or joined by another "
                + "ffi-hook-tracer that has not left)", directory: directory)
    default:
        finish(
            .failed, "process \(pid) (\(name)) did not start tracing (the join returned \(joinResult))",
            directory: directory)
    }
    say(
        "joined process \(pid) (\(name)); tracing "
            + (duration.map { "for \($0.formatted) s, or " } ?? "") + "until interrupted (Ctrl-C)")

    let reason = fhj_wait(pid, duration.map { Int64(($0 * 1000).rounded()) } ?? -1)
    if reason == FHJ_WAIT_EXITED {
        printed = printOutput(output, from: printed)
        let copied = copyJSON(jsonCopy, to: json, pid: pid)
        guard printed > 0 else {
            finish(
                .gone,
                "process \(pid) (\(name)) ended while traced, without a report: a joined process reports when it "
                    + "calls exit or a deadly signal ends it, not when it calls _exit or executes another program, "
                    + "or when SIGKILL ends it",
                directory: directory)
        }
        say("process \(pid) (\(name)) ended while traced; the report above is the one it made as it ended")
        finish(copied ? .traced : .failed, nil, directory: directory)
    }
    // The leave runs on the tracer's watching thread, which holds nothing, where there is one
    // (also with --inline: the program's threads, in a process that loads libraries all the
    // time, were found in the tracer's attach at each of 300 tries); made again while that
    // thread is parked by a stop of the program's (an attach after a dlopen).
    let (left, leaveResult) = call(
        pid, library: library, entry: "ffi_hook_tracer_leave", "", at: leave, on: "ffi-hook-watch")
    printed = printOutput(output, from: printed)
    let copied = copyJSON(jsonCopy, to: json, pid: pid)
    switch left {
    case FHJ_OK where leaveResult == 0:
        finish(copied ? .traced : .failed, nil, directory: directory)
    case FHJ_OK where leaveResult == 5:
        // The report said which --library names answered to no object of the process, or which
        // of its files could not be written.
        finish(.failed, nil, directory: directory)
    case FHJ_OK where leaveResult == 4:
        say("the hooks stay in process \(pid) (\(name)) until it exits")
        finish(
            .failed, busy,
            directory: directory)
    case FHJ_OK:
        finish(.failed, "process \(pid) (\(name)) was not traced any more when the tracer left", directory: directory)
    case FHJ_EXITED, FHJ_NO_PROCESS:
        // (Its exit waits for the report the leave is making; one cut short left no JSON.)
        if printed > 0, json != nil, access(jsonCopy, F_OK) != 0 {
            finish(
                .failed, "process \(pid) (\(name)) exited as the tracer left, before its JSON report was written",
                directory: directory)
        }
        finish(printed > 0 ? .traced : .gone, nil, directory: directory)
    default:
        say("the hooks stay in process \(pid) (\(name)) until it exits")
        finish(exit(for: left), nil, directory: directory)
    }
}

/// The text given to the join: every `FFI_HOOK_TRACER_` variable the options set, with the
/// process that writes the JSON, the JSON's file and the output file of this join.
private func joinConfiguration(pid: Int32, output: String, json: String?) -> String {
    var lines: [String] = []
    var entry = environ
    let replaced = ["FFI_HOOK_TRACER_PID=", "FFI_HOOK_TRACER_JSON=", "FFI_HOOK_TRACER_OUTPUT="]
    while let variable = entry.pointee {
        let line = String(cString: variable)
        if line.hasPrefix("FFI_HOOK_TRACER_"), !replaced.contains(where: line.hasPrefix) { lines.append(line) }
        entry += 1
    }
    lines.append("FFI_HOOK_TRACER_PID=\(pid)")
    lines.append("FFI_HOOK_TRACER_OUTPUT=\(output)")
    if let json { lines.append("FFI_HOOK_TRACER_JSON=\(json)") }
    // Killed before it leaves, this process is missed: the joined process then leaves by itself.
    lines.append("FFI_HOOK_TRACER_JOINER=\(getpid())")
    if lines.contains(where: { $0.contains("\n") }) { fail("an option's value cannot hold a line break with --pid") }
    return lines.joined(separator: "\n")
}

/// Calls `entry` of the library in process `pid` with `argument`, saying the message of any
/// status but FHJ_OK; returns the status and the entry's result. Loads the library and stores
/// the address of `ffi_hook_tracer_leave` in `leave` (`fhj_load_and_call`), or, given an
/// address, calls the function there (`fhj_call`).
private func call(
    _ pid: Int32, library: String, entry: String, _ argument: String, leave: UnsafeMutablePointer<UInt64>? = nil,
    at address: UInt64? = nil, on thread: String? = nil
) -> (fhj_status, Int32) {
    var result: Int32 = -1
    var message = [CChar](repeating: 0, count: 2048)
    var status = FHJ_OK
    // A call that found the thread doing the tracer's own work (4: holding its locks, in a
    // process that loads libraries all the time) is made again once it has moved on.
    for _ in 0..<300 {
        status = message.withUnsafeMutableBufferPointer { buffer in
            if let address {
                return fhj_call(
                    pid, library, entry, address, argument, thread, &result, buffer.baseAddress!, buffer.count)
            }
            return fhj_load_and_call(
                pid, library, entry, argument, "ffi_hook_tracer_leave", leave, &result, buffer.baseAddress!,
                buffer.count)
        }
        guard status == FHJ_OK, result == 4 else { break }
        usleep(1000)
    }
    if status != FHJ_OK { say(message.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }) }
    return (status, result)
}

/// The exit status for a status of `fhj_call`.
private func exit(for status: fhj_status) -> JoinExit {
    switch status {
    case FHJ_NOT_PERMITTED, FHJ_ALREADY_TRACED: .refused
    case FHJ_NO_PROCESS, FHJ_EXITED: .gone
    case FHJ_NO_LOADER: .unsupported
    default: .failed
    }
}

/// Prints what the joined process wrote to `path` past `offset` on standard error; returns
/// the new offset.
private func printOutput(_ path: String, from offset: Int) -> Int {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return offset }
    defer { close(descriptor) }
    var position = offset
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = pread(descriptor, &buffer, buffer.count, off_t(position))
        guard count > 0 else { break }
        buffer.withUnsafeBytes { _ = write(2, $0.baseAddress, count) }
        position += count
    }
    return position
}

/// `path` with each `%p` replaced by `pid` (without the string processing module, which the
/// wrapper does without).
func replacingProcessID(in path: String, with pid: Int32) -> String {
    var result = ""
    var characters = path[...]
    while let first = characters.first {
        if characters.hasPrefix("%p") {
            result += "\(pid)"
            characters = characters.dropFirst(2)
        } else {
            result.append(first)
            characters = characters.dropFirst()
        }
    }
    return result
}

/// Copies the JSON report the process wrote at `source` to `destination` (`%p`: the process
/// ID), saying why when it cannot; false when it could not be written.
@discardableResult
private func copyJSON(_ source: String, to destination: String?, pid: Int32) -> Bool {
    guard let destination else { return true }
    let path = replacingProcessID(in: destination, with: pid)
    let input = open(source, O_RDONLY | O_CLOEXEC)
    guard input >= 0 else { return true }
    defer { close(input) }
    let output = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard output >= 0 else {
        say("cannot write \(path): \(String(cString: strerror(errno)))")
        return false
    }
    defer { close(output) }
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = read(input, &buffer, buffer.count)
        guard count > 0 else { break }
        let written = buffer.withUnsafeBytes { write(output, $0.baseAddress, count) }
        guard written == count else {
            say("cannot write \(path): \(written < 0 ? String(cString: strerror(errno)) : "a short write")")
            return false
        }
    }
    return true
}

/// The command name of process `pid`, "?" when unknown.
private func processName(_ pid: Int32) -> String {
    let descriptor = open("/proc/\(pid)/comm", O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return "?" }
    defer { close(descriptor) }
    var buffer = [UInt8](repeating: 0, count: 64)
    let count = read(descriptor, &buffer, buffer.count)
    guard count > 0 else { return "?" }
    return String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: ["\n"])
}

/// Says `message` (when there is one), removes the report's directory and exits with `status`.
/// Removes the report directories (``joinProcess(_:duration:library:)``) of this user's
/// joiners that are gone: a joiner killed (SIGKILL, which it cannot catch) before the joined
/// process took its report over leaves its directory behind. Only directories named as a
/// joiner names them, whose joiner process no longer exists, and only the files a joiner puts
/// there.
private func removeAbandonedDirectories(in temporary: String) {
    guard let listing = opendir(temporary) else { return }
    defer { closedir(listing) }
    let prefix = "ffi-hook-tracer."
    while let entry = readdir(listing) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard name.hasPrefix(prefix) else { continue }
        let parts = name.dropFirst(prefix.count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1].count == 6, let joiner = Int32(parts[0]), joiner > 0 else { continue }
        guard kill(joiner, 0) != 0, errno == ESRCH else { continue }
        let directory = temporary + "/" + name
        var status = stat()
        guard lstat(directory, &status) == 0, status.st_mode & S_IFMT == S_IFDIR, status.st_uid == geteuid() else {
            continue
        }
        for file in ["output", "report.json"] { unlink(directory + "/" + file) }
        rmdir(directory)
    }
}

private func finish(_ status: JoinExit, _ message: String?, directory: String?) -> Never {
    if let message { say(message) }
    if let directory {
        for file in ["output", "report.json"] { unlink(directory + "/" + file) }
        rmdir(directory)
    }
    exit(status.rawValue)
}

/// Writes a line to standard error, prefixed with the tracer's name.
private func say(_ message: String) {
    put("ffi-hook-tracer: \(message)\n", to: 2)
}

extension Double {
    /// The number as a person writes it: without ".0" when whole.
    fileprivate var formatted: String {
        self == rounded() && abs(self) < 1e15 ? String(Int(self)) : String(self)
    }
}

extension String {
    /// The string without the given characters at its end.
    fileprivate func trimmingCharacters(in characters: Set<Character>) -> String {
        var text = Substring(self)
        while let last = text.last, characters.contains(last) { text.removeLast() }
        return String(text)
    }
}
