/// A signature that cannot be called as asked, with the value at fault and the reason.
///
/// ```
/// argument 2 (float) cannot be variadic: C promotes it to double, write 'd'; in signature "ii.f"
/// ```
public struct CallInterfaceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Which value of the signature the error is about.
    public enum Position: Sendable, Hashable, CustomStringConvertible {
        /// The argument at this index (0-based).
        case argument(Int)
        /// The return value.
        case returnValue

        /// "argument N" or "return value".
        public var description: String {
            switch self {
            case .argument(let index): "argument \(index)"
            case .returnValue: "return value"
            }
        }
    }

    /// What went wrong.
    public enum Code: Sendable, Hashable {
        /// The C calling convention has no way, or libffi no correct way, to pass this value.
        case unsupportedValue(reason: String)
        /// libffi refused to prepare the call interface (its `ffi_status`).
        case libffiRejected(status: Int)
        /// libffi laid the value out differently from the C compiler; calling would corrupt it.
        case layoutMismatch(libffiSize: Int, libffiAlignment: Int)
        /// A variadic interface's fixed-argument count outside `0...argumentCount`.
        case invalidFixedArgumentCount(Int)
        /// A variadic argument of a type C promotes (`float` to `double`, narrower integers to `int`).
        case variadicPromotion(promotedEncoding: String)
        /// A typed call given a different number of arguments than the signature has.
        case argumentCountMismatch(expected: Int, actual: Int)
        /// A typed call whose Swift type does not match the C type at `position`.
        case typeMismatch(swiftType: String)
    }

    /// The canonical encoding of the signature.
    public var signature: String
    /// The value at fault, when there is one.
    public var position: Position?
    /// The type at `position`, when there is one.
    public var type: CType?
    /// What went wrong.
    public var code: Code

    /// Creates an error about `position` of `signature`.
    public init(signature: Signature, position: Position?, code: Code) {
        self.signature = signature.encoding
        self.position = position
        switch position {
        case .argument(let index)?:
            self.type = signature.argumentTypes.indices.contains(index) ? signature.argumentTypes[index] : nil
        case .returnValue?: self.type = signature.returnType
        case nil: self.type = nil
        }
        self.code = code
    }

    /// The position, its type, the problem and the signature, on one line.
    public var description: String {
        var text = ""
        if let position {
            text += "\(position)"
            if let type { text += " (\(type))" }
            text += " "
        }
        switch code {
        case .unsupportedValue(let reason):
            text += "cannot be passed: \(reason)"
        case .libffiRejected(let status):
            text += "libffi rejected the call interface (ffi_status \(status))"
        case .layoutMismatch(let size, let alignment):
            text +=
                "has size \(type?.size ?? 0) and alignment \(type?.alignment ?? 0) in C, "
                + "but libffi computes size \(size) and alignment \(alignment)"
        case .invalidFixedArgumentCount(let count):
            text += "fixed-argument count \(count) is outside the signature's arguments"
        case .variadicPromotion(let promoted):
            text += "cannot be variadic: C promotes it, write '\(promoted)'"
        case .argumentCountMismatch(let expected, let actual):
            text += "call passes \(actual) arguments where the signature has \(expected)"
        case .typeMismatch(let swiftType):
            text += "does not match the Swift type \(swiftType)"
        }
        return text + "; in signature \(quoted(signature))"
    }
}
