import CFFIHookSupport
import CSQLite
import CZlib
import CZydis
import FFIHook
import Glibc
import Testing

@testable import FFIHookInline

/// The sweep for branches into the first bytes of functions decodes only the stretches of code
/// before the bytes that could encode one; decoding the whole code is the ground truth it must
/// agree with, on the code of real libraries the compiler and the assembler wrote.
@Suite struct BranchSweepTests {
    /// One branch into a watched function's first bytes: where it is, where it lands.
    struct Found: Hashable, CustomStringConvertible {
        let function: UInt
        let from: UInt
        let offset: Int
        var description: String { "0x\(String(from, radix: 16)) → 0x\(String(function, radix: 16))+\(offset)" }
    }

    /// The branches into the first bytes of `functions` (sorted) among `branches`, as the sweep
    /// keeps them.
    static func into(
        _ functions: [UInt], among branches: [(from: UInt, target: UInt)], windows: [UInt8]? = nil
    ) -> Set<Found> {
        var found = Set<Found>()
        for (from, target) in branches {
            let index = BranchSweep.firstIndex(in: functions, above: target) - 1
            guard index >= 0 else { continue }
            let offset = target &- functions[index]
            let window = windows.map { UInt($0[index]) } ?? BranchSweep.watchedLength
            guard offset > 0, offset < window else { continue }
            found.insert(Found(function: functions[index], from: from, offset: Int(offset)))
        }
        return found
    }

    /// The loaded object `library` names: by its soname, or the file name its path ends with.
    static func object(_ library: String, in objects: [LoadedObject]) -> LoadedObject? {
        objects.first { $0.soname == library || $0.path.hasSuffix("/" + library) }
    }

    /// The branches `sweep` found into `functions`, as ``into(_:among:windows:)`` lists them.
    static func swept(by sweep: BranchSweep, into functions: [UInt]) -> Set<Found> {
        var swept = Set<Found>()
        for function in functions {
            for branch in sweep.branches(into: function) {
                swept.insert(Found(function: function, from: branch.from, offset: branch.offset))
            }
        }
        return swept
    }

    /// What `swept` missed and has beyond `expected`, the first five of each, for a message.
    static func difference(_ swept: Set<Found>, from expected: Set<Found>) -> String {
        "missed \(expected.subtracting(swept).sorted { $0.from < $1.from }.prefix(5)), extra \(swept.subtracting(expected).sorted { $0.from < $1.from }.prefix(5))"
    }

    /// The places the unwind table says code begins are where libgcc's unwinder finds that
    /// functions begin (`_Unwind_Find_FDE` gives the start of the code a description covers),
    /// each once and in order; every function the compiler built and the dynamic symbol table
    /// names is among them, and the library's local functions make more of them than it exports.
    @Test(arguments: ["libsqlite3.so.0", "libz.so.1", "libc.so.6"])
    func unwindStartsAreWhereTheUnwinderFindsFunctions(library: String) throws {
        #expect(sqlite3_libversion_number() > 0)
        #expect(zlibVersion() != nil)
        // const struct dwarf_fde *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases), whose
        // bases are three pointers: the text and data bases, then the function's start.
        typealias FindDescription =
            @convention(c) (UnsafeMutableRawPointer?, UnsafeMutablePointer<UInt>) -> UnsafeRawPointer?
        let find = unsafeBitCast(try #require(dlsym(nil, "_Unwind_Find_FDE")), to: FindDescription.self)
        try ImportWalk.withLoadedObjects { objects in
            let object = try #require(objects.first { $0.soname == library }, "\(library) is not loaded")
            let count = ffh_elf_unwind_starts(object.object, nil, 0)
            var starts = [UInt](repeating: 0, count: count)
            let written = starts.withUnsafeMutableBufferPointer {
                ffh_elf_unwind_starts(object.object, $0.baseAddress, $0.count)
            }
            #expect(written == count)
            #expect(count > 100, "\(library): \(count) unwind starts")
            #expect(starts == Array(Set(starts)).sorted(), "\(library): the starts are not in order, each once")
            var misplaced: [UInt] = []
            for start in starts {
                var bases: (UInt, UInt, UInt) = (0, 0, 0)
                let description = withUnsafeMutablePointer(to: &bases) {
                    $0.withMemoryRebound(to: UInt.self, capacity: 3) {
                        find(UnsafeMutableRawPointer(bitPattern: start), $0)
                    }
                }
                if description == nil || bases.2 != start { misplaced.append(start) }
            }
            #expect(
                misplaced.isEmpty,
                "\(library): \(misplaced.count) starts where the unwinder starts no function, first \(misplaced.prefix(3))"
            )
            // The exported functions the compiler described: all of them in SQLite and zlib;
            // glibc's hand-written ones describe themselves too.
            let exported = Set(BatchTargets.functionStarts(of: object))
            let undescribed = exported.subtracting(starts)
            #expect(
                undescribed.isEmpty,
                "\(library): \(undescribed.count) of \(exported.count) exported functions have no unwind start")
            #expect(starts.count > exported.count, "\(library): no local function among \(starts.count) unwind starts")
            let all = BatchTargets.restartPoints(of: object)
            #expect(all == Array(exported.union(starts)).sorted())
            // The restart points around a function planned alone: those of the window, and the
            // last at or below its start (none below the first start).
            for (index, start) in all.enumerated() where index % max(1, all.count / 40) == 0 {
                for window in [start..<(start + 4096), (start - 1)..<(start + 16 * 1024), (start + 1)..<(start + 2)] {
                    let below = all.last { $0 <= window.lowerBound }
                    let inside = all.filter { $0 > window.lowerBound && $0 < window.upperBound }
                    let expected = (below.map { [$0] } ?? []) + inside
                    #expect(
                        BatchTargets.restartPoints(of: object, around: window) == expected,
                        "\(library): the restart points around \(window)")
                }
            }
        }
    }

    /// A prologue the table copies as it is (``Relocator/plainRelocation(code:patchLength:trampoline:end:)``)
    /// is relocated exactly as Zydis's decoding relocates it, at every place a function of a
    /// real library begins (its exports and its unwind table's starts), for a `jmp rel32` and
    /// for an absolute jump, with the trampoline near and far; the table takes a good share of
    /// the prologues (else the planner would gain nothing) and leaves the rest to Zydis.
    @Test(arguments: ["libc.so.6", "libsqlite3.so.0", "libz.so.1", "libswiftCore.so"])
    func plainProloguesAreRelocatedAsZydisRelocatesThem(library: String) throws {
        #expect(sqlite3_libversion_number() > 0)
        #expect(zlibVersion() != nil)
        try ImportWalk.withLoadedObjects { objects in
            let object = try #require(
                Self.object(library, in: objects),
                "\(library) is not loaded")
            let ranges = object.loadSegments.filter { $0.flags & 1 != 0 }.map { segment in
                let start = object.bias &+ UInt(truncatingIfNeeded: segment.address)
                return start..<(start &+ UInt(truncatingIfNeeded: segment.fileSize))
            }
            var plain = 0
            var decoded = 0
            var differing: [String] = []
            for start in BatchTargets.restartPoints(of: object) {
                guard let range = ranges.first(where: { $0.contains(start) }) else { continue }
                let code = try #require(UnsafeRawPointer(bitPattern: start))
                let end = Int(range.upperBound - start)
                for patchLength in [5, 14] {
                    for trampoline in [start &+ 0x1000_0000, start &+ 0x40_0000_0000] {
                        guard
                            let fast = Relocator.plainRelocation(
                                code: code, patchLength: patchLength, trampoline: trampoline, end: end)
                        else {
                            decoded += 1
                            // The table's length of what the patch displaces, where it knows every
                            // instruction, is what Zydis's relocation copies.
                            let displaced = ffh_x86_displaced_length(
                                code.assumingMemoryBound(to: UInt8.self), end, patchLength)
                            if displaced > 0,
                                let relocation = try? Relocator.relocate(
                                    code: code, patchLength: patchLength, trampoline: trampoline, mappedSize: end)
                            {
                                #expect(
                                    displaced == relocation.copiedLength,
                                    "0x\(String(start, radix: 16)) (\(patchLength) bytes): displaces \(displaced), copies \(relocation.copiedLength)"
                                )
                            }
                            continue
                        }
                        plain += 1
                        let zydis = Result { () throws(RelocationError) in
                            try Relocator.relocate(
                                code: code, patchLength: patchLength, trampoline: trampoline, mappedSize: end,
                                plainByTable: false)
                        }
                        // What the sweep takes a patch to displace, from the table alone.
                        let displaced = ffh_x86_displaced_length(
                            code.assumingMemoryBound(to: UInt8.self), end, patchLength)
                        #expect(
                            displaced == fast.copiedLength,
                            "0x\(String(start, radix: 16)) (\(patchLength) bytes): displaces \(displaced), copies \(fast.copiedLength)"
                        )
                        if case .success(let relocation) = zydis, relocation == fast { continue }
                        if differing.count < 5 {
                            differing.append("0x\(String(start, radix: 16)) (\(patchLength) bytes): \(zydis)")
                        }
                    }
                }
            }
            #expect(differing.isEmpty, "\(library): \(differing)")
            // (SQLite's and libc's: about two in three; zlib's and the Swift runtime's: about one
            // in two. A trampoline 256 GB away takes none that reads memory near the function.)
            #expect(plain * 5 > (plain + decoded) * 2, "\(library): \(plain) plain prologues, \(decoded) left to Zydis")
        }
    }

    /// The byte filter finds a branch into a function's window from every place around it and
    /// with every displacement that lands there, and no other: `jmp rel8` (found only near a
    /// window, where the thirty-two or sixteen bytes it reads at a time may hold one that
    /// reaches it), `jcc rel32` and `call rel32`, at every offset of the bytes read at a time
    /// and across their edges, reading 32 bytes at a time (where the processor has AVX2), 16
    /// and 1.
    @Test(arguments: 0..<32)
    func theFilterFindsEveryBranchIntoAWindowFromAnyPlace(alignment: Int) {
        var code = [UInt8](repeating: 0x90, count: 672)
        // A near slab's window, and the longest.
        for window in [UInt8(9), UInt8(BranchSweep.watchedLength)] {
            code.withUnsafeMutableBufferPointer { buffer in
                // The function at each of the places a 32-byte block of the code can hold it.
                let function = 320 + (alignment - Int(UInt(bitPattern: buffer.baseAddress!) + 320) % 32 + 32) % 32
                let base = UInt(bitPattern: buffer.baseAddress!)
                let functions = [base + UInt(function)]
                let words = ffh_branch_blocks(functions, 1, BranchSweep.watchedLength)
                var blocks = [UInt64](repeating: 0, count: words)
                var candidates = [UInt](repeating: 0, count: 16)
                var missed: [String] = []
                func check(_ bytes: [UInt8], at place: Int, landing target: Int) {
                    for (offset, byte) in bytes.enumerated() { buffer[place + offset] = byte }
                    defer { for offset in bytes.indices { buffer[place + offset] = 0x90 } }
                    var windows = [window]
                    for width: Int32 in [32, 16, 1] {
                        let total = ffh_branch_candidates_at_width(
                            width, buffer.baseAddress, buffer.count, functions, 1, BranchSweep.watchedLength,
                            &windows, &blocks, blocks.count, &candidates, candidates.count)
                        let expected = target > function && target < function + Int(window)
                        let found = (0..<min(total, candidates.count)).contains { candidates[$0] == base + UInt(place) }
                        if found != expected, missed.count < 5 {
                            missed.append(
                                "\(bytes) at \(place) landing at \(target - function), \(width) bytes at a time: found \(found)"
                            )
                        }
                    }
                }
                for place in (function - 160)..<(function + 160) {
                    // Landing just before, at and after the window's edges, and anywhere by reach.
                    let edges = [0, 1, 2, Int(window) - 1, Int(window)].map { function + $0 - (place + 2) }
                    for displacement in edges + [-128, 127] where (-128...127).contains(displacement) {
                        check(
                            [0xEB, UInt8(bitPattern: Int8(displacement))], at: place, landing: place + 2 + displacement)
                    }
                    for displacement in [-300, -2, 0, 1, 4] {
                        let target = function + displacement
                        let rel = Int32(target - (place + 6))
                        check(
                            [0x0F, 0x85] + withUnsafeBytes(of: rel.littleEndian, Array.init), at: place, landing: target
                        )
                        let call = Int32(target - (place + 5))
                        check([0xE8] + withUnsafeBytes(of: call.littleEndian, Array.init), at: place, landing: target)
                    }
                }
                #expect(missed.isEmpty, "window \(window): \(missed)")
            }
        }
    }

    /// The padding after a function is measured by the length table as Zydis measures it, at
    /// every end from 1 to 15 bytes before each place a function of a real library begins
    /// (ends inside instructions and inside the padding among them); many of them have some.
    @Test(arguments: ["libc.so.6", "libsqlite3.so.0", "libz.so.1", "libswiftCore.so"])
    func paddingIsMeasuredAsZydisMeasuresIt(library: String) throws {
        #expect(sqlite3_libversion_number() > 0)
        #expect(zlibVersion() != nil)
        try ImportWalk.withLoadedObjects { objects in
            let object = try #require(
                Self.object(library, in: objects),
                "\(library) is not loaded")
            let starts = BatchTargets.restartPoints(of: object)
            var padded = 0
            var differing: [String] = []
            for (start, next) in zip(starts, starts.dropFirst()) where next - start >= 32 {
                let code = try #require(UnsafeRawPointer(bitPattern: start))
                for back in 1...15 {
                    let size = Int(next - start) - back
                    let table = Relocator.paddingLength(after: code, size: size)
                    let zydis = Relocator.paddingLength(after: code, size: size, byTable: false)
                    if table > 0 { padded += 1 }
                    if table != zydis, differing.count < 5 {
                        differing.append("0x\(String(start, radix: 16)) + \(size): \(table) against \(zydis)")
                    }
                }
            }
            #expect(differing.isEmpty, "\(library): \(differing)")
            #expect(padded > 100, "\(library): padding found after \(padded) ends")
        }
    }

    /// The table-driven length of an instruction is Zydis's at every instruction a linear
    /// decoding of the library's executable segments meets (restarting at every known start, as
    /// the sweep does), its relative branches' displacements too, or it leaves the instruction
    /// to Zydis; it decides nearly every instruction itself. (Bytes in which Zydis finds no
    /// instruction, data between functions, it may step over differently: no branch of the
    /// code's is there.)
    @Test(arguments: ["libc.so.6", "libsqlite3.so.0", "libz.so.1", "libswiftCore.so", "libstdc++.so.6"])
    func instructionLengthsAreZydis(library: String) {
        #expect(sqlite3_libversion_number() > 0)
        #expect(zlibVersion() != nil)
        ImportWalk.withLoadedObjects { objects in
            guard let object = Self.object(library, in: objects)
            else {
                // libstdc++ is in the process only where the Swift runtime links it dynamically.
                #expect(library == "libstdc++.so.6", "\(library) is not loaded")
                return
            }
            let starts = BatchTargets.restartPoints(of: object)
            let ranges = object.loadSegments.filter { $0.flags & 1 != 0 }.map { segment in
                let start = object.bias &+ UInt(truncatingIfNeeded: segment.address)
                return start..<(start &+ UInt(truncatingIfNeeded: segment.fileSize))
            }
            var decoder = ZydisDecoder()
            ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)
            ZydisDecoderEnableMode(&decoder, ZYDIS_DECODER_MODE_MINIMAL, ZyanBool(ZYAN_TRUE))
            var instruction = ZydisDecodedInstruction()
            var decided = 0
            var left = 0
            var valid = 0
            var differing: [String] = []
            for range in ranges {
                var address = range.lowerBound
                var next = BranchSweep.firstIndex(in: starts, above: address)
                while address < range.upperBound {
                    let available = Int(range.upperBound - address)
                    let status = ZydisDecoderDecodeInstruction(
                        &decoder, nil, UnsafeRawPointer(bitPattern: address), available, &instruction)
                    let isInstruction = status & 0x8000_0000 == 0
                    let length = isInstruction ? UInt(instruction.length) : 1
                    var relative = Int64.min
                    let ours = ffh_x86_length(UnsafePointer(bitPattern: address), available, &relative)
                    if isInstruction { valid += 1 }
                    if ours == 0 {
                        if isInstruction { left += 1 }
                    } else if isInstruction {
                        decided += 1
                        let theirs = instruction.raw.imm.0.is_relative != 0 ? instruction.raw.imm.0.value.s : .min
                        if UInt(ours) != length || relative != theirs, differing.count < 5 {
                            let bytes = (0..<min(available, 15)).map {
                                String(format: "%02x", UnsafePointer<UInt8>(bitPattern: address)![$0])
                            }
                            differing.append("\(bytes.joined(separator: " ")): \(ours) bytes, Zydis \(length)")
                        }
                    }
                    var following = address + length
                    while next < starts.count, starts[next] <= address { next += 1 }
                    if next < starts.count, starts[next] < following { following = starts[next] }
                    address = following
                }
            }
            #expect(differing.isEmpty, "\(library): \(differing)")
            #expect(
                decided > 1000 && left * 100 < valid,
                "\(library): of \(valid) instructions, \(decided) decided, \(left) left to Zydis")
        }
    }

    /// Every function the library's dynamic symbol table defines watched at once (a batch), a
    /// seventh of them, and single functions: the sweep finds exactly the branches that decoding
    /// all of the library's code finds.
    @Test(arguments: ["libc.so.6", "libsqlite3.so.0", "libz.so.1"])
    func findsWhatDecodingAllTheCodeFinds(library: String) throws {
        // The libraries are linked into the tests; these keep them so.
        #expect(sqlite3_libversion_number() > 0)
        #expect(zlibVersion() != nil)
        try ImportWalk.withLoadedObjects { objects in
            let object = try #require(objects.first { $0.soname == library }, "\(library) is not loaded")
            let (starts, ranges) = Self.startsAndCode(of: object)
            var all: [(from: UInt, target: UInt)] = []
            BranchSweep.forEachDirectBranch(in: ranges, startingAgainAt: starts) { all.append(($0, $1)) }
            #expect(all.count > 1000)
            let subsets: [(String, [UInt])] = [
                ("every function", starts),
                ("a seventh", starts.enumerated().filter { $0.offset % 7 == 3 }.map(\.element)),
                ("the first", [starts[0]]),
                ("one in the middle", [starts[starts.count / 2]]),
                ("the last", [starts[starts.count - 1]]),
            ]
            for (name, functions) in subsets {
                let expected = Self.into(functions, among: all)
                let sweep = BranchSweep(ranges: ranges, starts: starts, functions: functions)
                let swept = Self.swept(by: sweep, into: functions)
                #expect(swept == expected, "\(library), \(name): \(Self.difference(swept, from: expected))")
                if name == "every function" {
                    // Loops that go back to a function's first instructions, at least.
                    #expect(!expected.isEmpty, "\(library): no branch into any function's first bytes")
                }
            }
            // Windows of every length from 1 to the longest, function by function: each function
            // watches only its own first bytes, and a plan that displaces more than its window
            // is checked against the full windows.
            var generator = SystemRandomNumberGenerator()
            let windows = starts.map { _ in UInt8.random(in: 1...UInt8(BranchSweep.watchedLength), using: &generator) }
            let expected = Self.into(starts, among: all, windows: windows)
            let sweep = BranchSweep(ranges: ranges, starts: starts, functions: starts, windows: windows)
            #expect(sweep.windows == windows)
            let swept = Self.swept(by: sweep, into: starts)
            #expect(swept == expected, "\(library), windows: \(Self.difference(swept, from: expected))")
            let full = Self.into(starts, among: all)
            let beyond = full.filter { found in
                let index = BranchSweep.firstIndex(in: starts, above: found.function) - 1
                return found.offset >= Int(windows[index])
                    && !(found.function..<(found.function + UInt(found.offset) + 1)).contains(found.from)
            }
            #expect(!beyond.isEmpty, "\(library): no branch lands past a function's window")
            for found in beyond.sorted(by: { $0.from < $1.from }).prefix(50) {
                // Displacing the bytes up to the landing and one more: the narrow sweep did not
                // look there, the wider one finds the branch (or another into those bytes).
                let caught = sweep.intoPatch(
                    function: found.function, patchOffset: 0, copiedLength: found.offset + 1)
                #expect(caught != nil, "\(library): \(found) is not seen past its window")
            }
        }
    }

    /// Reading 32 bytes at a time (where the processor has AVX2), 16 or 1, the filter finds the
    /// same candidates in a whole library's code, for every function watched at once, a seventh
    /// of them, and windows of random lengths (it is the filter's speed that differs: the sweep
    /// of a batch that plans few functions is most of its time).
    @Test(arguments: ["libc.so.6", "libsqlite3.so.0", "libz.so.1"])
    func everyWidthFindsTheSameCandidates(library: String) throws {
        #expect(sqlite3_libversion_number() > 0)
        #expect(zlibVersion() != nil)
        try ImportWalk.withLoadedObjects { objects in
            let object = try #require(objects.first { $0.soname == library }, "\(library) is not loaded")
            let (starts, ranges) = Self.startsAndCode(of: object)
            var generator = SystemRandomNumberGenerator()
            let seventh = starts.enumerated().filter { $0.offset % 7 == 3 }.map(\.element)
            let random = starts.map { _ in UInt8.random(in: 1...UInt8(BranchSweep.watchedLength), using: &generator) }
            for (name, functions, windows) in [
                ("every function", starts, nil), ("a seventh", seventh, nil), ("random windows", starts, random),
            ] as [(String, [UInt], [UInt8]?)] {
                var found: [Int32: [UInt]] = [:]
                for width: Int32 in [32, 16, 1] {
                    var candidates: [UInt] = []
                    for range in ranges {
                        let words = ffh_branch_blocks(functions, functions.count, BranchSweep.watchedLength)
                        var blocks = [UInt64](repeating: 0, count: words)
                        var buffer = [UInt](repeating: 0, count: 1 << 16)
                        let total = (windows ?? []).withUnsafeBufferPointer { given in
                            ffh_branch_candidates_at_width(
                                width, UnsafePointer(bitPattern: range.lowerBound), Int(range.count), functions,
                                functions.count, BranchSweep.watchedLength, windows == nil ? nil : given.baseAddress,
                                &blocks, blocks.count, &buffer, buffer.count)
                        }
                        #expect(total <= buffer.count, "\(library), \(name): \(total) candidates")
                        candidates += buffer.prefix(min(total, buffer.count))
                    }
                    found[width] = candidates
                }
                #expect(found[32] == found[1] && found[16] == found[1], "\(library), \(name)")
                #expect(found[1]?.isEmpty == false, "\(library), \(name): no candidate")
            }
        }
    }

    /// The object's restart points (``BatchTargets/restartPoints(of:)``) and its executable
    /// segments, as mapped.
    static func startsAndCode(of object: LoadedObject) -> (starts: [UInt], ranges: [Range<UInt>]) {
        let ranges = object.loadSegments.filter { $0.flags & 1 != 0 }.map { segment in
            let start = object.bias &+ UInt(truncatingIfNeeded: segment.address)
            return start..<(start &+ UInt(truncatingIfNeeded: segment.fileSize))
        }
        return (BatchTargets.restartPoints(of: object), ranges)
    }
}
