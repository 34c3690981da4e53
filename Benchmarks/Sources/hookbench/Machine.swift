import Glibc

/// The machine a run happened on.
struct Machine: Codable, Sendable {
    var cpu: String
    var processors: Int
    var kernel: String

    /// This machine: `/proc/cpuinfo`'s model name, the online processors, `uname`.
    static func current() -> Machine {
        Machine(cpu: cpuModel() ?? "unknown CPU", processors: sysconf(Int32(_SC_NPROCESSORS_ONLN)), kernel: kernel())
    }

    private static func cpuModel() -> String? {
        guard let file = fopen("/proc/cpuinfo", "r") else { return nil }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            let text = String(cString: line)
            if text.hasPrefix("model name"), let colon = text.firstIndex(of: ":") {
                return text[text.index(after: colon)...].trimmingSpaces()
            }
        }
        return nil
    }

    private static func kernel() -> String {
        var names = utsname()
        guard uname(&names) == 0 else { return "unknown kernel" }
        func string<T>(_ field: T) -> String {
            withUnsafeBytes(of: field) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
        }
        return "\(string(names.sysname)) \(string(names.release)) \(string(names.machine))"
    }
}

extension Substring {
    /// The text without leading and trailing spaces, tabs and newlines.
    func trimmingSpaces() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}
