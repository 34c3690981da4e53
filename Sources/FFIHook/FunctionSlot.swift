/// A place in memory that holds a C function pointer: a field of a struct of callbacks, an
/// entry of a table, an import-table entry.
///
/// A slot is just an address; it does not keep the memory alive. Hooking a slot writes a
/// closure's address into it, so the memory must be writable and stay valid while hooks are
/// installed.
public struct FunctionSlot: Sendable, Hashable, CustomStringConvertible {
    /// The slot's address (0 when made from something that is not a slot).
    public let address: UInt
    /// Why the slot is not usable, when it was made from a key path or a typed pointer that
    /// cannot name a function pointer, or given a fallback that is not a function pointer.
    var problem: String?
    /// The function calls get while the slot holds NULL (0 for none); see ``withFallback(_:)``.
    var fallbackAddress: UInt = 0
    /// What must stay alive while the slot is used, kept by every hook, replacement and attach
    /// installed on it until it is removed: the plan of an inline function's jump cell, whose
    /// memory goes once nothing refers to it. Not part of the slot's identity.
    package var owner: (any AnyObject & Sendable)?
    /// The function the slot stands for when what it holds is not that function (an inline
    /// function's jump cell holds its trampoline), or 0. Not part of the slot's identity.
    package var function: UInt = 0

    /// A slot at `address` whose memory `owner` keeps (see ``owner``), standing for
    /// `function` (see ``function``).
    package init(address: UInt, owner: any AnyObject & Sendable, function: UInt = 0) {
        self.address = address
        self.problem = nil
        self.owner = owner
        self.function = function
    }

    /// Equal when they are the same slot: the same address, problem and fallback.
    public static func == (lhs: FunctionSlot, rhs: FunctionSlot) -> Bool {
        lhs.address == rhs.address && lhs.problem == rhs.problem && lhs.fallbackAddress == rhs.fallbackAddress
    }

    /// Hashes the slot's address, problem and fallback.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(address)
        hasher.combine(problem)
        hasher.combine(fallbackAddress)
    }

    /// A slot at `address`, which must be aligned to a pointer and hold a C function pointer.
    ///
    /// Nothing is checked here: installing refuses a misaligned address with
    /// ``HookError/Code-swift.struct/misalignedSlot``, and one in unmapped or
    /// read-only memory with ``HookError/Code-swift.struct/unmappedSlot`` or
    /// ``HookError/Code-swift.struct/readOnlySlot``.
    public init(_ address: UnsafeMutableRawPointer) {
        self.address = UInt(bitPattern: address)
        self.problem = nil
    }

    /// A slot at a raw address, as a symbol lookup or a table walk yields it; installing
    /// checks that it is not 0 and is aligned.
    public init(address: UInt) {
        self.address = address
        self.problem = nil
    }

    /// A slot at a typed pointer to a C function pointer, such as a pointer to an imported
    /// `(@convention(c) (...) -> ...)?` variable.
    ///
    /// A pointer to something that is not pointer-sized (a whole struct of callbacks, say)
    /// gives a slot that installing refuses with
    /// ``HookError/Code-swift.struct/invalidSlot``; use ``field(_:of:)`` for one
    /// field of a struct.
    public init<Pointee>(_ pointer: UnsafeMutablePointer<Pointee>) {
        self.address = UInt(bitPattern: pointer)
        self.problem = Self.sizeProblem(of: Pointee.self, what: "a pointer to \(Pointee.self)")
    }

    /// The slot of a function-pointer field of a C struct, such as a table of callbacks.
    ///
    /// ```swift
    /// let slot = FunctionSlot.field(\ct_table.open, of: tablePointer)
    /// ```
    ///
    /// A key path that names no stored field (a computed property), or a field that is not
    /// pointer-sized, gives a slot that installing refuses with
    /// ``HookError/Code-swift.struct/invalidSlot``, which says why.
    public static func field<Table>(_ field: PartialKeyPath<Table>, of table: UnsafeMutablePointer<Table>)
        -> FunctionSlot
    {
        guard let offset = MemoryLayout<Table>.offset(of: field) else {
            return FunctionSlot(address: 0, problem: fieldProblem(field))
        }
        return FunctionSlot(address: UInt(bitPattern: table) + UInt(offset), problem: fieldProblem(field))
    }

    /// Why `field` cannot name a function-pointer slot of `Table` (no stored field, or not
    /// pointer-sized), or `nil` when it can; table layouts check their slots with it too.
    static func fieldProblem<Table>(_ field: PartialKeyPath<Table>) -> String? {
        guard MemoryLayout<Table>.offset(of: field) != nil else {
            return "the key path names no stored field of \(Table.self)"
        }
        // The key path's value type is only known at run time: open it to measure it.
        func problem<Value>(_ value: Value.Type) -> String? {
            sizeProblem(of: value, what: "field \(field)")
        }
        return _openExistential(type(of: field).valueType, do: problem)
    }

    /// Why a slot holding a `Value` cannot hold a function pointer, or `nil` when it can.
    /// `what` is only described when there is a problem: describing a key path is slow, and
    /// a slot is made on paths that should be cheap (and in children after `fork`, where the
    /// Swift runtime's lazy lookups may wait on a thread the child does not have).
    static func sizeProblem<Value>(of value: Value.Type, what: @autoclosure () -> String) -> String? {
        let size = MemoryLayout<Value>.size
        let pointerSize = MemoryLayout<UnsafeRawPointer>.size
        guard size != pointerSize else { return nil }
        return "\(what()) is \(size) bytes, not a \(pointerSize)-byte function pointer"
    }

    private init(address: UInt, problem: String?) {
        self.address = address
        self.problem = problem
    }

    /// The slot's address in hexadecimal.
    public var description: String {
        "FunctionSlot(0x\(String(address, radix: 16)))"
    }

    /// The address as a pointer, `nil` for a null slot.
    var pointer: UnsafeMutableRawPointer? { UnsafeMutableRawPointer(bitPattern: address) }
}
