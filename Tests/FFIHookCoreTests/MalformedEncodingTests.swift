import Testing

@testable import FFIHookCore

extension MalformedEncodingTests {
    /// Which entry point reads an encoding.
    enum EntryPoint: Sendable {
        /// `CType(_:)`: exactly one type.
        case type
        /// `Signature(_:)`: a return type and arguments, frame offsets allowed.
        case signature

        func parse(_ input: String) throws(EncodingError) {
            switch self {
            case .type: _ = try CType(input)
            case .signature: _ = try Signature(input)
            }
        }
    }

    /// One encoding that must be refused, with the error it must give.
    struct Case: Sendable, CustomTestStringConvertible {
        let entry: EntryPoint
        let input: String
        let offset: Int
        let problem: EncodingError.Problem

        var expected: EncodingError { EncodingError(encoding: input, offset: offset, problem: problem) }

        var testDescription: String {
            "\(entry == .type ? "CType" : "Signature") \(displayed(input)) -> \(problem.message) at \(offset)"
        }
    }
}

/// Shows an input in a test report: escaped, and shortened when long.
private func displayed(_ input: String) -> String {
    let utf8 = Array(input.utf8)
    guard utf8.count > 80 else { return quoted(input) }
    let head = String(decoding: utf8.prefix(40), as: UTF8.self)
    return "\(quoted(head))... (\(utf8.count) bytes)"
}

/// A case read with `CType(_:)`.
private func T(_ input: String, _ offset: Int, _ problem: EncodingError.Problem) -> MalformedEncodingTests.Case {
    .init(entry: .type, input: input, offset: offset, problem: problem)
}

/// A case read with `Signature(_:)`.
private func S(_ input: String, _ offset: Int, _ problem: EncodingError.Problem) -> MalformedEncodingTests.Case {
    .init(entry: .signature, input: input, offset: offset, problem: problem)
}

private func repeated(_ piece: String, _ count: Int) -> String {
    String(repeating: piece, count: count)
}

private let limit = CType.maximumNestingDepth
private let tooDeep = EncodingError.Problem.nestingTooDeep(limit: CType.maximumNestingDepth)

private func end(_ expected: String) -> EncodingError.Problem { .unexpectedEnd(expected: expected) }
private func unexpected(_ found: Character, _ expected: String) -> EncodingError.Problem {
    .unexpectedCharacter(found, expected: expected)
}
private func unbalanced(_ found: Character, _ expected: Character) -> EncodingError.Problem {
    .unbalancedBracket(found: found, expected: expected)
}
private func overlap(_ bit: Int, _ end: Int) -> EncodingError.Problem {
    .invalidBitFieldPlacement("starts at bit \(bit), before the previous member ends at bit \(end)")
}
private func tooWide(_ width: Int, _ bits: Int) -> EncodingError.Problem {
    .invalidBitFieldPlacement("width \(width) exceeds the \(bits) bits of its type")
}

private let noOffset = EncodingError.Problem.malformedBitField("expected a bit offset (GNU form bOFFSETTYPEWIDTH)")
private let noIntegerType = EncodingError.Problem.malformedBitField(
    "expected an integer type code after the bit offset")
private let noWidth = EncodingError.Problem.malformedBitField("expected a width after the type")
private let qualifiedBitField = EncodingError.Problem.malformedBitField("a bit-field takes no qualifier")

@Suite struct MalformedEncodingTests {
    static let emptyInput: [Case] = [
        T("", 0, .emptyInput),
        S("", 0, .emptyInput),
    ]

    static let unexpectedEnd: [Case] = [
        T("^", 1, end("a type")),
        S("^", 1, end("a type")),
        T("^^", 2, end("a type")),
        S("v^", 2, end("a type")),
        T("[", 1, end("an array count")),
        S("v[", 2, end("an array count")),
        T("[3", 2, end("a type")),
        T("[12", 3, end("a type")),
        T("[3i", 3, end("']'")),
        S("v[3i", 4, end("']'")),
        T("[2[3i]", 6, end("']'")),
        T("[3^", 3, end("a type")),
        T("{", 1, end("'=' or '}'")),
        T("{S", 2, end("'=' or '}'")),
        S("v{Struct", 8, end("'=' or '}'")),
        T("{S=", 3, end("'}'")),
        T("{S=i", 4, end("'}'")),
        S("{S=id", 5, end("'}'")),
        T("{S={T=i}", 8, end("'}'")),
        T("^{S=^", 5, end("a type")),
        T(#"{S="a""#, 6, end("a type")),
        T("(", 1, end("'=' or ')'")),
        T("(U", 2, end("'=' or ')'")),
        T("(U=", 3, end("')'")),
        S("v(U=if", 6, end("')'")),
        T("j", 1, end("a complex part type")),
        S("vj", 2, end("a complex part type")),
        T("{S=b", 4, end("a bit offset")),
        T("{S=b1", 5, end("a bit-field type")),
        S("v{S=b12", 7, end("a bit-field type")),
        T("{S=b1i", 6, end("a bit-field width")),
        T("(U=b0c", 6, end("a bit-field width")),
    ]

    static let danglingQualifier: [Case] = [
        T("r", 0, .danglingQualifier),
        T("rn", 0, .danglingQualifier),
        S("r", 0, .danglingQualifier),
        S("vr", 1, .danglingQualifier),
        S("vrnNoORVA", 1, .danglingQualifier),
        T("^r", 1, .danglingQualifier),
        T("{S=r", 3, .danglingQualifier),
        S("v24@0:8n", 7, .danglingQualifier),
        T("[3A", 2, .danglingQualifier),
    ]

    static let unterminatedName: [Case] = [
        T(#"@"NSStr"#, 1, .unterminatedName),
        S(#"v@""#, 2, .unterminatedName),
        S(#"@"NSString16@0:8"#, 1, .unterminatedName),
        T(#"{S="a"#, 3, .unterminatedName),
        T(#"{S="a"i"b"#, 7, .unterminatedName),
        T(#"{S=@""#, 4, .unterminatedName),
        T(#"(U="a"@"X"#, 7, .unterminatedName),
    ]

    static let unknownTypeCode: [Case] = [
        T("x", 0, .unknownTypeCode("x")),
        S("x", 0, .unknownTypeCode("x")),
        T("%", 0, .unknownTypeCode("%")),
        T("!", 0, .unknownTypeCode("!")),
        S("v!", 1, .unknownTypeCode("!")),
        T("a", 0, .unknownTypeCode("a")),
        T("E", 0, .unknownTypeCode("E")),
        T("<", 0, .unknownTypeCode("<")),
        T("\\", 0, .unknownTypeCode("\\")),
        T(" ", 0, .unknownTypeCode(" ")),
        T("\t", 0, .unknownTypeCode("\t")),
        T("=", 0, .unknownTypeCode("=")),
        T("\"a\"i", 0, .unknownTypeCode("\"")),
        T("\0", 0, .unknownTypeCode("\0")),
        S("i\0", 1, .unknownTypeCode("\0")),
        S("v\u{7F}", 1, .unknownTypeCode("\u{7F}")),
        T("0", 0, .unknownTypeCode("0")),
        T("7i", 0, .unknownTypeCode("7")),
        S("8v", 0, .unknownTypeCode("8")),
        S("-8v", 0, .unknownTypeCode("-")),
        S("v-", 1, .unknownTypeCode("-")),
        S("v8-", 2, .unknownTypeCode("-")),
        S("vr8", 2, .unknownTypeCode("8")),
        S("vi x", 2, .unknownTypeCode(" ")),
        S("v@:e", 3, .unknownTypeCode("e")),
        T("rx", 1, .unknownTypeCode("x")),
        T("^x", 1, .unknownTypeCode("x")),
        T("[3x]", 2, .unknownTypeCode("x")),
        T("{S=x}", 3, .unknownTypeCode("x")),
        T("{S=1i}", 3, .unknownTypeCode("1")),
        T("{S==i}", 3, .unknownTypeCode("=")),
        T(#"{S="a""b"i}"#, 6, .unknownTypeCode("\"")),
        T(#"{S=r"a"i}"#, 4, .unknownTypeCode("\"")),
    ]

    static let unexpectedCharacter: [Case] = [
        T("[3ii]", 3, unexpected("i", "']'")),
        S("v[3ii]", 4, unexpected("i", "']'")),
        T("[3i=]", 3, unexpected("=", "']'")),
        T(#"[3i"a"]"#, 3, unexpected("\"", "']'")),
        T("[3i[", 3, unexpected("[", "']'")),
        T("[3i{", 3, unexpected("{", "']'")),
        T("[2[3i]x]", 6, unexpected("x", "']'")),
        T("[3]", 2, unexpected("]", "a type")),
        S("v[3]", 3, unexpected("]", "a type")),
        T("[3^]", 3, unexpected("]", "a type")),
        T("[3r]", 3, unexpected("]", "a type")),
        T("{S=^}", 4, unexpected("}", "a type")),
        T("{S=r}", 4, unexpected("}", "a type")),
        T("(U=^)", 4, unexpected(")", "a type")),
        T(#"{S="a"}"#, 6, unexpected("}", "a type")),
    ]

    static let unbalancedBracket: [Case] = [
        T("{S=i)", 4, unbalanced(")", "}")),
        S("v{S=i)", 5, unbalanced(")", "}")),
        S("{S=i)v", 4, unbalanced(")", "}")),
        T("(U=i}", 4, unbalanced("}", ")")),
        T("[3i}", 3, unbalanced("}", "]")),
        T("[3i)", 3, unbalanced(")", "]")),
        S("v[3i}", 4, unbalanced("}", "]")),
        T("{S=)", 3, unbalanced(")", "}")),
        T("(U=}", 3, unbalanced("}", ")")),
        T("{S={T=i)}", 7, unbalanced(")", "}")),
        T("(U={S=c)})", 7, unbalanced(")", "}")),
        T("[2[3i}]", 5, unbalanced("}", "]")),
        T("[3{S=i}}", 7, unbalanced("}", "]")),
    ]

    static let missingArrayCount: [Case] = [
        T("[i]", 1, .missingArrayCount),
        S("v[i]", 2, .missingArrayCount),
        T("[]", 1, .missingArrayCount),
        T("[-1i]", 1, .missingArrayCount),
        T("[ 3i]", 1, .missingArrayCount),
        T("[[3i]]", 1, .missingArrayCount),
        T("{S=[c]}", 4, .missingArrayCount),
        T("^[i]", 2, .missingArrayCount),
        T("[2[i]]", 3, .missingArrayCount),
    ]

    static let numberOverflow: [Case] = [
        T("[99999999999i]", 1, .numberOverflow),
        // One more than the largest number accepted (the largest size in bits).
        T("[17179869177c]", 1, .numberOverflow),
        S("v[99999999999999999999999999i]", 2, .numberOverflow),
        T("[3[99999999999i]]", 3, .numberOverflow),
        T("[" + repeated("9", 1000) + "i]", 1, .numberOverflow),
        T("{S=b99999999999i1}", 4, .numberOverflow),
        T("{S=b17179869177c1}", 4, .numberOverflow),
        T("{S=b0i99999999999}", 6, .numberOverflow),
    ]

    static let sizeOverflow: [Case] = [
        T("[4294967295i]", 0, .sizeOverflow),
        S("v[4294967295i]", 1, .sizeOverflow),
        T("[2147483648c]", 0, .sizeOverflow),
        T("[1073741824s]", 0, .sizeOverflow),
        T("[17179869176c]", 0, .sizeOverflow),
        T("^[4294967295i]", 1, .sizeOverflow),
        T("[65536[65536c]]", 0, .sizeOverflow),
        T("[2[1073741824c]]", 0, .sizeOverflow),
        T("[3[2[536870912c]]]", 0, .sizeOverflow),
        // The product itself overflows `Int`.
        T("[17179869176[2147483647c]]", 0, .sizeOverflow),
        T("{S=[2147483647c]c}", 0, .sizeOverflow),
        T("{S=[1073741824c][1073741824c]}", 0, .sizeOverflow),
        S("v{S=[1073741824c][1073741824c]}", 1, .sizeOverflow),
        // Padding before the int pushes it past the limit.
        T("{S=[2147483645c]i}", 0, .sizeOverflow),
        // Rounding the size up to the alignment pushes it past the limit.
        T("{S=i[2147483643c]}", 0, .sizeOverflow),
        T("{S=b17179869160i8}", 0, .sizeOverflow),
        // The array inside the union is refused first, at its own bracket.
        T("(U=[2147483648c])", 3, .sizeOverflow),
        // A bit-field that ends beyond the limit, at its `b`.
        T("{S=b17179869176c1}", 3, .sizeOverflow),
    ]

    static let nestingTooDeep: [Case] = [
        T(repeated("^", limit + 1) + "i", limit, tooDeep),
        T(repeated("^", limit + 36) + "i", limit, tooDeep),
        S("v" + repeated("^", limit + 1) + "i", limit + 1, tooDeep),
        S(repeated("^", limit + 1) + "v", limit, tooDeep),
        T(repeated("[1", limit + 1) + "i" + repeated("]", limit + 1), 2 * limit, tooDeep),
        T(repeated("{A=", limit + 1) + "i" + repeated("}", limit + 1), 3 * limit, tooDeep),
        T(repeated("(U=", limit + 1) + "i" + repeated(")", limit + 1), 3 * limit, tooDeep),
        S("v" + repeated("{A=", limit + 1) + "i" + repeated("}", limit + 1), 3 * limit + 1, tooDeep),
        T(repeated("^", limit) + "jf", limit, tooDeep),
        T(repeated("^", limit) + "[1i]", limit, tooDeep),
        T(repeated("^", limit) + "{S=i}", limit, tooDeep),
        // 32 structs each holding a pointer: the innermost struct is the 65th level.
        T(repeated("{A=^", limit / 2) + "{B=i}" + repeated("}", limit / 2), 2 * limit, tooDeep),
        // Qualifiers do not nest: the 65th `^` is refused where it stands.
        T(repeated("r^", limit + 1) + "i", 2 * limit + 1, tooDeep),
    ]

    static let bitFieldOutsideAggregate: [Case] = [
        T("b0i3", 0, .bitFieldOutsideAggregate),
        T("b", 0, .bitFieldOutsideAggregate),
        T("rb0i3", 1, .bitFieldOutsideAggregate),
        S("b0i3", 0, .bitFieldOutsideAggregate),
        S("vb0i3", 1, .bitFieldOutsideAggregate),
        S("vib1c2", 2, .bitFieldOutsideAggregate),
        S("v^b0i3", 2, .bitFieldOutsideAggregate),
        T("[3b0i3]", 2, .bitFieldOutsideAggregate),
        T("^b0i3", 1, .bitFieldOutsideAggregate),
        T("{S=^b0i3}", 4, .bitFieldOutsideAggregate),
        T("{S=[2b0i3]}", 5, .bitFieldOutsideAggregate),
        T("(U=[1b0c1])", 5, .bitFieldOutsideAggregate),
    ]

    static let malformedBitField: [Case] = [
        // The Apple runtime's `bWIDTH` form has no offset and no type.
        T("{S=b3}", 5, noIntegerType),
        S("v{S=b3b5}", 6, noIntegerType),
        T("{S=b0f3}", 5, noIntegerType),
        T("{S=b0d3}", 5, noIntegerType),
        T("{S=b0D3}", 5, noIntegerType),
        T("{S=b0^3}", 5, noIntegerType),
        T("{S=b0v3}", 5, noIntegerType),
        T("{S=b0{T=i}3}", 5, noIntegerType),
        T("{S=bi3}", 4, noOffset),
        T("{S=b}", 4, noOffset),
        T("{S=b-1i3}", 4, noOffset),
        T("{S=b0i}", 6, noWidth),
        T("{S=b0ii}", 6, noWidth),
        S("v(U=b0c)", 7, noWidth),
        T("{S=rb0i3}", 3, qualifiedBitField),
        T("(U=nb0c1)", 3, qualifiedBitField),
    ]

    static let invalidBitFieldPlacement: [Case] = [
        T("{S=b0c9}", 3, tooWide(9, 8)),
        S("v{S=b0C9}", 4, tooWide(9, 8)),
        T("{S=b0s17}", 3, tooWide(17, 16)),
        T("{S=b0i33}", 3, tooWide(33, 32)),
        T("(U=b0i33)", 3, tooWide(33, 32)),
        T("{S=b0q65}", 3, tooWide(65, 64)),
        T("{S=b0t129}", 3, tooWide(129, 128)),
        T("{S=b0i3b2i3}", 7, overlap(2, 3)),
        T("{S=ib0i3}", 4, overlap(0, 32)),
        T("{S=cb4i3}", 4, overlap(4, 8)),
        T("{S=b8i8b0i8}", 7, overlap(0, 16)),
        T("{S=b0q40b32i8}", 8, overlap(32, 40)),
        // The offset is the member's type, after its name.
        T(#"{S="a"i"b"b0i3}"#, 10, overlap(0, 32)),
        S("v{S=cb0c1}", 5, overlap(0, 8)),
    ]

    static let opaqueValue: [Case] = [
        S("v{Opaque}", 1, .opaqueValue(name: "Opaque")),
        S("{Opaque}", 0, .opaqueValue(name: "Opaque")),
        S("{Opaque}v", 0, .opaqueValue(name: "Opaque")),
        S("(U)", 0, .opaqueValue(name: "U")),
        S("v(U)", 1, .opaqueValue(name: "U")),
        S("v{?}", 1, .opaqueValue(name: "?")),
        S("v{}", 1, .opaqueValue(name: "?")),
        S("vr{T}", 2, .opaqueValue(name: "T")),
        S("v24@0:8{CGContext}16", 7, .opaqueValue(name: "CGContext")),
        T("{S={T}}", 3, .opaqueValue(name: "T")),
        T("{S=i(U)}", 4, .opaqueValue(name: "U")),
        T(#"{S="t"{T}}"#, 6, .opaqueValue(name: "T")),
        T("(U={T})", 3, .opaqueValue(name: "T")),
        T("[3{T}]", 2, .opaqueValue(name: "T")),
        T("[3(U)]", 2, .opaqueValue(name: "U")),
        T("^[3{T}]", 3, .opaqueValue(name: "T")),
    ]

    static let voidValue: [Case] = [
        S("iv", 1, .voidValue),
        S("vv", 1, .voidValue),
        S("v@:v", 3, .voidValue),
        S("v8v16", 2, .voidValue),
        S("vrv", 2, .voidValue),
        S("v[2v]", 3, .voidValue),
        T("{S=v}", 3, .voidValue),
        T("{S=iv}", 4, .voidValue),
        T(#"{S="a"v}"#, 6, .voidValue),
        T("(U=v)", 3, .voidValue),
        T("[3v]", 2, .voidValue),
        T("[0v]", 2, .voidValue),
        T("^[1v]", 3, .voidValue),
    ]

    static let invalidComplex: [Case] = [
        T("jB", 1, .invalidComplex),
        T("j{", 1, .invalidComplex),
        T("j^i", 1, .invalidComplex),
        T("jj", 1, .invalidComplex),
        T("j@", 1, .invalidComplex),
        T("jx", 1, .invalidComplex),
        T("jri", 1, .invalidComplex),
        T("jb", 1, .invalidComplex),
        T("j[2f]", 1, .invalidComplex),
        S("vj*", 2, .invalidComplex),
        T("{S=jB}", 4, .invalidComplex),
        T("[2j?]", 3, .invalidComplex),
    ]

    static let invalidName: [Case] = [
        T("{a{b=i}", 2, .invalidName),
        T("(a(b=i))", 2, .invalidName),
        T("{a[=i}", 2, .invalidName),
        T(#"{a"b"=i}"#, 2, .invalidName),
        T("{?{=i}", 2, .invalidName),
        S("v{a(b=i)}", 3, .invalidName),
        T("^{a{b=i}}", 3, .invalidName),
        T("{S={a[b=i}}", 5, .invalidName),
    ]

    static let trailingCharacters: [Case] = [
        T("ii", 1, .trailingCharacters),
        T("i]", 1, .trailingCharacters),
        T("i}", 1, .trailingCharacters),
        T("i)", 1, .trailingCharacters),
        T("v8", 1, .trailingCharacters),
        T("i24@0:8", 1, .trailingCharacters),
        T("{S=i}}", 5, .trailingCharacters),
        T("[3i]]", 4, .trailingCharacters),
        T("^i i", 2, .trailingCharacters),
        T(#"@"A""B""#, 4, .trailingCharacters),
        T(#"@?"Block""#, 2, .trailingCharacters),
        T("jfi", 2, .trailingCharacters),
        T("{S}i", 3, .trailingCharacters),
        T("r^vx", 3, .trailingCharacters),
    ]

    static let all: [Case] =
        emptyInput + unexpectedEnd + danglingQualifier + unterminatedName + unknownTypeCode
        + unexpectedCharacter + unbalancedBracket + missingArrayCount + numberOverflow + sizeOverflow
        + nestingTooDeep + bitFieldOutsideAggregate + malformedBitField + invalidBitFieldPlacement
        + opaqueValue + voidValue + invalidComplex + invalidName + trailingCharacters

    @Test(arguments: all)
    func isRefusedWithOffsetAndReason(_ malformed: Case) {
        let error = #expect(throws: EncodingError.self) { try malformed.entry.parse(malformed.input) }
        #expect(error?.offset == malformed.offset)
        #expect(error?.code == malformed.problem.code)
        #expect(error?.message == malformed.problem.message)
        #expect(error == malformed.expected)
    }

    @Test func tableIsLargeAndCoversEveryReason() {
        #expect(Self.all.count >= 170)
        let groups: [[Case]] = [
            Self.emptyInput, Self.unexpectedEnd, Self.danglingQualifier, Self.unterminatedName,
            Self.unknownTypeCode, Self.unexpectedCharacter, Self.unbalancedBracket, Self.missingArrayCount,
            Self.numberOverflow, Self.sizeOverflow, Self.nestingTooDeep, Self.bitFieldOutsideAggregate,
            Self.malformedBitField, Self.invalidBitFieldPlacement, Self.opaqueValue, Self.voidValue,
            Self.invalidComplex, Self.invalidName, Self.trailingCharacters,
        ]
        // The case name of a reason, without its payload.
        func caseName(_ reason: EncodingError.Problem) -> String {
            String(String(describing: reason).prefix { $0 != "(" })
        }
        // Each group holds one reason, each reason has its own group, and all 19 reasons are there.
        for group in groups {
            #expect(Set(group.map { caseName($0.problem) }).count == 1)
        }
        let reasons = groups.compactMap { $0.first.map { caseName($0.problem) } }
        #expect(Set(reasons).count == 19)
        // Each kind of problem has its own code, named as the problem is.
        let codes = groups.compactMap { $0.first?.problem.code }
        #expect(Set(codes).count == 19)
        #expect(codes.map(\.description) == reasons)
        // The empty input has only two spellings; every other reason is met at least three times.
        for group in groups.dropFirst() {
            #expect(group.count >= 3, "\(group.first?.problem.message ?? "")")
        }
        // Every reason but trailing characters (which only a single type can have) is reached
        // through both entry points.
        for group in groups.dropLast() {
            #expect(group.contains { $0.entry == .type }, "\(group.first?.problem.message ?? "")")
            #expect(group.contains { $0.entry == .signature }, "\(group.first?.problem.message ?? "")")
        }
        #expect(Self.trailingCharacters.allSatisfy { $0.entry == .type })
    }

    @Test func descriptionMarksTheOffset() {
        let error = EncodingError(encoding: "{S=x}", offset: 3, problem: .unknownTypeCode("x"))
        #expect(error.description == #"unknown type code 'x' at offset 3 in "{S=x}""#)
        #expect(throws: error) { try CType("{S=x}") }
    }

    // MARK: - Non-ASCII input

    /// Multi-byte UTF-8 at a type position: refused at the first byte of the character.
    static let nonASCII: [(EntryPoint, String, Int)] = [
        (.type, "é", 0),
        (.type, "😀", 0),
        (.signature, "vé", 1),
        (.type, "[3€]", 2),
        (.type, "{S=iü}", 4),
        (.signature, "v24@0:8✓16", 7),
    ]

    @Test(arguments: nonASCII)
    func nonASCIIByteIsAnUnknownTypeCode(entry: EntryPoint, input: String, offset: Int) {
        let error = #expect(throws: EncodingError.self) { try entry.parse(input) }
        #expect(error?.encoding == input)
        #expect(error?.offset == offset)
        guard error?.code == .unknownTypeCode else {
            Issue.record("expected an unknown type code, got \(String(describing: error))")
            return
        }
    }

    @Test func nonASCIINamesAreNotRefused() throws {
        let type = try CType(#"{Größe="wert"i}"#)
        #expect(type.size == 4)
        #expect(type.encoding == #"{Größe="wert"i}"#)
    }

    // MARK: - Limits are inclusive

    static let atTheLimits: [String] = [
        repeated("^", limit) + "i",
        repeated("^", limit) + "v",
        repeated("r^", limit) + "ri",
        repeated("^", limit - 1) + "jD",
        repeated("[1", limit) + "i" + repeated("]", limit),
        repeated("{A=", limit) + "i" + repeated("}", limit),
        repeated("(U=", limit) + "c" + repeated(")", limit),
        repeated("{A=^", limit / 2) + "i" + repeated("}", limit / 2),
        repeated("^", limit - 1) + "{Opaque}",
        "[2147483647c]",
        "{S=[2147483647c]}",
        "(U=[2147483647c]c)",
        "{S=[2147483640c]i}",
        "[1073741823s]",
        "[17179869176{E=}]",
        "{S=b17179869160c8}",
        "{S=b0t128}",
    ]

    @Test(arguments: atTheLimits)
    func limitItselfIsAccepted(_ encoding: String) throws {
        let type = try CType(encoding)
        #expect(type.size <= CType.maximumSize)
        #expect(try CType(type.encoding) == type)
    }

    @Test func limitValues() {
        #expect(CType.maximumNestingDepth == 64)
        #expect(CType.maximumSize == 2_147_483_647)
    }

    @Test func largestSizesAreExact() throws {
        #expect(try CType("[2147483647c]").size == CType.maximumSize)
        #expect(try CType("{S=[2147483640c]i}").size == 2_147_483_644)
        #expect(try CType("{S=b17179869160c8}").size == 2_147_483_646)
        #expect(try CType("[17179869176{E=}]").size == 0)
    }

    @Test func signatureNestingIsCountedPerType() throws {
        let deep = repeated("^", limit) + "i"
        let signature = try Signature(deep + "24" + deep + "0" + deep + "8")
        #expect(signature.argumentTypes.count == 2)
        #expect(signature.returnType.size == 8)
    }

    // MARK: - Hostile input

    struct HostileCase: Sendable, CustomTestStringConvertible {
        let name: String
        let entry: EntryPoint
        let make: @Sendable () -> String
        let offset: @Sendable (String) -> Int
        let problem: EncodingError.Problem

        var testDescription: String { "\(entry == .type ? "CType" : "Signature") \(name)" }
    }

    static let hostile: [HostileCase] = [
        HostileCase(
            name: "10,000 '{'", entry: .type, make: { repeated("{", 10_000) }, offset: { _ in 1 },
            problem: .invalidName),
        HostileCase(
            name: "10,000 '{'", entry: .signature, make: { repeated("{", 10_000) }, offset: { _ in 1 },
            problem: .invalidName),
        HostileCase(
            name: "100,000 '^'", entry: .type, make: { repeated("^", 100_000) }, offset: { _ in limit },
            problem: tooDeep),
        HostileCase(
            name: "100,000 '^'", entry: .signature, make: { repeated("^", 100_000) }, offset: { _ in limit },
            problem: tooDeep),
        HostileCase(
            name: "1 MB of '['", entry: .type, make: { repeated("[", 1 << 20) }, offset: { _ in 1 },
            problem: .missingArrayCount),
        HostileCase(
            name: "1 MB of '['", entry: .signature, make: { repeated("[", 1 << 20) }, offset: { _ in 1 },
            problem: .missingArrayCount),
        HostileCase(
            name: "100,000 '[1'", entry: .type, make: { repeated("[1", 100_000) }, offset: { _ in 2 * limit },
            problem: tooDeep),
        HostileCase(
            name: "100,000 '{A='", entry: .type, make: { repeated("{A=", 100_000) }, offset: { _ in 3 * limit },
            problem: tooDeep),
        HostileCase(
            name: "100,000 '(U='", entry: .signature, make: { "v" + repeated("(U=", 100_000) },
            offset: { _ in 3 * limit + 1 }, problem: tooDeep),
        HostileCase(
            name: "1 MB of qualifiers", entry: .type, make: { repeated("rnNoORVA", 1 << 17) }, offset: { _ in 0 },
            problem: .danglingQualifier),
        HostileCase(
            name: "1 MB array count", entry: .type, make: { "[" + repeated("9", 1 << 20) + "i]" },
            offset: { _ in 1 }, problem: .numberOverflow),
        HostileCase(
            name: "1 MB struct name", entry: .type, make: { "{" + repeated("a", 1 << 20) },
            offset: { $0.utf8.count }, problem: .unexpectedEnd(expected: "'=' or '}'")),
        HostileCase(
            name: "1 MB class name", entry: .type, make: { "@\"" + repeated("a", 1 << 20) }, offset: { _ in 1 },
            problem: .unterminatedName),
        HostileCase(
            name: "unclosed struct of 100,000 ints", entry: .type, make: { "{S=" + repeated("i", 100_000) },
            offset: { $0.utf8.count }, problem: .unexpectedEnd(expected: "'}'")),
        HostileCase(
            name: "1 MB after a type", entry: .type, make: { repeated("i", 1 << 20) }, offset: { _ in 1 },
            problem: .trailingCharacters),
        HostileCase(
            name: "1 MB of 'b'", entry: .signature, make: { repeated("b", 1 << 20) }, offset: { _ in 0 },
            problem: .bitFieldOutsideAggregate),
        HostileCase(
            name: "1 MB of NUL", entry: .signature, make: { repeated("\0", 1 << 20) }, offset: { _ in 0 },
            problem: .unknownTypeCode("\0")),
    ]

    /// Reading is linear in the input: even an unoptimized build refuses a megabyte well within
    /// the bound, while anything quadratic would take hours.
    static let promptly: Duration = .seconds(20)

    @Test(.timeLimit(.minutes(1)), arguments: hostile)
    func hostileInputIsRefusedPromptly(_ hostile: HostileCase) throws {
        let input = hostile.make()
        var thrown: EncodingError?
        let elapsed = ContinuousClock().measure {
            do throws(EncodingError) {
                try hostile.entry.parse(input)
            } catch {
                thrown = error
            }
        }
        let error = try #require(thrown, "no error thrown")
        #expect(error.offset == hostile.offset(input))
        #expect(error.code == hostile.problem.code)
        #expect(error.message == hostile.problem.message)
        #expect(error.encoding == input)
        #expect(elapsed < Self.promptly)
    }

    @Test(.timeLimit(.minutes(1)))
    func longValidInputIsReadPromptly() throws {
        let arguments = "v" + repeated("i", 100_000)
        let members = "{S=" + repeated("c", 100_000) + "}"
        let offsets = "v" + repeated("8", 1 << 20)
        var results: (Signature, CType, Signature)?
        let elapsed = try ContinuousClock().measure {
            results = (try Signature(arguments), try CType(members), try Signature(offsets))
        }
        let (signature, type, frameOffsets) = try #require(results)
        #expect(signature.argumentTypes.count == 100_000)
        #expect(type.size == 100_000)
        #expect(frameOffsets.argumentTypes.isEmpty)
        #expect(elapsed < Self.promptly)
    }

    // MARK: - Brackets, complex parts, _Bool widths and non-ASCII input

    /// A closing bracket where a type is expected and which does not close the innermost open
    /// bracket is an unbalanced bracket (`expected` is `nil` when nothing is open), as it is
    /// after an array element (`[3i}`).
    static let strayClosingBrackets: [Case] = [
        T("]", 0, .unbalancedBracket(found: "]", expected: nil)),
        T("}", 0, .unbalancedBracket(found: "}", expected: nil)),
        T(")", 0, .unbalancedBracket(found: ")", expected: nil)),
        S("i]", 1, .unbalancedBracket(found: "]", expected: nil)),
        S("v)", 1, .unbalancedBracket(found: ")", expected: nil)),
        T("^]", 1, .unbalancedBracket(found: "]", expected: nil)),
        T("{S=i]", 4, unbalanced("]", "}")),
        T("(U=i]", 4, unbalanced("]", ")")),
        T("{S=^)", 4, unbalanced(")", "}")),
        T("[3^}", 3, unbalanced("}", "]")),
        T("[2{S=i]]", 6, unbalanced("]", "}")),
    ]

    @Test(arguments: strayClosingBrackets)
    func strayClosingBracketIsUnbalanced(_ malformed: Case) {
        #expect(throws: malformed.expected) { try malformed.entry.parse(malformed.input) }
    }

    @Test
    func voidComplexPartIsAVoidValue() {
        #expect(throws: EncodingError(encoding: "jv", offset: 1, problem: .voidValue)) {
            try CType("jv")
        }
        #expect(throws: EncodingError(encoding: "vjv", offset: 2, problem: .voidValue)) {
            try Signature("vjv")
        }
    }

    @Test
    func boolBitFieldIsOneBitWide() throws {
        for encoding in ["{S=b0B2}", "{S=b0B8}", "(U=b0B3)"] {
            let error = #expect(throws: EncodingError.self) { try CType(encoding) }
            #expect(error?.offset == 3)
            guard error?.code == .invalidBitFieldPlacement else {
                Issue.record("\(encoding): expected an invalid bit-field placement, got \(String(describing: error))")
                continue
            }
        }
        #expect(try CType("{S=b0B1b1B1}").size == 1)
    }

    @Test
    func nonASCIIUnknownTypeCodeNamesTheCharacter() {
        #expect(throws: EncodingError(encoding: "é", offset: 0, problem: .unknownTypeCode("é"))) {
            try CType("é")
        }
        #expect(throws: EncodingError(encoding: "v😀", offset: 1, problem: .unknownTypeCode("😀"))) {
            try Signature("v😀")
        }
        #expect(throws: EncodingError(encoding: "[3i€", offset: 3, problem: .unexpectedCharacter("€", expected: "']'")))
        {
            try CType("[3i€")
        }
    }
}
