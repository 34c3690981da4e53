#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Names looked for among the thousands of C strings a walk reads: each is hashed as bytes
/// and its hash looked for among the names' (sorted), and a string is made only of those
/// found.
struct NameFilter: Sendable {
    private var hashes: [UInt64] = []
    private let names: Set<String>

    init(_ names: Set<String>) {
        self.names = names
        hashes = names.map { name in
            var name = name
            return name.withUTF8 { Self.hash($0) }
        }.sorted()
    }

    func contains(_ name: UnsafePointer<CChar>) -> Bool {
        guard !hashes.isEmpty else { return false }
        let hash = Self.hash(
            UnsafeBufferPointer(
                start: UnsafeRawPointer(name).assumingMemoryBound(to: UInt8.self), count: strlen(name)))
        var low = 0
        var high = hashes.count
        while low < high {
            let middle = (low + high) / 2
            if hashes[middle] < hash { low = middle + 1 } else { high = middle }
        }
        return low < hashes.count && hashes[low] == hash && names.contains(String(cString: name))
    }

    /// FNV-1a, 64 bits.
    private static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }
}
