import FFIHookCore
import FuzzKit

/// Runs one input through `Signature(_:)` and `CType(_:)` and checks what they promise.
///
/// Bytes that are valid UTF-8 are parsed exactly as given, so error offsets refer to them;
/// other bytes are decoded with U+FFFD in place of each invalid sequence. A broken promise
/// stops the process through `fatalError`, which libFuzzer reports as a crash and saves.
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = inputBytes(data, size)
    let text = inputText(bytes)
    if String(validating: bytes, as: UTF8.self) != nil {
        require(text.utf8.elementsEqual(bytes), "valid UTF-8 changed while becoming a String", bytes)
    }
    let checker = Checker(text: text, bytes: bytes)
    let signature = checker.checkSignature()
    checker.checkSingleType(signature: signature)
    return 0
}
