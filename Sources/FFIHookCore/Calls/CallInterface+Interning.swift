#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension CallInterface {
    /// The shared interface for `signature`, prepared on first use.
    ///
    /// Signatures that differ only in names and qualifiers share one interface; a variadic
    /// call shape (a signature with a ``Signature/fixedArgumentCount``) gets its own, apart
    /// from the fixed signature of the same types and from other fixed counts. The cache
    /// holds interfaces weakly: an interface nobody references is freed, and the next
    /// request prepares a new one. Safe to call from any thread.
    ///
    /// - Throws: ``CallInterfaceError`` as ``init(_:)`` does.
    public static func shared(for signature: Signature) throws(CallInterfaceError) -> CallInterface {
        // Interfaces made while register plans are switched off (for tests) are kept apart.
        let key =
            RegisterCallPlan.isEnabled ? signature.abiKey : signature.abiKey + " ffi_call"
        if let existing = InterfaceCache.shared.lookup(key) { return existing }
        let interface = try CallInterface(signature)
        return InterfaceCache.shared.insert(interface, for: key)
    }

    /// How many interned interfaces are alive (for tests and diagnostics).
    static var sharedInterfaceCount: Int { InterfaceCache.shared.count }

    /// Has the interning table's lock taken across `fork` (see ``Locked/protectAcrossFork(rank:)``).
    package static func protectInterningAcrossFork(rank: Int32) {
        InterfaceCache.shared.protectAcrossFork(rank: rank)
    }
}

/// The weak table behind ``CallInterface/shared(for:)``.
final class InterfaceCache: Sendable {
    static let shared = InterfaceCache()

    private final class Entry: @unchecked Sendable {
        // Sendable: only read and written with the table's lock held.
        weak var interface: CallInterface?
        let identity: ObjectIdentifier

        init(interface: CallInterface, identity: ObjectIdentifier) {
            self.interface = interface
            self.identity = identity
        }
    }

    private let entries = Locked<[String: Entry]>([:])

    /// The live interface stored for `key`, if any.
    ///
    /// A request from a hook block that runs for a call the table's own work made (a hooked
    /// `malloc` while this thread holds the table's lock) finds nothing, and gets an
    /// interface of its own.
    func lookup(_ key: String) -> CallInterface? {
        guard !entries.isHeldByCurrentThread else { return nil }
        return entries.withLock { $0[key]?.interface }
    }

    /// Stores `interface` unless a live one won the race, and returns the one to use (the
    /// interface itself, not stored, for a request made while this thread holds the lock).
    func insert(_ interface: CallInterface, for key: String) -> CallInterface {
        guard !entries.isHeldByCurrentThread else { return interface }
        return entries.withLock { table in
            if let existing = table[key]?.interface { return existing }
            table[key] = Entry(interface: interface, identity: ObjectIdentifier(interface))
            interface.cacheKey.withLock { $0 = key }
            return interface
        }
    }

    /// Drops the entry of a dying interface, unless a newer interface already replaced it.
    func remove(_ key: String, identity: ObjectIdentifier) {
        // An interface freed by a block that runs under the table's own lock was not stored
        // by that block; one that was is dropped by the next insert of its key.
        guard !entries.isHeldByCurrentThread else { return }
        entries.withLock { table in
            if table[key]?.identity == identity { table[key] = nil }
        }
    }

    var count: Int { entries.withLock { $0.count } }

    /// Has the table's lock taken across `fork`.
    func protectAcrossFork(rank: Int32) { entries.protectAcrossFork(rank: rank) }
}
