import FFIHook
import Synchronization

/// Set to make one after block leave a wrong mark (the `bad-result` fault).
let badResultArmed = Atomic<Bool>(false)

/// The block of a hook of `kind` on `shape`: it counts its run in `tally` and `state` and
/// leaves the kind's mark (see ``Marks``).
func makeBlock(kind: HookKind, shape: SlotShape, tally: SlotTally, state: BlockState)
    -> @Sendable (borrowing Invocation) -> Void
{
    let runs = tally.runs[kind.rawValue]
    switch kind {
    case .before:
        return { call in
            state.ran(tally)
            runs.add()
            guard let a = shape.a(of: call) else {
                tally.blockFaults.add()
                return
            }
            shape.setA(of: call, to: a + Marks.beforeStep)
        }
    case .passthrough:
        return { call in
            state.ran(tally)
            runs.add()
            call.callOriginal()
            if !shape.argumentsMatchResult(of: call) { tally.argumentsChanged.add() }
            guard let result = shape.result(of: call) else {
                tally.blockFaults.add()
                return
            }
            shape.setResult(of: call, to: result + Marks.passthroughStep)
        }
    case .replace:
        return { call in
            state.ran(tally)
            runs.add()
            tally.skipped.add()
            guard let a = shape.a(of: call) else {
                tally.blockFaults.add()
                return
            }
            shape.setResult(of: call, to: Marks.replaced | (a ^ shape.b(of: call)), computingEchoes: true)
        }
    case .after:
        return { call in
            state.ran(tally)
            runs.add()
            if !shape.argumentsMatchResult(of: call) { tally.argumentsChanged.add() }
            guard let result = shape.result(of: call) else {
                tally.blockFaults.add()
                return
            }
            var step = Marks.afterStep
            if badResultArmed.load(ordering: .relaxed),
                badResultArmed.compareExchange(expected: true, desired: false, ordering: .relaxed).exchanged
            {
                step += 1
            }
            shape.setResult(of: call, to: result + step)
        }
    case .reenter:
        let input = CallInput(seed: ObjectIdentifier(state).hashValue)
        let expected = input.a + shape.rest(input)
        return { _ in
            state.ran(tally)
            runs.add()
            tally.nested.add()
            if shape.call(input) != expected { tally.nestedWrong.add() }
        }
    }
}
