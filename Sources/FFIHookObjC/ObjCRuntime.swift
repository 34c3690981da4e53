internal import CFFIHookObjC
import Synchronization

/// The process's Objective-C runtime, found by name at run time (see `ffh_objc.h`).
struct ObjCRuntime: @unchecked Sendable {
    // Sendable: the table is filled once, before it is published, and never written again.
    let functions: UnsafePointer<ffh_objc_runtime>

    /// The runtime, or `runtimeNotLoaded`.
    static func loaded() throws(ObjCHookError) -> ObjCRuntime {
        guard let functions = ffh_objc_runtime_functions() else {
            throw ObjCHookError(
                code: .runtimeNotLoaded,
                message:
                    "no Objective-C runtime is loaded in this process (gcc's libobjc: link it, or load a library that links it, first)"
            )
        }
        return ObjCRuntime(functions: functions)
    }

    /// How many times this module has changed the runtime's classes: an implementation set,
    /// a method added, a class registered. Each makes the runtime replace dispatch tables.
    static let changes = Atomic<Int>(0)

    /// The runtime if one is loaded.
    static var current: ObjCRuntime? {
        ffh_objc_runtime_functions().map { ObjCRuntime(functions: $0) }
    }

    /// What `pointer` is (a class, a metaclass, an object), read without faulting.
    func kind(of pointer: UnsafeRawPointer) -> ffh_objc_pointer_kind {
        ffh_objc_pointer_kind_of(functions, pointer)
    }

    func className(_ cls: OpaquePointer) -> String {
        guard let name = functions.pointee.class_getName(cls) else { return "?" }
        return String(cString: name)
    }

    func lookUpClass(_ name: String) -> OpaquePointer? {
        functions.pointee.objc_lookUpClass(name)
    }

    func classOf(_ object: OpaquePointer) -> OpaquePointer? {
        functions.pointee.object_getClass(object)
    }

    func superclass(of cls: OpaquePointer) -> OpaquePointer? {
        functions.pointee.class_getSuperclass(cls)
    }

    func isMetaclass(_ cls: OpaquePointer) -> Bool {
        functions.pointee.class_isMetaClass(cls) != 0
    }

    /// The selector called `name`; nil for an empty name or one with a NUL byte, which the
    /// runtime, reading a C string, would take for a shorter name.
    func selector(_ name: String) -> OpaquePointer? {
        guard !name.isEmpty, !name.utf8.contains(0) else { return nil }
        return functions.pointee.sel_registerName(name)
    }

    func instanceMethod(of cls: OpaquePointer, selector: OpaquePointer) -> OpaquePointer? {
        functions.pointee.class_getInstanceMethod(cls, selector)
    }

    func defines(_ cls: OpaquePointer, _ method: OpaquePointer) -> Bool {
        ffh_objc_class_defines(functions, cls, method) != 0
    }

    func typeEncoding(of method: OpaquePointer) -> String? {
        functions.pointee.method_getTypeEncoding(method).map { String(cString: $0) }
    }

    func implementation(of method: OpaquePointer) -> UInt {
        UInt(bitPattern: unsafeBitCast(functions.pointee.method_getImplementation(method), to: Int.self))
    }

    /// Sets `method`'s implementation, then refreshes the dispatch tables of `owner` (the
    /// class that defines it) and its subclasses: `method_setImplementation` of the GNU
    /// runtime updates the defining class's table alone, so subclasses whose tables were
    /// already built would go on calling the old implementation.
    ///
    /// The owner's dispatch table is built first: `method_setImplementation` writes the new
    /// implementation into the table of every class that defines the method, and the table
    /// of a class no message has reached yet is the runtime's one shared placeholder, after
    /// which every class without a table of its own would dispatch the selector to it.
    func setImplementation(of method: OpaquePointer, in owner: OpaquePointer, to implementation: UInt) {
        if let selector = functions.pointee.method_getName(method) {
            prepareDispatch(of: owner, selector: selector)
        }
        setImplementation(of: method, to: implementation)
        functions.pointee.update_dispatch_table?(owner)
        Self.changes.add(1, ordering: .relaxed)
        ffh_objc_count_change()
    }

    /// Builds the dispatch tables of `cls` and its superclasses if no message has done so
    /// yet (sending `+initialize` as the first message would). The runtime builds them
    /// lazily, and a class whose table is built while its methods are being changed can end
    /// up dispatching an inherited message back to the subclass's method.
    func prepareDispatch(of cls: OpaquePointer, selector: OpaquePointer) {
        _ = functions.pointee.class_getMethodImplementation(cls, selector)
    }

    private func setImplementation(of method: OpaquePointer, to implementation: UInt) {
        _ = functions.pointee.method_setImplementation(
            method, unsafeBitCast(Int(bitPattern: implementation), to: ffh_objc_IMP?.self))
    }

    /// Moves `object` from `expected` to `cls` unless another thread set its class meanwhile
    /// (``ffh_objc_exchange_class``); whether it did.
    func exchangeClass(of object: OpaquePointer, from expected: OpaquePointer, to cls: OpaquePointer) -> Bool {
        ffh_objc_exchange_class(object, expected, cls) != 0
    }

    /// What `[object class]` returns: the message sent as compiled code sends it. An object
    /// whose class has no `-class` (a root class other than NSObject) reports its class as
    /// the runtime has it, before any subclass made for per-instance hooks.
    func reportedClass(of object: OpaquePointer) -> OpaquePointer? {
        guard let selector = selector("class"), let cls = classOf(object) else { return nil }
        guard instanceMethod(of: cls, selector: selector) != nil,
            let implementation = functions.pointee.objc_msg_lookup(object, selector)
        else { return ffh_objc_instance_class_method(object, selector) }
        typealias ClassMethod = @convention(c) (OpaquePointer?, OpaquePointer?) -> OpaquePointer?
        return unsafeBitCast(implementation, to: ClassMethod.self)(object, selector)
    }

    func addMethod(to cls: OpaquePointer, selector: OpaquePointer, implementation: UnsafeRawPointer, types: String)
        -> Bool
    {
        Self.changes.add(1, ordering: .relaxed)
        ffh_objc_count_change()
        return functions.pointee.class_addMethod(
            cls, selector, unsafeBitCast(implementation, to: ffh_objc_IMP.self), types) != 0
    }
}
