internal import CFFIHookSupport

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

    /// The mapping that holds `address` now, if any: asked of the kernel (one request where it
    /// has PROCMAP_QUERY, else the file read up to the address's line), or answered from this
    /// thread's snapshot (``withSnapshot(_:)``).
    package static func containing(_ address: UInt) -> MemoryMapping? {
        if let found = snapshotted(address) { return found }
        var mapping = ffh_mapping()
        switch ffh_mapping_of(address, &mapping) {
        case 1: return MemoryMapping(mapping)
        case 0: return nil
        default: break
        }
        var found: MemoryMapping?
        forEachLine { mapping in
            guard mapping.start <= address && address < mapping.end else { return true }
            found = mapping
            return false
        }
        return found
    }

    /// A mapping as the C side reports one.
    private init(_ mapping: ffh_mapping) {
        self.init(
            start: UInt(mapping.start), end: UInt(mapping.end), readable: mapping.protection & PROT_READ != 0,
            writable: mapping.protection & PROT_WRITE != 0, executable: mapping.protection & PROT_EXEC != 0)
    }

    /// What a thread running ``withSnapshot(_:)`` knows of the memory map.
    private struct Snapshot {
        /// The thread (`pthread_self`).
        let thread: UInt
        /// The memory map opened for queries (-1: the kernel cannot be asked; `mappings` then
        /// holds the whole file, read at the start).
        var descriptor: Int32
        /// The mappings learnt so far, in address order: each as the first look at it found it.
        var mappings: [MemoryMapping] = []
    }

    /// The snapshot a thread answers from while it runs ``withSnapshot(_:)``.
    /// Taken inside the registry's lock (a protection looked up during an install) and inside
    /// the lock of the pages kept writable (``SlotMemory``), so it is taken across fork after
    /// both.
    private static let snapshot: Locked<Snapshot?> = {
        let lock = Locked<Snapshot?>(nil)
        lock.protectAcrossFork(rank: SlotRegistry.forkRank + 4)
        return lock
    }()

    /// Runs `body` with the memory map kept as it was: ``containing(_:)`` answers on this thread,
    /// while `body` runs, from what was learnt of each mapping the first time an address of it
    /// was looked up. For a walk that looks up many addresses of objects it keeps loaded, whose
    /// protections only the walk itself changes (and restores). Where the kernel answers
    /// PROCMAP_QUERY a mapping is learnt when first asked about (a walk over a few import
    /// tables asks about a few mappings: reading the file, in a process of hundreds of objects,
    /// cost a third of a millisecond at every `dlopen` a group follows); elsewhere the file is
    /// read once at the start. One thread at a time has a snapshot; another thread, or a nested
    /// call, asks as usual.
    package static func withSnapshot<Result, Failure: Error>(
        _ body: () throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let thread = UInt(pthread_self())
        let taken = snapshot.withLock { current -> Bool in
            guard current == nil else { return false }
            current = Snapshot(thread: thread, descriptor: -1)
            return true
        }
        guard taken else { return try body() }
        var descriptor = ffh_maps_open()
        var mappings: [MemoryMapping] = []
        // A kernel without the request says so at the first query: the file is read instead.
        // (Asked about an address mapped for certain: this library's own.)
        var probe = ffh_mapping()
        if descriptor < 0 || ffh_mapping_query(descriptor, UInt(bitPattern: #dsohandle), &probe) < 0 {
            ffh_maps_close(descriptor)
            descriptor = -1
            mappings = all()
        }
        snapshot.withLock { $0 = Snapshot(thread: thread, descriptor: descriptor, mappings: mappings) }
        defer {
            snapshot.withLock { $0 = nil }
            ffh_maps_close(descriptor)
        }
        return try body()
    }

    /// Whether this thread runs under a snapshot, and what it says of `address`: nil when
    /// there is none or no mapping holds the address.
    package static func snapshotted(_ address: UInt) -> MemoryMapping? {
        let thread = UInt(pthread_self())
        let known: (descriptor: Int32, found: MemoryMapping?)? = snapshot.withLock { current in
            guard let current, current.thread == thread else { return nil }
            return (current.descriptor, containing(address, in: current.mappings))
        }
        guard let known else { return nil }
        if let found = known.found { return found }
        // Read whole at the start (no query): the file, as before, for an address mapped since.
        guard known.descriptor >= 0 else { return nil }
        var mapping = ffh_mapping()
        guard ffh_mapping_query(known.descriptor, address, &mapping) == 1 else { return nil }
        let learnt = MemoryMapping(mapping)
        snapshot.withLock { current in
            guard current?.thread == thread, let mappings = current?.mappings else { return }
            let place = mappings.firstIndex { $0.start > learnt.start } ?? mappings.count
            current?.mappings.insert(learnt, at: place)
        }
        return learnt
    }

    /// The mappings that hold `addresses` now, by address (one that no mapping holds is left
    /// out): a request for each where the kernel answers PROCMAP_QUERY (none for an address in a
    /// mapping already learnt), else the file read once.
    package static func current(at addresses: [UInt]) -> [UInt: MemoryMapping] {
        var found: [UInt: MemoryMapping] = [:]
        let descriptor = ffh_maps_open()
        defer { ffh_maps_close(descriptor) }
        var learnt: [MemoryMapping] = []
        for address in addresses {
            if let known = learnt.first(where: { $0.start <= address && address < $0.end }) {
                found[address] = known
                continue
            }
            var mapping = ffh_mapping()
            switch ffh_mapping_query(descriptor, address, &mapping) {
            case 1:
                learnt.append(MemoryMapping(mapping))
                found[address] = learnt.last
            case 0: continue
            default:
                let mappings = all()
                for address in addresses { found[address] = containing(address, in: mappings) }
                return found
            }
        }
        return found
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
