// The entry point the fuzzers share.
//
// SwiftPM gives an executable's `main` another name, so libFuzzer's own `main` cannot be
// used; each fuzzer starts the libFuzzer driver itself and hands it its callback.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// libFuzzer's driver: parses the command line, then calls `callback` once per input.
@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// Runs libFuzzer with the process's command line and `callback` as the function under
/// test, then exits with libFuzzer's status.
public func runFuzzer(_ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
    var argumentCount = CommandLine.argc
    var arguments = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argumentCount, &arguments, callback))
}

/// The bytes of one input, copied out of libFuzzer's buffer.
public func inputBytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    if let data, size > 0 { Array(UnsafeBufferPointer(start: data, count: size)) } else { [] }
}
