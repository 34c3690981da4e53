#if compiler(>=6.2)
    /// What every ``CEncodable`` type is: bitwise copyable, with a metatype that any thread may
    /// use, since a hooked call, on whatever thread makes it, reads its arguments through the
    /// types' conformances.
    public typealias CEncodableBase = BitwiseCopyable & SendableMetatype
#else
    /// What every ``CEncodable`` type is: bitwise copyable.
    public typealias CEncodableBase = BitwiseCopyable
#endif

/// A Swift type with exactly one C counterpart, whose encoding typed hooks derive.
///
/// The standard library's fixed-width integers, `Int`/`UInt` (64-bit `long`), `Bool`
/// (`_Bool`), `Float`, `Double` and raw and opaque pointers conform. Imported C structs do
/// not: hook them with a typed overload that takes the encoding, which checks size and
/// alignment instead.
public protocol CEncodable: CEncodableBase {
    /// The type encoding of the C counterpart (`i` for `Int32`, `^v` for a pointer).
    static var typeEncoding: String { get }

    /// Reads a value of this type from `address`, which need not be aligned: how a typed
    /// hook reads each argument of a call.
    ///
    /// The default implementation is the one to use. It is a requirement so that a hooked
    /// call reads each argument through code compiled for its type, which generic code over
    /// a parameter pack does not do (Swift copies a pack's values through their metadata).
    static func loadUnaligned(from address: UnsafeRawPointer) -> Self
}

extension CEncodable {
    /// Reads `MemoryLayout<Self>.size` bytes at `address` as a value of this type.
    @inlinable
    public static func loadUnaligned(from address: UnsafeRawPointer) -> Self {
        address.loadUnaligned(as: Self.self)
    }
}

/// `Int8` stands for C's `signed char` in typed hooks.
extension Int8: CEncodable {
    /// `c`: `signed char`.
    public static var typeEncoding: String { "c" }
}

/// `UInt8` stands for C's `unsigned char` in typed hooks.
extension UInt8: CEncodable {
    /// `C`: `unsigned char`.
    public static var typeEncoding: String { "C" }
}

/// `Int16` stands for C's `short` in typed hooks.
extension Int16: CEncodable {
    /// `s`: `short`.
    public static var typeEncoding: String { "s" }
}

/// `UInt16` stands for C's `unsigned short` in typed hooks.
extension UInt16: CEncodable {
    /// `S`: `unsigned short`.
    public static var typeEncoding: String { "S" }
}

/// `Int32` stands for C's `int` in typed hooks.
extension Int32: CEncodable {
    /// `i`: `int`.
    public static var typeEncoding: String { "i" }
}

/// `UInt32` stands for C's `unsigned int` in typed hooks.
extension UInt32: CEncodable {
    /// `I`: `unsigned int`.
    public static var typeEncoding: String { "I" }
}

/// `Int64` stands for C's `long long` (and a 64-bit `long`) in typed hooks.
extension Int64: CEncodable {
    /// `q`: `long long` (and a 64-bit `long`).
    public static var typeEncoding: String { "q" }
}

/// `UInt64` stands for C's `unsigned long long` in typed hooks.
extension UInt64: CEncodable {
    /// `Q`: `unsigned long long`.
    public static var typeEncoding: String { "Q" }
}

/// `Int` stands for C's 64-bit `long` in typed hooks.
extension Int: CEncodable {
    /// `q` on 64-bit platforms, `i` on 32-bit ones.
    public static var typeEncoding: String { MemoryLayout<Int>.size == 8 ? "q" : "i" }
}

/// `UInt` stands for C's 64-bit `unsigned long` in typed hooks.
extension UInt: CEncodable {
    /// `Q` on 64-bit platforms, `I` on 32-bit ones.
    public static var typeEncoding: String { MemoryLayout<UInt>.size == 8 ? "Q" : "I" }
}

/// `Bool` stands for C's `_Bool` in typed hooks.
extension Bool: CEncodable {
    /// `B`: `_Bool`.
    public static var typeEncoding: String { "B" }

    /// The byte at `address` as C reads a truth value: any nonzero byte is `true`.
    @inlinable
    public static func loadUnaligned(from address: UnsafeRawPointer) -> Bool {
        address.load(as: UInt8.self) != 0
    }
}

/// `Float` stands for C's `float` in typed hooks.
extension Float: CEncodable {
    /// `f`: `float`.
    public static var typeEncoding: String { "f" }
}

/// `Double` stands for C's `double` in typed hooks.
extension Double: CEncodable {
    /// `d`: `double`.
    public static var typeEncoding: String { "d" }
}

/// `OpaquePointer` stands for a C pointer in typed hooks.
extension OpaquePointer: CEncodable {
    /// `^v`: a pointer.
    public static var typeEncoding: String { "^v" }
}

/// `UnsafeRawPointer` stands for a C pointer (`const void *`) in typed hooks.
extension UnsafeRawPointer: CEncodable {
    /// `^v`: a pointer.
    public static var typeEncoding: String { "^v" }
}

/// `UnsafeMutableRawPointer` stands for a C pointer (`void *`) in typed hooks.
extension UnsafeMutableRawPointer: CEncodable {
    /// `^v`: a pointer.
    public static var typeEncoding: String { "^v" }
}

/// `UnsafePointer` stands for a C pointer to its pointee in typed hooks.
extension UnsafePointer: CEncodable {
    /// `^v`: a pointer.
    public static var typeEncoding: String { "^v" }
}

/// `UnsafeMutablePointer` stands for a C pointer to its pointee in typed hooks.
extension UnsafeMutablePointer: CEncodable {
    /// `^v`: a pointer.
    public static var typeEncoding: String { "^v" }
}

/// A pointer type whose optional is a nullable C pointer.
public protocol CPointerEncodable: CEncodable {}

extension OpaquePointer: CPointerEncodable {}
extension UnsafeRawPointer: CPointerEncodable {}
extension UnsafeMutableRawPointer: CPointerEncodable {}
extension UnsafePointer: CPointerEncodable {}
extension UnsafeMutablePointer: CPointerEncodable {}

/// An optional pointer stands for a C pointer that may be NULL in typed hooks.
extension Optional: CEncodable where Wrapped: CPointerEncodable {
    /// `^v`: a pointer that may be NULL.
    public static var typeEncoding: String { "^v" }
}
