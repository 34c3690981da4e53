internal import CFFI
import Synchronization

/// One libffi closure: executable code that calls `handler` with `userData`.
///
/// The closure is freed with this object. Debian's libffi allocates closures in pages that
/// are writable and executable at once; where the kernel forbids that (memory-deny-write-
/// execute) it maps a temporary file twice instead, so the code address differs from the
/// writable one. Where neither works, allocation fails and
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

    /// When set, allocation fails as it does where writable and executable memory is
    /// forbidden and libffi has no fallback; lets tests reach that path.
    package static let failsAllocationForTesting = Atomic<Bool>(false)

    static func make(
        cif: UnsafeMutablePointer<ffi_cif>, handler: Handler, userData: UnsafeMutableRawPointer
    ) throws(Failure) -> Closure {
        if failsAllocationForTesting.load(ordering: .relaxed) { throw .allocation }
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
