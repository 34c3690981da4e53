import CHookBench
import CObjCForward
import HookFixtures

/// `hookbench --count-calls N --mechanism M`: installs one mechanism, makes `N` calls from
/// its C loop, removes it, and prints nothing. Times move with the machine's load while
/// instruction counts repeat, so the cost of one call is measured as callgrind's count of
/// two such runs with different `N`, their difference over the difference in calls: the
/// start-up, the install and the one checking call cancel out.
struct CallCount {
    let mechanism: Mechanism
    let signature: BenchSignature
    let calls: Int

    /// Installs, checks one call, makes the calls, removes.
    func run() throws {
        if mechanism.isObjectiveC {
            guard objcfwd_prepare() == 0 else {
                throw BenchError("Objective-C forwarding setup failed: \(String(cString: objcfwd_error()))")
            }
        }
        let tokens = try mechanism.install(on: signature)
        defer { try? mechanism.remove(tokens, from: signature) }
        guard mechanism.check(signature) else {
            throw BenchError("\(mechanism.title) on \(signature.title) changed the function's result")
        }
        _ = mechanism.time(signature, iterations: calls)
    }
}
