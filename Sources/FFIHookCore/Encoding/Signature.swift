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
public struct Signature: Sendable, Hashable, CustomStringConvertible {
    /// The type the function returns (`void` when it returns nothing).
    public let returnType: CType
    /// The types of the arguments, in order.
    public let argumentTypes: [CType]

    /// Reads a signature from a type encoding.
    ///
    /// - Throws: ``EncodingError`` naming the byte offset and reason when `encoding` is not
    ///   a well-formed signature. Any input string is safe to pass: the parser neither
    ///   traps nor recurses without bound.
    public init(_ encoding: String) throws(EncodingError) {
        var parser = EncodingParser(encoding)
        (returnType, argumentTypes) = try parser.parseSignature()
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
    }

    /// The canonical encoding: the return type's then each argument's, without frame offsets.
    ///
    /// One adjacency would read back differently: an object `@` followed by an unknown `?`
    /// spells a block `@?`. Only there a frame offset `0` is kept between the two.
    public var encoding: String { joinedEncoding(names: true) }

    /// The canonical encoding (see ``encoding``).
    public var description: String { encoding }

    /// The encoding without names and qualifiers: signatures the ABI cannot tell apart share it.
    package var abiKey: String { joinedEncoding(names: false) }

    private func joinedEncoding(names: Bool) -> String {
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
