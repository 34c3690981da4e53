/// One Objective-C object, for hooks that run for it alone.
///
/// ```swift
/// let token = try ObjCHook.before(on: ObjCObject(counter), "add:to:") { call in … }
/// ```
///
/// The value holds the object's address and does not retain the object. Typed blocks get
/// their receiver as one, so that printing it shows the object (`<Counter: 0x…>`, the form of
/// `NSObject`'s `-description`) rather than a bare address; ``pointer`` is the `id` itself.
/// An `id` argument or result a typed block takes as an `ObjCObject` may be `nil`: its address
/// is then 0 (``isNil``), it prints as `nil`, and it has no classes.
public struct ObjCObject: Sendable, Hashable, BitwiseCopyable, CustomStringConvertible {
    /// The object's address (an `id`).
    public let address: UInt

    /// The object at `pointer`, an `id`.
    public init(_ pointer: UnsafeRawPointer) {
        address = UInt(bitPattern: pointer)
    }

    /// Whether this is a `nil` `id` (address 0), as a typed block's `id` argument or result
    /// may be.
    public var isNil: Bool { address == 0 }

    /// The object's address as a pointer. A `nil` object (``isNil``) has none: reading this
    /// then stops the program, so check ``isNil`` (or ``address``) first where `nil` may come.
    public var pointer: UnsafeRawPointer {
        guard let pointer = UnsafeRawPointer(bitPattern: address) else {
            preconditionFailure("ObjCObject.pointer of a nil object (address 0): check isNil first")
        }
        return pointer
    }

    /// The class the object reports (`[object class]`), which per-instance hooks and
    /// key-value observing leave as it was; `nil` for a `nil` object and when no runtime is
    /// loaded.
    public var reportedClass: ObjCClass? {
        guard let object = OpaquePointer(bitPattern: address), let runtime = ObjCRuntime.current else { return nil }
        return runtime.reportedClass(of: object).map { ObjCClass(UnsafeRawPointer($0)) }
    }

    /// The class the runtime dispatches the object's messages through (`object_getClass`),
    /// which is a subclass made at run time while the object has hooks of its own or is
    /// observed; `nil` for a `nil` object and when no runtime is loaded.
    public var dispatchClass: ObjCClass? {
        guard let object = OpaquePointer(bitPattern: address), let runtime = ObjCRuntime.current else { return nil }
        return runtime.classOf(object).map { ObjCClass(UnsafeRawPointer($0)) }
    }

    /// `<Counter: 0x…>`, as `NSObject`'s `-description` prints an object, with the class the
    /// object reports (``reportedClass``), or the address alone when no runtime is loaded;
    /// `nil` for a `nil` object.
    ///
    /// Sends the object no message but `-class`: a class's own `-description` (an `NSString`'s
    /// text, say) is not used, and printing is safe inside any hook block.
    public var description: String {
        guard address != 0 else { return "nil" }
        let address = "0x" + String(address, radix: 16)
        guard let name = reportedClass?.name else { return address }
        return "<\(name): \(address)>"
    }
}
