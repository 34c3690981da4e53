/// Text helpers shared by the outputs built from events: quoting for JSON and XML, durations
/// for people, and the colours of functions.
enum EventFormatting {
    /// `text` as a JSON string literal.
    static func json(_ text: String) -> String {
        var bytes: [UInt8] = []
        appendJSON(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `text` as a JSON string literal: `"` and `\` escaped, control characters as
    /// `\u00XX`, every other byte of its UTF-8 as it is.
    static func appendJSON(_ text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(byte)
            case ..<0x20:
                bytes.append(contentsOf: "\\u00".utf8)
                bytes.append(hexDigits[Int(byte >> 4)])
                bytes.append(hexDigits[Int(byte & 15)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Whether `byte` is a control character (below a space, or DEL): the outputs of a line a
    /// call or a row a function write it `?` in a name, where a newline would split the line.
    static func isControl(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7F }

    /// `text` escaped for XML character data and attribute values.
    static func xml(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case _ where scalar.value < 0x20 && scalar != "\n" && scalar != "\t": result += "?"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// `value` in digits grouped by thousands (1,234,567).
    static func grouped(_ value: UInt64) -> String { text { appendGrouped(value, to: &$0) } }

    /// Appends `value` in digits grouped by thousands.
    static func appendGrouped(_ value: UInt64, to bytes: inout [UInt8]) {
        withDigits(of: value) { digits in
            for (index, digit) in digits.enumerated() {
                if index > 0, (digits.count - index) % 3 == 0 { bytes.append(UInt8(ascii: ",")) }
                bytes.append(digit)
            }
        }
    }

    /// Appends `value` in decimal digits, with a minus sign when negative.
    static func appendDecimal(_ value: Int, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        withDigits(of: UInt64(value.magnitude)) { bytes.append(contentsOf: $0) }
    }

    /// Appends `value` in decimal digits.
    static func appendDecimal(_ value: UInt64, to bytes: inout [UInt8]) {
        withDigits(of: value) { bytes.append(contentsOf: $0) }
    }

    /// Calls `body` with the decimal digits of `value`, made on the stack.
    private static func withDigits<Result>(
        of value: UInt64, _ body: (UnsafeBufferPointer<UInt8>) -> Result
    ) -> Result {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var rest = value
            var start = 20
            repeat {
                start -= 1
                buffer[start] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            return body(UnsafeBufferPointer(rebasing: buffer[start...]))
        }
    }

    /// `count` of `noun` (whose plural takes an s): "1 call", "1,024 calls".
    static func counted(_ count: UInt64, _ noun: String) -> String {
        "\(grouped(count)) \(noun)\(count == 1 ? "" : "s")"
    }

    /// A duration with three significant digits in ns, µs, ms or s.
    static func duration(_ nanoseconds: Double) -> String { text { appendDuration(nanoseconds, to: &$0) } }

    /// Appends a duration with three significant digits in ns, µs, ms or s.
    static func appendDuration(_ nanoseconds: Double, to bytes: inout [UInt8]) {
        if nanoseconds >= 1e9 {
            appendFixed(nanoseconds / 1e9, to: &bytes)
            bytes.append(contentsOf: " s".utf8)
        } else if nanoseconds >= 1e6 {
            appendFixed(nanoseconds / 1e6, to: &bytes)
            bytes.append(contentsOf: " ms".utf8)
        } else if nanoseconds >= 1e3 {
            appendFixed(nanoseconds / 1e3, to: &bytes)
            bytes.append(contentsOf: " µs".utf8)
        } else {
            appendDecimal(Int(nanoseconds.rounded()), to: &bytes)
            bytes.append(contentsOf: " ns".utf8)
        }
    }

    /// A share of a whole as a percentage with three significant digits.
    static func percent(_ share: Double) -> String { text { appendPercent(share, to: &$0) } }

    /// Appends a share of a whole as a percentage with three significant digits.
    static func appendPercent(_ share: Double, to bytes: inout [UInt8]) {
        appendFixed(share * 100, to: &bytes)
        bytes.append(UInt8(ascii: "%"))
    }

    /// `value` with two decimals below 10, one below 100, none from 100.
    static func fixed(_ value: Double) -> String { text { appendFixed(value, to: &$0) } }

    /// Appends `value` with two decimals below 10, one below 100, none from 100.
    static func appendFixed(_ value: Double, to bytes: inout [UInt8]) {
        let decimals = value >= 100 ? 0 : value >= 10 ? 1 : 2
        let scale = decimals == 0 ? 1 : decimals == 1 ? 10 : 100
        let scaled = Int((value * Double(scale)).rounded())
        guard decimals > 0 else { return appendDecimal(scaled, to: &bytes) }
        // (As Swift's `/` and `%` round toward zero: a negative value's fraction is left out of
        // its digits, as it always was.)
        appendDecimal(scaled / scale, to: &bytes)
        bytes.append(UInt8(ascii: "."))
        let fraction = scaled % scale
        if fraction >= 0, decimals == 2, fraction < 10 { bytes.append(UInt8(ascii: "0")) }
        appendDecimal(fraction, to: &bytes)
    }

    /// The text `append` writes, as a string.
    private static func text(_ append: (inout [UInt8]) -> Void) -> String {
        var bytes: [UInt8] = []
        append(&bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A warm colour (red to yellow) that depends only on the function's name, so that a
    /// function has the same colour in every picture.
    static func color(_ name: String) -> String {
        var hash: UInt32 = 2_166_136_261
        for byte in name.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        let red = 205 + Int(hash % 50)
        let green = 80 + Int((hash >> 8) % 150)
        let blue = 30 + Int((hash >> 16) % 50)
        return "rgb(\(red),\(green),\(blue))"
    }

    /// `name` cut to what fits in `width` pixels of 12-pixel monospace text ("" when not even
    /// three characters fit).
    static func label(_ name: String, width: Double) -> String {
        let fits = Int((width - 6) / 7.3)
        guard fits >= 3 else { return "" }
        return name.count <= fits ? name : String(name.prefix(fits - 2)) + ".."
    }
}
