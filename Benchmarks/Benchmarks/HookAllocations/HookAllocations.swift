import Benchmark
import CHookBench
import CObjCForward
import FFIHook
import HookFixtures
import Synchronization

// Fails `swift package benchmark thresholds check` when a hooked call allocates more than
// the thresholds in Thresholds/ allow. Each iteration makes 1,000 calls from C through a
// hooked slot, or sends 1,000 messages to a hooked Objective-C method, so a count of 1,000
// means one allocation per call.
//
// Every kind of block is held to zero: Invocation, typed and attach blocks alike.

let benchmarks: @Sendable () -> Void = {
    let configuration = Benchmark.Configuration(
        metrics: [.mallocCountTotal], warmupIterations: 10, scalingFactor: .kilo, maxDuration: .seconds(1),
        maxIterations: 50, thresholds: [.mallocCountTotal: .init(absolute: [.p90: 0])])

    for signature in BenchSignature.allCases {
        for hooks in Hooks.allCases {
            Benchmark(
                "\(hooks.rawValue)-\(signature)", configuration: configuration,
                closure: { benchmark in
                    let calls = Int64(benchmark.scaledIterations.count)
                    if hooks.isObjectiveC {
                        blackHole(objcfwd_time_calls(signature.c, calls))
                    } else {
                        blackHole(hb_time_slot_calls(signature.c, calls))
                    }
                },
                setup: { try Installed.hooks.install(hooks, on: signature) },
                teardown: { try Installed.hooks.removeAll(from: signature) })
        }
    }
}

/// The hooks a benchmark installs.
enum Hooks: String, CaseIterable, Sendable {
    /// An Invocation before block and an Invocation after block.
    case beforeAfter = "BeforeAfter"
    /// An Invocation instead block that calls the original.
    case instead = "Instead"
    /// A typed before block and a typed after block.
    case typed = "TypedBeforeAfter"
    /// A typed instead block that calls the original.
    case typedInstead = "TypedInstead"
    /// An attach with an empty enter block and an empty leave block, no signature: the leave
    /// runs through a swapped return address.
    case attachEnterLeave = "AttachEnterLeave"
    /// An attach with an empty enter block only.
    case attachEnter = "AttachEnter"
    /// An Invocation before block and an Invocation after block on the signature's
    /// Objective-C method, class-wide; the messages are sent from a compiled loop that drains
    /// an autorelease pool every 256 messages.
    case objcBeforeAfter = "ObjCBeforeAfter"

    var isObjectiveC: Bool { self == .objcBeforeAfter }
}

/// The tokens of the running benchmark's hooks.
final class Installed: Sendable {
    static let hooks = Installed()

    private let tokens = Mutex<[HookToken]>([])

    func install(_ hooks: Hooks, on signature: BenchSignature) throws {
        let slot = signature.slot
        let types = signature.signature
        let installed: [HookToken]
        switch hooks {
        case .beforeAfter:
            installed = [
                try Hook.before(on: slot, signature: types) { _ in },
                try Hook.after(on: slot, signature: types) { _ in },
            ]
        case .instead:
            installed = [try Hook.instead(on: slot, signature: types) { call in call.callOriginal() }]
        case .typed:
            installed = try TypedHooks.installBeforeAfter(on: signature)
        case .typedInstead:
            installed = [try TypedHooks.installInstead(on: signature)]
        case .attachEnterLeave:
            installed = [try Hook.attach(on: slot, onEnter: { _ in }, onLeave: { _ in })]
        case .attachEnter:
            installed = [try Hook.attach(on: slot, onEnter: { _ in })]
        case .objcBeforeAfter:
            guard objcfwd_prepare() == 0 else { throw ObjCSetupError(message: String(cString: objcfwd_error())) }
            installed = try ObjCHooks.installBeforeAfter(on: signature)
        }
        let correct =
            hooks.isObjectiveC
            ? ObjCHooks.isHookedByLibrary(signature) && objcfwd_send_once(signature.c) != 0
            : signature.slotGivesOriginalResult
        guard correct else {
            for token in installed { token.remove() }
            throw HookedCallError(signature: signature)
        }
        tokens.withLock { $0 += installed }
    }

    func removeAll(from signature: BenchSignature) throws {
        let removed = tokens.withLock { tokens in
            defer { tokens = [] }
            return tokens
        }
        for token in removed { token.remove() }
        try Hook.waitForReclamation()
    }
}

/// A hooked slot that no longer returns what the original does.
struct HookedCallError: Error, CustomStringConvertible {
    let signature: BenchSignature

    var description: String { "the hooked \(signature.title) slot or method returns a wrong result" }
}

/// The Objective-C class under test could not be prepared.
struct ObjCSetupError: Error, CustomStringConvertible {
    let message: String

    var description: String { "Objective-C setup failed: \(message)" }
}
