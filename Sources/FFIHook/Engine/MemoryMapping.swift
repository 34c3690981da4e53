#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One mapping of `/proc/self/maps`: its range and protection.
///
/// Lines are parsed from their bytes, without strings: a process with thousands of mappings
/// (inline hooks add two per planned function) reads the file at every plan.
package struct MemoryMapping: Equatable, Sendable {
    package let start: UInt
    package let end: UInt
    package let readable: Bool
    package let writable: Bool
    package let executable: Bool

    /// A mapping (for a sentinel past the last one, say).
    package init(start: UInt, end: UInt, readable: Bool, writable: Bool, executable: Bool) {
        self.start = start
        self.end = end
        self.readable = readable
        self.writable = writable
        self.executable = executable
    }

    /// The mapping's protection as `PROT_*` bits.
    package var protection: Int32 {
        (readable ? PROT_READ : 0) | (writable ? PROT_WRITE : 0) | (executable ? PROT_EXEC : 0)
    }

    /// The process's mappings now, in address order (empty when the file cannot be read).
    package static func all() -> [MemoryMapping] {
        var mappings: [MemoryMapping] = []
        forEachLine { mapping in
            mappings.append(mapping)
            return true
        }
        return mappings
    }

    /// The mapping that holds `address` now, if any (reads the file up to its line).
    package static func containing(_ address: UInt) -> MemoryMapping? {
        if let snapshot = snapshotOfThisThread(), let found = containing(address, in: snapshot) { return found }
        var found: MemoryMapping?
        forEachLine { mapping in
            guard mapping.start <= address && address < mapping.end else { return true }
            found = mapping
            return false
        }
        return found
    }

    /// The snapshot a thread answers from while it runs ``withSnapshot(_:)``: the thread
    /// (`pthread_self`) and the mappings.
    /// Taken inside the registry's lock (a protection looked up during an install) and inside
    /// the lock of the pages kept writable (``SlotMemory``), so it is taken across fork after
    /// both.
    private static let snapshot: Locked<(thread: UInt, mappings: [MemoryMapping])?> = {
        let lock = Locked<(thread: UInt, mappings: [MemoryMapping])?>(nil)
        lock.protectAcrossFork(rank: SlotRegistry.forkRank + 4)
        return lock
    }()

    /// The mappings of the snapshot this thread runs under, if any.
    private static func snapshotOfThisThread() -> [MemoryMapping]? {
        let thread = UInt(pthread_self())
        return snapshot.withLock { $0?.thread == thread ? $0?.mappings : nil }
    }

    /// Runs `body` with the memory map read once: ``containing(_:)`` answers from that
    /// snapshot on this thread while `body` runs (from the file for an address the snapshot
    /// does not cover, mapped since). For a walk that looks up many addresses of objects it
    /// keeps loaded, whose protections only the walk itself changes (and restores). One
    /// thread at a time has a snapshot; another thread, or a nested call, reads the file as
    /// usual.
    package static func withSnapshot<Result, Failure: Error>(
        _ body: () throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let thread = UInt(pthread_self())
        let taken = snapshot.withLock { current -> Bool in
            guard current == nil else { return false }
            current = (thread, [])
            return true
        }
        guard taken else { return try body() }
        let mappings = all()
        snapshot.withLock { $0 = (thread, mappings) }
        defer { snapshot.withLock { $0 = nil } }
        return try body()
    }

    /// Whether this thread runs under a snapshot, and what it says of `address`: nil when
    /// there is none or it does not cover the address.
    package static func snapshotted(_ address: UInt) -> MemoryMapping? {
        snapshotOfThisThread().flatMap { containing(address, in: $0) }
    }

    /// The mapping that holds `address` among `mappings`, if any; `mappings` are in the order
    /// of the memory map, by address (a binary search).
    package static func containing(_ address: UInt, in mappings: [MemoryMapping]) -> MemoryMapping? {
        var low = 0
        var high = mappings.count
        // The first mapping that starts above the address; the one before it may hold it.
        while low < high {
            let middle = (low + high) / 2
            if mappings[middle].start <= address { low = middle + 1 } else { high = middle }
        }
        guard low > 0, address < mappings[low - 1].end else { return nil }
        return mappings[low - 1]
    }

    /// Calls `body` with each mapping in order while it returns true.
    private static func forEachLine(_ body: (MemoryMapping) -> Bool) {
        guard let file = fopen("/proc/self/maps", "r") else { return }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while true {
            let length = getline(&line, &capacity, file)
            guard length > 0, let line else { return }
            let mapping = line.withMemoryRebound(to: UInt8.self, capacity: length) {
                parse(UnsafeBufferPointer(start: $0, count: length))
            }
            if let mapping, !body(mapping) { return }
        }
    }

    /// `start-end perms …`.
    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> MemoryMapping? {
        var index = 0
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
        return MemoryMapping(
            start: start, end: end, readable: bytes[index] == UInt8(ascii: "r"),
            writable: bytes[index + 1] == UInt8(ascii: "w"), executable: bytes[index + 2] == UInt8(ascii: "x"))
    }
}
