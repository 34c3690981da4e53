internal import CFFIHookObjC

/// A class of the process's Objective-C runtime.
///
/// ```swift
/// let counter = try ObjCClass(named: "Counter")
/// let token = try ObjCHook.before(on: .instance("add:to:", of: counter)) { call in … }
/// ```
///
/// A value holds the class's address; classes are never unloaded by the GNU runtime, so the
/// value stays valid for the life of the process.
public struct ObjCClass: Sendable, Hashable, CustomStringConvertible {
    /// The class's address (a `Class` of the runtime).
    public let address: UInt

    /// The class at `pointer`, a `Class` of the runtime.
    public init(_ pointer: UnsafeRawPointer) {
        address = UInt(bitPattern: pointer)
    }

    /// The registered class called `name`.
    ///
    /// - Throws: ``ObjCHookError/Code-swift.struct/runtimeNotLoaded`` when no Objective-C
    ///   runtime is loaded, ``ObjCHookError/Code-swift.struct/classNotFound`` when no class
    ///   of that name is registered.
    public init(named name: String) throws(ObjCHookError) {
        let runtime = try ObjCRuntime.loaded()
        guard !name.utf8.contains(0), let cls = runtime.lookUpClass(name) else {
            throw ObjCHookError(
                code: .classNotFound, message: "no class of this name is registered with the runtime",
                className: name)
        }
        address = UInt(bitPattern: UnsafeRawPointer(cls))
    }

    /// The class of `object`, an Objective-C object (an `id`): the class the runtime
    /// dispatches its messages through, which may be a subclass made at run time (by
    /// key-value observing, say), not the one `-class` reports.
    ///
    /// - Throws: ``ObjCHookError/Code-swift.struct/runtimeNotLoaded``, or
    ///   ``ObjCHookError/Code-swift.struct/invalidClass`` for a nil object.
    public static func of(_ object: UnsafeRawPointer?) throws(ObjCHookError) -> ObjCClass {
        let runtime = try ObjCRuntime.loaded()
        guard let object else { throw ObjCHookError(code: .invalidClass, message: "the object is nil") }
        guard runtime.kind(of: object) != FFH_OBJC_INVALID, let cls = runtime.classOf(OpaquePointer(object)) else {
            throw ObjCHookError(code: .invalidClass, message: "the pointer points to no object of the runtime")
        }
        return ObjCClass(UnsafeRawPointer(cls))
    }

    /// The class's address as a pointer.
    public var pointer: UnsafeRawPointer { UnsafeRawPointer(bitPattern: address)! }

    var opaque: OpaquePointer { OpaquePointer(pointer) }

    /// The class's name, as the runtime records it (`nil` when no runtime is loaded).
    public var name: String? {
        ObjCRuntime.current.map { $0.className(opaque) }
    }

    /// The class's superclass, `nil` for a root class (or when no runtime is loaded).
    public var superclass: ObjCClass? {
        ObjCRuntime.current?.superclass(of: opaque).map { ObjCClass(UnsafeRawPointer($0)) }
    }

    /// The class's name (`Counter`, or `Counter (metaclass)` for a metaclass), or its address
    /// when the runtime cannot be asked.
    public var description: String {
        guard let runtime = ObjCRuntime.current, let name else { return "Class(0x\(String(address, radix: 16)))" }
        return runtime.isMetaclass(opaque) ? name + " (metaclass)" : name
    }
}
