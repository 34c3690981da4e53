import Glibc

/// The progress line on standard error: rewritten in place on a terminal, one line per step
/// otherwise.
struct Progress {
    let total: Int
    private(set) var done = 0
    private let isTerminal = isatty(2) != 0

    init(total: Int) {
        self.total = total
    }

    /// Reports that `label` starts.
    mutating func step(_ label: String) {
        done += 1
        let line = "[\(done)/\(total)] \(label)"
        write(isTerminal ? "\r\u{1B}[K" + line : line + "\n")
    }

    /// Clears the line.
    func finish() {
        if isTerminal { write("\r\u{1B}[K") }
    }

    private func write(_ text: String) {
        var text = text
        text.withUTF8 { bytes in _ = Glibc.write(2, bytes.baseAddress, bytes.count) }
    }
}
