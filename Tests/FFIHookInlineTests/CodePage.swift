#if canImport(Glibc)
    import Glibc
#endif

/// One page of executable memory mapped at a chosen distance from an address, for
/// trampolines: within ±2 GB for the rel32 forms, or beyond 4 GB for the absolute ones.
final class CodePage {
    let base: UnsafeMutableRawPointer
    static let size = 4096

    var address: UInt { UInt(bitPattern: base) }

    /// A page whose distance from `address` is in `distances`, searched outward in 64 KiB steps
    /// on both sides with MAP_FIXED_NOREPLACE; nil when none is free.
    init?(near address: UInt, distances: ClosedRange<UInt>) {
        let mapFixedNoReplace: Int32 = 0x10_0000
        let step: UInt = 0x1_0000
        let aligned = address & ~(step - 1)
        var distance = max(distances.lowerBound, step) & ~(step - 1)
        while distance <= distances.upperBound {
            for candidate in [aligned &+ distance, aligned &- distance]
            where candidate > 0x1_0000 && candidate < 0x7FFF_0000_0000 {
                let hint = UnsafeMutableRawPointer(bitPattern: candidate)
                let mapped = mmap(
                    hint, Self.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | mapFixedNoReplace, -1, 0)
                guard let mapped, mapped != MAP_FAILED else { continue }
                if mapped == hint {
                    base = mapped
                    return
                }
                munmap(mapped, Self.size)
            }
            distance += step
        }
        return nil
    }

    /// A page within ±1.5 GB of `address`: rel32 reaches it and the code near `address`.
    static func near(_ address: UnsafeRawPointer) -> CodePage? {
        CodePage(near: UInt(bitPattern: address), distances: 0x1_0000...0x6000_0000)
    }

    /// A page 8 GB or more from `address`: only absolute forms reach back.
    static func far(_ address: UnsafeRawPointer) -> CodePage? {
        CodePage(near: UInt(bitPattern: address), distances: 0x2_0000_0000...0x2_4000_0000)
    }

    /// Writes `bytes` at the page's start and makes it read-and-execute.
    func install(_ bytes: [UInt8]) {
        precondition(bytes.count <= Self.size)
        mprotect(base, Self.size, PROT_READ | PROT_WRITE)
        bytes.withUnsafeBytes { base.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        mprotect(base, Self.size, PROT_READ | PROT_EXEC)
    }

    deinit { munmap(base, Self.size) }
}
