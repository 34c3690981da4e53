/// The function-pointer fields of a C struct of callbacks that a table hook or a lifecycle
/// dispatcher covers, each with its name and C signature.
///
/// ```swift
/// let layout = TableLayout<io_methods>([
///     .init("read", \.xRead, try Signature("i^v^viq")),
///     .init("write", \.xWrite, try Signature("i^vr^viq")),
/// ])
/// ```
public struct TableLayout<Table>: Sendable {
    /// One function-pointer field of the table.
    public struct Field: Sendable, Hashable {
        /// The name the field is reported under.
        public let name: String
        /// The field's byte offset in the table, `nil` when the key path names no stored field.
        public let offset: Int?
        /// The C signature of the function the field holds.
        public let signature: Signature
        /// Why the field cannot hold a function pointer, when it cannot.
        let problem: String?

        /// The field `field` of `Table`, reported as `name`.
        ///
        /// A key path that names no stored field, or a field that is not pointer-sized, makes
        /// every install over the layout fail with
        /// ``HookError/Code-swift.struct/invalidSlot`` naming the field.
        public init(_ name: String, _ field: PartialKeyPath<Table>, _ signature: Signature) {
            self.name = name
            self.offset = MemoryLayout<Table>.offset(of: field)
            self.signature = signature
            self.problem = FunctionSlot.fieldProblem(field).map { "slot \"\(name)\": \($0)" }
        }
    }

    /// The fields, in the order given.
    public let fields: [Field]

    /// A layout of `fields`.
    public init(_ fields: [Field]) {
        self.fields = fields
    }

    /// The fields, under their earlier name.
    @available(*, deprecated, renamed: "fields")
    public var slots: [Field] { fields }

    /// A field, under its earlier name.
    @available(*, deprecated, renamed: "Field")
    public typealias Slot = Field

    /// The slot's address in `table`.
    func address(of slot: Field, in table: UInt) -> UnsafeMutableRawPointer? {
        guard let offset = slot.offset else { return nil }
        return UnsafeMutableRawPointer(bitPattern: table + UInt(offset))
    }

    /// Installs one hook per slot of `table`, all or none.
    ///
    /// `install` gets each slot, its address in `table`, and the function pointer the table
    /// at `source` holds there (the hooked table itself, or a lifecycle component's); a slot
    /// whose function pointer in `source` is NULL is skipped. When one install throws, the
    /// hooks installed before it are removed and the error is rethrown.
    func installEach(
        in table: UInt, readingFrom source: UInt,
        _ install: (Field, UnsafeMutableRawPointer, UInt) throws(HookError) -> HookRecord
    ) throws(HookError) -> HookGroupToken {
        var tokens: [HookToken] = []
        var skipped: [String] = []
        do throws(HookError) {
            for slot in fields {
                if let problem = slot.problem {
                    throw HookError(slot: nil, signature: slot.signature, problem: .invalidSlot(problem))
                }
                guard let target = address(of: slot, in: table), let from = address(of: slot, in: source) else {
                    throw HookError(slot: nil, signature: slot.signature, problem: .nullSlot)
                }
                // The caller's table, which its owner may unmap: read under the fault guard.
                guard let function = SlotMemory.load(UInt(bitPattern: from)) else {
                    throw HookError(
                        slot: UInt(bitPattern: from), signature: slot.signature,
                        problem: SlotMemory.unreadable(UInt(bitPattern: from)))
                }
                guard function != 0 else {
                    skipped.append(slot.name)
                    continue
                }
                tokens.append(HookToken(try install(slot, target, function)))
            }
        } catch {
            for token in tokens { token.remove() }
            throw error
        }
        return HookGroupToken(tokens: tokens, skippedFields: skipped)
    }
}

/// The handle of a group of hooks installed together (a whole table, a lifecycle
/// component, the import-table entries of a symbol); removing it removes every hook of the
/// group.
///
/// Dropping the token does not remove the hooks. The token may be used from any thread.
public final class HookGroupToken: Sendable, Hashable, CustomStringConvertible {
    private struct Members {
        var tokens: [HookToken]
        /// Hooks that serve the group without being among its `tokens` (those that follow
        /// `dlopen` for an import-table group).
        var companions: [HookToken] = []
        var removed = false
    }

    private let members: Locked<Members>

    /// The tokens of the group's hooks, including those added since it was made (an
    /// import-table group that follows later loads grows as objects are loaded).
    public var tokens: [HookToken] { members.withLock { $0.tokens } }
    /// The names of the layout's fields the group left alone because they held NULL.
    public let skippedFields: [String]

    /// The targets the group left out, each with the error that refused it: a group of inline
    /// hooks on a batch of functions names each function it could not patch or hook (the
    /// error's ``HookError/symbol``), and hooks the others. Empty for other groups, which are
    /// all or nothing.
    public let refusals: [HookError]
    /// What wraps the removal of the group's hooks, when something must happen around it (a
    /// batch of inline hooks takes all its patches out in one stop at its end).
    private let removalScope: (@Sendable (() -> Void) -> Void)?

    /// The skipped fields, under their earlier name.
    @available(*, deprecated, renamed: "skippedFields")
    public var skippedSlots: [String] { skippedFields }

    package init(
        tokens: [HookToken], skippedFields: [String], refusals: [HookError] = [],
        removalScope: (@Sendable (() -> Void) -> Void)? = nil
    ) {
        self.members = Locked(Members(tokens: tokens))
        self.skippedFields = skippedFields
        self.refusals = refusals
        self.removalScope = removalScope
    }

    /// Adds hooks installed after the group was made: `tokens` join ``tokens``, `companions`
    /// are only removed with the group. Returns false, adding nothing, when the group was
    /// removed already; the caller then removes them.
    func add(tokens: [HookToken], companions: [HookToken] = []) -> Bool {
        replace(removing: [], with: tokens, companions: companions) != nil
    }

    /// Whether ``remove()`` was called: a walk that follows later loads for the group hooks
    /// nothing more (what one hooks after all is removed by ``replace(removing:with:companions:)``).
    var isRemoved: Bool { members.withLock { $0.removed } }

    /// Takes `old` hooks (tokens or companions) out of the group and adds `tokens` and
    /// `companions`, in one step; returns those of `old` that were in the group, which the
    /// caller removes, or nil, changing nothing, when the group was removed already.
    func replace(removing old: [HookToken], with tokens: [HookToken], companions: [HookToken]) -> [HookToken]? {
        members.withLock { members in
            guard !members.removed else { return nil }
            var taken: [HookToken] = []
            if !old.isEmpty {
                let identities = Set(old.map(ObjectIdentifier.init))
                func isTaken(_ token: HookToken) -> Bool { identities.contains(ObjectIdentifier(token)) }
                taken = members.tokens.filter(isTaken) + members.companions.filter(isTaken)
                members.tokens.removeAll(where: isTaken)
                members.companions.removeAll(where: isTaken)
            }
            members.tokens += tokens
            members.companions += companions
            return taken
        }
    }

    /// Removes every hook of the group; true when at least one was still installed.
    ///
    /// Safe to call from any thread, including from inside one of the group's blocks, and
    /// more than once: later calls, and calls that race the first, return false and change
    /// nothing (the first call's removal may still be under way when they return). Each slot gets its
    /// original back as ``HookToken/remove()`` describes.
    @discardableResult
    public func remove() -> Bool {
        let (tokens, companions) = members.withLock { members -> ([HookToken], [HookToken]) in
            // A second call, even one that races the first, finds the group taken.
            guard !members.removed else { return ([], []) }
            members.removed = true
            // Companions' blocks may refer back to the group (the dlopen follower does):
            // dropping them breaks that cycle.
            defer { members.companions = [] }
            return (members.tokens, members.companions)
        }
        // Companions first: once they are gone, nothing adds to the group any more.
        var removed = false
        let body = {
            removed = companions.reduce(false) { removed, token in token.remove() || removed }
            removed = tokens.reduce(removed) { removed, token in token.remove() || removed }
        }
        // One grace period for the whole group, and one change of protection per page.
        SlotMemory.keepingPagesWritable {
            SlotRegistry.shared.withBatchedReclamation {
                if let removalScope { removalScope(body) } else { body() }
            }
        }
        return removed
    }

    /// Whether any hook of the group is still installed.
    public var isActive: Bool {
        members.withLock { members in
            members.tokens.contains { $0.isActive } || members.companions.contains { $0.isActive }
        }
    }

    /// Tokens are equal when they are the same token.
    public static func == (lhs: HookGroupToken, rhs: HookGroupToken) -> Bool { lhs === rhs }

    /// Hashes the token's identity.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }

    /// The number of hooks and skipped fields, and whether the group is in place.
    public var description: String {
        let hooks = tokens.count
        let skipped = skippedFields.count
        return "HookGroupToken(\(hooks) hook\(hooks == 1 ? "" : "s"), \(skipped) empty field\(skipped == 1 ? "" : "s") "
            + "skipped, \(isActive ? "active" : "removed"))"
    }
}
