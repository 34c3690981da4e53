/// Number formatting for the reports, without Foundation.
enum Format {
    /// `value` with exactly `digits` digits after the point.
    static func fixed(_ value: Double, _ digits: Int) -> String {
        guard value.isFinite else { return "–" }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = Int64((abs(value) * scale).rounded())
        let whole = scaled / Int64(scale)
        let sign = value < 0 && scaled != 0 ? "-" : ""
        guard digits > 0 else { return sign + grouped(whole) }
        var fraction = String(scaled % Int64(scale))
        while fraction.count < digits { fraction = "0" + fraction }
        return sign + grouped(whole) + "." + fraction
    }

    /// Nanoseconds with three significant digits or so.
    static func nanoseconds(_ value: Double) -> String {
        switch value {
        case ..<10: fixed(value, 2)
        case ..<100: fixed(value, 1)
        default: fixed(value, 0)
        }
    }

    /// Microseconds from nanoseconds.
    static func microseconds(_ nanoseconds: Double) -> String {
        fixed(nanoseconds / 1_000, nanoseconds < 10_000 ? 2 : 1)
    }

    /// A ratio, as `1.23×`.
    static func ratio(_ value: Double) -> String {
        (value < 10 ? fixed(value, 2) : value < 100 ? fixed(value, 1) : fixed(value, 0)) + "×"
    }

    /// Allocations per call.
    static func mallocs(_ value: Double) -> String {
        value == 0 ? "0" : fixed(value, 2)
    }

    /// Calls per second, in millions.
    static func millionsPerSecond(_ value: Double) -> String {
        fixed(value / 1_000_000, 1) + " M/s"
    }

    private static func grouped(_ value: Int64) -> String {
        let digits = String(value)
        guard digits.count > 4 else { return digits }
        var result = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return result
    }
}
