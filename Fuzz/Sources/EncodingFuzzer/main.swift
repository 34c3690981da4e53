// Entry point of the encoding fuzzer.
//
// SwiftPM gives an executable's `main` another name, so libFuzzer's own `main` cannot be
// used; the program starts the libFuzzer driver itself and hands it `fuzzOneInput`.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// libFuzzer's driver: parses the command line, then calls `callback` once per input.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

var argumentCount = CommandLine.argc
var arguments = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argumentCount, &arguments, fuzzOneInput))
