/// Text helpers shared by the outputs built from events: quoting for JSON and XML, durations
/// for people, and the colours of functions.
enum EventFormatting {
    /// `text` as a JSON string literal.
    static func json(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case _ where scalar.value < 0x20:
                result += "\\u00" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

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
    static func grouped(_ value: UInt64) -> String {
        let digits = Array(String(value).utf8)
        var result: [UInt8] = []
        result.reserveCapacity(digits.count + digits.count / 3)
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { result.append(UInt8(ascii: ",")) }
            result.append(digit)
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// `count` of `noun` (whose plural takes an s): "1 call", "1,024 calls".
    static func counted(_ count: UInt64, _ noun: String) -> String {
        "\(grouped(count)) \(noun)\(count == 1 ? "" : "s")"
    }

    /// A duration with three significant digits in ns, µs, ms or s.
    static func duration(_ nanoseconds: Double) -> String {
        if nanoseconds >= 1e9 { return fixed(nanoseconds / 1e9) + " s" }
        if nanoseconds >= 1e6 { return fixed(nanoseconds / 1e6) + " ms" }
        if nanoseconds >= 1e3 { return fixed(nanoseconds / 1e3) + " µs" }
        return "\(Int(nanoseconds.rounded())) ns"
    }

    /// A share of a whole as a percentage with three significant digits.
    static func percent(_ share: Double) -> String { fixed(share * 100) + "%" }

    /// `value` with two decimals below 10, one below 100, none from 100.
    static func fixed(_ value: Double) -> String {
        let decimals = value >= 100 ? 0 : value >= 10 ? 1 : 2
        let scale = decimals == 0 ? 1 : decimals == 1 ? 10 : 100
        let scaled = Int((value * Double(scale)).rounded())
        guard decimals > 0 else { return "\(scaled)" }
        let fraction = String(scaled % scale)
        return "\(scaled / scale)." + String(repeating: "0", count: decimals - fraction.count) + fraction
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
