import CHookBench
import FFIHook

#if canImport(Glibc)
    import Glibc
#endif

/// Slots that come and go: many heap tables of callbacks, each hooked, called, unhooked and
/// freed while others live, as a program that hooks the callback structs it allocates does.
/// Reports the resident memory the process keeps per distinct slot address and the cost of
/// a first hook on a new slot.
struct TransientSlots {
    /// How many tables to allocate in all.
    let tables: Int
    /// Whether each table's slot is released (``Hook/releaseSlots(in:)``) before it is freed.
    let releases: Bool

    /// How many tables live at once; each iteration frees one chosen at random. Tables have
    /// from 1 to 32 slots, the hooked one at a random index, so the heap hands out many
    /// distinct slot addresses.
    private static let live = 8192

    private typealias Add = @convention(c) (Int32, Int32) -> Int32

    func run() throws -> String {
        let signature = try Signature("iii")
        // Filled in before the resident set is read, so their pages count as already there.
        var slots = [UInt](repeating: 0, count: tables)
        var installNanoseconds = [UInt64](repeating: 0, count: tables)
        var index = 0
        // The same pattern of tables without hooks first, so that the heap has grown to hold
        // the live tables before the resident set is read.
        try churn(hooking: nil) { _ in }
        let before = Self.residentBytes()
        try churn(hooking: signature) { slot in
            let start = hb_now_ns()
            let token = try Hook.before(on: FunctionSlot(slot), signature: signature) { _ in }
            installNanoseconds[index] = hb_now_ns() - start
            slots[index] = UInt(bitPattern: slot)
            index += 1
            guard slot.pointee!(2, 3) == 5 else { throw BenchError("a hooked transient slot returned a wrong sum") }
            token.remove()
        }
        try Hook.waitForReclamation()
        let grown = Double(Self.residentBytes() - before)
        var addresses = Set<UInt>()
        var firstHookNanoseconds: [UInt64] = []
        for (slot, nanoseconds) in zip(slots, installNanoseconds) where addresses.insert(slot).inserted {
            firstHookNanoseconds.append(nanoseconds)
        }
        firstHookNanoseconds.sort()
        let median = Double(firstHookNanoseconds[firstHookNanoseconds.count / 2]) / 1000
        let p99 = Double(firstHookNanoseconds[firstHookNanoseconds.count * 99 / 100]) / 1000
        return """
            Transient slots: \(tables) tables, \(addresses.count) distinct addresses, \
            \(releases ? "each slot released before its table is freed" : "no slot released")
            resident memory grew \(format(grown / 1_048_576)) MiB: \(format(grown / Double(addresses.count))) bytes \
            per distinct address
            first hook on a new slot: median \(format(median)) µs, p99 \(format(p99)) µs \
            (\(firstHookNanoseconds.count) first hooks)

            """
    }

    /// Allocates `tables` tables, runs `body` on one slot of each, and frees them in random
    /// order, keeping ``live`` at a time.
    private func churn(
        hooking signature: Signature?, _ body: (UnsafeMutablePointer<Add?>) throws -> Void
    ) throws {
        var random = SystemRandomNumberGenerator()
        var alive: [(table: UnsafeMutablePointer<Add?>, count: Int)] = []
        alive.reserveCapacity(Self.live + 1)
        for _ in 0..<tables {
            let count = Int.random(in: 1...32, using: &random)
            let table = UnsafeMutablePointer<Add?>.allocate(capacity: count)
            table.initialize(repeating: hb_add, count: count)
            try body(table + Int.random(in: 0..<count, using: &random))
            alive.append((table, count))
            if alive.count > Self.live {
                free(alive.remove(at: Int.random(in: 0..<alive.count, using: &random)), releasing: signature != nil)
            }
        }
        for table in alive { free(table, releasing: signature != nil) }
    }

    /// Frees a table, releasing its slots first when asked to.
    private func free(_ table: (table: UnsafeMutablePointer<Add?>, count: Int), releasing: Bool) {
        if releases && releasing {
            Hook.releaseSlots(in: UnsafeRawBufferPointer(start: table.table, count: table.count * 8))
        }
        table.table.deallocate()
    }

    private func format(_ value: Double) -> String {
        let scaled = (value * 10).rounded() / 10
        return String(describing: scaled)
    }

    /// The process's resident set in bytes, from /proc/self/statm ("size resident ...", in pages).
    private static func residentBytes() -> Int {
        let descriptor = open("/proc/self/statm", O_RDONLY)
        guard descriptor >= 0 else { return 0 }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let length = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard length > 0 else { return 0 }
        let fields = buffer[..<length].split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
