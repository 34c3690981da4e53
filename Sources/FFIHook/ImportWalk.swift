package import CFFIHookSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One loaded object, kept loaded for the length of a walk (inline hooks find functions in
/// the same walk).
package struct LoadedObject {
    /// The object as the C walk describes it (in the walk's snapshot).
    package let object: UnsafePointer<ffh_elf_object>
    /// The path the loader knows it by; the executable's path for the main program.
    package let path: String
    /// Its DT_SONAME, when it has one.
    package let soname: String?
    /// Whether it is the main program (the loader lists it first).
    package let isMainProgram: Bool
    /// The dlopen handle that keeps it loaded.
    package let handle: UnsafeMutableRawPointer
    /// Its place in the walk's list of objects (the loader's order).
    package let position: Int
}

/// The walk over the import tables of the loaded objects.
package enum ImportWalk {
    /// One import-table entry of a symbol in a loaded object, as the walk finds it.
    struct Entry {
        /// The entry's address.
        let slot: UInt
        /// The relocation that fills it.
        let kind: ImportEntry.Kind
        /// The symbol version the entry asks for, if any.
        let version: String?
    }

    /// Runs `body` with the objects loaded now, each kept loaded until `body` returns.
    ///
    /// The thread is marked as walking meanwhile: pinning an object calls `dlopen`, which a
    /// group that follows later loads has hooked, and that hook must not start another walk.
    package static func withLoadedObjects<Result, Failure: Error>(
        _ body: ([LoadedObject]) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try withLoadedObjects(including: { _, _ in true }, body)
    }

    /// ``withLoadedObjects(_:)`` for the objects that may be in `scope` (``mayBeInScope(path:_:)``),
    /// told apart before they are pinned: a group that follows loads (the tracer's, one at every
    /// `dlopen`, each for the object just loaded) would otherwise pin every loaded object at
    /// every load, a `dlopen`, `dlinfo` and `dlclose` for each.
    package static func withLoadedObjects<Result, Failure: Error>(
        in scope: ImportScope, _ body: ([LoadedObject]) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try withLoadedObjects(including: { path, _ in mayBeInScope(path: path, scope) }, body)
    }

    /// Whether the object at `path` (the main program's file for the main program) may be in
    /// `scope`, by its path alone: ``isInScope(_:_:)`` decides for the objects this lets through.
    /// A scope that names an object by a path (a name with a slash, which no soname has: a
    /// soname names a file) takes only the objects whose path answers to it, the main program's
    /// only the program's file, every other scope every object.
    static func mayBeInScope(path: String, _ scope: ImportScope) -> Bool {
        switch scope {
        case .all, .allIncludingLaterLoads: return true
        case .mainProgram: return path == executablePath
        case .object(let name):
            guard name.utf8.contains(UInt8(ascii: "/")) else { return true }
            return pathAnswers(path, to: name)
        }
    }

    /// Whether `path` answers to `name` as a path: the same, or ending in it where it begins
    /// with a slash or follows one in `path`.
    private static func pathAnswers(_ path: String, to name: String) -> Bool {
        path == name || (path.hasSuffix(name) && (name.hasPrefix("/") || path.hasSuffix("/" + name)))
    }

    /// ``withLoadedObjects(_:)`` for the objects `including` accepts, by path and load bias,
    /// as the loader lists them: the others are neither pinned nor given to `body` (pinning
    /// one asks the loader to look it up by name).
    package static func withLoadedObjects<Result, Failure: Error>(
        including: (String, UInt) -> Bool, _ body: ([LoadedObject]) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        ffh_elf_begin_walk()
        defer { ffh_elf_end_walk() }
        var count = 0
        let objects = ffh_elf_objects(&count)
        defer { ffh_elf_free_objects(objects, count) }
        var pinned: [LoadedObject] = []
        defer {
            for object in pinned { ffh_elf_unpin(object.handle) }
        }
        guard let objects else { return try body([]) }
        // Every entry's install looks up its page's protection and reads and writes under the
        // fault guard: one reading of the memory map and one check of the guard serve the walk.
        return try MemoryMapping.withSnapshot { () throws(Failure) -> Result in
            try SlotMemory.guardingFaults { () throws(Failure) -> Result in
                try walk(objects, count, including, &pinned, body)
            }
        }
    }

    /// Runs `body` with the loaded object whose segments hold `address` (nil when none does),
    /// kept loaded until `body` returns: one object pinned, where ``withLoadedObjects(_:)`` pins
    /// them all and reads the memory map, for looking up one address.
    package static func withLoadedObject<Result>(
        containing address: UInt, _ body: (LoadedObject?) -> Result
    ) -> Result {
        ffh_elf_begin_walk()
        defer { ffh_elf_end_walk() }
        var count = 0
        let objects = ffh_elf_objects(&count)
        defer { ffh_elf_free_objects(objects, count) }
        guard let objects else { return body(nil) }
        for index in 0..<count {
            let object = UnsafePointer(objects + index)
            // Its program headers are in its own memory, which another thread may unload meanwhile:
            // read only once it is pinned (the span was copied while the loader's list was locked).
            guard address >= object.pointee.lowest, address < object.pointee.highest else { continue }
            guard let handle = ffh_elf_pin(object) else { continue }
            guard ffh_elf_contains(object, address) != 0 else {
                ffh_elf_unpin(handle)
                continue
            }
            defer { ffh_elf_unpin(handle) }
            let isMainProgram = index == 0
            let path = isMainProgram ? executablePath : String(cString: object.pointee.path)
            let soname = ffh_elf_soname(object).map { String(cString: $0) }
            return body(
                LoadedObject(
                    object: object, path: path, soname: soname, isMainProgram: isMainProgram, handle: handle,
                    position: index))
        }
        return body(nil)
    }

    /// Pins the objects of a snapshot and runs `body` with them (see ``withLoadedObjects(_:)``).
    private static func walk<Result, Failure: Error>(
        _ objects: UnsafeMutablePointer<ffh_elf_object>, _ count: Int, _ including: (String, UInt) -> Bool,
        _ pinned: inout [LoadedObject], _ body: ([LoadedObject]) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        for index in 0..<count {
            let object = UnsafePointer(objects + index)
            let isMainProgram = index == 0
            let path = isMainProgram ? executablePath : String(cString: object.pointee.path)
            guard including(path, UInt(object.pointee.base)) else { continue }
            // An object unloaded since the snapshot is skipped; one being loaded by another
            // thread is waited for by the pin, so it is relocated when its entries are read.
            guard let handle = ffh_elf_pin(object) else { continue }
            let soname = ffh_elf_soname(object).map { String(cString: $0) }
            pinned.append(
                LoadedObject(
                    object: object, path: path, soname: soname, isMainProgram: isMainProgram, handle: handle,
                    position: index))
        }
        return try body(pinned)
    }

    /// The place of the first of each name of `names` that differs from those before it, in
    /// order, with the name's ELF hash (`ffh_elf_name_hash`, which the entries' index asks
    /// for): a group of a thousand names is told apart by that hash, cheaper than a set of
    /// strings, and two names are compared only where their hashes meet.
    static func distinctNames(_ names: [String]) -> [(place: Int, hash: UInt32)] {
        var distinct: [(place: Int, hash: UInt32)] = []
        distinct.reserveCapacity(names.count)
        // Open addressing: each cell holds the place of a name in `distinct` plus one (0: empty).
        var cells = 16
        while cells < names.count * 2 { cells *= 2 }
        var table = [Int](repeating: 0, count: cells)
        for place in names.indices {
            let hash = names[place].withCString { ffh_elf_name_hash($0) }
            var cell = Int(hash) & (cells - 1)
            while true {
                let held = table[cell]
                if held == 0 {
                    distinct.append((place, hash))
                    table[cell] = distinct.count
                    break
                }
                let other = distinct[held - 1]
                if other.hash == hash && names[other.place] == names[place] { break }
                cell = (cell + 1) & (cells - 1)
            }
        }
        return distinct
    }

    /// The main program's file.
    package static let executablePath: String = {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, Int(PATH_MAX))
        guard length > 0 else { return "" }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }()

    /// Whether `object` is one that `scope` names.
    static func isInScope(_ object: LoadedObject, _ scope: ImportScope) -> Bool {
        switch scope {
        case .all, .allIncludingLaterLoads: true
        case .mainProgram: object.isMainProgram
        case .object(let name): !name.isEmpty && (object.soname == name || pathAnswers(object.path, to: name))
        }
    }

    /// The object's JUMP_SLOT and GLOB_DAT entries for `symbol`, each address once.
    static func entries(of symbol: String, in object: LoadedObject) -> [Entry] {
        var capacity = 8
        while true {
            var found = [ffh_elf_entry](repeating: ffh_elf_entry(), count: capacity)
            let total = ffh_elf_find_entries(object.object, symbol, &found, capacity)
            guard total <= capacity else {
                capacity = total
                continue
            }
            return distinct(found[..<total])
        }
    }

    /// The entries of `found` (a symbol's few), each address once.
    private static func distinct<Found: Collection<ffh_elf_entry>>(_ found: Found) -> [Entry] {
        var entries: [Entry] = []
        forEachDistinct(found) { entries.append($0) }
        return entries
    }

    /// Calls `body` with each entry of `found` (a symbol's few, in one object), each address
    /// once: an entry whose slot an entry before it in `found` has is left out.
    fileprivate static func forEachDistinct<Found: Collection<ffh_elf_entry>>(
        _ found: Found, _ body: (Entry) -> Void
    ) {
        for (offset, entry) in found.enumerated()
        where !found.prefix(offset).contains(where: { $0.slot == entry.slot }) {
            body(Entry(entry))
        }
    }

    /// The entries of the objects of one walk by symbol, each object's relocations read once,
    /// at its first question: for work on many symbols at once (a group, a tracer's list of a
    /// library's functions), which would otherwise read every object's relocations once per
    /// symbol.
    final class EntryIndex {
        /// How many symbols make an index by hash worth hashing every relocation's name of the
        /// objects asked about (a large object has tens of thousands): below it, an index keeps
        /// the entries of the few names by comparing names (``init(names:)``).
        static let worthwhile = 8

        /// Each object's index by its place in the walk, made at its first question (nil when
        /// memory ran out: the object is then searched symbol by symbol), and whether it holds
        /// no entry at all.
        // Unchecked: a walk's index is used by the walk's thread alone, and the dynamic check of
        // each access cost as much as the lookup it guards.
        @exclusivity(unchecked) private var byPosition: [(made: Bool, index: OpaquePointer?, empty: Bool)] = []

        /// The names the index is for, as a Bloom filter of their ELF hashes (one bit each, in
        /// a power of two of 64-bit words), or empty for every name. Each object's index then
        /// keeps only the entries whose names may be among them: for a library's 1,370 names,
        /// the objects that import them and a few entries of the others that get through the
        /// filter (or are dlopen's, which a following walk asks about too), not every entry of
        /// the twenty objects of a process with the Swift runtime.
        private let filter: [UInt64]

        /// The names the index is for, when they are few (``init(names:)``): each object's index
        /// keeps the entries of these names alone, found by comparing names (no hash of every
        /// entry's), with their C strings for the C side, which the index frees.
        private let names: Set<String>?
        private let nameStrings: UnsafeMutablePointer<UnsafePointer<CChar>?>?

        /// An index for questions about any name.
        init() {
            filter = []
            names = nil
            nameStrings = nil
        }

        /// An index for questions about a few names (fewer than ``worthwhile``: what a group of
        /// a few symbols, or a follower of `dlopen`, asks): each object's relocations are read
        /// once for all of them, where each name's question would read them again. A question
        /// about another name is answered too, by reading the objects' relocations for it alone.
        init(names: some Sequence<String>) {
            let distinct = Set(names)
            filter = []
            self.names = distinct
            let strings = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: max(distinct.count, 1))
            for (place, name) in distinct.enumerated() { strings[place] = UnsafePointer(strdup(name)) }
            nameStrings = strings
        }

        /// How many names ``nameStrings`` holds.
        private var nameCount: Int { names?.count ?? 0 }

        /// An index for questions about the names whose ELF hashes (``ffh_elf_name_hash``) are
        /// `hashes`; a question about another name is answered too, by reading the objects'
        /// relocations for it alone.
        init(hashes: [UInt32]) {
            var words = 1
            // About sixteen bits a name: one name in twenty that is not among them gets through.
            while words * 64 < hashes.count * 16 { words *= 2 }
            var filter = [UInt64](repeating: 0, count: words)
            for hash in hashes { filter[Int(hash >> 6) & (words - 1)] |= 1 << UInt64(hash & 63) }
            self.filter = filter
            names = nil
            nameStrings = nil
        }

        /// An index for questions about `symbols`.
        convenience init(symbols: some Sequence<String>) {
            self.init(hashes: symbols.map(Self.hash(of:)))
        }

        /// An index for questions about the symbols of `requests` and `symbols`: by their names
        /// when they are few, else by a filter of their hashes.
        convenience init(requests: [ImportRequest], adding symbols: [String] = []) {
            if requests.count + symbols.count < Self.worthwhile {
                self.init(names: requests.map(\.symbol) + symbols)
            } else {
                self.init(
                    hashes: requests.map { $0.nameHash ?? Self.hash(of: $0.symbol) } + symbols.map(Self.hash(of:)))
            }
        }

        /// An index for questions about `symbols`, by their names when they are few.
        static func forSymbols(_ symbols: [String]) -> EntryIndex {
            symbols.count < worthwhile ? EntryIndex(names: symbols) : EntryIndex(symbols: symbols)
        }

        /// The ELF hash of a symbol's name (``ffh_elf_name_hash``).
        static func hash(of symbol: String) -> UInt32 {
            ffh_elf_name_hash(symbol)
        }

        deinit {
            for case (_, let index?, _) in byPosition { ffh_elf_index_free(index) }
            if let nameStrings {
                for place in 0..<nameCount { free(UnsafeMutableRawPointer(mutating: nameStrings[place])) }
                nameStrings.deallocate()
            }
        }

        /// Whether the index answers for `symbol`, whose hash is `hash`: one of its names, or a
        /// hash its filter lets through (every name without either).
        func admits(_ symbol: String, hash: UInt32) -> Bool {
            if let names { return names.contains(symbol) }
            return filter.isEmpty || (filter[Int(hash >> 6) & (filter.count - 1)] >> UInt64(hash & 63)) & 1 == 1
        }

        /// Whether the index was made for a set of names (and keeps only entries whose names
        /// may be among them).
        var isFiltered: Bool { !filter.isEmpty || names != nil }

        /// Calls `body` with each entry the index keeps for `object`, in the order of its
        /// tables, with its name and the name's hash; false, calling nothing, when the object
        /// has no index (memory ran out).
        func forEachIndexedEntry(
            of object: LoadedObject, _ body: (UnsafePointer<CChar>, UInt32, ffh_elf_entry) -> Void
        ) -> Bool {
            let (made, empty) = index(of: object.object, at: object.position)
            if empty { return true }
            guard let made else { return false }
            let total = ffh_elf_index_count(made)
            withUnsafeTemporaryAllocation(of: ffh_elf_entry.self, capacity: 64) { entries in
                withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { hashes in
                    var start = 0
                    while start < total {
                        let count = ffh_elf_index_entries(
                            made, start, entries.baseAddress, hashes.baseAddress, entries.count)
                        guard count > 0 else { break }
                        for place in 0..<count {
                            if let name = entries[place].name { body(name, hashes[place], entries[place]) }
                        }
                        start += count
                    }
                }
            }
            return true
        }

        /// The object's index, made at its first question, and whether it is empty.
        private func index(of object: UnsafePointer<ffh_elf_object>, at position: Int) -> (OpaquePointer?, Bool) {
            if position >= byPosition.count {
                byPosition += repeatElement(
                    (made: false, index: nil, empty: false), count: position + 1 - byPosition.count)
            }
            if !byPosition[position].made {
                let made =
                    nameStrings.map { ffh_elf_index_make_named(object, $0, nameCount) }
                    ?? filter.withUnsafeBufferPointer { words in
                        ffh_elf_index_make_filtered(object, words.baseAddress, words.count)
                    }
                byPosition[position] = (true, made, made != nil && ffh_elf_index_count(made) == 0)
            }
            return (byPosition[position].index, byPosition[position].empty)
        }

        /// Calls `body` with each entry for `symbol` of each of `objects`, as
        /// ``ImportWalk/entries(of:in:)`` finds them, in the order of `objects`, with its
        /// object's place in `objects`; without a list of them (a group asks for a thousand
        /// symbols).
        func forEachEntry(
            of symbol: String, hash: UInt32? = nil, in objects: [LoadedObject], _ body: (Int, Entry) -> Void
        ) {
            symbol.withCString { name in
                let hash = hash ?? ffh_elf_name_hash(name)
                // A name the index is not for: each object's relocations are read for it.
                guard admits(symbol, hash: hash) else {
                    for place in objects.indices {
                        for entry in ImportWalk.entries(of: symbol, in: objects[place]) { body(place, entry) }
                    }
                    return
                }
                withUnsafeTemporaryAllocation(of: ffh_elf_entry.self, capacity: 4) { buffer in
                    // By place: a copy of each object (its strings retained) would cost more
                    // than the question.
                    for place in objects.indices {
                        let (object, position) = (objects[place].object, objects[place].position)
                        let (made, empty) = index(of: object, at: position)
                        if empty { continue }
                        guard let index = made else {
                            for entry in ImportWalk.entries(of: symbol, in: objects[place]) { body(place, entry) }
                            continue
                        }
                        let total = ffh_elf_index_find(index, name, hash, buffer.baseAddress, buffer.count)
                        if total == 0 { continue }
                        if total <= buffer.count {
                            ImportWalk.forEachDistinct(buffer[..<total]) { body(place, $0) }
                        } else {
                            var all = [ffh_elf_entry](repeating: ffh_elf_entry(), count: total)
                            let written = ffh_elf_index_find(index, name, hash, &all, total)
                            ImportWalk.forEachDistinct(all[..<min(written, total)]) { body(place, $0) }
                        }
                    }
                }
            }
        }

        /// The entries ``forEachEntry(of:in:_:)`` meets, each with its object's place.
        func entries(of symbol: String, in objects: [LoadedObject]) -> [(object: Int, entry: Entry)] {
            var result: [(object: Int, entry: Entry)] = []
            forEachEntry(of: symbol, in: objects) { result.append(($0, $1)) }
            return result
        }
    }

    /// The entries for `symbol` of each of `objects`, through `index` when there is one, each
    /// with its object's place in `objects`.
    static func entries(
        of symbol: String, in objects: [LoadedObject], index: EntryIndex?
    ) -> [(object: Int, entry: Entry)] {
        if let index { return index.entries(of: symbol, in: objects) }
        return objects.indices.flatMap { place in entries(of: symbol, in: objects[place]).map { (place, $0) } }
    }

    /// Hooks `request.symbol`'s entries in `objects` for which `isWanted` says yes, all or
    /// nothing: when one cannot be hooked, those already hooked are removed again.
    static func install(
        _ request: ImportRequest, in objects: [LoadedObject], index: EntryIndex? = nil,
        where isWanted: (Entry) -> Bool
    ) throws(HookError) -> [HookToken] {
        try forEachEntry(of: request.symbol, in: objects, index: index, where: isWanted) {
            entry, object throws(HookError) in
            try install(request, at: entry, in: object)
        } undo: { token in
            token.remove()
        }
    }

    /// Attaches each of `requests` (attach requests, with no signature) to its entries in
    /// `objects` for which `isWanted` says yes, as ``install(_:in:index:where:)`` does for each
    /// request, but as one batch (``AttachEngine/attach(_:liftsProtection:)``), all or nothing;
    /// an error names the symbol.
    static func attach(
        _ requests: [ImportRequest], in objects: [LoadedObject], index: EntryIndex? = nil,
        where isWanted: (Entry) -> Bool
    ) throws(HookError) -> [HookToken] {
        var items: [AttachEngine.Item] = []
        items.reserveCapacity(requests.count)
        let hashes = requests.map { $0.nameHash ?? EntryIndex.hash(of: $0.symbol) }
        if let index, index.isFiltered, objects.count > 2,
            requests.indices.allSatisfy({ index.admits(requests[$0].symbol, hash: hashes[$0]) })
        {
            // Each object's entries of the requests' names, met once each: the index holds only
            // entries whose names may be the requests' (in an object that imports none of them,
            // the few that get through the filter), where asking it about each request would ask
            // every object about every name. (For one or two objects, the questions cost less
            // than the table of requests by hash.)
            // The requests by hash: the first with each hash, and after each the next with its hash.
            var first: [UInt32: Int] = Dictionary(minimumCapacity: requests.count)
            var next = [Int](repeating: -1, count: requests.count)
            for place in requests.indices.reversed() {
                if let head = first.updateValue(place, forKey: hashes[place]) { next[place] = head }
            }
            // For each request, the object it was last met in and where that object's items for
            // it begin: an entry listed twice (a name met again in the same object) counts once,
            // as the index's answers to a name list it.
            var metIn = [Int](repeating: -1, count: requests.count)
            var itemsFrom = [Int](repeating: 0, count: requests.count)
            for objectPlace in objects.indices {
                let object = objects[objectPlace]
                let indexed = index.forEachIndexedEntry(of: object) { name, hash, found in
                    var place = first[hash] ?? -1
                    while place >= 0 {
                        defer { place = next[place] }
                        guard requests[place].symbol.withCString({ strcmp($0, name) == 0 }) else { continue }
                        let entry = Entry(found)
                        if metIn[place] == objectPlace {
                            if items[itemsFrom[place]...].contains(where: { $0.slot == entry.slot }) { continue }
                        } else {
                            metIn[place] = objectPlace
                            itemsFrom[place] = items.count
                        }
                        guard isWanted(entry),
                            bindLazyEntry(entry, of: requests[place].symbol, in: object.object, handle: object.handle),
                            leads(entry, to: requests[place].leadsTo)
                        else { continue }
                        items.append(
                            AttachEngine.Item(
                                slot: entry.slot, attachment: requests[place].attachment!,
                                symbol: requests[place].symbol))
                    }
                }
                guard !indexed else { continue }
                for request in requests {
                    for entry in entries(of: request.symbol, in: object)
                    where isWanted(entry)
                        && bindLazyEntry(entry, of: request.symbol, in: object.object, handle: object.handle)
                        && leads(entry, to: request.leadsTo)
                    {
                        items.append(
                            AttachEngine.Item(slot: entry.slot, attachment: request.attachment!, symbol: request.symbol)
                        )
                    }
                }
            }
            return try AttachEngine.attach(items, liftsProtection: true).map(HookToken.init(handle:))
        }
        // As forEachEntry, without a list of each request's entries.
        for place in requests.indices {
            let (symbol, attachment, hash) = (
                requests[place].symbol, requests[place].attachment!, requests[place].nameHash
            )
            let leadsTo = requests[place].leadsTo
            // Closure literals, not a local function: that one's context (with the list it
            // appends to) was allocated for each request.
            if let index {
                index.forEachEntry(of: symbol, hash: hash, in: objects) { object, entry in
                    guard isWanted(entry),
                        bindLazyEntry(entry, of: symbol, in: objects[object].object, handle: objects[object].handle),
                        leads(entry, to: leadsTo)
                    else { return }
                    items.append(AttachEngine.Item(slot: entry.slot, attachment: attachment, symbol: symbol))
                }
            } else {
                for (object, entry) in entries(of: symbol, in: objects, index: nil)
                where isWanted(entry)
                    && bindLazyEntry(entry, of: symbol, in: objects[object].object, handle: objects[object].handle)
                    && leads(entry, to: leadsTo)
                {
                    items.append(AttachEngine.Item(slot: entry.slot, attachment: attachment, symbol: symbol))
                }
            }
        }
        return try AttachEngine.attach(items, liftsProtection: true).map(HookToken.init(handle:))
    }

    /// Whether `entry` (bound) leads where a request asks for (``ImportRequest/leadsTo``, nil
    /// for anywhere): the function it holds.
    private static func leads(_ entry: Entry, to leadsTo: (@Sendable (UnsafeRawPointer) -> Bool)?) -> Bool {
        guard let leadsTo else { return true }
        guard let function = UnsafeRawPointer(bitPattern: value(at: entry.slot)) else { return false }
        return leadsTo(function)
    }

    /// Makes something of each entry of `symbol` in `objects` for which `isWanted` says yes,
    /// binding a lazy entry first (see ``bindLazyEntry(_:of:in:)``), all or nothing: when
    /// `make` throws, `undo` takes back what it made before.
    static func forEachEntry<Made>(
        of symbol: String, in objects: [LoadedObject], index: EntryIndex? = nil,
        where isWanted: (Entry) -> Bool = { _ in true },
        make: (Entry, LoadedObject) throws(HookError) -> Made, undo: (Made) -> Void
    ) throws(HookError) -> [Made] {
        var made: [Made] = []
        do throws(HookError) {
            for (place, entry) in entries(of: symbol, in: objects, index: index) where isWanted(entry) {
                guard bindLazyEntry(entry, of: symbol, in: objects[place]) else { continue }
                made.append(try make(entry, objects[place]))
            }
        } catch {
            for thing in made { undo(thing) }
            throw error
        }
        return made
    }

    /// The objects of `objects` in `scope`; an object scope that matches none is
    /// ``HookError/Code-swift.struct/objectNotFound``.
    static func chosen(
        from objects: [LoadedObject], in scope: ImportScope, signature: Signature?
    ) throws(HookError) -> [LoadedObject] {
        let chosen = objects.filter { isInScope($0, scope) }
        if case .object(let name) = scope, chosen.isEmpty {
            throw HookError(slot: nil, signature: signature, problem: .objectNotFound(name))
        }
        return chosen
    }

    /// Hooks one entry of `object` through the slot registry, lifting the page protection of
    /// full RELRO; the hook's block is the one the request makes for the entry (or, for an
    /// attach request, attaches to the entry).
    static func install(_ request: ImportRequest, at entry: Entry, in object: LoadedObject) throws(HookError)
        -> HookToken
    {
        guard let signature = request.signature else {
            let attachment = request.attachment!
            let handle = try AttachEngine.attach(
                slot: UnsafeMutableRawPointer(bitPattern: entry.slot), attachment: attachment, liftsProtection: true,
                symbol: request.symbol)
            return HookToken(handle: handle)
        }
        let block = request.makeBlock(ImportEntry(symbol: request.symbol, entry: entry, object: object))
        let record = try SlotRegistry.shared.install(
            slot: UnsafeMutableRawPointer(bitPattern: entry.slot), signature: signature,
            position: request.position, options: request.options, liftsProtection: true,
            reentryByFunction: true, limit: request.limit, block: block)
        return HookToken(record)
    }

    /// The word an entry holds now.
    static func value(at slot: UInt) -> UInt {
        UInt(ffh_elf_load(UInt(slot)))
    }

    /// Makes a lazily bound entry hold the function it will be bound to; false when it must
    /// not be hooked.
    ///
    /// Under lazy binding a JUMP_SLOT entry holds, until the first call through it, an
    /// address inside the object's own PLT, whose code pushes the relocation index and enters
    /// the loader's resolver, which binds the entry and jumps to the function. Were a hook to
    /// take that address as its original, calling the original would jump through the entry
    /// again, that is into the hook: endless recursion, or the resolver overwriting the hook.
    /// So such an entry is bound here first, to what the resolver would bind it to, and the
    /// hook's original is the real function.
    ///
    /// An entry the resolver still has to write lies outside the RELRO range, in memory the
    /// loader leaves writable, so it is written in place with no page protection to lift,
    /// by compare-and-swap: a concurrent first call that binds it meanwhile writes the same
    /// address. An entry that points into the object's code from read-only (RELRO) memory
    /// was bound at load, to a function of the object itself, and is left as it is; so is one
    /// the library wrote itself (a replacement compiled into the object, `ImportTable.replace`
    /// of the program's own function, leads into the object's code as a lazy entry does).
    static func bindLazyEntry(_ entry: Entry, of symbol: String, in object: LoadedObject) -> Bool {
        bindLazyEntry(entry, of: symbol, in: object.object, handle: object.handle)
    }

    /// ``bindLazyEntry(_:of:in:)`` for the object `object`, pinned by `handle`.
    static func bindLazyEntry(
        _ entry: Entry, of symbol: String, in object: UnsafePointer<ffh_elf_object>, handle: UnsafeMutableRawPointer
    ) -> Bool {
        let current = value(at: entry.slot)
        guard current != 0, ffh_elf_is_in_code(object, UInt(current)) != 0,
            ffh_elf_is_writable_data(object, UInt(entry.slot)) != 0,
            SlotRegistry.shared.isWritten(at: entry.slot) != true
        else { return true }
        // (Looked up as the object itself, through its own code, which the entry leads to now:
        // see ffh_elf_resolve.)
        guard var resolved = ffh_elf_resolve(symbol, handle, UInt(current)) else { return false }
        // The object's own code, where the object does not define the function: a non-PIE
        // program's PLT entry, which its taking the function's address made the function's
        // address for every lookup (bound to it, the entry would lead to itself). The definition
        // after the object instead.
        var definition = ffh_elf_symbol()
        if ffh_elf_is_in_code(object, UInt(bitPattern: resolved)) != 0,
            ffh_elf_find_definition(object, symbol, &definition) == 0
        {
            guard let after = ffh_elf_resolve_after(symbol, UInt(current)),
                ffh_elf_is_in_code(object, UInt(bitPattern: after)) == 0
            else { return false }
            resolved = after
        }
        _ = ffh_elf_replace(UInt(entry.slot), UInt(current), UInt(bitPattern: resolved))
        return true
    }
}

extension ImportWalk.Entry {
    /// The entry an ELF reader found.
    init(_ found: ffh_elf_entry) {
        self.init(
            slot: UInt(found.slot), kind: found.kind == FFH_ELF_JUMP_SLOT ? .jumpSlot : .globalData,
            version: found.version.map { String(cString: $0) })
    }
}
