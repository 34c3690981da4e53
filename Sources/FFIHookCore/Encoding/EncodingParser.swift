/// Reads type encodings into ``CType`` values.
///
/// The parser works on UTF-8 bytes and never traps: every malformed input becomes an
/// ``EncodingError``. Recursion is bounded by ``CType/maximumNestingDepth`` and every
/// number and size by ``CType/maximumSize``, so hostile input cannot exhaust the stack or
/// overflow arithmetic.
struct EncodingParser {
    /// Where a type is being read, which decides what it may be.
    enum Context {
        /// A type read on its own (`CType(_:)`): anything, including `v` and `{Name}`.
        case standalone
        /// The return type of a signature: `v` allowed.
        case returnValue
        /// An argument of a signature.
        case argument
        /// The pointee of `^`: `v` and opaque aggregates allowed.
        case pointee
        /// An array element or the part of a complex number.
        case element
        /// A member of a struct or union; `namedFields` tells whether members carry names.
        case field(namedFields: Bool)

        var allowsVoid: Bool {
            switch self {
            case .standalone, .returnValue, .pointee: true
            default: false
            }
        }

        var allowsOpaque: Bool {
            switch self {
            case .standalone, .pointee: true
            default: false
            }
        }
    }

    let text: String
    let bytes: [UInt8]
    var index = 0
    var depth = 0
    /// The closing bracket of each aggregate or array being read, innermost last.
    var closers: [UInt8] = []
    /// The frame offset after each top-level type of a signature read so far (nil where a
    /// type has none).
    var frameOffsets: [Int?] = []

    init(_ text: String) {
        self.text = text
        self.bytes = Array(text.utf8)
    }

    // MARK: - Entry points

    /// Reads one type that spans the whole input.
    mutating func parseSingleType() throws(EncodingError) -> CType {
        guard !bytes.isEmpty else { throw failure(.emptyInput, at: 0) }
        let type = try parseType(.standalone)
        if index < bytes.count {
            throw failure(.trailingCharacters, at: index)
        }
        return type
    }

    /// Reads a return type and any number of argument types, skipping frame offsets.
    mutating func parseSignature() throws(EncodingError) -> (CType, [CType]) {
        guard !bytes.isEmpty else { throw failure(.emptyInput, at: 0) }
        let returnType = try parseType(.returnValue)
        frameOffsets.append(skipFrameOffset())
        var arguments: [CType] = []
        while index < bytes.count {
            arguments.append(try parseType(.argument))
            frameOffsets.append(skipFrameOffset())
        }
        return (returnType, arguments)
    }

    // MARK: - Types

    mutating func parseType(_ context: Context) throws(EncodingError) -> CType {
        let start = index
        var qualifiers: CType.Qualifiers = []
        while let byte = peek(), let qualifier = CType.Qualifiers.forCode(byte) {
            qualifiers.insert(qualifier)
            index += 1
        }
        guard let byte = peek() else {
            throw failure(
                qualifiers.isEmpty ? .unexpectedEnd(expected: "a type") : .danglingQualifier,
                at: qualifiers.isEmpty ? index : start)
        }
        let type = try parseUnqualified(byte, context)
        guard qualifiers.isEmpty else {
            if case .bitField = type.kind {
                throw failure(.malformedBitField("a bit-field takes no qualifier"), at: start)
            }
            return CType(kind: type.kind, qualifiers: qualifiers, size: type.size, alignment: type.alignment)
        }
        return type
    }

    private mutating func parseUnqualified(_ byte: UInt8, _ context: Context) throws(EncodingError) -> CType {
        let start = index
        if let primitive = CType.Primitive(rawValue: byte) {
            index += 1
            return CType(kind: .primitive(primitive), size: primitive.size, alignment: primitive.alignment)
        }
        switch byte {
        case UInt8(ascii: "v"):
            guard context.allowsVoid else { throw failure(.voidValue, at: start) }
            index += 1
            return CType(kind: .void, size: 0, alignment: 1)
        case UInt8(ascii: "*"):
            index += 1
            return .pointerSized(.cString)
        case UInt8(ascii: "#"):
            index += 1
            return .pointerSized(.objectClass)
        case UInt8(ascii: ":"):
            index += 1
            return .pointerSized(.selector)
        case UInt8(ascii: "?"):
            index += 1
            return .pointerSized(.unknown)
        case UInt8(ascii: "@"):
            return try parseObject(context)
        case UInt8(ascii: "^"):
            return try nested { (parser: inout EncodingParser) throws(EncodingError) in
                parser.index += 1
                let pointee = try parser.parseType(.pointee)
                return .pointerSized(.pointer(pointee: pointee))
            }
        case UInt8(ascii: "["):
            return try nested { (parser: inout EncodingParser) throws(EncodingError) in
                try parser.parseArray()
            }
        case UInt8(ascii: "{"), UInt8(ascii: "("):
            return try nested { (parser: inout EncodingParser) throws(EncodingError) in
                try parser.parseAggregate(context)
            }
        case UInt8(ascii: "j"):
            return try nested { (parser: inout EncodingParser) throws(EncodingError) in
                try parser.parseComplex()
            }
        case UInt8(ascii: "b"):
            guard case .field = context else { throw failure(.bitFieldOutsideAggregate, at: start) }
            return try parseBitField()
        case UInt8(ascii: "]"), UInt8(ascii: "}"), UInt8(ascii: ")"):
            if let innermost = closers.last, innermost == byte {
                throw failure(.unexpectedCharacter(character(byte), expected: "a type"), at: start)
            }
            throw failure(.unbalancedBracket(found: character(byte), expected: closers.last.map(character)), at: start)
        default:
            throw failure(.unknownTypeCode(character(at: start)), at: start)
        }
    }

    /// Runs `body` one nesting level deeper, refusing to pass the depth limit.
    private mutating func nested(
        _ body: (inout EncodingParser) throws(EncodingError) -> CType
    ) throws(EncodingError) -> CType {
        guard depth < CType.maximumNestingDepth else {
            throw failure(.nestingTooDeep(limit: CType.maximumNestingDepth), at: index)
        }
        depth += 1
        defer { depth -= 1 }
        return try body(&self)
    }

    private mutating func parseObject(_ context: Context) throws(EncodingError) -> CType {
        index += 1
        switch peek() {
        case UInt8(ascii: "?"):
            index += 1
            return .pointerSized(.block)
        case UInt8(ascii: "\""):
            // In a struct whose members carry names, `@"X"` followed by a type code is an
            // anonymous object followed by the member named X.
            let quoteStart = index
            let name = try parseQuotedName()
            if case .field(namedFields: true) = context {
                let next = peek()
                let closesOrNamesNext =
                    next == nil || next == UInt8(ascii: "\"") || next == UInt8(ascii: "}")
                    || next == UInt8(ascii: ")")
                if !closesOrNamesNext {
                    index = quoteStart
                    return .pointerSized(.object(className: nil))
                }
            }
            return .pointerSized(.object(className: name))
        default:
            return .pointerSized(.object(className: nil))
        }
    }

    private mutating func parseArray() throws(EncodingError) -> CType {
        let start = index
        index += 1
        guard let count = try parseNumber(limit: CType.maximumSize * 8) else {
            if index == bytes.count { throw failure(.unexpectedEnd(expected: "an array count"), at: index) }
            throw failure(.missingArrayCount, at: index)
        }
        closers.append(UInt8(ascii: "]"))
        let element = try parseType(.element)
        closers.removeLast()
        try expectClose(UInt8(ascii: "]"), what: "']'")
        let (size, overflow) = element.size.multipliedReportingOverflow(by: count)
        guard !overflow, size <= CType.maximumSize else { throw failure(.sizeOverflow, at: start) }
        return CType(kind: .array(count: count, element: element), size: size, alignment: element.alignment)
    }

    private mutating func parseComplex() throws(EncodingError) -> CType {
        index += 1
        guard let byte = peek() else { throw failure(.unexpectedEnd(expected: "a complex part type"), at: index) }
        if byte == UInt8(ascii: "v") { throw failure(.voidValue, at: index) }
        guard let part = CType.Primitive(rawValue: byte), part != .bool else {
            throw failure(.invalidComplex, at: index)
        }
        index += 1
        return CType(kind: .complex(part: part), size: part.size * 2, alignment: part.alignment)
    }

    private mutating func parseBitField() throws(EncodingError) -> CType {
        let start = index
        index += 1
        guard let offset = try parseNumber(limit: CType.maximumSize * 8) else {
            if index == bytes.count { throw failure(.unexpectedEnd(expected: "a bit offset"), at: index) }
            throw failure(.malformedBitField("expected a bit offset (GNU form bOFFSETTYPEWIDTH)"), at: index)
        }
        guard let byte = peek() else { throw failure(.unexpectedEnd(expected: "a bit-field type"), at: index) }
        guard let base = CType.Primitive(rawValue: byte), base.isInteger else {
            throw failure(.malformedBitField("expected an integer type code after the bit offset"), at: index)
        }
        index += 1
        guard let width = try parseNumber(limit: CType.maximumSize * 8) else {
            if index == bytes.count { throw failure(.unexpectedEnd(expected: "a bit-field width"), at: index) }
            throw failure(.malformedBitField("expected a width after the type"), at: index)
        }
        let typeBits = base == .bool ? 1 : base.size * 8
        guard width <= typeBits else {
            throw failure(
                .invalidBitFieldPlacement("width \(width) exceeds the \(typeBits) bits of its type"), at: start)
        }
        let end = (offset + width + 7) / 8
        guard end <= CType.maximumSize else { throw failure(.sizeOverflow, at: start) }
        let bitField = CType.BitField(bitOffset: offset, base: base, width: width)
        return CType(kind: .bitField(bitField), size: end - offset / 8, alignment: width == 0 ? 1 : base.alignment)
    }

    // MARK: - Structs and unions

    private mutating func parseAggregate(_ context: Context) throws(EncodingError) -> CType {
        let start = index
        let open = bytes[index]
        let close = open == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: ")")
        let isUnion = open == UInt8(ascii: "(")
        index += 1
        let nameStart = index
        while true {
            guard let byte = peek() else {
                throw failure(.unexpectedEnd(expected: "'=' or '\(character(close))'"), at: index)
            }
            if byte == UInt8(ascii: "=") || byte == close { break }
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "("), UInt8(ascii: "["), UInt8(ascii: "\""),
                UInt8(ascii: "}"), UInt8(ascii: ")"), UInt8(ascii: "]"):
                throw failure(.invalidName, at: index)
            default: index += 1
            }
        }
        let rawName = String(decoding: bytes[nameStart..<index], as: UTF8.self)
        let name: String? = rawName.isEmpty || rawName == "?" ? nil : rawName
        if bytes[index] == close {
            index += 1
            guard context.allowsOpaque else { throw failure(.opaqueValue(name: name ?? "?"), at: start) }
            let kind: CType.Kind = isUnion ? .union(name: name, fields: nil) : .structure(name: name, fields: nil)
            return CType(kind: kind, size: 0, alignment: 1)
        }
        index += 1  // '='
        closers.append(close)
        defer { closers.removeLast() }
        var layout = AggregateLayout(isUnion: isUnion)
        var namedFields = false
        while true {
            guard let byte = peek() else {
                throw failure(.unexpectedEnd(expected: "'\(character(close))'"), at: index)
            }
            if byte == close { break }
            if byte == UInt8(ascii: "}") || byte == UInt8(ascii: ")") {
                throw failure(.unbalancedBracket(found: character(byte), expected: character(close)), at: index)
            }
            var fieldName: String?
            if byte == UInt8(ascii: "\"") {
                fieldName = try parseQuotedName()
                namedFields = true
            }
            let fieldStart = index
            let type = try parseType(.field(namedFields: namedFields))
            do throws(AggregateLayout.Problem) {
                try layout.append(name: fieldName, type: type)
            } catch {
                throw failure(error.problem, at: error == .sizeOverflow ? start : fieldStart)
            }
        }
        index += 1
        let (size, alignment) = layout.finish()
        guard size <= CType.maximumSize else { throw failure(.sizeOverflow, at: start) }
        let kind: CType.Kind =
            isUnion ? .union(name: name, fields: layout.fields) : .structure(name: name, fields: layout.fields)
        return CType(kind: kind, size: size, alignment: alignment)
    }

    // MARK: - Lexical pieces

    private func peek() -> UInt8? {
        index < bytes.count ? bytes[index] : nil
    }

    private func character(_ byte: UInt8) -> Character {
        Character(Unicode.Scalar(byte))
    }

    /// The character whose UTF-8 encoding starts at `offset` (U+FFFD for a stray byte).
    private func character(at offset: Int) -> Character {
        let end = min(offset + 4, bytes.count)
        var iterator = bytes[offset..<end].makeIterator()
        var decoder = UTF8()
        if case .scalarValue(let scalar) = decoder.decode(&iterator) { return Character(scalar) }
        return "\u{FFFD}"
    }

    private mutating func expectClose(_ close: UInt8, what: String) throws(EncodingError) {
        guard let byte = peek() else { throw failure(.unexpectedEnd(expected: what), at: index) }
        guard byte == close else {
            if byte == UInt8(ascii: "]") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: ")") {
                throw failure(.unbalancedBracket(found: character(byte), expected: character(close)), at: index)
            }
            throw failure(.unexpectedCharacter(character(at: index), expected: what), at: index)
        }
        index += 1
    }

    /// Reads decimal digits; `nil` when none are there.
    private mutating func parseNumber(limit: Int) throws(EncodingError) -> Int? {
        let start = index
        var value = 0
        while let byte = peek(), byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            guard value <= limit else { throw failure(.numberOverflow, at: start) }
            index += 1
        }
        return index == start ? nil : value
    }

    /// Reads `"name"` and returns the name.
    private mutating func parseQuotedName() throws(EncodingError) -> String {
        let open = index
        index += 1
        let nameStart = index
        while let byte = peek(), byte != UInt8(ascii: "\"") { index += 1 }
        guard index < bytes.count else { throw failure(.unterminatedName, at: open) }
        let name = String(decoding: bytes[nameStart..<index], as: UTF8.self)
        index += 1
        return name
    }

    /// Skips a method encoding's frame offset (`-`? digits) after a top-level type; returns
    /// its value when it has one that fits in an `Int`.
    private mutating func skipFrameOffset() -> Int? {
        var probe = index
        let negative = probe < bytes.count && bytes[probe] == UInt8(ascii: "-")
        if negative { probe += 1 }
        let digitsStart = probe
        var value: Int? = 0
        while probe < bytes.count, bytes[probe] >= UInt8(ascii: "0"), bytes[probe] <= UInt8(ascii: "9") {
            if let current = value {
                let (times, overflow) = current.multipliedReportingOverflow(by: 10)
                let (sum, overflowAdding) = times.addingReportingOverflow(Int(bytes[probe] - UInt8(ascii: "0")))
                value = overflow || overflowAdding ? nil : sum
            }
            probe += 1
        }
        guard probe > digitsStart else { return nil }
        index = probe
        return value.map { negative ? -$0 : $0 }
    }

    private func failure(_ problem: EncodingError.Problem, at offset: Int) -> EncodingError {
        EncodingError(encoding: text, offset: offset, problem: problem)
    }
}

extension CType {
    /// A pointer-sized scalar of the given kind.
    static func pointerSized(_ kind: Kind) -> CType {
        CType(kind: kind, size: Platform.pointerSize, alignment: Platform.pointerSize)
    }
}
