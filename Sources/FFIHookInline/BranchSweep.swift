internal import CFFIHookSupport
import CZydis

/// The direct branches of an object's whole code that land in the first bytes of functions,
/// found by looking at the code once.
///
/// A function's own scan (``Relocator/branches(into:function:size:mappedSize:)``) sees the
/// branches of its own body into the bytes its patch overwrites; hand-written code also branches
/// into another function's body: glibc's `__mempcpy_avx512_unaligned_erms` ends with a jump to
/// the instruction after `__memmove_avx512_unaligned_erms`'s first, three bytes into it. A thread
/// taking that jump after the patch went in would run the middle of the jump. The sweep finds
/// what decoding an object's code linearly finds (its executable segments, narrowed to the
/// sections of code its file names: data a linker put there is not decoded), starting again at
/// every known function start (the decoding cannot drift across one: the exported functions',
/// and every start the unwind table lists, ``BatchTargets/restartPoints(of:)``), without
/// decoding most of them: a filter in C over every byte finds those that could encode a branch into a watched
/// function, and only the stretch from the function start before each to it is decoded (a test
/// holds the two to each other on libc, SQLite and zlib). A fraction of the time of decoding
/// everything.
///
/// A batch sweeps its libraries' code whole, for the functions it plans; a function planned
/// alone, the code around it (``InlinePlanner/neighbourhood``).
struct BranchSweep {
    /// A direct branch (`jmp`, `jcc`, `call`, `loop`, `jrcxz`, `xbegin`) into a function's first
    /// bytes: where it is and how far into the function it lands.
    struct Branch {
        let from: UInt
        let offset: Int
    }

    /// The functions watched, sorted ascending.
    let functions: [UInt]

    /// How many of each function's first bytes are watched (in the order of ``functions``):
    /// ``watchedLength``, or fewer where the sweep was told how many a patch of the function
    /// displaces.
    let windows: [UInt8]

    /// The branches found, by the index of the function they land in.
    private var found: [[Branch]]

    /// The sweep with every window ``watchedLength`` bytes long, made when a plan displaces more
    /// of a function than its window covers (a patch longer than the windows were measured for);
    /// nil when the windows are that long already.
    private let wider: WiderSweep?

    /// How many bytes into a function a landing counts at most: more than any patch overwrites.
    static let watchedLength: UInt = 32

    /// Decodes `ranges` (executable memory, mapped while this runs), starting again at each of
    /// `starts`, and keeps the branches into the first bytes of `functions` (both sorted, each
    /// once): the first `windows[i]` bytes of `functions[i]` when `windows` is given (each at most
    /// ``watchedLength``; a shorter window watches fewer bytes, and far fewer stretches of the
    /// code are decoded), else the first ``watchedLength``.
    ///
    /// Only the stretches between starts that hold a byte that could encode such a branch are
    /// decoded (``forEachBranchIntoFirstBytes(of:in:startingAgainAt:windows:_:)``): the same branches as
    /// decoding all of it finds, at a fraction of the cost for a library's whole code.
    init(ranges: [Range<UInt>], starts: [UInt], functions: [UInt], windows: [UInt8]? = nil) {
        self.functions = functions
        let windows = windows.map { $0.map { min($0, UInt8(Self.watchedLength)) } }
        self.windows = windows ?? [UInt8](repeating: UInt8(Self.watchedLength), count: functions.count)
        var found = [[Branch]](repeating: [], count: functions.count)
        let watched = self.windows
        Self.forEachBranchIntoFirstBytes(of: functions, in: ranges, startingAgainAt: starts, windows: windows) {
            from, target in
            let index = Self.firstIndex(in: functions, above: target) - 1
            guard index >= 0 else { return }
            let offset = target - functions[index]
            guard offset > 0, offset < UInt(watched[index]) else { return }
            found[index].append(Branch(from: from, offset: Int(offset)))
        }
        self.found = found
        wider =
            self.windows.allSatisfy { UInt($0) >= Self.watchedLength }
            ? nil : WiderSweep(ranges: ranges, starts: starts, functions: functions)
    }

    /// The sweep with full windows, made the first time one is needed.
    private final class WiderSweep {
        let ranges: [Range<UInt>]
        let starts: [UInt]
        let functions: [UInt]
        lazy var sweep = BranchSweep(ranges: ranges, starts: starts, functions: functions)

        init(ranges: [Range<UInt>], starts: [UInt], functions: [UInt]) {
            self.ranges = ranges
            self.starts = starts
            self.functions = functions
        }
    }

    /// The branches that land in `function` past its first byte, within its window.
    func branches(into function: UInt) -> [Branch] {
        let index = Self.firstIndex(in: functions, above: function) - 1
        return index >= 0 && functions[index] == function ? found[index] : []
    }

    /// The first branch into the bytes a plan of `function` overwrites (``intoPatch(_:function:patchOffset:copiedLength:)``),
    /// from the wider sweep when the plan displaces more of the function than its window covers.
    func intoPatch(function: UInt, patchOffset: Int, copiedLength: Int) -> Branch? {
        let index = Self.firstIndex(in: functions, above: function) - 1
        if index >= 0, functions[index] == function, copiedLength > Int(windows[index]), let wider {
            return wider.sweep.intoPatch(function: function, patchOffset: patchOffset, copiedLength: copiedLength)
        }
        return Self.intoPatch(
            branches(into: function), function: function, patchOffset: patchOffset, copiedLength: copiedLength)
    }

    /// Calls `body` with each direct branch that ``forEachDirectBranch(in:startingAgainAt:_:)``
    /// finds in `ranges` and whose target lands in the first ``watchedLength`` bytes of one of
    /// `functions` (sorted; the first `windows[i]` bytes of `functions[i]` where `windows` is
    /// given), past its first byte (and maybe with others): a filter over the
    /// bytes (``ffh_branch_candidates``) finds every opcode that could encode one, and only the
    /// stretches from the start before each (where the full decoding is in step) to it are
    /// decoded, as the full decoding decodes them.
    static func forEachBranchIntoFirstBytes(
        of functions: [UInt], in ranges: [Range<UInt>], startingAgainAt starts: [UInt], windows: [UInt8]? = nil,
        _ body: (_ from: UInt, _ target: UInt) -> Void
    ) {
        guard !functions.isEmpty else { return }
        // The filter's bitmap of the watched bytes (128 KiB for 1 MiB of code); none when the
        // functions are spread too far for one, over 128 MiB (then everything is decoded).
        let words = ffh_branch_blocks(functions, functions.count, Self.watchedLength)
        var blocks = words > 0 && words <= 1 << 21 ? [UInt64](repeating: 0, count: words) : []
        for range in ranges where !range.isEmpty {
            // Room for one candidate in 256 bytes (SQLite's code has one in 830): a second pass
            // over the bytes only for code denser in them.
            var capacity = max(256, range.count / 256)
            var candidates: [UInt] = []
            while true {
                // (The filter marks the same bits each time: the bitmap is not cleared.)
                candidates = [UInt](repeating: 0, count: capacity)
                let total = functions.withUnsafeBufferPointer { functions in
                    ffh_branch_candidates(
                        UnsafePointer(bitPattern: range.lowerBound), range.count, functions.baseAddress,
                        functions.count, Self.watchedLength, windows, &blocks, blocks.count, &candidates, capacity)
                }
                if total < 0 {
                    // The filter could not run: decode all of it.
                    forEachDirectBranch(in: [range], startingAgainAt: starts, body)
                    candidates = []
                    break
                }
                if total <= capacity {
                    candidates.removeSubrange(total...)
                    break
                }
                capacity = total
            }
            // Each stretch from the last start at or before a candidate (or the range's start) to
            // the candidate, each stretch once.
            var index = 0
            while index < candidates.count {
                let startIndex = firstIndex(in: starts, above: candidates[index]) - 1
                let start =
                    startIndex >= 0 && starts[startIndex] >= range.lowerBound ? starts[startIndex] : range.lowerBound
                let nextStart = startIndex + 1 < starts.count ? starts[startIndex + 1] : UInt.max
                // The candidates in the same stretch.
                var last = index
                while last + 1 < candidates.count, candidates[last + 1] < nextStart { last += 1 }
                let end = min(range.upperBound, candidates[last] + 1)
                forEachWatchedBranch(
                    in: start..<end, limit: range.upperBound, startingAgainAt: starts, functions: functions,
                    blocks: blocks, body)
                index = last + 1
            }
        }
    }

    /// Calls `body` with each direct branch that ``forEachDirectBranch(in:startingAgainAt:limit:_:)``
    /// finds in `range` (instructions running up to `limit`) whose target the bitmap `blocks` of
    /// ``ffh_branch_candidates`` for `functions` watches: decoded in C (``ffh_branch_decode``),
    /// the instructions its table leaves aside by Zydis, as that decoding does.
    static func forEachWatchedBranch(
        in range: Range<UInt>, limit: UInt, startingAgainAt starts: [UInt], functions: [UInt], blocks: [UInt64],
        _ body: (_ from: UInt, _ target: UInt) -> Void
    ) {
        var decoder = ZydisDecoder()
        var decoderReady = false
        var instruction = ZydisDecodedInstruction()
        var found = [ffh_branch_found](repeating: ffh_branch_found(), count: 64)
        var address = range.lowerBound
        var next = firstIndex(in: starts, above: address)
        starts.withUnsafeBufferPointer { starts in
            functions.withUnsafeBufferPointer { functions in
                blocks.withUnsafeBufferPointer { blocks in
                    while address < range.upperBound {
                        var undecoded: Int32 = 0
                        let count = ffh_branch_decode(
                            &address, range.upperBound, limit, starts.baseAddress, starts.count, &next,
                            functions.baseAddress, functions.count, Self.watchedLength, blocks.baseAddress, &found,
                            found.count, &undecoded)
                        for index in 0..<count { body(found[index].from, found[index].target) }
                        guard undecoded != 0 else { continue }
                        // An instruction the table leaves to Zydis: decoded as the full decoding
                        // decodes it, then on from after it.
                        if !decoderReady {
                            ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)
                            ZydisDecoderEnableMode(&decoder, ZYDIS_DECODER_MODE_MINIMAL, ZyanBool(ZYAN_TRUE))
                            decoderReady = true
                        }
                        let status = ZydisDecoderDecodeInstruction(
                            &decoder, nil, UnsafeRawPointer(bitPattern: address), Int(limit - address), &instruction)
                        let length = status & 0x8000_0000 == 0 ? UInt(instruction.length) : 1
                        if status & 0x8000_0000 == 0, instruction.raw.imm.0.is_relative != 0 {
                            let target = address &+ length &+ UInt(bitPattern: Int(instruction.raw.imm.0.value.s))
                            if ffh_branch_is_watched(
                                functions.baseAddress, functions.count, Self.watchedLength, blocks.baseAddress, target)
                                != 0
                            {
                                body(address, target)
                            }
                        }
                        var following = address + length
                        while next < starts.count, starts[next] <= address { next += 1 }
                        if next < starts.count, starts[next] < following { following = starts[next] }
                        address = following
                    }
                }
            }
        }
    }

    /// The first of `incoming` that lands inside the bytes a patch overwrites, from outside the
    /// copied bytes (a copied instruction's branch is relocated with it).
    static func intoPatch(
        _ incoming: [Branch], function: UInt, patchOffset: Int, copiedLength: Int
    ) -> Branch? {
        let copied = function..<(function + UInt(copiedLength))
        return incoming.first { $0.offset > patchOffset && $0.offset < copiedLength && !copied.contains($0.from) }
    }

    /// Calls `body` with each direct branch of `ranges`: its address and its target.
    ///
    /// With `limit`, each range is where instructions start, and an instruction may run past
    /// its end up to `limit` (the end of the mapped code it is part of).
    static func forEachDirectBranch(
        in ranges: [Range<UInt>], startingAgainAt starts: [UInt], limit: UInt? = nil,
        _ body: (_ from: UInt, _ target: UInt) -> Void
    ) {
        var decoder = ZydisDecoder()
        ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)
        // Lengths and the raw immediate are all the sweep reads: the minimal mode skips the rest
        // of the decoding.
        ZydisDecoderEnableMode(&decoder, ZYDIS_DECODER_MODE_MINIMAL, ZyanBool(ZYAN_TRUE))
        var instruction = ZydisDecodedInstruction()
        for range in ranges {
            var address = range.lowerBound
            // The first known start after the place being decoded.
            var next = firstIndex(in: starts, above: address)
            while address < range.upperBound {
                let available = Int((limit ?? range.upperBound) - address)
                // The instructions compilers emit by a table (``ffh_x86_length``); the rest by
                // Zydis.
                var relative = Int64.min
                var length = UInt(ffh_x86_length(UnsafePointer(bitPattern: address), available, &relative))
                if length == 0 {
                    let status = ZydisDecoderDecodeInstruction(
                        &decoder, nil, UnsafeRawPointer(bitPattern: address), available, &instruction)
                    length = status & 0x8000_0000 == 0 ? UInt(instruction.length) : 1
                    if status & 0x8000_0000 == 0, instruction.raw.imm.0.is_relative != 0 {
                        relative = instruction.raw.imm.0.value.s
                    }
                }
                if relative != Int64.min {
                    body(address, address &+ length &+ UInt(bitPattern: Int(relative)))
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
