/// Stops the process with `message` and the input that broke it, in text and hex.
///
/// `fatalError` traps; libFuzzer reports the trap as a crash and saves the input.
public func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, _ bytes: [UInt8]) {
    guard !condition() else { return }
    fatalError("\(message()); input \(escaped(bytes)) (hex \(hex(bytes)))")
}

/// The input's printable ASCII as is, every other byte as `\xNN`.
public func escaped(_ bytes: [UInt8]) -> String {
    var text = "\""
    for byte in bytes {
        switch byte {
        case UInt8(ascii: "\\"): text += "\\\\"
        case UInt8(ascii: "\""): text += "\\\""
        case 0x20..<0x7F: text.unicodeScalars.append(Unicode.Scalar(byte))
        default: text += "\\x" + hexByte(byte)
        }
    }
    return text + "\""
}

/// The bytes in hexadecimal, `<empty>` for none.
public func hex(_ bytes: [UInt8]) -> String {
    bytes.isEmpty ? "<empty>" : bytes.map(hexByte).joined()
}

/// The text of an input: valid UTF-8 exactly as given (so byte offsets refer to it), other
/// bytes decoded with U+FFFD in place of each invalid sequence.
public func inputText(_ bytes: some Collection<UInt8>) -> String {
    String(validating: bytes, as: UTF8.self) ?? String(decoding: bytes, as: UTF8.self)
}

private func hexByte(_ byte: UInt8) -> String {
    let digits = Array("0123456789abcdef")
    return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
}
