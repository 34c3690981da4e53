import FFIHookCore

/// Runs one input through `Signature(_:)` and `CType(encoding:)` and checks what they promise.
///
/// Bytes that are valid UTF-8 are parsed exactly as given, so error offsets refer to them;
/// other bytes are decoded with U+FFFD in place of each invalid sequence. A broken promise
/// stops the process through `fatalError`, which libFuzzer reports as a crash and saves.
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes: [UInt8] = if let data, size > 0 { Array(UnsafeBufferPointer(start: data, count: size)) } else { [] }
    let text: String
    if let exact = String(validating: bytes, as: UTF8.self) {
        text = exact
        require(text.utf8.elementsEqual(bytes), "valid UTF-8 changed while becoming a String", bytes)
    } else {
        text = String(decoding: bytes, as: UTF8.self)
    }
    let checker = Checker(text: text, bytes: bytes)
    let signature = checker.checkSignature()
    checker.checkSingleType(signature: signature)
    return 0
}

/// Stops the process with `message` and the input that broke it, in text and hex.
func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, _ bytes: [UInt8]) {
    guard !condition() else { return }
    fatalError("\(message()); input \(escaped(bytes)) (hex \(hex(bytes)))")
}

/// The input's printable ASCII as is, every other byte as `\xNN`.
func escaped(_ bytes: [UInt8]) -> String {
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

func hex(_ bytes: [UInt8]) -> String {
    bytes.isEmpty ? "<empty>" : bytes.map(hexByte).joined()
}

private func hexByte(_ byte: UInt8) -> String {
    let digits = Array("0123456789abcdef")
    return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
}
