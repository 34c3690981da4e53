import CHookBench
import Glibc

/// frida-gum's Interceptor in this process, installed by a helper program that attaches to
/// it through frida (`Benchmarks/Peers/frida-peer.py`).
///
/// The helper gets this process's id and the function's address as its arguments, answers
/// `ready frida VERSION` once attached, then one line per command (`install MECHANISM`,
/// `remove`): `ok` or `error: WHY`. Closing its input makes it undo everything and quit;
/// ``finish()`` does that and waits for it, and so does dropping the last reference.
final class FridaPeer {
    /// frida's version, as the helper reports it.
    let version: String
    private var process: hb_peer
    private var finished = false

    /// Starts `driver` and waits until it has attached to this process, ready to hook `function`.
    init(driver: String, function: UnsafeRawPointer) throws {
        let address = "0x" + String(UInt(bitPattern: function), radix: 16)
        let strings = [driver, String(getpid()), address]
        let arguments: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var process = hb_peer()
        let error = hb_peer_start(arguments, &process)
        guard error == 0 else { throw BenchError("cannot start \(driver): \(String(cString: strerror(error)))") }
        let greeting = Self.exchange(&process, nil)
        guard let greeting, greeting.hasPrefix("ready frida ") else {
            _ = hb_peer_finish(&process)
            throw BenchError("\(driver) did not attach frida: \(greeting ?? "it exited without a word")")
        }
        self.process = process
        version = String(greeting.dropFirst("ready frida ".count))
    }

    deinit {
        if !finished { _ = hb_peer_finish(&process) }
    }

    /// Makes frida hook the function with `mechanism` (one of the `frida…` mechanisms).
    func install(_ mechanism: Mechanism) throws {
        try command("install \(mechanism.rawValue)")
    }

    /// Makes frida undo what it installed.
    func remove() throws {
        try command("remove")
    }

    /// Tells the helper to undo everything, detach and quit; waits for it.
    func finish() throws {
        finished = true
        let status = hb_peer_finish(&process)
        guard status == 0 else { throw BenchError("the frida helper exited with status \(status)") }
    }

    private func command(_ line: String) throws {
        guard !finished else { throw BenchError("the frida helper has finished") }
        let answer = Self.exchange(&process, line)
        guard answer == "ok" else { throw BenchError("frida, \(line): \(answer ?? "the helper has exited")") }
    }

    /// Sends `line` (nothing when nil) and returns the answer, or nil when the helper is gone.
    private static func exchange(_ process: inout hb_peer, _ line: String?) -> String? {
        var answer = [CChar](repeating: 0, count: 1_024)
        let length = hb_peer_exchange(&process, line, &answer, answer.count)
        guard length >= 0 else { return nil }
        return String(decoding: answer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
