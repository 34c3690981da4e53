import CZydis

/// The direct branches of an object's whole code that land in the first bytes of functions,
/// found by decoding the code once.
///
/// A function's own scan (``Relocator/branches(into:function:size:mappedSize:)``) sees the
/// branches of its own body into the bytes its patch overwrites; hand-written code also branches
/// into another function's body: glibc's `__mempcpy_avx512_unaligned_erms` ends with a jump to
/// the instruction after `__memmove_avx512_unaligned_erms`'s first, three bytes into it. A thread
/// taking that jump after the patch went in would run the middle of the jump. The sweep decodes
/// an object's executable segments linearly, starting again at every known function start (the
/// decoding cannot drift across one).
///
/// A batch decodes its libraries' code whole, for the functions it plans; a function planned
/// alone, the code around it (``InlinePlanner/neighbourhood``).
struct BranchSweep {
    /// A direct branch (`jmp`, `jcc`, `call`, `loop`, `jrcxz`, `xbegin`) into a function's first
    /// bytes: where it is and how far into the function it lands.
    struct Branch {
        let from: UInt
        let offset: Int
    }

    /// The branches found, by the function they land in.
    private(set) var branches: [UInt: [Branch]] = [:]

    /// How many bytes into a function a landing counts: more than any patch overwrites.
    static let watchedLength: UInt = 32

    /// Decodes `ranges` (executable memory, mapped while this runs), starting again at each of
    /// `starts`, and keeps the branches into the first bytes of `functions` (both sorted).
    init(ranges: [Range<UInt>], starts: [UInt], functions: [UInt]) {
        var found: [UInt: [Branch]] = [:]
        Self.forEachDirectBranch(in: ranges, startingAgainAt: starts) { from, target in
            let index = Self.firstIndex(in: functions, above: target) - 1
            guard index >= 0 else { return }
            let function = functions[index]
            let offset = target - function
            guard offset > 0, offset < Self.watchedLength else { return }
            found[function, default: []].append(Branch(from: from, offset: Int(offset)))
        }
        branches = found
    }

    /// The branches that land in `function` past its first byte.
    func branches(into function: UInt) -> [Branch] { branches[function] ?? [] }

    /// The first of `incoming` that lands inside the bytes a patch overwrites, from outside the
    /// copied bytes (a copied instruction's branch is relocated with it).
    static func intoPatch(
        _ incoming: [Branch], function: UInt, patchOffset: Int, copiedLength: Int
    ) -> Branch? {
        let copied = function..<(function + UInt(copiedLength))
        return incoming.first { $0.offset > patchOffset && $0.offset < copiedLength && !copied.contains($0.from) }
    }

    /// Calls `body` with each direct branch of `ranges`: its address and its target.
    static func forEachDirectBranch(
        in ranges: [Range<UInt>], startingAgainAt starts: [UInt], _ body: (_ from: UInt, _ target: UInt) -> Void
    ) {
        var decoder = ZydisDecoder()
        ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)
        var instruction = ZydisDecodedInstruction()
        for range in ranges {
            var address = range.lowerBound
            // The first known start after the place being decoded.
            var next = firstIndex(in: starts, above: address)
            while address < range.upperBound {
                let available = Int(range.upperBound - address)
                let status = ZydisDecoderDecodeInstruction(
                    &decoder, nil, UnsafeRawPointer(bitPattern: address), available, &instruction)
                let length: UInt = status & 0x8000_0000 == 0 ? UInt(instruction.length) : 1
                if status & 0x8000_0000 == 0, instruction.raw.imm.0.is_relative != 0 {
                    body(address, address &+ length &+ UInt(bitPattern: Int(instruction.raw.imm.0.value.s)))
                }
                var following = address + length
                // An instruction that runs over a known start was not one: go on from the start.
                while next < starts.count, starts[next] <= address { next += 1 }
                if next < starts.count, starts[next] < following { following = starts[next] }
                address = following
            }
        }
    }

    /// The index of the first element of `sorted` above `value` (`sorted.count` when none).
    static func firstIndex(in sorted: [UInt], above value: UInt) -> Int {
        var low = 0
        var high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] <= value { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
