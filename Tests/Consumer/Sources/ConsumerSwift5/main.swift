// Attach in Swift 5 language mode, where a lone trailing closure could bind to the last
// closure parameter of a function (backward matching, with only a warning): it must run as
// the enter block, before the function, as it does in Swift 6.
import FFIHook

#if canImport(Glibc)
    import Glibc
#endif

/// Whether the function has run yet in the current call.
var functionRan = false
/// When the block ran: before the function (an enter block) or after it (a leave block).
var before = 0
var after = 0

typealias Twice = @convention(c) (Int) -> Int
let slot = UnsafeMutablePointer<Twice>.allocate(capacity: 1)
slot.initialize(to: { value in
    functionRan = true
    return value * 2
})

do {
    let token = try Hook.attach(on: FunctionSlot(slot)) { _ in
        if functionRan { after += 1 } else { before += 1 }
    }
    let result = slot.pointee(21)
    token.remove()
    guard result == 42, before == 1, after == 0 else {
        print("ConsumerSwift5: a lone trailing closure ran \(before) time(s) before and \(after) after the function")
        exit(1)
    }
    print("ConsumerSwift5: a lone trailing closure is the enter block in Swift 5 mode")
} catch {
    print("ConsumerSwift5: \(error)")
    exit(1)
}
