#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One check of the run's end state, with what it compared.
struct Check {
    let name: String
    let passed: Bool
    let detail: String
}

/// Memory figures at one moment.
struct MemorySample {
    /// Resident set size in bytes.
    let resident: UInt64
    /// Heap bytes in use (see `soak_heap_bytes`).
    let heap: UInt64

    /// The figures in MiB, for the summary.
    var description: String {
        "RSS \(mebibytes(resident)) MiB, heap \(mebibytes(heap)) MiB"
    }
}

/// `bytes` in MiB with one decimal.
func mebibytes(_ bytes: UInt64) -> String {
    let tenths = (bytes * 10 + 524_288) / 1_048_576
    return "\(tenths / 10).\(tenths % 10)"
}

/// `bytes` as a signed difference in MiB with one decimal.
func mebibytes(difference bytes: Int64) -> String {
    (bytes < 0 ? "-" : "+") + mebibytes(bytes.magnitude)
}

/// Prints the checks and returns whether all passed.
func printChecks(_ checks: [Check]) -> Bool {
    printLine("checks:")
    for check in checks {
        printLine("  \(check.passed ? "PASS" : "FAIL")  \(check.name): \(check.detail)")
    }
    let failed = checks.filter { !$0.passed }.count
    printLine(
        failed == 0 ? "result: all \(checks.count) checks passed" : "result: \(failed) of \(checks.count) checks FAILED"
    )
    return failed == 0
}

/// `value` with one decimal.
func oneDecimal(_ value: Double) -> String {
    let tenths = Int((value * 10).rounded())
    return "\(tenths / 10).\(tenths % 10)"
}

/// Writes `message` and a newline to standard output at once, unbuffered, so that
/// progress shows in a log file while the soak runs.
func printLine(_ message: String) {
    write(message + "\n", to: 1)
}

/// Writes `message` to standard error.
func printError(_ message: String) {
    write(message, to: 2)
}

private func write(_ message: String, to descriptor: Int32) {
    var text = message
    text.withUTF8 { bytes in
        var rest = UnsafeRawBufferPointer(bytes)
        while !rest.isEmpty {
            let written = write(descriptor, rest.baseAddress, rest.count)
            guard written > 0 else { return }
            rest = UnsafeRawBufferPointer(rebasing: rest[written...])
        }
    }
}
