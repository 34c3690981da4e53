internal import CFFI

/// The library's only calls into libffi's preparation and call functions.
enum LibFFI {
    /// `ffi_prep_cif`, or `ffi_prep_cif_var` when `fixedArgumentCount` is given.
    static func prepare(
        _ cif: UnsafeMutablePointer<ffi_cif>, returnType: UnsafeMutablePointer<ffi_type>,
        argumentTypes: UnsafeMutablePointer<UnsafeMutablePointer<ffi_type>?>?, count: Int,
        fixedArgumentCount: Int?
    ) -> ffi_status {
        if let fixedArgumentCount {
            return ffi_prep_cif_var(
                cif, ffh_default_abi(), UInt32(fixedArgumentCount), UInt32(count), returnType, argumentTypes)
        }
        return ffi_prep_cif(cif, ffh_default_abi(), UInt32(count), returnType, argumentTypes)
    }

    /// `ffi_call`.
    static func call(
        _ cif: UnsafeMutablePointer<ffi_cif>, _ function: UnsafeRawPointer,
        _ returnValue: UnsafeMutableRawPointer?, _ arguments: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
    ) {
        ffi_call(cif, unsafeBitCast(function, to: (@convention(c) () -> Void).self), returnValue, arguments)
    }
}
