public import CHookBench
public import FFIHook

/// One of the C signatures under test, with its slot in CHookBench.
public enum BenchSignature: Int, CaseIterable, Codable, Sendable {
    /// `int (int, int)`
    case intInt
    /// `void (void)`
    case void
    /// `double (double, double)`
    case double
    /// `int (int, int, int, int, int, int)`
    case sixInts
    /// `double (struct hb_point)`, a 16-byte struct in registers.
    case struct16
    /// `struct hb_record (struct hb_record)`, a 40-byte struct in memory both ways.
    case struct40

    /// The C enumerator.
    public var c: hb_signature { hb_signature(rawValue: UInt32(rawValue)) }

    /// The C declaration, short.
    public var title: String {
        switch self {
        case .intInt: "int(int, int)"
        case .void: "void(void)"
        case .double: "double(double, double)"
        case .sixInts: "int(6 × int)"
        case .struct16: "double(16-byte struct)"
        case .struct40: "40-byte struct(40-byte struct)"
        }
    }

    /// The slot that holds the function.
    public var slot: FunctionSlot { FunctionSlot(UnsafeMutableRawPointer(hb_slot(c))) }

    /// The library's signature, parsed from the encoding C reports.
    public var signature: Signature {
        let encoding = String(cString: hb_encoding(c))
        do {
            return try Signature(encoding)
        } catch {
            fatalError("the encoding \(encoding) of \(title) does not parse: \(error)")
        }
    }

    /// Whether one call through the slot returns what the original returns.
    public var slotGivesOriginalResult: Bool { hb_check_slot(c) != 0 }
}
