/// One Objective-C object, for hooks that run for it alone.
///
/// ```swift
/// let token = try ObjCHook.before(on: ObjCObject(counter), "add:to:") { call in … }
/// ```
///
/// The value holds the object's address and does not retain the object. Typed blocks get
/// their receiver as one, so that printing it shows the object (`<Counter: 0x…>`, the form of
/// `NSObject`'s `-description`) rather than a bare address; ``pointer`` is the `id` itself.
public struct ObjCObject: Sendable, Hashable, BitwiseCopyable, CustomStringConvertible {
    /// The object's address (an `id`).
    public let address: UInt

    /// The object at `pointer`, an `id`.
    public init(_ pointer: UnsafeRawPointer) {
        address = UInt(bitPattern: pointer)
    }

    /// The object's address as a pointer.
    public var pointer: UnsafeRawPointer { UnsafeRawPointer(bitPattern: address)! }

    /// The class the object reports (`[object class]`), which per-instance hooks and
    /// key-value observing leave as it was; `nil` when no runtime is loaded.
    public var reportedClass: ObjCClass? {
        guard let runtime = ObjCRuntime.current else { return nil }
        return runtime.reportedClass(of: OpaquePointer(pointer)).map { ObjCClass(UnsafeRawPointer($0)) }
    }

    /// The class the runtime dispatches the object's messages through (`object_getClass`),
    /// which is a subclass made at run time while the object has hooks of its own or is
    /// observed; `nil` when no runtime is loaded.
    public var dispatchClass: ObjCClass? {
        guard let runtime = ObjCRuntime.current else { return nil }
        return runtime.classOf(OpaquePointer(pointer)).map { ObjCClass(UnsafeRawPointer($0)) }
    }

    /// `<Counter: 0x…>`, as `NSObject`'s `-description` prints an object, with the class the
    /// object reports (``reportedClass``), or the address alone when no runtime is loaded.
    ///
    /// Sends the object no message but `-class`: a class's own `-description` (an `NSString`'s
    /// text, say) is not used, and printing is safe inside any hook block.
    public var description: String {
        let address = "0x" + String(address, radix: 16)
        guard let name = reportedClass?.name else { return address }
        return "<\(name): \(address)>"
    }
}
