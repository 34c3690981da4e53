#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One mapping of `/proc/self/maps`: its range and protection.
struct MemoryMapping: Equatable, Sendable {
    let start: UInt
    let end: UInt
    let readable: Bool
    let writable: Bool
    let executable: Bool

    /// The mapping's protection as `PROT_*` bits.
    var protection: Int32 {
        (readable ? PROT_READ : 0) | (writable ? PROT_WRITE : 0) | (executable ? PROT_EXEC : 0)
    }

    /// The process's mappings now, in address order (empty when the file cannot be read).
    /// Parsed from the bytes, without strings: a process with thousands of mappings (one
    /// pair more per inline-hooked function) reads it once per plan.
    static func all() -> [MemoryMapping] {
        let descriptor = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return [] }
        defer { close(descriptor) }
        var text: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 18)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            text.append(contentsOf: buffer[0..<count])
        }
        var mappings: [MemoryMapping] = []
        text.withUnsafeBufferPointer { bytes in
            var index = 0
            while index < bytes.count {
                if let mapping = parse(bytes, &index) { mappings.append(mapping) }
                // The rest of the line.
                while index < bytes.count && bytes[index] != UInt8(ascii: "\n") { index += 1 }
                index += 1
            }
        }
        return mappings
    }

    /// The mapping that holds `address` among `mappings`, if any.
    static func containing(_ address: UInt, in mappings: [MemoryMapping]) -> MemoryMapping? {
        mappings.first { $0.start <= address && address < $0.end }
    }

    /// `start-end perms` at `index`, which it leaves after the permissions.
    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>, _ index: inout Int) -> MemoryMapping? {
        func hex(_ terminator: UInt8) -> UInt? {
            var value: UInt = 0
            var digits = 0
            while index < bytes.count {
                let byte = bytes[index]
                let digit: UInt
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt(byte - UInt8(ascii: "a") + 10)
                default:
                    guard byte == terminator, digits > 0 else { return nil }
                    index += 1
                    return value
                }
                value = value << 4 | digit
                digits += 1
                index += 1
            }
            return nil
        }
        guard let start = hex(UInt8(ascii: "-")), let end = hex(UInt8(ascii: " ")), index + 3 <= bytes.count else {
            return nil
        }
        let mapping = MemoryMapping(
            start: start, end: end, readable: bytes[index] == UInt8(ascii: "r"),
            writable: bytes[index + 1] == UInt8(ascii: "w"), executable: bytes[index + 2] == UInt8(ascii: "x"))
        index += 3
        return mapping
    }
}

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
