/// A type encoding that could not be read: what kind of problem, where, and what it is in words.
///
/// `offset` counts UTF-8 bytes from the start of `encoding`. The description is the message,
/// the offset and the input quoted, so it can be shown to a user as it is:
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
    /// What kind of problem an encoding has: one of the static members below.
    ///
    /// A code is a struct rather than an enum so that new kinds of problem can be added
    /// without breaking a `switch` in code that uses the library: compare with `==`.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Value: String, Sendable {
            case emptyInput, unexpectedEnd, unknownTypeCode, unexpectedCharacter, unbalancedBracket
            case missingArrayCount, numberOverflow, sizeOverflow, nestingTooDeep, bitFieldOutsideAggregate
            case malformedBitField, invalidBitFieldPlacement, opaqueValue, voidValue, invalidComplex
            case danglingQualifier, unterminatedName, invalidName, trailingCharacters
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The encoding is the empty string.
        public static var emptyInput: Self { Self(.emptyInput) }
        /// The input stops where more was needed.
        public static var unexpectedEnd: Self { Self(.unexpectedEnd) }
        /// A byte that starts no type.
        public static var unknownTypeCode: Self { Self(.unknownTypeCode) }
        /// A byte other than the one the grammar needs at this place.
        public static var unexpectedCharacter: Self { Self(.unexpectedCharacter) }
        /// A closing bracket that does not match the innermost open one, or closes nothing.
        public static var unbalancedBracket: Self { Self(.unbalancedBracket) }
        /// An array `[` with no element count before its element type.
        public static var missingArrayCount: Self { Self(.missingArrayCount) }
        /// A number (array count, bit-field offset or width) too large to represent.
        public static var numberOverflow: Self { Self(.numberOverflow) }
        /// A type whose size exceeds ``CType/maximumSize``.
        public static var sizeOverflow: Self { Self(.sizeOverflow) }
        /// Nesting deeper than ``CType/maximumNestingDepth``.
        public static var nestingTooDeep: Self { Self(.nestingTooDeep) }
        /// A bit-field `b` outside a struct or union.
        public static var bitFieldOutsideAggregate: Self { Self(.bitFieldOutsideAggregate) }
        /// A bit-field that is not in GNU form `bOFFSETTYPEWIDTH`, or whose type is not an integer.
        public static var malformedBitField: Self { Self(.malformedBitField) }
        /// A bit-field wider than its type, or placed before the end of the previous field.
        public static var invalidBitFieldPlacement: Self { Self(.invalidBitFieldPlacement) }
        /// An opaque struct or union (`{Name}`) where its size is needed.
        public static var opaqueValue: Self { Self(.opaqueValue) }
        /// `v` where a value is needed (an argument, field, array element or pointee of a complex).
        public static var voidValue: Self { Self(.voidValue) }
        /// `j` followed by something that is not an arithmetic scalar.
        public static var invalidComplex: Self { Self(.invalidComplex) }
        /// A qualifier (`r n N o O R V A`) with no type after it.
        public static var danglingQualifier: Self { Self(.danglingQualifier) }
        /// A `"` that opens a name or class name and is never closed.
        public static var unterminatedName: Self { Self(.unterminatedName) }
        /// A byte that cannot appear in a struct or union name.
        public static var invalidName: Self { Self(.invalidName) }
        /// Characters after a complete type where none may follow.
        public static var trailingCharacters: Self { Self(.trailingCharacters) }

        /// The code's name, as the static member is spelled (`unknownTypeCode`).
        public var description: String { value.rawValue }
    }

    /// What kind of problem it is.
    public var code: Code
    /// The whole encoding that was being read.
    public var encoding: String
    /// The UTF-8 byte offset in `encoding` where the problem was found.
    public var offset: Int
    /// What is wrong there, in words, without the position: `unknown type code 'x'`.
    public var message: String

    /// Creates an error for `encoding` at byte `offset`.
    public init(code: Code, encoding: String, offset: Int, message: String) {
        self.code = code
        self.encoding = encoding
        self.offset = offset
        self.message = message
    }

    /// Creates the error the parser reports for `problem`.
    package init(encoding: String, offset: Int, problem: Problem) {
        self.init(code: problem.code, encoding: encoding, offset: offset, message: problem.message)
    }

    /// The message, the offset and the quoted input (or the part of it around the offset), on one line.
    public var description: String {
        "\(message) at offset \(offset) in \(quotedExcerpt)"
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

extension EncodingError {
    /// A problem the parser found, with the details its message needs.
    package enum Problem: Sendable, Hashable {
        case emptyInput
        case unexpectedEnd(expected: String)
        case unknownTypeCode(Character)
        case unexpectedCharacter(Character, expected: String)
        case unbalancedBracket(found: Character, expected: Character?)
        case missingArrayCount
        case numberOverflow
        case sizeOverflow
        case nestingTooDeep(limit: Int)
        case bitFieldOutsideAggregate
        case malformedBitField(String)
        case invalidBitFieldPlacement(String)
        case opaqueValue(name: String)
        case voidValue
        case invalidComplex
        case danglingQualifier
        case unterminatedName
        case invalidName
        case trailingCharacters

        /// The code of this kind of problem.
        package var code: Code {
            switch self {
            case .emptyInput: .emptyInput
            case .unexpectedEnd: .unexpectedEnd
            case .unknownTypeCode: .unknownTypeCode
            case .unexpectedCharacter: .unexpectedCharacter
            case .unbalancedBracket: .unbalancedBracket
            case .missingArrayCount: .missingArrayCount
            case .numberOverflow: .numberOverflow
            case .sizeOverflow: .sizeOverflow
            case .nestingTooDeep: .nestingTooDeep
            case .bitFieldOutsideAggregate: .bitFieldOutsideAggregate
            case .malformedBitField: .malformedBitField
            case .invalidBitFieldPlacement: .invalidBitFieldPlacement
            case .opaqueValue: .opaqueValue
            case .voidValue: .voidValue
            case .invalidComplex: .invalidComplex
            case .danglingQualifier: .danglingQualifier
            case .unterminatedName: .unterminatedName
            case .invalidName: .invalidName
            case .trailingCharacters: .trailingCharacters
            }
        }

        /// One line that says what is wrong, without the position.
        package var message: String {
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
    String(quote) + escaped(text, quote: quote) + String(quote)
}

/// `text` for a one-line error message: a backslash, `quote` (when given), a newline, a tab
/// and other control characters written as escapes (`\u{…}` for the others).
package func escaped(_ text: String, quote: Character? = nil) -> String {
    var result = ""
    let quoteScalar = quote?.unicodeScalars.first
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\\": result += "\\\\"
        case "\n": result += "\\n"
        case "\t": result += "\\t"
        case _ where scalar == quoteScalar: result += "\\\(scalar)"
        case _ where scalar.value < 0x20 || scalar.value == 0x7F:
            result += "\\u{\(String(scalar.value, radix: 16))}"
        default: result.unicodeScalars.append(scalar)
        }
    }
    return result
}
