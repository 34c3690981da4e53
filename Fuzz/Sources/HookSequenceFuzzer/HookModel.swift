import FFIHook
import FuzzKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One hook the fuzzer installed, and what the model expects of it.
struct ModelHook {
    let slot: Int
    let position: HookPosition
    let variant: InsteadVariant
    let constant: Int32
    let once: Bool
    let token: HookToken
    let counters: HookCounters
    /// How many times the block has run on the fuzzing thread.
    var expectedRuns = 0
    /// Whether the model holds the hook installed (a `once` hook that ran on the fuzzing
    /// thread, or one removed, is not).
    var live = true

    var summary: String {
        let kind = position == .instead ? "instead(\(variant))" : "\(position)"
        return "\(kind)\(once ? " once" : "") k=\(constant) on slot \(slot)"
    }
}

/// The hooks of one input and the checks of every operation against them.
struct HookModel {
    /// The input, quoted when a check fails.
    let bytes: [UInt8]
    /// Every hook of the input, in install order.
    private(set) var hooks: [ModelHook] = []

    /// The most hooks kept installed at once.
    static let maximumLive = 24

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
        FuzzKit.require(condition(), message(), bytes)
    }

    /// Indices of the hooks the model holds installed, on `slot` or on all slots.
    func live(on slot: Int? = nil) -> [Int] {
        hooks.indices.filter { hooks[$0].live && (slot == nil || hooks[$0].slot == slot) }
    }

    // MARK: - Installing

    mutating func install(slot: Int, position: HookPosition, once: Bool, variant: InsteadVariant, constant: Int32) {
        guard live().count < Self.maximumLive else { return }
        let counters = HookCounters()
        let block = HookBlocks.make(
            slot: slot, position: position, variant: variant, constant: constant, counters: counters)
        let needsOriginal = position != .instead && Slots.original(slot) == 0 && live(on: slot).isEmpty
        let token: HookToken
        do {
            token = try Hook.install(
                on: Slots.slot(slot), signature: Slots.signature, position: position, options: once ? [.once] : [],
                block)
        } catch {
            require(
                needsOriginal && error.code == .emptySlot,
                "installing \(position) on slot \(slot) failed: \(error)")
            return
        }
        require(!needsOriginal, "a \(position) hook was installed on slot \(slot), which holds NULL")
        // The background thread may already have run (and so removed) a once hook on a noisy slot.
        require(token.isActive || (once && Slots.isNoisy(slot)), "a new token is not active")
        hooks.append(
            ModelHook(
                slot: slot, position: position, variant: variant, constant: constant, once: once, token: token,
                counters: counters))
    }

    /// Installing with another ABI on a slot that certainly has hooks must be refused.
    func installMismatched(slot: Int) {
        let certain = live(on: slot).contains { !hooks[$0].once || !Slots.isNoisy(slot) }
        guard certain else { return }
        do {
            let token = try Hook.before(on: Slots.slot(slot), signature: Signature("ddd")) { _ in }
            token.remove()
            require(false, "a before hook with signature \"ddd\" was installed on slot \(slot), hooked as \"iii\"")
        } catch let error as HookError {
            require(
                error.code == .signatureMismatch && error.message.contains(#"signature "iii""#),
                "installing \"ddd\" on slot \(slot) hooked as \"iii\" threw \(error)")
        } catch {
            require(false, "\"ddd\" does not parse: \(error)")
        }
    }

    // MARK: - Removing

    /// Removes the live hook chosen by `choice`.
    mutating func removeLive(_ choice: UInt8) {
        let candidates = live()
        guard !candidates.isEmpty else { return }
        remove(candidates[Int(choice) % candidates.count])
    }

    /// Removes hook `index`, which the model holds installed.
    mutating func remove(_ index: Int) {
        let hook = hooks[index]
        let removed = hook.token.remove()
        if !hook.once {
            require(removed, "remove() of installed hook #\(index) (\(hook.summary)) returned false")
        } else if !removed {
            // Only another thread's run removes a once hook behind the model's back.
            requireRanElsewhere(index, "remove() of once hook #\(index) (\(hook.summary)) returned false")
        }
        require(!hook.token.isActive, "hook #\(index) (\(hook.summary)) is active after remove()")
        hooks[index].live = false
    }

    /// Removes a hook removed before, chosen by `choice`: it must answer false.
    func removeAgain(_ choice: UInt8) {
        let candidates = hooks.indices.filter { !hooks[$0].live }
        guard !candidates.isEmpty else { return }
        let index = candidates[Int(choice) % candidates.count]
        require(
            !hooks[index].token.remove(), "a second remove() of hook #\(index) (\(hooks[index].summary)) returned true")
    }

    /// Removes every live hook, waits for reclamation and checks the slots hold their
    /// originals again and that the counts match.
    mutating func finish() {
        for index in live() { remove(index) }
        waitForReclamation()
        for slot in 0..<Slots.count {
            let original = Slots.original(slot)
            // A once hook the background thread ran removes itself on that thread; its
            // removal may still be writing the original back.
            let settled = Slots.isNoisy(slot) ? eventually { Slots.current(slot) == original } : true
            require(
                settled && Slots.current(slot) == original,
                "slot \(slot) holds 0x\(String(Slots.current(slot), radix: 16)) after every hook was removed, "
                    + "not its original 0x\(String(original, radix: 16))")
        }
        checkCounts()
    }

    func waitForReclamation() {
        do {
            try Hook.waitForReclamation()
        } catch {
            require(false, "waitForReclamation() failed outside any hook: \(error)")
        }
    }

    // MARK: - Calling

    /// Calls through `slot` and checks the result and every block's run count.
    mutating func call(slot: Int, _ a: Int32, _ b: Int32) {
        let (result, called) = Slots.call(slot, a, b)
        let onSlot = live(on: slot)
        guard called else {
            require(onSlot.isEmpty, "slot \(slot) holds NULL while \(onSlot.count) hooks are installed on it")
            return
        }
        let runs = hooks.map { $0.counters.fuzzing.load(ordering: .relaxed) - $0.expectedRuns }
        var reached = Set<Int>()
        func ran(_ index: Int) -> Bool {
            let hook = hooks[index]
            reached.insert(index)
            let count = runs[index]
            if !hook.once {
                require(count == 1, "hook #\(index) (\(hook.summary)) ran \(count) times in one call through it")
                return true
            }
            require(count == 0 || count == 1, "once hook #\(index) (\(hook.summary)) ran \(count) times in one call")
            if count == 0 {
                requireRanElsewhere(index, "once hook #\(index) (\(hook.summary)) was skipped")
            }
            return count == 1
        }

        var x = a
        for index in onSlot where hooks[index].position == .before && ran(index) {
            x = Transform.before(x, hooks[index].constant)
        }
        // Instead blocks run newest first; each wrapping one calls inward, the first other
        // one ends the chain.
        var chain: [Int] = []
        for index in onSlot.reversed() where hooks[index].position == .instead && ran(index) {
            chain.append(index)
            if hooks[index].variant != .wrap { break }
        }
        var expected = Slots.reference(slot, x, b)
        if let last = chain.last, hooks[last].variant != .wrap {
            let k = hooks[last].constant
            expected = hooks[last].variant == .replace ? Transform.replace(x, k) : Transform.reenter(expected, k)
            chain.removeLast()
        }
        for index in chain.reversed() { expected = Transform.wrap(expected, hooks[index].constant) }
        for index in onSlot where hooks[index].position == .after && ran(index) {
            expected = Transform.after(expected, hooks[index].constant)
        }

        for index in hooks.indices where !reached.contains(index) {
            require(
                runs[index] == 0,
                "hook #\(index) (\(hooks[index].summary), \(hooks[index].live ? "not reached" : "removed")) "
                    + "ran \(runs[index]) times in a call through slot \(slot)")
        }
        require(
            result == expected,
            "call through slot \(slot) with (\(a), \(b)) returned \(result), expected \(expected) from "
                + "[\(onSlot.map { "#\($0) \(hooks[$0].summary)" }.joined(separator: ", "))]")

        for index in hooks.indices where runs[index] > 0 {
            hooks[index].expectedRuns += runs[index]
            if hooks[index].once {
                require(!hooks[index].token.isActive, "once hook #\(index) is active after its run")
                hooks[index].live = false
            }
        }
        checkCounts()
    }

    // MARK: - Counts

    /// Checks every block's count on the fuzzing thread, that no once hook ran twice, and
    /// that nothing on a quiet slot ran on another thread.
    func checkCounts() {
        for (index, hook) in hooks.enumerated() {
            let fuzzing = hook.counters.fuzzing.load(ordering: .relaxed)
            let background = hook.counters.background.load(ordering: .relaxed)
            require(
                fuzzing == hook.expectedRuns,
                "hook #\(index) (\(hook.summary)) ran \(fuzzing) times on the fuzzing thread, expected \(hook.expectedRuns)"
            )
            if hook.once {
                require(
                    fuzzing + background <= 1,
                    "once hook #\(index) (\(hook.summary)) ran \(fuzzing) + \(background) times")
            }
            if !Slots.isNoisy(hook.slot) {
                require(background == 0, "hook #\(index) (\(hook.summary)) ran on another thread")
            }
        }
    }

    /// A once hook the fuzzing thread did not run, where the model expected it, must have
    /// run on the background thread (its count may lag behind the claim for a moment).
    private func requireRanElsewhere(_ index: Int, _ what: String) {
        let hook = hooks[index]
        require(Slots.isNoisy(hook.slot), "\(what) on quiet slot \(hook.slot), where only the fuzzing thread calls")
        require(
            eventually { hook.counters.background.load(ordering: .relaxed) >= 1 },
            "\(what), but it never ran on another thread")
    }
}

/// Whether `condition` holds within ten seconds of polling.
func eventually(_ condition: () -> Bool) -> Bool {
    for _ in 0..<100_000 {
        if condition() { return true }
        usleep(100)
    }
    return condition()
}
