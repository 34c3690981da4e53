extension CType {
    /// The scalar type codes of the encoding grammar.
    ///
    /// `l`/`L` are 32-bit (the runtime's `long` from 32-bit days); compilers encode a 64-bit
    /// `long` as `q`/`Q`. `t`/`T` are 128-bit integers, `D` is `long double`.
    public enum Primitive: UInt8, Sendable, Hashable, CaseIterable {
        /// `c`: `char` / `signed char`.
        case char = 0x63
        /// `C`: `unsigned char`.
        case unsignedChar = 0x43
        /// `s`: `short`.
        case short = 0x73
        /// `S`: `unsigned short`.
        case unsignedShort = 0x53
        /// `i`: `int`.
        case int = 0x69
        /// `I`: `unsigned int`.
        case unsignedInt = 0x49
        /// `l`: a 32-bit `long`.
        case long = 0x6C
        /// `L`: a 32-bit `unsigned long`.
        case unsignedLong = 0x4C
        /// `q`: `long long` (and a 64-bit `long`).
        case longLong = 0x71
        /// `Q`: `unsigned long long` (and a 64-bit `unsigned long`).
        case unsignedLongLong = 0x51
        /// `t`: `__int128`.
        case int128 = 0x74
        /// `T`: `unsigned __int128`.
        case unsignedInt128 = 0x54
        /// `f`: `float`.
        case float = 0x66
        /// `d`: `double`.
        case double = 0x64
        /// `D`: `long double`.
        case longDouble = 0x44
        /// `B`: `_Bool`.
        case bool = 0x42

        /// The encoding character.
        public var code: Character { Character(Unicode.Scalar(rawValue)) }

        /// `sizeof` on this platform.
        public var size: Int {
            switch self {
            case .char, .unsignedChar, .bool: 1
            case .short, .unsignedShort: 2
            case .int, .unsignedInt, .long, .unsignedLong, .float: 4
            case .longLong, .unsignedLongLong, .double: 8
            case .int128, .unsignedInt128: 16
            case .longDouble: Platform.longDoubleSize
            }
        }

        /// `_Alignof` on this platform.
        public var alignment: Int {
            switch self {
            case .longDouble: Platform.longDoubleAlignment
            default: size
            }
        }

        /// Whether this is an integer type (including `_Bool`).
        public var isInteger: Bool {
            switch self {
            case .float, .double, .longDouble: false
            default: true
            }
        }

        /// Whether this is a floating-point type.
        public var isFloatingPoint: Bool { !isInteger }

        /// Whether this is a signed integer type.
        public var isSigned: Bool {
            switch self {
            case .char, .short, .int, .long, .longLong, .int128: true
            default: false
            }
        }
    }
}

/// Facts about the C ABI of the platform the library was built for.
enum Platform {
    #if arch(x86_64)
        static let longDoubleSize = 16
        static let longDoubleAlignment = 16
    #elseif arch(arm64)
        static let longDoubleSize = 16
        static let longDoubleAlignment = 16
    #else
        static let longDoubleSize = MemoryLayout<Double>.size
        static let longDoubleAlignment = MemoryLayout<Double>.alignment
    #endif
    static let pointerSize = MemoryLayout<UnsafeRawPointer>.size
}
