// A Swift program for the tracer: it draws `count` random numbers (one call of the runtime's
// swift_stdlib_random each: a range of a power of two is never drawn again), keeps them in class
// instances, and prints a sum, so that its output shows whether the runtime worked as untraced.
final class Box {
    let value: Int
    init(_ value: Int) { self.value = value }
}

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 0 : 1000
var boxes: [Box] = []
var seen = 0
for _ in 0..<count {
    let drawn = Int.random(in: 0..<16)
    seen += drawn < 16 ? 1 : 0
    boxes.append(Box(drawn))
}
let words = boxes.map { String($0.value) }.joined(separator: ",")
print("drew \(seen) numbers; \(boxes.count) boxes; \(words.count > 0)")
