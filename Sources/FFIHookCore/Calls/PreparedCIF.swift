package import CFFI

/// One prepared `ffi_cif` and the argument-type array it points to, freed together.
package final class PreparedCIF {
    package let cif: UnsafeMutablePointer<ffi_cif>
    private let argumentTypes: UnsafeMutablePointer<UnsafeMutablePointer<ffi_type>?>

    /// libffi's refusal to prepare a cif, with its `ffi_status`.
    struct PreparationFailure: Error {
        let status: Int
    }

    /// Prepares a cif; throws libffi's status when it refuses, having freed what it took.
    static func prepare(
        returnType: UnsafeMutablePointer<ffi_type>, argumentTypes types: [UnsafeMutablePointer<ffi_type>],
        fixedArgumentCount: Int?
    ) throws(PreparationFailure) -> PreparedCIF {
        let cif = UnsafeMutablePointer<ffi_cif>.allocate(capacity: 1)
        cif.initialize(to: ffi_cif())
        let argumentTypes = UnsafeMutablePointer<UnsafeMutablePointer<ffi_type>?>.allocate(
            capacity: max(types.count, 1))
        for (index, type) in types.enumerated() { argumentTypes[index] = type }
        let status = LibFFI.prepare(
            cif, returnType: returnType, argumentTypes: argumentTypes, count: types.count,
            fixedArgumentCount: fixedArgumentCount)
        guard status == FFI_OK else {
            cif.deallocate()
            argumentTypes.deallocate()
            throw PreparationFailure(status: Int(status.rawValue))
        }
        return PreparedCIF(cif: cif, argumentTypes: argumentTypes)
    }

    private init(
        cif: UnsafeMutablePointer<ffi_cif>, argumentTypes: UnsafeMutablePointer<UnsafeMutablePointer<ffi_type>?>
    ) {
        self.cif = cif
        self.argumentTypes = argumentTypes
    }

    deinit {
        cif.deallocate()
        argumentTypes.deallocate()
    }
}
