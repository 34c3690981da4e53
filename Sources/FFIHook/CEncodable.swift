/// A Swift type with exactly one C counterpart, whose encoding typed hooks derive.
///
/// The standard library's fixed-width integers, `Int`/`UInt` (64-bit `long`), `Bool`
/// (`_Bool`), `Float`, `Double` and raw and opaque pointers conform. Imported C structs do
/// not: hook them with a typed overload that takes the encoding, which checks size and
/// alignment instead.
public protocol CEncodable: BitwiseCopyable {
    /// The type encoding of the C counterpart (`i` for `Int32`, `^v` for a pointer).
    static var typeEncoding: String { get }
}

extension Int8: CEncodable {
    /// `c`: `signed char`.
    public static var typeEncoding: String { "c" }
}

extension UInt8: CEncodable {
    /// `C`: `unsigned char`.
    public static var typeEncoding: String { "C" }
}

extension Int16: CEncodable {
    /// `s`: `short`.
    public static var typeEncoding: String { "s" }
}

extension UInt16: CEncodable {
    /// `S`: `unsigned short`.
    public static var typeEncoding: String { "S" }
}

extension Int32: CEncodable {
    /// `i`: `int`.
    public static var typeEncoding: String { "i" }
}

extension UInt32: CEncodable {
    /// `I`: `unsigned int`.
    public static var typeEncoding: String { "I" }
}

extension Int64: CEncodable {
    /// `q`: `long long` (and a 64-bit `long`).
    public static var typeEncoding: String { "q" }
}

extension UInt64: CEncodable {
    /// `Q`: `unsigned long long`.
    public static var typeEncoding: String { "Q" }
}

extension Int: CEncodable {
    /// `q` on 64-bit platforms, `i` on 32-bit ones.
    public static var typeEncoding: String { MemoryLayout<Int>.size == 8 ? "q" : "i" }
}

extension UInt: CEncodable {
    /// `Q` on 64-bit platforms, `I` on 32-bit ones.
    public static var typeEncoding: String { MemoryLayout<UInt>.size == 8 ? "Q" : "I" }
}

extension Bool: CEncodable {
    /// `B`: `_Bool`.
    public static var typeEncoding: String { "B" }
}

extension Float: CEncodable {
    /// `f`: `float`.
    public static var typeEncoding: String { "f" }
}

extension Double: CEncodable {
    /// `d`: `double`.
    public static var typeEncoding: String { "d" }
}

extension OpaquePointer: CEncodable {
    /// `^v`: a pointer.
    public static var typeEncoding: String { "^v" }
}

extension UnsafeRawPointer: CEncodable {
    /// `^v`: a pointer.
    public static var typeEncoding: String { "^v" }
}

extension UnsafeMutableRawPointer: CEncodable {
    /// `^v`: a pointer.
    public static var typeEncoding: String { "^v" }
}

extension UnsafePointer: CEncodable {
    /// `^v`: a pointer.
    public static var typeEncoding: String { "^v" }
}

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

extension Optional: CEncodable where Wrapped: CPointerEncodable {
    /// `^v`: a pointer that may be NULL.
    public static var typeEncoding: String { "^v" }
}
