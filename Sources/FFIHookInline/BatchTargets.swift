internal import CFFIHookSupport
internal import FFIHook

/// The functions a batch names: a library's exports (and its local functions), or a list of
/// symbols, found in one walk over the loaded objects and one read of each symbol table.
enum BatchTargets {
    /// The functions to plan, and those refused before planning.
    struct Found {
        var targets: [PlanTarget] = []
        var refused: [InlineRefusal] = []
    }

    /// Every function `library` exports; with `locals`, also those only its `.symtab` names;
    /// with `selecting`, only the functions one of whose names it chooses.
    static func exports(
        of library: String, locals: Bool, selecting: ((String) -> Bool)? = nil
    ) throws(HookError) -> Found {
        try ImportWalk.withLoadedObjects { objects throws(HookError) -> Found in
            guard let object = LoadedObjects.object(named: library, in: objects) else {
                throw HookError(
                    code: .objectNotFound, message: "no loaded object has the soname, file name or path \(library)",
                    object: library)
            }
            var found = Found()
            let defined = definedFunctions(of: object)
            // Each exported function with its rank (``AliasRank``) and whether `selecting` chose
            // its name, in the table's order; then one target per address, named by the alias a
            // program most likely calls it by, chosen where one of the address's names was. By
            // sorting, not hashing: a dictionary by address took a tenth of a library's listing.
            var exported: [(target: PlanTarget, rank: AliasRank, chosen: Bool)] = []
            exported.reserveCapacity(defined.count)
            for function in defined {
                let name = String(cString: function.symbol.name)
                let isDefault = function.is_default_version != 0
                let rank = AliasRank(name: name, isDefault: isDefault, isWeak: function.is_weak != 0)
                if function.symbol.type == DynamicSymbol.typeIndirectFunction {
                    // Its address is a resolver: the implementation is what runs. Only the
                    // default version can be asked for by name.
                    guard isDefault, let address = SymbolResolver.bound(name, in: object.handle) else {
                        found.refused.append(
                            InlineRefusal(
                                name: name, address: UInt(function.symbol.address), reason: .indirectFunction,
                                error: HookError(
                                    code: .unhookableFunction,
                                    message:
                                        "an older version of an IFUNC symbol, whose implementation cannot be asked for by name",
                                    symbol: name, object: library)))
                        continue
                    }
                    exported.append((PlanTarget(address: address, name: name), rank, selecting?(name) ?? true))
                } else {
                    let size = function.symbol.size
                    exported.append(
                        (
                            PlanTarget(
                                address: UInt(function.symbol.address), name: name,
                                size: size > 0 && size <= UInt64(Int.max) ? Int(size) : nil, isKnownStart: true),
                            rank, selecting?(name) ?? true
                        ))
                }
            }
            let addresses = exported.map(\.target.address)
            // By address, and in the table's order at one address (a tie in rank keeps the first).
            let order = exported.indices.sorted { (addresses[$0], $0) < (addresses[$1], $1) }
            var kept: [Int] = []
            kept.reserveCapacity(exported.count)
            var run = order.startIndex
            while run < order.endIndex {
                var best = order[run]
                var chosen = exported[best].chosen
                var next = run + 1
                while next < order.endIndex, addresses[order[next]] == addresses[best] {
                    let other = order[next]
                    if exported[other].rank < exported[best].rank { best = other }
                    chosen = chosen || exported[other].chosen
                    next += 1
                }
                if chosen { kept.append(best) }
                run = next
            }
            let sortedAddresses = order.map { addresses[$0] }
            let identity = ObjectRanges.identity(of: object)
            found.targets.reserveCapacity(kept.count)
            for index in kept {
                var target = exported[index].target
                target.object = identity
                found.targets.append(target)
            }
            if locals, let table = SymbolTableCache.shared.table(for: object) {
                let local = table.functions.filter { !$0.isIndirect }
                // A local symbol at an exported function's address names that function; of two
                // local symbols at one address, the first names it.
                var localAt = Set<UInt>()
                for (function, name) in zip(local, table.names(of: local)) {
                    let address = object.bias &+ UInt(truncatingIfNeeded: function.value)
                    let place = BranchSweep.firstIndex(in: sortedAddresses, above: address &- 1)
                    guard place == sortedAddresses.count || sortedAddresses[place] != address,
                        !localAt.contains(address), object.isInCode(address)
                    else { continue }
                    // The part of a function the compiler split off (gcc's and LLVM's `f.cold`),
                    // a function symbol of its own, is reached by a jump from its function with
                    // that function's frame on the stack: no return address is at the stack
                    // pointer for an attach to take.
                    if let name, isSplitOffPart(name) {
                        found.refused.append(
                            notAFunctionStart(
                                name, at: address,
                                "the part of a function the compiler split off, reached by a jump from it rather than called",
                                object: library))
                        continue
                    }
                    localAt.insert(address)
                    guard selecting.map({ selecting in name.map(selecting) ?? false }) ?? true else { continue }
                    found.targets.append(
                        PlanTarget(
                            address: address, name: name,
                            size: function.size > 0 && function.size <= UInt64(Int.max) ? Int(function.size) : nil,
                            isKnownStart: true, object: identity))
                }
            }
            if let selecting { found.refused = found.refused.filter { selecting($0.name) } }
            return found
        }
    }

    /// How well a name suits a function with several: an exported default version first, then
    /// the name with the fewest leading underscores (`malloc` before `__libc_malloc`,
    /// `getpid` before `__getpid`), then the shorter (`fopen` before `fopen64`, `fallocate`
    /// before `fallocate64`), then a global before a weak one; ties keep the first in the
    /// table.
    struct AliasRank: Comparable {
        let isDefault: Bool
        let underscores: Int
        let isWeak: Bool
        let length: Int

        init(name: String, isDefault: Bool, isWeak: Bool) {
            self.isDefault = isDefault
            self.underscores = name.utf8.prefix { $0 == UInt8(ascii: "_") }.count
            self.isWeak = isWeak
            self.length = name.utf8.count
        }

        static func < (lhs: Self, rhs: Self) -> Bool {
            if lhs.isDefault != rhs.isDefault { return lhs.isDefault }
            if lhs.underscores != rhs.underscores { return lhs.underscores < rhs.underscores }
            if lhs.length != rhs.length { return lhs.length < rhs.length }
            return !lhs.isWeak && rhs.isWeak
        }
    }

    /// The functions `symbols` name in `object` (the global scope when nil).
    static func symbols(_ symbols: [String], in object: String?) throws(HookError) -> Found {
        try ImportWalk.withLoadedObjects { objects throws(HookError) -> Found in
            if let object, LoadedObjects.object(named: object, in: objects) == nil {
                throw HookError(
                    code: .objectNotFound, message: "no loaded object has the soname, file name or path \(object)",
                    object: object)
            }
            var found = Found()
            var seen = Set<String>()
            let ranges = ObjectRanges(objects)
            for symbol in symbols where seen.insert(symbol).inserted {
                do throws(SymbolLookupError) {
                    let (address, size) = try SymbolResolver.resolve(symbol: symbol, in: object, among: objects)
                    // A definition of known size starts a function; otherwise the planner asks
                    // the symbol tables (an IFUNC's implementation, a symbol of size 0).
                    found.targets.append(
                        PlanTarget(
                            address: address, name: symbol, size: size > 0 ? Int(size) : nil, isKnownStart: size > 0,
                            object: ranges.identity(of: address)))
                } catch {
                    found.refused.append(
                        InlineRefusal(
                            name: symbol, address: 0, reason: .symbolNotFound,
                            error: HookError(
                                code: .symbolNotFound, message: error.description, symbol: symbol, object: object)))
                }
            }
            return found
        }
    }

    /// The functions at `addresses`: each looked up in its object's symbol tables (the dynamic
    /// one, then the file's `.symtab`), each table read once for the whole list. An address
    /// inside a function, or an IFUNC resolver, is refused; one no symbol names is planned with
    /// no known size.
    static func addresses(_ addresses: [UInt]) -> Found {
        ImportWalk.withLoadedObjects { objects -> Found in
            var found = Found()
            var tables: [Int: ObjectFunctions] = [:]
            for address in addresses {
                guard let position = objects.firstIndex(where: { $0.contains(address) }) else {
                    found.targets.append(PlanTarget(address: address, isKnownStart: true))
                    continue
                }
                if tables[position] == nil { tables[position] = ObjectFunctions(objects[position]) }
                let name = InlinePlanner.hex(address)
                switch tables[position]!.lookup(address) {
                case .start(let symbol, let size, let isIndirect):
                    guard !isIndirect else {
                        found.refused.append(
                            InlineRefusal(
                                name: symbol ?? name, address: address, reason: .indirectFunction,
                                error: HookError(
                                    code: .unhookableFunction,
                                    message:
                                        "the symbol's address is an IFUNC resolver, which picks the code that runs; hook the implementation (InlineFunction(symbol:) resolves it)",
                                    symbol: symbol ?? name)))
                        continue
                    }
                    found.targets.append(PlanTarget(address: address, name: symbol, size: size, isKnownStart: true))
                case .inside(let symbol, let start):
                    let owner = symbol.map { "`\($0)`" } ?? "a function"
                    found.refused.append(
                        notAFunctionStart(
                            name, at: address,
                            "\(name) is inside \(owner) at offset \(address - start), not at a function's start"))
                case .unknown:
                    found.targets.append(PlanTarget(address: address, isKnownStart: true))
                }
            }
            let ranges = ObjectRanges(objects)
            for index in found.targets.indices {
                found.targets[index].object = ranges.identity(of: found.targets[index].address)
            }
            return found
        }
    }

    /// A refusal of `name` at `address`, which is not where a function a caller calls begins.
    /// Whether a local symbol names the part of a function the compiler split off: `cold` after
    /// a dot, last (`f.cold`) or followed by more (`f.cold.1`). Compared by pieces of the name's
    /// bytes: `String.contains(_:)` of a string belongs to the string-processing module, which
    /// every program built on this one (the tracer's preloaded library among them) would
    /// otherwise link and load for this one question.
    static func isSplitOffPart(_ name: String) -> Bool {
        name.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).dropFirst()
            .contains { $0.elementsEqual("cold".utf8) }
    }

    private static func notAFunctionStart(
        _ name: String, at address: UInt, _ message: String, object: String? = nil
    ) -> InlineRefusal {
        InlineRefusal(
            name: name, address: address, reason: .notAFunctionStart,
            error: HookError(code: .unhookableFunction, message: message, symbol: name, object: object))
    }

    /// Where the functions the object's dynamic symbol table defines start.
    static func functionStarts(of object: LoadedObject) -> [UInt] {
        definedFunctions(of: object).map { UInt($0.symbol.address) }
    }

    /// The instruction boundaries a linear decoding of the object's code starts again at, sorted
    /// and each once: where its exported functions start, and where its unwind table says code
    /// begins (``ffh_elf_unwind_starts``: its local functions too, and the parts the compiler
    /// split off). The more of them, the shorter the stretches a sweep decodes, and the less a
    /// decoding that wandered into data between functions carries on.
    static func restartPoints(of object: LoadedObject) -> [UInt] {
        sortedOnce(startCandidates(of: object))
    }

    /// `values` sorted ascending, each once (a sort and a pass, where a set and its sort
    /// hashed each of a library's ten thousand starts).
    static func sortedOnce(_ values: [UInt]) -> [UInt] {
        var sorted = values.sorted()
        var kept = 0
        for index in sorted.indices where kept == 0 || sorted[index] != sorted[kept - 1] {
            sorted[kept] = sorted[index]
            kept += 1
        }
        sorted.removeSubrange(kept...)
        return sorted
    }

    /// The restart points (``restartPoints(of:)``) that a decoding of `window` of the object's
    /// code reads: those inside it, and the last one at or below its start, where a decoding
    /// from below is in step. A function planned alone decodes only the code around it: sorting
    /// the restart points of a whole large object (tens of thousands in a program built with its
    /// tests) cost more than the decoding, for every function.
    static func restartPoints(of object: LoadedObject, around window: Range<UInt>) -> [UInt] {
        var below: UInt?
        var inside: [UInt] = []
        for point in startCandidates(of: object) {
            if point <= window.lowerBound {
                if below.map({ point > $0 }) ?? true { below = point }
            } else if point < window.upperBound {
                inside.append(point)
            }
        }
        return sortedOnce(inside + (below.map { [$0] } ?? []))
    }

    /// The exported functions' starts and the unwind table's, in no order, some perhaps twice.
    static func startCandidates(of object: LoadedObject) -> [UInt] {
        var unwind: [UInt] = []
        let count = ffh_elf_unwind_starts(object.object, nil, 0)
        if count > 0 {
            unwind = [UInt](repeating: 0, count: count)
            let written = unwind.withUnsafeMutableBufferPointer {
                ffh_elf_unwind_starts(object.object, $0.baseAddress, $0.count)
            }
            unwind.removeSubrange(min(written, count)...)
        }
        return functionStarts(of: object) + unwind
    }

    /// The best of the names the object exports for the function at `address` (``AliasRank``),
    /// or nil when it exports none there.
    static func plainestName(at address: UInt, in object: LoadedObject) -> String? {
        withUnsafeTemporaryAllocation(of: ffh_elf_function.self, capacity: 32) { buffer -> String? in
            let count = min(
                ffh_elf_functions_at(object.object, address, buffer.baseAddress, buffer.count), buffer.count)
            return buffer.prefix(count).map { function in
                let name = String(cString: function.symbol.name)
                return (
                    name,
                    AliasRank(name: name, isDefault: function.is_default_version != 0, isWeak: function.is_weak != 0)
                )
            }.min { $0.1 < $1.1 }?.0
        }
    }

    /// The functions the object's dynamic symbol table defines.
    private static func definedFunctions(of object: LoadedObject) -> [ffh_elf_function] {
        let count = ffh_elf_defined_functions(object.object, nil, 0)
        guard count > 0 else { return [] }
        var functions = [ffh_elf_function](repeating: ffh_elf_function(), count: count)
        let written = functions.withUnsafeMutableBufferPointer {
            ffh_elf_defined_functions(object.object, $0.baseAddress, $0.count)
        }
        return Array(functions.prefix(min(written, count)))
    }
}

/// One loaded object's functions from both its symbol tables, read once, for looking up many
/// addresses.
private struct ObjectFunctions {
    /// What a table says of an address.
    enum Lookup {
        case start(name: String?, size: Int?, isIndirect: Bool)
        case inside(name: String?, start: UInt)
        case unknown
    }

    /// The dynamic symbol table's functions, by address (run-time addresses).
    private var exported: [(address: UInt, size: UInt64, name: String, isIndirect: Bool)] = []
    /// The `.symtab`'s, when the file has one and is the one mapped, and its string table.
    private var table: ELFSymbolTable?
    private var strings: [UInt8]?
    private var bias: UInt = 0

    init(_ object: LoadedObject) {
        let count = ffh_elf_defined_functions(object.object, nil, 0)
        if count > 0 {
            var functions = [ffh_elf_function](repeating: ffh_elf_function(), count: count)
            let written = functions.withUnsafeMutableBufferPointer {
                ffh_elf_defined_functions(object.object, $0.baseAddress, $0.count)
            }
            var ranked = functions.prefix(min(written, count)).map { function in
                let name = String(cString: function.symbol.name)
                return (
                    function: (
                        address: UInt(function.symbol.address), size: function.symbol.size, name: name,
                        isIndirect: function.symbol.type == DynamicSymbol.typeIndirectFunction
                    ),
                    rank: BatchTargets.AliasRank(
                        name: name, isDefault: function.is_default_version != 0, isWeak: function.is_weak != 0)
                )
            }
            // By address, and the aliases of one address with the best name last: the lookup
            // finds the last entry at or below an address.
            ranked.sort {
                $0.function.address != $1.function.address
                    ? $0.function.address < $1.function.address : $1.rank < $0.rank
            }
            exported = ranked.map(\.function)
        }
        bias = object.bias
        if let table = SymbolTableCache.shared.table(for: object), !table.functions.isEmpty {
            self.table = table
            strings = table.stringTableBytes()
        }
    }

    /// What the tables say of `address`.
    func lookup(_ address: UInt) -> Lookup {
        // The exported function of greatest address at or below it.
        var low = 0
        var high = exported.count
        while low < high {
            let middle = (low + high) / 2
            if exported[middle].address <= address { low = middle + 1 } else { high = middle }
        }
        if low > 0 {
            let function = exported[low - 1]
            if function.address == address {
                let size = function.size > 0 ? Int(exact: function.size) : nil
                if size != nil || table == nil {
                    return .start(name: function.name, size: size, isIndirect: function.isIndirect)
                }
            } else if function.size > 0, UInt64(address - function.address) < function.size {
                return .inside(name: function.name, start: function.address)
            }
        }
        guard let table, let function = table.function(containing: UInt64(address &- bias)) else { return .unknown }
        let start = bias &+ UInt(truncatingIfNeeded: function.value)
        let name = strings.flatMap { ELFSymbolTable.name(of: function, in: $0) }
        if start == address {
            return .start(
                name: name, size: function.size > 0 ? Int(exact: function.size) : nil, isIndirect: function.isIndirect)
        }
        return function.size > 0 ? .inside(name: name, start: start) : .unknown
    }
}

extension Int {
    fileprivate init?(exact value: UInt64) {
        guard value <= UInt64(Int.max) else { return nil }
        self.init(value)
    }
}
