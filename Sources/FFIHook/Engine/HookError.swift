/// A hook that could not be installed, or a hook operation that could not run.
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
/// waitForReclamation() was called from inside a hook block, where it would wait for itself
/// ```
public struct HookError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: Sendable, Hashable {
        /// The slot address is NULL.
        case nullSlot
        /// The slot address is not aligned to a pointer.
        case misalignedSlot
        /// The slot was made from something that names no function pointer: a key path to
        /// a computed property, or a field or pointee that is not pointer-sized. The string
        /// says which and why.
        case invalidSlot(String)
        /// The slot holds NULL and the hook is a before or after hook, which needs an original.
        case emptySlot
        /// The slot is already hooked with a signature of other types (names and type
        /// qualifiers aside): every hook of a slot must describe its function the same way.
        case signatureMismatch(installed: String)
        /// A typed block's Swift type does not match the signature at `position`.
        case typeMismatch(position: CallInterfaceError.Position, swiftType: String, cType: String)
        /// A typed block has a different number of arguments than the signature.
        case argumentCountMismatch(expected: Int, actual: Int)
        /// The signature cannot be passed on this platform.
        case unsupportedSignature(CallInterfaceError)
        /// libffi could not allocate a closure (for example under a policy that forbids
        /// pages that are writable and executable).
        case closureAllocationFailed
        /// libffi refused to prepare the closure (its `ffi_status`).
        case closurePreparationFailed(status: Int)
        /// The slot kept changing under a concurrent writer while the hook was being installed.
        case slotContention
        /// The slot's address is not mapped in this process.
        case unmappedSlot
        /// The slot is in read-only memory; ``HookOptions/liftsPageProtection`` allows writing it.
        case readOnlySlot
        /// The page protection could not be lifted (`mprotect` failed).
        case protectionChangeFailed
        /// Waiting for reclamation from inside a hooked call, or installing or reading
        /// ``Hook/statistics`` from a block that runs within the library's own install or
        /// removal on the same thread (for an allocation it makes, with `malloc` hooked): each
        /// would wait for itself.
        case calledFromHookBlock
        /// No loaded object's path ends with the name given for an import-table hook, and
        /// none has it as its soname.
        case objectNotFound(String)
        /// No object in the scope of an import-table hook imports the symbol: it has no
        /// JUMP_SLOT or GLOB_DAT entry for it.
        case symbolNotImported(String)
    }

    /// The slot's address, when the error is about a slot.
    public var slot: UInt?
    /// The canonical encoding of the signature involved, when there is one.
    public var signature: String?
    /// What went wrong.
    public var code: Code

    /// Creates an error.
    public init(slot: UInt?, signature: String?, code: Code) {
        self.slot = slot
        self.signature = signature
        self.code = code
    }

    /// What went wrong, with the slot and signature, on one line.
    public var description: String {
        switch code {
        case .nullSlot: cannotHook("the slot address is NULL")
        case .misalignedSlot:
            cannotHook("the slot address is not aligned to \(MemoryLayout<UnsafeRawPointer>.alignment) bytes")
        case .invalidSlot(let reason): cannotHook(reason)
        case .emptySlot: cannotHook("it holds NULL, and a before or after hook needs an original to run")
        case .signatureMismatch(let installed):
            cannotHook(
                "it is already hooked with signature \(quoted(installed)); every hook of a slot must use the same types"
            )
        case .typeMismatch(let position, let swiftType, let cType):
            cannotHook("the block's \(position) is \(swiftType), which does not match C type \(cType)")
        case .argumentCountMismatch(let expected, let actual):
            cannotHook("the block takes \(actual) arguments where the signature has \(expected)")
        case .unsupportedSignature(let error): cannotHook("\(error)")
        case .closureAllocationFailed:
            cannotHook("libffi could not allocate a closure (is mapping writable and executable memory forbidden?)")
        case .closurePreparationFailed(let status):
            cannotHook("libffi refused to prepare the closure (ffi_status \(status))")
        case .slotContention: cannotHook("the slot kept changing under another writer")
        case .unmappedSlot: cannotHook("no memory is mapped at that address")
        case .readOnlySlot:
            cannotHook(
                "the slot is in read-only memory (pass .liftsPageProtection to make its page writable while it is written)"
            )
        case .objectNotFound(let object):
            cannotHook("no loaded object has a path ending in \(quoted(object)) or that soname")
        case .symbolNotImported(let symbol):
            cannotHook("no object in scope imports \(quoted(symbol)) (it has no JUMP_SLOT or GLOB_DAT entry for it)")
        // Not only an install writes a slot: a removal writes the original back.
        case .protectionChangeFailed:
            "the page protection of \(slotName ?? "the slot")\(signaturePhrase) could not be changed (mprotect failed)"
        case .calledFromHookBlock:
            "called from inside a hook block, where it would wait for itself (waitForReclamation() in a hooked call, or an install or a read of Hook.statistics in a block that runs within the library's own install or removal on this thread)"
                + context
        }
    }

    /// `slot 0x…` with the address in 16 hex digits, when there is a slot.
    private var slotName: String? {
        slot.map { "slot 0x" + String($0, radix: 16).leftPadded(to: 16) }
    }

    /// ` with signature "…"` when there is a signature, else empty.
    private var signaturePhrase: String {
        signature.map { " with signature \(quoted($0))" } ?? ""
    }

    /// ` (slot 0x…, signature "…")` with what is known, or empty when neither is.
    private var context: String {
        let parts = [slotName, signature.map { "signature \(quoted($0))" }].compactMap { $0 }
        return parts.isEmpty ? "" : " (\(parts.joined(separator: ", ")))"
    }

    /// An install failure: `cannot hook slot 0x… with signature "…": reason`.
    private func cannotHook(_ reason: String) -> String {
        "cannot hook" + (slotName.map { " " + $0 } ?? "") + signaturePhrase + ": " + reason
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
