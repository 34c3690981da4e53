/// A signature that cannot be called as asked: what kind of problem, the value at fault, and
/// what is wrong in words.
///
/// ```
/// argument 1 (f) cannot be variadic: C promotes it, write 'd'; in signature "iif"
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

    /// What kind of problem a signature has: one of the static members below.
    ///
    /// A code is a struct rather than an enum so that new kinds of problem can be added
    /// without breaking a `switch` in code that uses the library: compare with `==`.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Value: String, Sendable {
            case unsupportedValue, libffiRejected, layoutMismatch, invalidFixedArgumentCount
            case variadicPromotion, argumentCountMismatch, typeMismatch
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The C calling convention has no way, or libffi no correct way, to pass this value.
        public static var unsupportedValue: Self { Self(.unsupportedValue) }
        /// libffi refused to prepare the call interface.
        public static var libffiRejected: Self { Self(.libffiRejected) }
        /// libffi laid the value out differently from the C compiler; calling would corrupt it.
        public static var layoutMismatch: Self { Self(.layoutMismatch) }
        /// A variadic interface's fixed-argument count outside `0...argumentCount`.
        public static var invalidFixedArgumentCount: Self { Self(.invalidFixedArgumentCount) }
        /// A variadic argument of a type C promotes (`float` to `double`, narrower integers to `int`).
        public static var variadicPromotion: Self { Self(.variadicPromotion) }
        /// Swift values or a Swift block with a different number of arguments than the signature.
        public static var argumentCountMismatch: Self { Self(.argumentCountMismatch) }
        /// A Swift type that does not match the C type at the error's position.
        public static var typeMismatch: Self { Self(.typeMismatch) }

        /// The code's name, as the static member is spelled (`typeMismatch`).
        public var description: String { value.rawValue }
    }

    /// What kind of problem it is.
    public var code: Code
    /// The signature.
    public var signature: Signature
    /// The value at fault, when there is one.
    public var position: Position?
    /// The type at `position`, when there is one.
    public var type: CType?
    /// What is wrong, in words, with the position and its type but without the signature:
    /// `argument 2 (float) cannot be variadic: C promotes it, write 'd'`.
    public var message: String

    /// Creates an error about `position` of `signature`.
    public init(code: Code, signature: Signature, position: Position?, message: String) {
        self.code = code
        self.signature = signature
        self.position = position
        switch position {
        case .argument(let index)?:
            self.type = signature.argumentTypes.indices.contains(index) ? signature.argumentTypes[index] : nil
        case .returnValue?: self.type = signature.returnType
        case nil: self.type = nil
        }
        self.message = message
    }

    /// Creates the error for `problem` at `position` of `signature`, with its message.
    package init(signature: Signature, position: Position?, problem: Problem) {
        self.init(code: problem.code, signature: signature, position: position, message: "")
        var text = ""
        if let position {
            text += "\(position)"
            if let type { text += " (\(type))" }
            text += " "
        }
        switch problem {
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
            text += "\(actual) \(actual == 1 ? "argument" : "arguments") given where the signature has \(expected)"
        case .typeMismatch(let swiftType):
            text += "does not match the Swift type \(swiftType)"
        }
        message = text
    }

    /// The message and the signature, on one line.
    public var description: String {
        message + "; in signature \(quoted(signature.encoding))\(signature.variadicNote)"
    }

    /// A problem found while preparing or checking a call, with the details its message needs.
    package enum Problem: Sendable, Hashable {
        case unsupportedValue(reason: String)
        case libffiRejected(status: Int)
        case layoutMismatch(libffiSize: Int, libffiAlignment: Int)
        case invalidFixedArgumentCount(Int)
        case variadicPromotion(promotedEncoding: String)
        case argumentCountMismatch(expected: Int, actual: Int)
        case typeMismatch(swiftType: String)

        /// The code of this kind of problem.
        package var code: Code {
            switch self {
            case .unsupportedValue: .unsupportedValue
            case .libffiRejected: .libffiRejected
            case .layoutMismatch: .layoutMismatch
            case .invalidFixedArgumentCount: .invalidFixedArgumentCount
            case .variadicPromotion: .variadicPromotion
            case .argumentCountMismatch: .argumentCountMismatch
            case .typeMismatch: .typeMismatch
            }
        }
    }
}
