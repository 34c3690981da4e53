internal import FFIHook

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The two pages an inline hook keeps for one function, mapped within ±2 GB of it when there
/// is room: a code page with the stub the function's patch jumps to (`jmp [rip+cell]`) and
/// the trampoline, and a data page with the cell, the 8-byte word the stub jumps through,
/// which the hook engine treats as a slot.
struct CodeRegion: Sendable {
    static let pageSize = UInt(sysconf(Int32(_SC_PAGESIZE)))
    /// Where the trampoline starts in the code page, after the 6-byte stub.
    static let trampolineOffset: UInt = 16
    /// The greatest distance a rel32 reaches, with room for the region itself.
    static let reach: UInt = 0x7FFF_0000

    /// The code page's address: the stub.
    let base: UInt
    /// Whether `base` lies within reach of the function (a 5-byte `jmp rel32` reaches it).
    let isNear: Bool

    var stub: UInt { base }
    var trampoline: UInt { base + Self.trampolineOffset }
    var cell: UInt { base + Self.pageSize }

    /// Maps the two pages as close to `function` as the free address space allows; nil when
    /// nothing can be mapped at all.
    static func allocate(near function: UInt, mappings: [MemoryMapping]) -> CodeRegion? {
        let size = 2 * pageSize
        let low = function > reach ? function - reach : pageSize
        let high = function < UInt.max - reach ? function + reach : UInt.max - size
        // Free gaps between mappings, nearest first.
        var candidates: [UInt] = []
        var previousEnd = pageSize * 16
        let top = MemoryMapping(
            start: 0x7FFF_FFFF_F000, end: 0x7FFF_FFFF_F000, readable: false, writable: false, executable: false)
        for mapping in mappings + [top] {
            if mapping.start >= previousEnd + size {
                // The gap's end nearest the function, and its start.
                let gapStart = previousEnd
                let gapEnd = mapping.start - size
                if gapEnd >= low && gapStart <= high {
                    let first = max(gapStart, low)
                    let last = min(gapEnd, high)
                    if first <= last {
                        let nearest = function < first ? first : function > last ? last : (function & ~(pageSize - 1))
                        candidates.append(nearest)
                    }
                }
            }
            previousEnd = max(previousEnd, mapping.end)
        }
        candidates.sort { distance($0, function) < distance($1, function) }
        // MAP_FIXED_NOREPLACE (Linux 4.17): the hint or nothing, never over a mapping.
        let fixedNoReplace: Int32 = 0x10_0000
        for hint in candidates.prefix(16) {
            let mapped = mmap(
                UnsafeMutableRawPointer(bitPattern: hint), Int(size), PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | fixedNoReplace, -1, 0)
            guard let mapped, mapped != MAP_FAILED else { continue }
            let base = UInt(bitPattern: mapped)
            if base == hint && distance(base, function) < reach && distance(base + size, function) < reach {
                return CodeRegion(base: base, isNear: true)
            }
            munmap(mapped, Int(size))
        }
        // Anywhere: the patch is then the 14-byte absolute jump.
        let mapped = mmap(nil, Int(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let mapped, mapped != MAP_FAILED else { return nil }
        return CodeRegion(base: UInt(bitPattern: mapped), isNear: false)
    }

    private static func distance(_ a: UInt, _ b: UInt) -> UInt { a > b ? a - b : b - a }

    /// Writes the stub and `trampoline` bytes, stores the trampoline's address in the cell,
    /// and makes the code page read-and-execute; false when the protection cannot change.
    func fill(trampoline bytes: [UInt8]) -> Bool {
        let code = UnsafeMutableRawPointer(bitPattern: base)!
        // jmp [rip + disp32], disp32 from the end of the 6-byte instruction to the cell.
        let displacement = Int32(Int(cell) - Int(stub + 6))
        var stubBytes: [UInt8] = [0xFF, 0x25]
        withUnsafeBytes(of: displacement.littleEndian) { stubBytes += $0 }
        stubBytes += [UInt8](repeating: 0xCC, count: Int(Self.trampolineOffset) - stubBytes.count)
        let all = stubBytes + bytes
        all.withUnsafeBytes { code.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        UnsafeMutablePointer<UInt>(bitPattern: cell)!.pointee = trampoline
        return mprotect(code, Int(Self.pageSize), PROT_READ | PROT_EXEC) == 0
    }

    /// Unmaps a region that no patch uses.
    func free() {
        munmap(UnsafeMutableRawPointer(bitPattern: base), Int(2 * Self.pageSize))
    }
}
