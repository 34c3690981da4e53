import FFIHookCore
import FuzzKit

/// Reads one input as a call shape and checks the call interfaces prepared for it.
///
/// Layout: byte 0 chooses the shape (bit 0 set: variadic), byte 1 gives a variadic shape's
/// fixed-argument count (taken modulo the argument count plus three, minus one, so that the
/// counts just outside the arguments come up too), and the rest is the signature's encoding.
/// Encodings the parser refuses end the input; the encoding fuzzer checks those.
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = inputBytes(data, size)
    guard bytes.count > 2 else { return 0 }
    let text = inputText(bytes[2...])
    let signature: Signature
    do {
        signature = try Signature(text)
    } catch {
        require(
            error.offset >= 0 && error.offset <= text.utf8.count,
            "Signature error offset \(error.offset) outside the encoding: \(error)", bytes)
        return 0
    }
    let checker = InterfaceChecker(signature: signature, bytes: bytes)
    if bytes[0] & 1 == 0 {
        checker.checkFixed()
    } else {
        let count = Int(bytes[1]) % (signature.argumentTypes.count + 3) - 1
        checker.checkVariadic(fixedArgumentCount: count)
    }
    return 0
}
