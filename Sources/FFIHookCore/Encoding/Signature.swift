/// A C function's return type and argument types, read from a type encoding.
///
/// The first type of the encoding is the return type, the rest are the arguments, in the
/// form compilers emit: `"i^vi"` is `int f(void *, int)`, `"{P=dd}{P=dd}d"` returns a
/// struct of two doubles. Method encodings with frame offsets are accepted and the offsets
/// ignored: `"v24@0:8@16"`.
///
/// Every argument and the return type must be a complete value type: `v` only as the return
/// type, no opaque `{Name}` and no bit-field outside an aggregate. An array argument is
/// kept as written; a call passes it as C does, as a pointer to its first element.
///
/// A signature can also describe one call shape of a variadic function: the fixed arguments,
/// then the concrete variadic ones, with ``fixedArgumentCount`` saying where the variadic
/// ones start (see ``init(variadic:fixedArgumentCount:)``). Every hook and call interface
/// made from such a signature prepares its call for that shape.
public struct Signature: Sendable, Hashable, CustomStringConvertible {
    /// The type the function returns (`void` when it returns nothing).
    public let returnType: CType
    /// The types of the arguments, in order.
    public let argumentTypes: [CType]
    /// For one call shape of a variadic function, how many leading arguments are fixed (the
    /// rest are variadic); `nil` for a function without variadic arguments.
    ///
    /// Two signatures with the same types but different counts are different signatures:
    /// they are not equal, and a slot hooked with one cannot be hooked with the other.
    public let fixedArgumentCount: Int?
    /// The encoding without names and qualifiers, with a variadic call shape's count: what
    /// interfaces are shared by (see ``abiKey``). Made once, here: every install asks for it.
    private let storedABIKey: String

    /// Reads a signature from a type encoding.
    ///
    /// - Throws: ``EncodingError`` naming the byte offset and reason when `encoding` is not
    ///   a well-formed signature. Any input string is safe to pass: the parser neither
    ///   traps nor recurses without bound.
    public init(_ encoding: String) throws(EncodingError) {
        var parser = EncodingParser(encoding)
        (returnType, argumentTypes) = try parser.parseSignature()
        fixedArgumentCount = nil
        storedABIKey = Self.abiKey(returnType, argumentTypes, nil)
    }

    /// The frame offsets of a method encoding (`i24@0:8i16i20`): the number after the return
    /// type (the frame's size), then the one after each argument; nil when the encoding does
    /// not parse or a type has no offset.
    package static func frameOffsets(of encoding: String) -> [Int]? {
        var parser = EncodingParser(encoding)
        guard (try? parser.parseSignature()) != nil else { return nil }
        let offsets = parser.frameOffsets.compactMap { $0 }
        return offsets.count == parser.frameOffsets.count ? offsets : nil
    }

    /// Reads one call shape of a variadic function from a type encoding: the fixed arguments,
    /// then the concrete variadic ones of this shape.
    ///
    /// `open(const char *, int, ...)` called as `open(path, flags, mode)` is
    /// `Signature(variadic: "i*ii", fixedArgumentCount: 2)`. Variadic arguments are written
    /// as C's default promotions make them: `d` for a `float`, `i` for `char`, `short` and
    /// `_Bool`.
    ///
    /// The count and the variadic types are checked when a call interface or a hook is
    /// prepared from the signature, not here: a count outside `0...argumentTypes.count`
    /// or a promotable variadic type is a ``CallInterfaceError`` then.
    ///
    /// - Throws: ``EncodingError`` as ``init(_:)`` does.
    public init(variadic encoding: String, fixedArgumentCount: Int) throws(EncodingError) {
        try self.init(encoding)
        self = self.variadic(fixedArgumentCount: fixedArgumentCount)
    }

    /// Makes a signature from types already read.
    ///
    /// - Precondition: no argument is `void`, opaque or a bit-field; the return type is not
    ///   opaque or a bit-field.
    public init(returning returnType: CType, arguments argumentTypes: [CType]) {
        for (index, type) in argumentTypes.enumerated() {
            precondition(
                !type.isVoid && !type.isOpaque && !type.isBitField,
                "argument \(index) of a signature must be a complete value type, not \(type)")
        }
        precondition(
            !returnType.isOpaque && !returnType.isBitField,
            "the return type of a signature must be void or a complete value type, not \(returnType)")
        self.returnType = returnType
        self.argumentTypes = argumentTypes
        self.fixedArgumentCount = nil
        storedABIKey = Self.abiKey(returnType, argumentTypes, nil)
    }

    private init(_ signature: Signature, fixedArgumentCount: Int?) {
        self.returnType = signature.returnType
        self.argumentTypes = signature.argumentTypes
        self.fixedArgumentCount = fixedArgumentCount
        storedABIKey = Self.abiKey(returnType, argumentTypes, fixedArgumentCount)
    }

    /// This signature as one call shape of a variadic function whose first
    /// `fixedArgumentCount` arguments are fixed (see ``init(variadic:fixedArgumentCount:)``).
    ///
    /// The count is checked when a call interface or a hook is prepared from the result.
    public func variadic(fixedArgumentCount: Int) -> Signature {
        Signature(self, fixedArgumentCount: fixedArgumentCount)
    }

    /// The canonical encoding: the return type's then each argument's, without frame offsets.
    ///
    /// One adjacency would read back differently: an object `@` followed by an unknown `?`
    /// spells a block `@?`. Only there a frame offset `0` is kept between the two. The
    /// encoding has no place for ``fixedArgumentCount``: a variadic signature's encoding
    /// is that of its types alone.
    public var encoding: String { joinedEncoding(names: true) }

    /// The canonical encoding (see ``encoding``), followed for a variadic call shape by how
    /// many arguments are fixed: `i*ii (variadic after 2 fixed arguments)`.
    public var description: String { encoding + variadicNote }

    /// ` (variadic after N fixed arguments)` for a variadic call shape, else empty: what
    /// messages add after a quoted ``encoding``.
    package var variadicNote: String { Self.variadicNote(fixedArgumentCount) }

    /// ``variadicNote`` for a signature with `fixedArgumentCount`.
    package static func variadicNote(_ fixedArgumentCount: Int?) -> String {
        guard let fixedArgumentCount else { return "" }
        return " (variadic after \(fixedArgumentCount) fixed argument\(fixedArgumentCount == 1 ? "" : "s"))"
    }

    /// The encoding without names and qualifiers: signatures the ABI cannot tell apart share
    /// it. A variadic call shape adds its fixed-argument count, so that it never shares an
    /// interface with the fixed signature of the same types, nor with another count.
    package var abiKey: String { storedABIKey }

    /// What hooks of one slot must agree on: ``abiKey``, except that the integer and pointer
    /// types of a word or more that the platform's calling convention passes alike count as
    /// one type of their size: `int` and `unsigned int`; `long long`, `size_t`, any pointer,
    /// C string, object, class, selector or block. So `"qi^vQ"` (`write` as C declares it)
    /// and `"qi^vq"` (the same function seen from Swift, `Int` for `size_t`) can hook one
    /// slot together, while `char` and `unsigned char`, which callers widen differently,
    /// stay apart, as do aggregates, floating-point types and variadic call shapes.
    ///
    /// The slot keeps the signature of its first hook: its call interface passes the
    /// arguments and the result, and later hooks read them by size.
    package var slotSharingKey: String {
        var key = Self.sharingCode(returnType)
        for argument in argumentTypes { key += " " + Self.sharingCode(argument) }
        guard let fixedArgumentCount else { return key }
        return key + " variadic \(fixedArgumentCount)"
    }

    private static func sharingCode(_ type: CType) -> String {
        let word = MemoryLayout<UnsafeRawPointer>.size
        switch type.kind {
        case .primitive(let primitive) where primitive.isInteger && primitive != .bool && primitive.size >= 4:
            return "w\(primitive.size)"
        case .pointer, .cString, .object, .block, .objectClass, .selector:
            return "w\(word)"
        default:
            var text = ""
            type.appendEncoding(to: &text, names: false)
            return text
        }
    }

    private static func abiKey(_ returnType: CType, _ argumentTypes: [CType], _ fixedArgumentCount: Int?) -> String {
        let key = joinedEncoding(returnType, argumentTypes, names: false)
        guard let fixedArgumentCount else { return key }
        return key + " variadic \(fixedArgumentCount)"
    }

    private func joinedEncoding(names: Bool) -> String {
        Self.joinedEncoding(returnType, argumentTypes, names: names)
    }

    private static func joinedEncoding(_ returnType: CType, _ argumentTypes: [CType], names: Bool) -> String {
        var text = ""
        returnType.appendEncoding(to: &text, names: names)
        for argument in argumentTypes {
            var next = ""
            argument.appendEncoding(to: &next, names: names)
            if text.utf8.last == UInt8(ascii: "@") && next.utf8.first == UInt8(ascii: "?") { text += "0" }
            text += next
        }
        return text
    }
}

extension CType {
    var isBitField: Bool {
        if case .bitField = kind { return true }
        return false
    }
}
