internal import CFFIHookSupport

/// One import-table entry of a symbol in a loaded object: the word through which that
/// object's calls of the symbol reach it.
///
/// ``ImportTable/bindings(of:in:)`` lists them, each with what it holds; a block of a
/// group of symbols (``ImportTable/hook(symbols:in:position:options:_:)``) receives the
/// entry its call came through. An entry describes where the entry is, not what it holds:
/// it stays true while its object stays loaded.
public struct ImportEntry: Sendable, Hashable, CustomStringConvertible {
    /// The relocations that fill import-table entries.
    public enum Kind: Sendable, Hashable, CustomStringConvertible {
        /// `R_X86_64_JUMP_SLOT`: the entry behind a PLT stub, used by calls through the PLT;
        /// lazily bound (at its first call) unless the object was linked with `-z now` or
        /// the program runs with `LD_BIND_NOW`.
        case jumpSlot
        /// `R_X86_64_GLOB_DAT`: the entry of a function whose address the object takes, or
        /// that it calls without the PLT (`-fno-plt`); bound when the object is loaded.
        case globalData

        /// The relocation's name: `JUMP_SLOT` or `GLOB_DAT`.
        public var description: String {
            switch self {
            case .jumpSlot: "JUMP_SLOT"
            case .globalData: "GLOB_DAT"
            }
        }
    }

    /// The symbol the entry is for, such as `"open"`.
    public let symbol: String
    /// The symbol version the entry asks for, such as `"GLIBC_2.2.5"`, or nil when the
    /// object imports the symbol unversioned.
    public let version: String?
    /// The path the dynamic loader knows the importing object by; for the main program, the
    /// file `/proc/self/exe` names.
    public let objectPath: String
    /// The importing object's `DT_SONAME`, when it has one (`"libsqlite3.so.0"`).
    public let objectSoname: String?
    /// Whether the importing object is the main program.
    public let isInMainProgram: Bool
    /// The entry's address, as a slot that ``Hook`` could hook (import-table hooks do that,
    /// lifting the page protection of full RELRO).
    public let slot: FunctionSlot
    /// The relocation that fills the entry.
    public let kind: Kind

    /// The importing object's soname, or else the last component of its path: a name that
    /// ``ImportScope/object(_:)`` accepts. Made once, with the entry: a block may read it
    /// on every call without allocating.
    public let objectName: String

    /// The scope that names the importing object: ``ImportScope/mainProgram`` for the main
    /// program, else ``ImportScope/object(_:)`` with ``objectName``.
    public var scope: ImportScope { isInMainProgram ? .mainProgram : .object(objectName) }

    /// The symbol, its version, the relocation, the address and the object, such as
    /// `"open@GLIBC_2.2.5" JUMP_SLOT entry 0x00007f3a2c001008 in libswiftGlibc.so`.
    public var description: String {
        let name = version.map { "\(symbol)@\($0)" } ?? symbol
        let address = "0x" + String(slot.address, radix: 16).leftPadded(to: 16)
        return "\"\(name)\" \(kind) entry \(address) in \(isInMainProgram ? "the main program" : objectName)"
    }

    init(symbol: String, entry: ImportWalk.Entry, object: LoadedObject) {
        self.symbol = symbol
        self.version = entry.version
        self.objectPath = object.path
        self.objectSoname = object.soname
        self.isInMainProgram = object.isMainProgram
        self.objectName = ImportTable.displayName(object)
        self.slot = FunctionSlot(address: entry.slot)
        self.kind = entry.kind
    }
}

/// An import-table entry and what it held when ``ImportTable/bindings(of:in:)`` read it.
public struct ImportBinding: Sendable, Hashable, CustomStringConvertible {
    /// What an import-table entry holds.
    public enum State: Sendable, Hashable {
        /// Not bound yet: a lazily bound `JUMP_SLOT` entry that still leads to its object's
        /// own PLT stub, which binds it at the first call (hooking it binds it first).
        case unbound
        /// Bound to the function at this address (a replacement's function, when one was
        /// written there).
        case bound(function: UInt)
        /// Holding the closure of this library's hooks, which wrap the function at this
        /// address.
        case hooked(original: UInt)
    }

    /// The entry.
    public let entry: ImportEntry
    /// The word the entry held.
    public let value: UInt
    /// What that word is.
    public let state: State
    /// The loaded object whose code holds the function calls through the entry reach (the
    /// hooks' original for a hooked entry), by soname or file name; nil for an unbound
    /// entry, or a function outside every loaded object's code (a closure, say).
    public let functionObject: String?

    /// Whether the entry held the closure of this library's hooks.
    public var isHooked: Bool {
        if case .hooked = state { true } else { false }
    }

    /// The function calls through the entry reach (for a hooked entry, the hooks'
    /// original), nil when the entry is not bound yet.
    public var function: UInt? {
        switch state {
        case .unbound: nil
        case .bound(let function), .hooked(let function): function
        }
    }

    /// The entry and what it held, such as
    /// `"open@GLIBC_2.2.5" JUMP_SLOT entry 0x… in libswiftGlibc.so: bound to 0x… in libc.so.6`.
    public var description: String {
        let place = functionObject.map { " in \($0)" } ?? ""
        let held: String =
            switch state {
            case .unbound: "not bound yet (lazy)"
            case .bound(let function): "bound to 0x\(String(function, radix: 16))\(place)"
            case .hooked(let original): "hooked, wrapping 0x\(String(original, radix: 16))\(place)"
            }
        return "\(entry): \(held)"
    }
}

extension ImportTable {
    /// The import-table entries of `symbol` in the loaded objects of `scope`, each with what
    /// it holds now: where the calls of a symbol come from, before hooking it.
    ///
    /// ```swift
    /// // Which objects' calls of open would a hook see?
    /// for binding in try ImportTable.bindings(of: "open") {
    ///     print(binding)  // "open@GLIBC_2.2.5" JUMP_SLOT entry 0x… in libswiftGlibc.so: bound to 0x… in libc.so.6
    /// }
    /// ```
    ///
    /// Calls from Swift code to C functions that Swift wraps in its platform overlay (see
    /// "Swift's overlays" under ``ImportTable``) show up in the overlay's entries, such as
    /// `libswiftGlibc.so`'s, not the program's.
    ///
    /// Safe to call from any thread while other threads load and unload objects: each object
    /// is kept loaded while its entries are read. The list is the state of one moment;
    /// nothing is bound or changed.
    ///
    /// - Parameters:
    ///   - symbol: the function's name as the objects import it, such as `"open"`.
    ///   - scope: the objects to look in; ``ImportScope/allIncludingLaterLoads`` is the same
    ///     as ``ImportScope/all`` here.
    /// - Returns: the entries in the loader's order of the objects (the main program first),
    ///   empty when no object of the scope imports the symbol.
    /// - Throws: ``HookError`` with ``HookError/Code-swift.struct/objectNotFound`` when no
    ///   loaded object matches ``ImportScope/object(_:)``, or
    ///   ``HookError/Code-swift.struct/calledFromHookBlock`` when called from a block that
    ///   runs within the library's own install or removal on the same thread.
    public static func bindings(of symbol: String, in scope: ImportScope = .all) throws(HookError) -> [ImportBinding] {
        do {
            return try ImportWalk.withLoadedObjects { objects throws(HookError) in
                let chosen = try ImportWalk.chosen(from: objects, in: scope, signature: nil)
                var bindings: [ImportBinding] = []
                for object in chosen {
                    for entry in ImportWalk.entries(of: symbol, in: object) {
                        bindings.append(try binding(of: entry, symbol: symbol, in: object, among: objects))
                    }
                }
                return bindings
            }
        } catch {
            var error = error.naming(symbol: symbol)
            error.operation = "list the import entries of"
            throw error
        }
    }

    /// What `entry` of `object` holds now.
    private static func binding(
        of entry: ImportWalk.Entry, symbol: String, in object: LoadedObject, among objects: [LoadedObject]
    ) throws(HookError) -> ImportBinding {
        let value = ImportWalk.value(at: entry.slot)
        guard let hooked = SlotRegistry.shared.hookedFunction(at: entry.slot, holding: value) else {
            throw HookError(slot: entry.slot, signature: nil, problem: .calledFromHookBlock)
        }
        let state: ImportBinding.State
        if hooked.isHooked {
            state = .hooked(original: hooked.original)
        } else if value == 0
            || (ffh_elf_is_in_code(object.object, value) != 0
                && ffh_elf_is_writable_data(object.object, entry.slot) != 0
                && SlotRegistry.shared.isWritten(at: entry.slot) != true)
        {
            // As ImportWalk.bindLazyEntry tells a lazy entry: it leads into its own object's
            // code from memory the loader still writes.
            state = .unbound
        } else {
            state = .bound(function: value)
        }
        let function: UInt? =
            switch state {
            case .unbound: nil
            case .bound(let function), .hooked(let function): function
            }
        let home = function.flatMap { function in
            objects.first { ffh_elf_is_in_code($0.object, function) != 0 }
        }
        return ImportBinding(
            entry: ImportEntry(symbol: symbol, entry: entry, object: object), value: value, state: state,
            functionObject: home.map(displayName))
    }

    /// The name an object goes by in messages and in suggested scopes: its soname, else the
    /// last component of its path.
    static func displayName(_ object: LoadedObject) -> String {
        object.soname ?? String(object.path.split(separator: "/").last ?? Substring(object.path))
    }

    /// The names of the objects among `objects` that import `symbol`, each once, in the
    /// loader's order.
    static func importers(of symbol: String, among objects: [LoadedObject]) -> [String] {
        var names: [String] = []
        for object in objects where !ImportWalk.entries(of: symbol, in: object).isEmpty {
            let name = object.isMainProgram ? HookError.mainProgramImporter : displayName(object)
            if !names.contains(name) { names.append(name) }
        }
        return names
    }

    /// The error for `symbol` having no entry in `scope`, naming the loaded objects that do
    /// import it (or saying that none does), read in a walk of its own.
    static func notImported(_ symbol: String, in scope: ImportScope, signature: Signature?) -> HookError {
        let names = ImportWalk.withLoadedObjects { objects in importers(of: symbol, among: objects) }
        return notImported(symbol, in: scope, signature: signature, importers: names)
    }

    /// The error for `symbol` having no entry in `scope`, given the objects that import it.
    static func notImported(
        _ symbol: String, in scope: ImportScope, signature: Signature?, importers: [String]
    ) -> HookError {
        HookError(
            slot: nil, signature: signature,
            problem: .symbolNotImported(symbol, scope: scope, importers: importers))
    }
}
