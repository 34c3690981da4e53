import FFIHookCore
import Testing

@testable import FFIHook

/// The address table of slot closures against a dictionary, through random inserts, lookups,
/// replacements, removals and range queries, with addresses that crowd into few buckets.
@Suite struct SlotTableTests {
    @Test(arguments: [1, 2, 3])
    func agreesWithADictionary(seed: UInt64) throws {
        var random = SplitMix(seed: seed)
        let interface = try CallInterface.shared(for: Signature("v"))
        var pool = ClosurePool()
        var table = SlotTable()
        var model: [UInt: ClosurePool.Cell] = [:]
        var free: [ClosurePool.Cell] = []
        // Addresses from a small window, 8-byte aligned, so runs of probes collide often.
        func address() -> UInt { 0x7f00_0000_1000 + UInt(random.next() % 4096) * 8 }
        for step in 0..<20_000 {
            switch random.next() % 4 {
            case 0, 1:
                let cell = try free.popLast() ?? pool.make(for: interface)
                let slot = address()
                pool.slot(cell).pointee.address = slot
                if let replaced = model[slot] { free.append(replaced) }
                table.insert(cell, in: pool)
                model[slot] = cell
            case 2:
                guard let slot = model.keys.randomElement(using: &random) else { continue }
                table.remove(model[slot]!, in: pool)
                free.append(model.removeValue(forKey: slot)!)
            default:
                let slot = address()
                #expect(table.cell(at: slot, in: pool) == model[slot], "step \(step): lookup of \(slot)")
            }
            #expect(table.count == model.count)
        }
        for (slot, cell) in model {
            #expect(table.cell(at: slot, in: pool) == cell)
        }
        let low: UInt = 0x7f00_0000_1000 + 1000 * 8
        let range = low...(low + 800 * 8)
        let inRange = Set(table.cells(in: range, in: pool))
        #expect(inRange == Set(model.filter { range.contains($0.key) }.values))
    }
}

/// A small deterministic generator, so a failing seed can be replayed.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
