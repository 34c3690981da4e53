/// A hook that could not be installed, or a hook operation that could not run.
///
/// Tell problems apart by ``code-swift.property``; ``message`` says what went wrong in words,
/// and ``slot``, ``signature``, ``symbol``, ``object`` and ``callInterfaceError`` carry the
/// inputs it concerns, typed, when there are some.
///
/// The description says what happened, naming the slot and the signature when there are
/// some. A hook that could not be installed reads
///
/// ```
/// cannot hook slot 0x00007f3a2c001008 with signature "iii": it holds NULL, and a before or after hook needs an original to run
/// ```
///
/// and an operation other than an install says what went wrong in its own words:
///
/// ```
/// the page protection of slot 0x00007f3a2c001008 with signature "iii" could not be changed (mprotect failed)
/// called from inside a hook block, where it would wait for itself (…)
/// ```
public struct HookError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem it is: one of the static members below.
    ///
    /// A code is a struct rather than an enum so that new kinds of problem can be added
    /// without breaking a `switch` in code that uses the library: compare with `==`.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Value: String, Sendable {
            case nullSlot, misalignedSlot, invalidSlot, emptySlot, signatureMismatch, invalidSignature
            case closureAllocationFailed, closurePreparationFailed, slotContention, unmappedSlot, readOnlySlot
            case protectionChangeFailed, calledFromHookBlock, objectNotFound, symbolNotImported, unsupportedScope
            case unsupportedCallerLimit, unhookableFunction, patchFailed, symbolNotFound, unsupportedPlatform
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The slot address is NULL.
        public static var nullSlot: Self { Self(.nullSlot) }
        /// The slot address is not aligned to a pointer.
        public static var misalignedSlot: Self { Self(.misalignedSlot) }
        /// The slot was made from something that names no function pointer (a key path to a
        /// computed property, a field or pointee that is not pointer-sized, a slot in code),
        /// a replacement or fallback is not a function's address, or the slot holds an address
        /// where no memory can be read (a small integer, memory unmapped or made inaccessible);
        /// the message says which and why.
        public static var invalidSlot: Self { Self(.invalidSlot) }
        /// The slot holds NULL and the hook is a before or after hook, which needs an original.
        public static var emptySlot: Self { Self(.emptySlot) }
        /// The slot is already hooked with a signature of other types (names and type
        /// qualifiers aside): every hook of a slot must describe its function the same way.
        public static var signatureMismatch: Self { Self(.signatureMismatch) }
        /// The signature cannot serve the hook: C or libffi cannot pass one of its values on
        /// this platform, or a typed block's Swift types do not match it.
        /// ``HookError/callInterfaceError`` says which value and why.
        public static var invalidSignature: Self { Self(.invalidSignature) }
        /// libffi could not allocate a closure (for example under a policy that forbids
        /// pages that are writable and executable).
        public static var closureAllocationFailed: Self { Self(.closureAllocationFailed) }
        /// libffi refused to prepare the closure; the message gives its `ffi_status`.
        public static var closurePreparationFailed: Self { Self(.closurePreparationFailed) }
        /// The slot kept changing under a concurrent writer while the hook was being installed.
        public static var slotContention: Self { Self(.slotContention) }
        /// The slot's address is not mapped in this process, or its page is mapped with no
        /// access at all (`PROT_NONE`: the message says which).
        public static var unmappedSlot: Self { Self(.unmappedSlot) }
        /// The slot is in read-only memory; ``HookOptions/liftsPageProtection`` allows writing it.
        public static var readOnlySlot: Self { Self(.readOnlySlot) }
        /// The page protection could not be lifted or restored (`mprotect` failed), or the page
        /// is a read-only page of a file that no loaded object holds, which is never lifted
        /// (see ``HookOptions/liftsPageProtection``).
        public static var protectionChangeFailed: Self { Self(.protectionChangeFailed) }
        /// Waiting for reclamation from inside a hooked call, or installing or reading
        /// ``Hook/statistics`` from a block that runs within the library's own install or
        /// removal on the same thread (for an allocation it makes, with `malloc` hooked): each
        /// would wait for itself.
        public static var calledFromHookBlock: Self { Self(.calledFromHookBlock) }
        /// No loaded object's path ends with the name given for an import-table hook, and
        /// none has it as its soname; ``HookError/object`` is the name.
        public static var objectNotFound: Self { Self(.objectNotFound) }
        /// No object in the scope of an import-table hook imports the symbol: it has no
        /// JUMP_SLOT or GLOB_DAT entry for it. ``HookError/symbol`` is the symbol; the message
        /// names the loaded objects that do import it and a scope that covers them, or says
        /// that none does.
        public static var symbolNotImported: Self { Self(.symbolNotImported) }
        /// An import-table operation that cannot cover the scope asked for: a replacement
        /// does not follow later loads.
        public static var unsupportedScope: Self { Self(.unsupportedScope) }

        /// A hook limited to the current task (``HookOptions/inCurrentTaskOnly``) installed
        /// outside ``Hook/scoped(_:during:)``, which is what names the task's calls; or a
        /// replacement asked to be limited to a thread or a task, which it cannot be: it runs
        /// no block of the library's that could tell calls apart.
        public static var unsupportedCallerLimit: Self { Self(.unsupportedCallerLimit) }

        /// An inline hook cannot patch the function: its first instructions cannot be moved
        /// into a trampoline (the message names the instruction, its offset from the
        /// function's start and why), the function is shorter than the patch, or another
        /// place in the function branches into the bytes the patch would overwrite.
        public static var unhookableFunction: Self { Self(.unhookableFunction) }
        /// An inline hook's patch could not be written or taken out: another thread did not
        /// stop, or sat inside the bytes to overwrite where it could not be moved; the code's
        /// page could not be made writable; or the function's bytes changed (its object was
        /// unloaded). The message says which.
        public static var patchFailed: Self { Self(.patchFailed) }
        /// No loaded object defines the function's symbol, or it names data rather than a
        /// function; ``HookError/symbol`` is the symbol and ``HookError/object`` the object
        /// asked for.
        public static var symbolNotFound: Self { Self(.symbolNotFound) }
        /// Inline hooks need a code writer and a decoder this platform does not have (they
        /// work on Linux x86-64).
        public static var unsupportedPlatform: Self { Self(.unsupportedPlatform) }

        /// The code's name, as the static member is spelled (`emptySlot`).
        public var description: String { value.rawValue }
    }

    /// What kind of problem it is.
    public var code: Code
    /// The slot, when the error is about one.
    public var slot: FunctionSlot?
    /// The signature involved, when there is one.
    public var signature: Signature?
    /// The symbol of an import-table hook, when the error is about one.
    public var symbol: String?
    /// The object name given for an import-table hook, when the error is about one.
    public var object: String?
    /// For ``Code-swift.struct/invalidSignature``, what is wrong with the signature: the
    /// value at fault and why.
    public var callInterfaceError: CallInterfaceError?
    /// What went wrong, in words, without the slot and the signature:
    /// `it holds NULL, and a before or after hook needs an original to run`.
    public var message: String
    /// What could not be done, after "cannot" in the description: "hook", or for a query
    /// that hooks nothing its own words ("list the import entries of").
    package var operation = "hook"

    /// Creates an error.
    public init(
        code: Code, message: String, slot: FunctionSlot? = nil, signature: Signature? = nil, symbol: String? = nil,
        object: String? = nil, callInterfaceError: CallInterfaceError? = nil
    ) {
        self.code = code
        self.message = message
        self.slot = slot
        self.signature = signature
        self.symbol = symbol
        self.object = object
        self.callInterfaceError = callInterfaceError
    }

    /// Creates the error for `problem` at the slot at `address` (none when nil or 0).
    package init(slot address: UInt?, signature: Signature?, problem: Problem) {
        self.init(
            code: problem.code, message: problem.message,
            slot: address.flatMap { $0 == 0 ? nil : FunctionSlot(address: $0) },
            signature: signature)
        switch problem {
        case .objectNotFound(let name): object = name
        case .symbolNotImported(let name, _, _): symbol = name
        default: break
        }
    }

    /// Creates the error for a signature that cannot serve the hook, for the reason `error` gives.
    package init(slot address: UInt?, signature: Signature, rejectedBecause error: CallInterfaceError) {
        self.init(slot: address, signature: signature, problem: .invalidSignature(error.message))
        callInterfaceError = error
    }

    /// What went wrong, with the slot and signature, on one line.
    public var description: String {
        switch code {
        // Not only an install writes a slot: a removal writes the original back.
        case .protectionChangeFailed:
            "the page protection of \(slotName ?? "the slot")\(signaturePhrase) could not be changed (mprotect failed)"
        case .calledFromHookBlock: message + context
        default: "cannot " + operation + subject + signaturePhrase + ": " + message
        }
    }

    /// A problem found while installing or removing, with the details its message needs.
    package enum Problem: Sendable, Hashable {
        /// ``unsupportedCallerLimit(_:)``'s reason for a task limit outside a scope.
        package static let taskLimitOutsideScope = Problem.unsupportedCallerLimit(
            "a hook limited to the current task (.inCurrentTaskOnly) must be installed inside Hook.scoped(_:during:), which names the task's calls; this install runs in no scope"
        )
        /// ``unsupportedCallerLimit(_:)``'s reason for a limited attach.
        package static let limitedAttachReason =
            "an attach cannot be limited to a thread or a task (.onInstallingThreadOnly, .inCurrentTaskOnly): test `threadID` in its blocks instead"
        /// ``unsupportedCallerLimit(_:)``'s reason for a limited replacement.
        package static let limitedReplacement = Problem.unsupportedCallerLimit(
            "a replacement cannot be limited to a thread or a task (.onInstallingThreadOnly, .inCurrentTaskOnly): it runs no block that could tell calls apart"
        )
        case nullSlot
        case misalignedSlot
        case invalidSlot(String)
        case emptySlot
        case signatureMismatch(installed: String, fixedArgumentCount: Int? = nil)
        case invalidSignature(String)
        case closureAllocationFailed
        case closurePreparationFailed(status: Int)
        case slotContention
        case unmappedSlot
        /// Mapped, but neither readable nor writable (`PROT_NONE`); its code is `unmappedSlot`.
        case inaccessibleSlot
        case readOnlySlot
        case protectionChangeFailed
        case calledFromHookBlock
        case objectNotFound(String)
        /// The symbol; the scope searched, when known; the loaded objects that import it
        /// (soname or file name), when they were looked for.
        case symbolNotImported(String, scope: ImportScope? = nil, importers: [String]? = nil)
        case unsupportedScope
        case unsupportedCallerLimit(String)

        /// The code of this kind of problem.
        package var code: Code {
            switch self {
            case .nullSlot: .nullSlot
            case .misalignedSlot: .misalignedSlot
            case .invalidSlot: .invalidSlot
            case .emptySlot: .emptySlot
            case .signatureMismatch: .signatureMismatch
            case .invalidSignature: .invalidSignature
            case .closureAllocationFailed: .closureAllocationFailed
            case .closurePreparationFailed: .closurePreparationFailed
            case .slotContention: .slotContention
            case .unmappedSlot, .inaccessibleSlot: .unmappedSlot
            case .readOnlySlot: .readOnlySlot
            case .protectionChangeFailed: .protectionChangeFailed
            case .calledFromHookBlock: .calledFromHookBlock
            case .objectNotFound: .objectNotFound
            case .symbolNotImported: .symbolNotImported
            case .unsupportedScope: .unsupportedScope
            case .unsupportedCallerLimit: .unsupportedCallerLimit
            }
        }

        /// What went wrong, in words.
        package var message: String {
            switch self {
            case .nullSlot: "the slot address is NULL"
            case .misalignedSlot: "the slot address is not aligned to \(MemoryLayout<UnsafeRawPointer>.alignment) bytes"
            case .invalidSlot(let reason): reason
            case .emptySlot: "it holds NULL, and a before or after hook needs an original to run"
            case .signatureMismatch(let installed, let fixedArgumentCount):
                "it is already hooked with signature \(quoted(installed))\(Signature.variadicNote(fixedArgumentCount)); "
                    + "every hook of a slot must use the same types and the same variadic call shape "
                    + "(integers of 4 bytes or more may differ in signedness, pointers from integers of their size)"
            case .invalidSignature(let reason): reason
            case .closureAllocationFailed:
                "libffi could not allocate a closure (is mapping writable and executable memory forbidden?)"
            case .closurePreparationFailed(let status): "libffi refused to prepare the closure (ffi_status \(status))"
            case .slotContention: "the slot kept changing under another writer"
            case .unmappedSlot: "no memory is mapped at that address"
            case .inaccessibleSlot: "its page is mapped but can be neither read nor written (PROT_NONE)"
            case .readOnlySlot:
                "the slot is in read-only memory (pass .liftsPageProtection to make its page writable while it is written)"
            case .protectionChangeFailed: "the page protection could not be changed (mprotect failed)"
            case .calledFromHookBlock:
                "called from inside a hook block, where it would wait for itself (waitForReclamation() in a hooked call, or an install or a read of Hook.statistics in a block that runs within the library's own install or removal on this thread)"
            case .objectNotFound(let object): "no loaded object has a path ending in \(quoted(object)) or that soname"
            case .symbolNotImported(let symbol, let scope, let importers):
                HookError.notImportedMessage(symbol, scope: scope, importers: importers)
            case .unsupportedScope:
                "a replacement does not follow later loads (replace with .all once the objects are loaded)"
            case .unsupportedCallerLimit(let reason): reason
            }
        }
    }

    /// `slot 0x…` with the address in 16 hex digits, when there is a slot.
    private var slotName: String? {
        slot.map { "slot 0x" + String($0.address, radix: 16).leftPadded(to: 16) }
    }

    /// What could not be hooked: ` "symbol" at slot 0x…`, ` "symbol"`, ` slot 0x…`, or empty.
    private var subject: String {
        switch (symbol, slotName) {
        case (let symbol?, let slot?): " \(quoted(symbol)) at \(slot)"
        case (let symbol?, nil): " \(quoted(symbol))"
        case (nil, let slot?): " \(slot)"
        case (nil, nil): ""
        }
    }

    /// ` with signature "…"` when there is a signature, else empty.
    private var signaturePhrase: String {
        signature.map { " with signature \(quoted($0.encoding))\($0.variadicNote)" } ?? ""
    }

    /// ` (slot 0x…, signature "…")` with what is known, or empty when neither is.
    private var context: String {
        let parts = [slotName, signature.map { "signature \(quoted($0.encoding))\($0.variadicNote)" }].compactMap { $0 }
        return parts.isEmpty ? "" : " (\(parts.joined(separator: ", ")))"
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
