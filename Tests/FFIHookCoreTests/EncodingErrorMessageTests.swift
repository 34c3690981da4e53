import Testing

@testable import FFIHookCore

/// An error in a long encoding quotes only the input around the offset, so the message stays
/// one short line that still shows the offending character.
@Suite struct EncodingErrorMessageTests {
    /// One million `i`.
    static let million = String(repeating: "i", count: 1_000_000)
    /// The quoted text on either side of the offset.
    static let radius = String(repeating: "i", count: EncodingError.quotedRadius)

    @Test func aBadCodeAtTheEndOfAHugeInput() {
        let error = #expect(throws: EncodingError.self) { try Signature(Self.million + "!") }
        #expect(error?.offset == 1_000_000)
        #expect(
            error?.description
                == "unknown type code '!' at offset 1000000 in …\"\(Self.radius)!\" (1000001 bytes)")
        #expect((error?.description.count ?? .max) < 200)
    }

    @Test func aBadCodeAtTheStartOfAHugeInput() {
        let error = #expect(throws: EncodingError.self) { try CType("!" + Self.million) }
        #expect(error?.offset == 0)
        #expect(
            error?.description
                == "unknown type code '!' at offset 0 in \"!\(Self.radius)\"… (1000001 bytes)")
        #expect((error?.description.count ?? .max) < 200)
    }

    @Test func aBadCodeInTheMiddleOfAHugeInput() {
        let half = String(repeating: "i", count: 500_000)
        let error = #expect(throws: EncodingError.self) { try Signature(half + "!" + half) }
        #expect(error?.offset == 500_000)
        #expect(
            error?.description
                == "unknown type code '!' at offset 500000 in …\"\(Self.radius)!\(Self.radius)\"… (1000001 bytes)")
        #expect((error?.description.count ?? .max) < 200)
    }

    @Test func trailingCharactersAfterAHugeType() {
        // A single type stops after the first `i`; the rest is quoted only in part.
        let error = #expect(throws: EncodingError.self) { try CType(Self.million) }
        #expect(error?.code == .trailingCharacters)
        #expect(error?.offset == 1)
        #expect((error?.description.count ?? .max) < 200)
        #expect(error?.description.hasSuffix("… (1000000 bytes)") == true)
    }

    @Test func aHugeOpaqueNameIsShortened() {
        let name = String(repeating: "N", count: 1_000_000)
        let error = #expect(throws: EncodingError.self) { try Signature("v{\(name)}") }
        #expect(error?.code == .opaqueValue)
        #expect(error?.message == EncodingError.Problem.opaqueValue(name: name).message)
        #expect(error?.offset == 1)
        #expect((error?.description.count ?? .max) < 300)
        #expect(error?.description.hasPrefix("opaque aggregate '\(String(repeating: "N", count: 64))…' used") == true)
    }

    /// Multi-byte characters on both sides of the cut: the window counts characters, not
    /// bytes, and never splits one.
    @Test func multiByteCharactersAroundTheCut() {
        let before = String(repeating: "é", count: 1000)
        let after = String(repeating: "😀", count: 1000)
        let input = before + "x" + after
        let offset = before.utf8.count
        let error = EncodingError(encoding: input, offset: offset, problem: .unknownTypeCode("x"))
        let radius = EncodingError.quotedRadius
        let window = String(repeating: "é", count: radius) + "x" + String(repeating: "😀", count: radius)
        #expect(
            error.description
                == "unknown type code 'x' at offset \(offset) in …\"\(window)\"… (\(input.utf8.count) bytes)")
        #expect(error.description.count < 200)
        #expect(!error.description.unicodeScalars.contains("\u{FFFD}"))
    }

    /// An offset inside a character (possible only for an error made by hand) quotes around
    /// the start of that character.
    @Test func anOffsetInsideACharacterIsMovedToItsStart() {
        let input = String(repeating: "é", count: 100) + "€" + String(repeating: "é", count: 100)
        let start = 200  // the first byte of "€"
        let error = EncodingError(encoding: input, offset: start + 2, problem: .unknownTypeCode("€"))
        let side = String(repeating: "é", count: EncodingError.quotedRadius)
        #expect(error.description.contains("at offset 202 in …\"\(side)€\(side)\"… (403 bytes)"))
        // An offset past the end quotes the end of the input.
        let beyond = EncodingError(encoding: input, offset: 10_000, problem: .trailingCharacters)
        #expect(beyond.description.hasSuffix("at offset 10000 in …\"\(side)\" (403 bytes)"))
    }

    @Test func parserRefusesAMultiByteCodeInAHugeInput() {
        let error = #expect(throws: EncodingError.self) {
            try Signature("v" + String(repeating: "é", count: 500_000))
        }
        #expect(error?.offset == 1)
        #expect(error?.code == .unknownTypeCode)
        #expect(error?.message == EncodingError.Problem.unknownTypeCode("é").message)
        #expect(
            error?.description
                == "unknown type code 'é' at offset 1 in \"v\(String(repeating: "é", count: 33))\"… (1000001 bytes)")
    }

    /// An input that fits in the window is quoted whole, as before; one character more is cut.
    @Test func aShortInputIsQuotedWhole() {
        let radius = EncodingError.quotedRadius
        let fits = String(repeating: "i", count: radius) + "x" + String(repeating: "i", count: radius)
        let whole = EncodingError(encoding: fits, offset: radius, problem: .unknownTypeCode("x"))
        #expect(whole.description == "unknown type code 'x' at offset \(radius) in \"\(fits)\"")
        let longer = EncodingError(encoding: fits + "i", offset: radius, problem: .unknownTypeCode("x"))
        #expect(longer.description == "unknown type code 'x' at offset \(radius) in \"\(fits)\"… (66 bytes)")
        let end = EncodingError(encoding: "{S=i", offset: 4, problem: .unexpectedEnd(expected: "'}'"))
        #expect(end.description == #"unexpected end of encoding, expected '}' at offset 4 in "{S=i""#)
    }

    @Test func controlCharactersInTheWindowAreStillEscaped() {
        let input = Self.million + "\n\t\u{1}\"x"
        let error = EncodingError(encoding: input, offset: 1_000_004, problem: .unknownTypeCode("x"))
        #expect(error.description.hasSuffix(#"\n\t\u{1}\"x" (1000005 bytes)"#))
        #expect(error.description.count < 200)
    }
}
