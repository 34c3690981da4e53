/// A type encoding that could not be read, with the place and the reason.
///
/// `offset` counts UTF-8 bytes from the start of `encoding`. The description quotes the
/// input and marks the offending position, so it can be shown to a user as it is:
///
/// ```
/// unknown type code 'x' at offset 3 in "{S=x}"
/// ```
///
/// A long input is quoted only around the offset, up to 32 characters (Unicode scalars) on
/// either side; `…` outside the quotes marks what is left out, and the total length follows:
///
/// ```
/// unknown type code '!' at offset 1000000 in …"iiiiiiiiiiiiiiiiiiiiiiiiiiiiiiii!" (1000001 bytes)
/// ```
public struct EncodingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why an encoding was refused.
    public enum Reason: Sendable, Hashable {
        /// The encoding is the empty string.
        case emptyInput
        /// The input stops where more was needed; the payload says what was expected.
        case unexpectedEnd(expected: String)
        /// A byte that starts no type.
        case unknownTypeCode(Character)
        /// A byte other than the one the grammar needs at this place.
        case unexpectedCharacter(Character, expected: String)
        /// A closing bracket that does not match the innermost open one.
        case unbalancedBracket(found: Character, expected: Character?)
        /// An array `[` with no element count before its element type.
        case missingArrayCount
        /// A number (array count, bit-field offset or width) too large to represent.
        case numberOverflow
        /// A type whose size exceeds ``CType/maximumSize``.
        case sizeOverflow
        /// Nesting deeper than ``CType/maximumNestingDepth``.
        case nestingTooDeep(limit: Int)
        /// A bit-field `b` outside a struct or union.
        case bitFieldOutsideAggregate
        /// A bit-field that is not in GNU form `bOFFSETTYPEWIDTH`, or whose type is not an integer.
        case malformedBitField(String)
        /// A bit-field wider than its type, or placed before the end of the previous field.
        case invalidBitFieldPlacement(String)
        /// An opaque struct or union (`{Name}`) where its size is needed.
        case opaqueValue(name: String)
        /// `v` where a value is needed (an argument, field, array element or pointee of a complex).
        case voidValue
        /// `j` followed by something that is not an arithmetic scalar.
        case invalidComplex
        /// A qualifier (`r n N o O R V A`) with no type after it.
        case danglingQualifier
        /// A `"` that opens a name or class name and is never closed.
        case unterminatedName
        /// A byte that cannot appear in a struct or union name.
        case invalidName
        /// Characters after a complete type where none may follow.
        case trailingCharacters
    }

    /// The whole encoding that was being read.
    public var encoding: String
    /// The UTF-8 byte offset in `encoding` where the problem was found.
    public var offset: Int
    /// What is wrong there.
    public var reason: Reason

    /// Creates an error for `encoding` at byte `offset`.
    public init(encoding: String, offset: Int, reason: Reason) {
        self.encoding = encoding
        self.offset = offset
        self.reason = reason
    }

    /// The reason, the offset and the quoted input (or the part of it around the offset), on one line.
    public var description: String {
        "\(reason.summary) at offset \(offset) in \(quotedExcerpt)"
    }

    /// How many characters (Unicode scalars) of the input the description quotes on either side
    /// of the offset; the scalar at the offset is quoted as well.
    static let quotedRadius = 32

    /// The input quoted whole when it fits in the window around the offset; otherwise the
    /// window, with `…` before and after the quotes where input is left out and the total
    /// length in bytes.
    private var quotedExcerpt: String {
        let utf8 = encoding.utf8
        // The offset, clamped to the input and moved back to the start of its scalar, so the
        // window never splits one.
        var center = utf8.index(utf8.startIndex, offsetBy: min(max(offset, 0), utf8.count))
        while center != utf8.endIndex && center != utf8.startIndex && UTF8.isContinuation(utf8[center]) {
            utf8.formIndex(before: &center)
        }
        let scalars = encoding.unicodeScalars
        let radius = Self.quotedRadius
        let start = scalars.index(center, offsetBy: -radius, limitedBy: scalars.startIndex) ?? scalars.startIndex
        let end = scalars.index(center, offsetBy: radius + 1, limitedBy: scalars.endIndex) ?? scalars.endIndex
        guard start != scalars.startIndex || end != scalars.endIndex else { return quoted(encoding) }
        let window = quoted(String(scalars[start..<end]))
        let before = start == scalars.startIndex ? "" : "…"
        let after = end == scalars.endIndex ? "" : "…"
        return "\(before)\(window)\(after) (\(utf8.count) bytes)"
    }
}

extension EncodingError.Reason {
    /// One line that says what is wrong, without the position.
    public var summary: String {
        switch self {
        case .emptyInput: "empty encoding"
        case .unexpectedEnd(let expected): "unexpected end of encoding, expected \(expected)"
        case .unknownTypeCode(let c): "unknown type code \(quoted(String(c), quote: "'"))"
        case .unexpectedCharacter(let c, let expected):
            "unexpected \(quoted(String(c), quote: "'")), expected \(expected)"
        case .unbalancedBracket(let found, let expected):
            if let expected {
                "unbalanced bracket: found '\(found)' where '\(expected)' closes the open aggregate"
            } else {
                "unbalanced bracket: '\(found)' closes nothing"
            }
        case .missingArrayCount: "array without an element count"
        case .numberOverflow: "number too large"
        case .sizeOverflow: "type larger than \(CType.maximumSize) bytes"
        case .nestingTooDeep(let limit): "nesting deeper than \(limit) levels"
        case .bitFieldOutsideAggregate: "bit-field outside a struct or union"
        case .malformedBitField(let why): "malformed bit-field: \(why)"
        case .invalidBitFieldPlacement(let why): "invalid bit-field: \(why)"
        case .opaqueValue(let name): "opaque aggregate '\(shortened(name))' used where its size is needed"
        case .voidValue: "void used as a value"
        case .invalidComplex: "complex type needs an arithmetic scalar after 'j'"
        case .danglingQualifier: "qualifier without a type"
        case .unterminatedName: "unterminated quoted name"
        case .invalidName: "invalid character in aggregate name"
        case .trailingCharacters: "trailing characters after the type"
        }
    }
}

/// `name` as it is when short; otherwise its first 64 characters (Unicode scalars) and `…`.
private func shortened(_ name: String) -> String {
    let scalars = name.unicodeScalars
    let limit = 2 * EncodingError.quotedRadius
    guard let cut = scalars.index(scalars.startIndex, offsetBy: limit, limitedBy: scalars.endIndex),
        cut != scalars.endIndex
    else { return name }
    return String(scalars[..<cut]) + "…"
}

/// Quotes `text` for an error message, escaping control and non-ASCII bytes.
package func quoted(_ text: String, quote: Character = "\"") -> String {
    var result = String(quote)
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\\": result += "\\\\"
        case "\n": result += "\\n"
        case "\t": result += "\\t"
        case _ where scalar == quote.unicodeScalars.first!: result += "\\\(quote)"
        case _ where scalar.value < 0x20 || scalar.value == 0x7F:
            result += "\\u{\(String(scalar.value, radix: 16))}"
        default: result.unicodeScalars.append(scalar)
        }
    }
    result.append(quote)
    return result
}
