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

    /// How many tables live at once; each iteration frees one chosen at random.
    private static let live = 64

    func run() throws -> String {
        typealias Add = @convention(c) (Int32, Int32) -> Int32
        let signature = try Signature("iii")
        var random = SystemRandomNumberGenerator()
        var alive: [UnsafeMutablePointer<Add?>] = []
        var addresses = Set<UInt>()
        var firstHookNanoseconds: [UInt64] = []
        let before = Self.residentBytes()
        for _ in 0..<tables {
            let table = UnsafeMutablePointer<Add?>.allocate(capacity: 1)
            table.initialize(to: hb_add)
            let isNew = addresses.insert(UInt(bitPattern: table)).inserted
            let start = hb_now_ns()
            let token = try Hook.before(on: FunctionSlot(table), signature: signature) { _ in }
            let elapsed = hb_now_ns() - start
            if isNew { firstHookNanoseconds.append(elapsed) }
            guard table.pointee!(2, 3) == 5 else { throw BenchError("a hooked transient slot returned a wrong sum") }
            token.remove()
            alive.append(table)
            if alive.count > Self.live {
                let victim = alive.remove(at: Int.random(in: 0..<alive.count, using: &random))
                if releases { Hook.releaseSlots(in: UnsafeRawBufferPointer(start: victim, count: 8)) }
                victim.deallocate()
            }
        }
        for table in alive {
            if releases { Hook.releaseSlots(in: UnsafeRawBufferPointer(start: table, count: 8)) }
            table.deallocate()
        }
        try Hook.waitForReclamation()
        let grown = Double(Self.residentBytes() - before)
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
