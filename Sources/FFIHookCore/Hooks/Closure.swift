internal import CFFI

/// One libffi closure: executable code that calls `handler` with `userData`.
///
/// The closure is freed with this object. Debian's libffi allocates closures in pages that
/// are writable and executable at once; where that is forbidden, allocation fails and
/// ``make(cif:handler:userData:)`` reports it instead of crashing.
final class Closure {
    typealias Handler =
        @convention(c) (
            UnsafeMutablePointer<ffi_cif>?, UnsafeMutableRawPointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
            UnsafeMutableRawPointer?
        ) -> Void

    /// The address callers jump to.
    let code: UnsafeRawPointer
    private let closure: UnsafeMutablePointer<ffi_closure>

    enum Failure: Error {
        case allocation
        case preparation(status: Int)
    }

    static func make(
        cif: UnsafeMutablePointer<ffi_cif>, handler: Handler, userData: UnsafeMutableRawPointer
    ) throws(Failure) -> Closure {
        var code: UnsafeMutableRawPointer?
        guard let raw = ffi_closure_alloc(CFFI_closure_size(), &code), let code else { throw .allocation }
        let closure = raw.assumingMemoryBound(to: ffi_closure.self)
        let status = ffi_prep_closure_loc(closure, cif, handler, userData, code)
        guard status == FFI_OK else {
            ffi_closure_free(raw)
            throw .preparation(status: Int(status.rawValue))
        }
        return Closure(code: UnsafeRawPointer(code), closure: closure)
    }

    private init(code: UnsafeRawPointer, closure: UnsafeMutablePointer<ffi_closure>) {
        self.code = code
        self.closure = closure
    }

    deinit {
        ffi_closure_free(closure)
    }
}
