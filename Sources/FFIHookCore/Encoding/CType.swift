/// A C type read from a type encoding, with its size, alignment and structure.
///
/// Values are immutable and cheap to copy. Size and alignment follow the C rules of the
/// platform the library runs on and agree with the compiler's `sizeof` and `_Alignof` for
/// every encoding the compiler emits. Two things an encoding cannot say are assumed:
/// aggregates are not packed and carry no extra alignment attribute, and every bit-field of
/// nonzero width is named (an unnamed one would not count towards the alignment).
public struct CType: Sendable, Hashable, CustomStringConvertible {
    /// What kind of type this is.
    public var kind: Kind { node.kind }
    /// The primitive of a primitive type, nil otherwise: ``kind`` without building it (each
    /// read of ``kind`` allocates the enum's box).
    package var primitiveKind: Primitive? { node.primitiveValue }
    /// Whether ``kind`` is an array, without building it.
    package var isArray: Bool { node.isArray }
    /// Whether a value of the type is an address (see ``KindNode/isAddress``).
    package var isAddress: Bool { node.isAddress }
    /// The shape, stored without enum payloads (see ``KindNode``).
    private let node: KindNode
    /// The qualifiers written before the type (`r` const, `n` in, ...).
    public let qualifiers: Qualifiers
    /// The size in bytes, as `sizeof` gives it (0 for `void`, opaque and empty aggregates).
    public let size: Int
    /// The alignment in bytes, as `_Alignof` gives it (1 for `void` and opaque aggregates).
    public let alignment: Int

    /// The largest size a type may have, in bytes; larger ones are refused while parsing.
    public static let maximumSize = Int(Int32.max)
    /// The deepest nesting of pointers, arrays, structs, unions and complex types accepted.
    public static let maximumNestingDepth = 64

    /// Reads exactly one type from `encoding`, as ``Signature/init(_:)`` reads a signature.
    ///
    /// - Throws: ``EncodingError`` naming the offset and the problem when `encoding` is not
    ///   exactly one well-formed type. Any input string is safe to pass.
    public init(_ encoding: String) throws(EncodingError) {
        var parser = EncodingParser(encoding)
        self = try parser.parseSingleType()
    }

    /// Reads exactly one type from `encoding`, under the initializer's earlier label.
    @available(*, deprecated, renamed: "init(_:)")
    public init(encoding: String) throws(EncodingError) {
        try self.init(encoding)
    }

    init(kind: Kind, qualifiers: Qualifiers = [], size: Int, alignment: Int) {
        self.node = KindNode(kind)
        self.qualifiers = qualifiers
        self.size = size
        self.alignment = alignment
    }

    /// The canonical encoding: names and qualifiers kept, frame offsets dropped.
    ///
    /// Reading it back gives an equal `CType`.
    public var description: String { encoding }

    /// The canonical encoding of this type (see ``description``).
    public var encoding: String {
        var text = ""
        appendEncoding(to: &text, names: true)
        return text
    }
}

// MARK: - Kinds

extension CType {
    /// The shape of a ``CType``.
    public indirect enum Kind: Sendable, Hashable {
        /// `v`: no value; only valid as a return type or pointee.
        case void
        /// A scalar number or `_Bool`.
        case primitive(Primitive)
        /// `^T`: a pointer to `pointee`; `^?` points to a function, `^v` to anything.
        case pointer(pointee: CType)
        /// `*`: `char *`, a C string.
        case cString
        /// `@` or `@"Name"`: an Objective-C object pointer, with its class name when given.
        case object(className: String?)
        /// `@?`: a block pointer.
        case block
        /// `#`: an Objective-C `Class`.
        case objectClass
        /// `:`: an Objective-C selector.
        case selector
        /// `?`: an unknown type, most often a function; pointer-sized when used as a value.
        case unknown
        /// `[NT]`: `count` elements of `element`.
        case array(count: Int, element: CType)
        /// `{name=...}`: a struct; `fields` is `nil` for an opaque `{name}`.
        case structure(name: String?, fields: [Field]?)
        /// `(name=...)`: a union; `fields` is `nil` for an opaque `(name)`.
        case union(name: String?, fields: [Field]?)
        /// `jT`: a complex number whose parts have type `part`.
        case complex(part: Primitive)
        /// `bOFFSETTYPEWIDTH`: a bit-field of a struct or union.
        case bitField(BitField)
    }

    /// One member of a struct or union.
    public struct Field: Sendable, Hashable {
        /// The member's name when the encoding gives it (`"name"` before its type).
        public let name: String?
        /// The member's type.
        public let type: CType
        /// The byte offset of the member in its aggregate; for a bit-field, the byte holding its first bit.
        public let offset: Int
    }

    /// A bit-field's position and width, in the GNU runtime's form.
    public struct BitField: Sendable, Hashable {
        /// The offset of the first bit from the start of the aggregate.
        public let bitOffset: Int
        /// The declared integer type.
        public let base: Primitive
        /// The width in bits (0 for a zero-width separator).
        public let width: Int
    }

    /// The qualifiers of a method-type encoding.
    public struct Qualifiers: OptionSet, Sendable, Hashable {
        /// One bit per qualifier.
        public let rawValue: UInt8
        /// Creates a set from its bits.
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// `r`: const.
        public static let const = Qualifiers(rawValue: 1 << 0)
        /// `n`: in.
        public static let `in` = Qualifiers(rawValue: 1 << 1)
        /// `N`: inout.
        public static let `inout` = Qualifiers(rawValue: 1 << 2)
        /// `o`: out.
        public static let out = Qualifiers(rawValue: 1 << 3)
        /// `O`: bycopy.
        public static let bycopy = Qualifiers(rawValue: 1 << 4)
        /// `R`: byref.
        public static let byref = Qualifiers(rawValue: 1 << 5)
        /// `V`: oneway.
        public static let oneway = Qualifiers(rawValue: 1 << 6)
        /// `A`: atomic.
        public static let atomic = Qualifiers(rawValue: 1 << 7)

        /// Each qualifier with its code, in the order the canonical encoding prints them.
        static let codes: [(Qualifiers, UInt8)] = [
            (.const, UInt8(ascii: "r")), (.in, UInt8(ascii: "n")), (.inout, UInt8(ascii: "N")),
            (.out, UInt8(ascii: "o")), (.bycopy, UInt8(ascii: "O")), (.byref, UInt8(ascii: "R")),
            (.oneway, UInt8(ascii: "V")), (.atomic, UInt8(ascii: "A")),
        ]

        static func forCode(_ byte: UInt8) -> Qualifiers? {
            codes.first { $0.1 == byte }?.0
        }
    }
}

// MARK: - Questions about a type

extension CType {
    /// Whether the type is a struct, union, array or complex number.
    public var isAggregate: Bool {
        switch kind {
        case .structure, .union, .array, .complex: true
        default: false
        }
    }

    /// Whether the type is an opaque `{Name}` or `(Name)` whose members are unknown.
    public var isOpaque: Bool {
        switch kind {
        case .structure(_, nil), .union(_, nil): true
        default: false
        }
    }

    /// Whether the type is `void`.
    public var isVoid: Bool {
        if case .void = kind { return true }
        return false
    }

    /// The same type without qualifiers.
    public var unqualified: CType {
        CType(kind: kind, size: size, alignment: alignment)
    }
}

// MARK: - Storage

/// A ``CType/Kind`` stored as plain fields.
///
/// Swift keeps the case of a multi-payload indirect enum in the spare high bits of the
/// pointer to its payload box. Leak checkers (LeakSanitizer, valgrind) do not recognise such
/// a tagged value as a pointer, so every long-lived type (held by a hooked slot, say) would
/// be reported as leaked. Storing the shape in a class with untagged references keeps the
/// library clean under those tools; ``CType/kind`` rebuilds the enum on demand.
final class KindNode: Sendable, Hashable {
    private enum Tag: UInt8 {
        case void, primitive, pointer, cString, object, block, objectClass, selector, unknown
        case array, structure, union, complex, bitField
    }

    private let tag: Tag
    private let primitive: CType.Primitive?
    private let name: String?
    private let count: Int
    private let width: Int
    private let child: CType?
    private let fields: [CType.Field]?

    init(_ kind: CType.Kind) {
        var primitive: CType.Primitive?
        var name: String?
        var count = 0
        var width = 0
        var child: CType?
        var fields: [CType.Field]?
        switch kind {
        case .void: tag = .void
        case .primitive(let value):
            tag = .primitive
            primitive = value
        case .pointer(let pointee):
            tag = .pointer
            child = pointee
        case .cString: tag = .cString
        case .object(let className):
            tag = .object
            name = className
        case .block: tag = .block
        case .objectClass: tag = .objectClass
        case .selector: tag = .selector
        case .unknown: tag = .unknown
        case .array(let elements, let element):
            tag = .array
            count = elements
            child = element
        case .structure(let aggregateName, let members):
            tag = .structure
            name = aggregateName
            fields = members
        case .union(let aggregateName, let members):
            tag = .union
            name = aggregateName
            fields = members
        case .complex(let part):
            tag = .complex
            primitive = part
        case .bitField(let bitField):
            tag = .bitField
            primitive = bitField.base
            count = bitField.bitOffset
            width = bitField.width
        }
        self.primitive = primitive
        self.name = name
        self.count = count
        self.width = width
        self.child = child
        self.fields = fields
    }

    var kind: CType.Kind {
        switch tag {
        case .void: .void
        case .primitive: .primitive(primitive!)
        case .pointer: .pointer(pointee: child!)
        case .cString: .cString
        case .object: .object(className: name)
        case .block: .block
        case .objectClass: .objectClass
        case .selector: .selector
        case .unknown: .unknown
        case .array: .array(count: count, element: child!)
        case .structure: .structure(name: name, fields: fields)
        case .union: .union(name: name, fields: fields)
        case .complex: .complex(part: primitive!)
        case .bitField: .bitField(CType.BitField(bitOffset: count, base: primitive!, width: width))
        }
    }

    /// The primitive of a primitive type (nil for every other kind), read without
    /// rebuilding ``kind``.
    var primitiveValue: CType.Primitive? { tag == .primitive ? primitive : nil }
    /// Whether the type is an array, read without rebuilding ``kind``.
    var isArray: Bool { tag == .array }
    /// Whether a value of the type is an address (a pointer, string, object, block, class,
    /// selector, unknown or array), read without rebuilding ``kind``.
    var isAddress: Bool {
        switch tag {
        case .pointer, .cString, .object, .block, .objectClass, .selector, .unknown, .array: true
        default: false
        }
    }

    static func == (lhs: KindNode, rhs: KindNode) -> Bool {
        lhs === rhs
            || (lhs.tag == rhs.tag && lhs.primitive == rhs.primitive && lhs.name == rhs.name
                && lhs.count == rhs.count && lhs.width == rhs.width && lhs.child == rhs.child
                && lhs.fields == rhs.fields)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(tag)
        hasher.combine(primitive)
        hasher.combine(name)
        hasher.combine(count)
        hasher.combine(width)
        hasher.combine(child)
        hasher.combine(fields)
    }
}
