import FFIHook
import Synchronization

/// How many hooks of each kind each slot holds or is about to hold, kept within the kinds'
/// caps so that no call can see more than ``HookKind/cap`` hooks of a kind.
final class Reservations: Sendable {
    private let counts = Mutex<[Int]>(Array(repeating: 0, count: SlotShape.allCases.count * HookKind.allCases.count))

    init() {}

    /// Claims room for one more hook; false when the slot is full for the kind.
    func reserve(_ shape: SlotShape, _ kind: HookKind) -> Bool {
        counts.withLock { counts in
            let index = shape.rawValue * HookKind.allCases.count + kind.rawValue
            guard counts[index] < kind.cap else { return false }
            counts[index] += 1
            return true
        }
    }

    /// Gives back the room of a hook that is removed.
    func release(_ shape: SlotShape, _ kind: HookKind) {
        counts.withLock { $0[shape.rawValue * HookKind.allCases.count + kind.rawValue] -= 1 }
    }
}

/// What one mutator did, readable while it runs.
final class MutatorProgress: Sendable {
    let installs = Counter()
    let removes = Counter()
    /// `once` hooks that had removed themselves when the mutator came to remove them.
    let onceFired = Counter()
    /// Times the mutator removed all of its hooks at once.
    let drains = Counter()

    init() {}
}

/// A thread that installs and removes hooks on random slots, of random kinds, some with
/// ``HookOptions/once``, and removes them in random order, until told to stop; then it
/// removes all of its hooks.
struct Mutator: Sendable {
    let id: Int
    let seed: UInt64
    let signatures: [Signature]
    let tallies: [SlotTally]
    let reservations: Reservations
    let failures: FailureLog
    let progress: MutatorProgress

    private struct Held {
        let token: HookToken
        let shape: SlotShape
        let kind: HookKind
        let state: BlockState
    }

    func run() {
        var random = SoakRandom(seed: seed &+ 0x1000 &+ UInt64(id))
        var held: [Held] = []
        while running.load(ordering: .relaxed) {
            let roll = random.below(1000)
            if roll < 5 {
                drain(&held, &random)
                progress.drains.add()
            } else if roll < 550 || held.isEmpty {
                if !install(into: &held, &random), !held.isEmpty {
                    remove(held.swapRemove(at: random.below(held.count)), &random)
                }
            } else {
                remove(held.swapRemove(at: random.below(held.count)), &random)
            }
        }
        drain(&held, &random)
    }

    /// Installs a random hook; false when its slot has no room for the kind.
    private func install(into held: inout [Held], _ random: inout SoakRandom) -> Bool {
        let shape = SlotShape(rawValue: random.below(SlotShape.allCases.count)) ?? .add
        let kind = HookKind(rawValue: random.below(HookKind.allCases.count)) ?? .before
        guard reservations.reserve(shape, kind) else { return false }
        let once = random.chance(1, in: 4)
        let state = BlockState(once: once)
        let block = makeBlock(kind: kind, shape: shape, tally: tallies[shape.rawValue], state: state)
        let options: HookOptions = once ? .once : []
        let signature = signatures[shape.rawValue]
        do {
            let token =
                switch kind.position {
                case .before: try Hook.before(on: shape.slot, signature: signature, options: options, block)
                case .instead: try Hook.instead(on: shape.slot, signature: signature, options: options, block)
                case .after: try Hook.after(on: shape.slot, signature: signature, options: options, block)
                }
            held.append(Held(token: token, shape: shape, kind: kind, state: state))
            progress.installs.add()
        } catch {
            failures.record("install") { "\(kind) hook on \(shape): \(error)" }
            reservations.release(shape, kind)
        }
        return true
    }

    /// Removes one hook and checks what removing reports.
    private func remove(_ hook: Held, _ random: inout SoakRandom) {
        let removed = hook.token.remove()
        progress.removes.add()
        if !removed {
            if !hook.state.once {
                failures.record("remove") { "the first remove() of a \(hook.kind) hook on \(hook.shape) was false" }
            } else if hook.state.runCount.value != 1 {
                failures.record("once") {
                    "a once hook removed itself after \(hook.state.runCount.value) runs (\(hook.kind) on \(hook.shape))"
                }
            } else {
                progress.onceFired.add()
            }
        }
        if hook.token.isActive {
            failures.record("remove") { "a removed \(hook.kind) hook on \(hook.shape) is still active" }
        }
        if random.chance(1, in: 8) && hook.token.remove() {
            failures.record("remove") { "a second remove() of a \(hook.kind) hook on \(hook.shape) was true" }
        }
        reservations.release(hook.shape, hook.kind)
    }

    /// Removes every held hook, in random order.
    private func drain(_ held: inout [Held], _ random: inout SoakRandom) {
        while !held.isEmpty {
            remove(held.swapRemove(at: random.below(held.count)), &random)
        }
    }
}

extension Array {
    /// Removes the element at `index` by moving the last one into its place.
    fileprivate mutating func swapRemove(at index: Int) -> Element {
        swapAt(index, count - 1)
        return removeLast()
    }
}
