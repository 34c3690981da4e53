/// A place in memory that holds a C function pointer: a field of a struct of callbacks, an
/// entry of a table, an import-table entry.
///
/// A slot is just an address; it does not keep the memory alive. Hooking a slot writes a
/// closure's address into it, so the memory must be writable and stay valid while hooks are
/// installed.
public struct FunctionSlot: Sendable, Hashable, CustomStringConvertible {
    /// The slot's address (0 when made from something that is not a slot).
    public let address: UInt
    /// Why the slot is not usable, when it was made from a key path that names no stored field.
    let problem: String?

    /// A slot at `address`, which must be aligned to a pointer and hold a C function pointer.
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

    /// A slot at a typed pointer to a C function pointer.
    public init<Pointee>(_ pointer: UnsafeMutablePointer<Pointee>) {
        self.init(UnsafeMutableRawPointer(pointer))
    }

    /// The slot of a function-pointer field of a C struct, such as a table of callbacks.
    ///
    /// ```swift
    /// let slot = FunctionSlot.field(\ct_table.open, of: tablePointer)
    /// ```
    ///
    /// A key path that names no stored field (a computed property) gives a slot that
    /// installing refuses with ``HookError/Code-swift.enum/nullSlot``.
    public static func field<Table>(_ field: PartialKeyPath<Table>, of table: UnsafeMutablePointer<Table>)
        -> FunctionSlot
    {
        guard let offset = MemoryLayout<Table>.offset(of: field) else {
            return FunctionSlot(address: 0, problem: "\(field) is not a stored field of \(Table.self)")
        }
        return FunctionSlot(UnsafeMutableRawPointer(table) + offset)
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
