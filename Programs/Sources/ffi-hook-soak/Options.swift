#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The command line of the soak: how long, how many threads of each kind, and a seed.
struct SoakOptions: Sendable {
    /// How long the callers and mutators run, in seconds.
    var seconds: Double = 60
    /// Threads calling through the hooked slots.
    var callers = 4
    /// Threads installing and removing hooks.
    var mutators = 2
    /// How often progress is printed, in seconds (0: never).
    var progressInterval: Double = 30
    /// Seeds the threads' generators; each thread derives its own.
    var seed: UInt64 = 0x5eed
    /// A deliberate fault that the checks must catch (a self-test of the checker).
    var fault: Fault?
    /// The inline soak instead (InlineSoak.swift): callers call a C function directly while
    /// its inline hook is installed and removed `cycles` times, cold then kept patched.
    var inline = false
    /// Install-and-remove cycles of the inline soak's cold phase (the patch written and taken
    /// out each time).
    var cycles = 10_000
    /// Install-and-remove cycles of its kept-patched phase (only the jump cell written).
    var keptCycles = 10_000

    /// A fault planted on purpose, to show that the checks can fail.
    enum Fault: String, Sendable {
        /// One run of the `add` original is not counted, as if a call were lost.
        case lostCall = "lost-call"
        /// One after block adds a wrong mark, as if a result were corrupted.
        case badResult = "bad-result"
    }

    static let usage = """
        usage: ffi-hook-soak [--seconds N] [--callers N] [--mutators N] [--progress N] [--seed N]
               ffi-hook-soak --inline [--cycles N] [--kept-cycles N] [--callers N] [--progress N]
          --seconds N   how long to run (default 60)
          --callers N   threads calling through the hooked table (default 4)
          --mutators N  threads installing and removing hooks (default 2)
          --progress N  seconds between progress lines, 0 for none (default 30)
          --seed N      seed of the threads' random choices (default 24301)
          --inline      the inline soak: callers call a C function directly while its inline
                        hook is installed and removed, first with the patch written and taken
                        out each time, then with the function kept patched
          --cycles N    install-and-remove cycles with the patch written each time
                        (default 10000)
          --kept-cycles N
                        install-and-remove cycles with the function kept patched
                        (default 10000)
        """

    /// Parses `arguments` (without the program name); returns a message on bad input.
    static func parse(_ arguments: [String]) -> Result<SoakOptions, UsageError> {
        var options = SoakOptions()
        var index = 0
        func value(_ name: String) -> Result<String, UsageError> {
            index += 1
            guard index < arguments.count else { return .failure(UsageError("\(name) needs a value")) }
            return .success(arguments[index])
        }
        func number<T: LosslessStringConvertible & Comparable>(_ name: String, _ minimum: T) -> Result<T, UsageError> {
            value(name).flatMap { text in
                guard let parsed = T(text), parsed >= minimum else {
                    return .failure(UsageError("\(name) needs a number of at least \(minimum), not \"\(text)\""))
                }
                return .success(parsed)
            }
        }
        while index < arguments.count {
            let argument = arguments[index]
            let parsed: Result<Void, UsageError>
            switch argument {
            case "--seconds": parsed = number(argument, 0.0).map { options.seconds = $0 }
            case "--callers": parsed = number(argument, 1).map { options.callers = $0 }
            case "--mutators": parsed = number(argument, 1).map { options.mutators = $0 }
            case "--progress": parsed = number(argument, 0.0).map { options.progressInterval = $0 }
            case "--seed": parsed = number(argument, UInt64(0)).map { options.seed = $0 }
            case "--inline":
                options.inline = true
                parsed = .success(())
            case "--cycles": parsed = number(argument, 1).map { options.cycles = $0 }
            case "--kept-cycles": parsed = number(argument, 1).map { options.keptCycles = $0 }
            case "--inject-fault":
                parsed = value(argument).flatMap { text in
                    guard let fault = Fault(rawValue: text) else {
                        return .failure(UsageError("unknown fault \"\(text)\" (lost-call, bad-result)"))
                    }
                    options.fault = fault
                    return .success(())
                }
            case "-h", "--help": return .failure(UsageError(nil))
            default: parsed = .failure(UsageError("unknown argument \"\(argument)\""))
            }
            if case .failure(let error) = parsed { return .failure(error) }
            index += 1
        }
        return .success(options)
    }

    /// A bad command line, or a request for help (no message).
    struct UsageError: Error {
        let message: String?
        init(_ message: String?) { self.message = message }
    }
}
