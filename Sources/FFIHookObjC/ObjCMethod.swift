internal import CFFIHookObjC

/// An Objective-C method to hook: a selector of a class, instance or class method.
///
/// ```swift
/// let counter = try ObjCClass(named: "Counter")
/// let add = ObjCMethod.instance("add:to:", of: counter)   // -[Counter add:to:]
/// let make = ObjCMethod.class("counterWithStart:", of: counter)  // +[Counter counterWithStart:]
/// ```
public struct ObjCMethod: Sendable, Hashable, CustomStringConvertible {
    /// The class whose method, or whose instances' method, it is.
    public let owner: ObjCClass
    /// The selector's name, as Objective-C spells it (`add:to:`).
    public let selector: String
    /// Whether it is a class method (`+`) rather than an instance method (`-`).
    public let isClassMethod: Bool

    /// The instance method `selector` of `owner`'s instances.
    public static func instance(_ selector: String, of owner: ObjCClass) -> ObjCMethod {
        ObjCMethod(owner: owner, selector: selector, isClassMethod: false)
    }

    /// The class method `selector` of `owner`.
    public static func `class`(_ selector: String, of owner: ObjCClass) -> ObjCMethod {
        ObjCMethod(owner: owner, selector: selector, isClassMethod: true)
    }

    /// The method's type encoding as the runtime records it, frame offsets included
    /// (`i24@0:8i16i20`); the method may be inherited.
    ///
    /// - Throws: ``ObjCHookError`` when no runtime is loaded, the class has no method for the
    ///   selector, or, for a class method, the runtime reads the class as still under
    ///   construction (a class clang compiled for gcc's runtime: see *FFIHookObjC*, which
    ///   says why such a class's class methods cannot be hooked).
    public var typeEncoding: String {
        get throws(ObjCHookError) {
            let target = try resolved()
            guard let selector = target.runtime.selector(selector),
                let method = target.runtime.instanceMethod(of: target.cls, selector: selector)
            else {
                throw target.failure(.selectorNotFound, "the class has no method for this selector and inherits none")
            }
            guard let encoding = target.runtime.typeEncoding(of: method) else {
                throw target.failure(.invalidSignature, "the runtime records no type encoding for the method")
            }
            return encoding
        }
    }

    /// `-[Counter add:to:]`, or `+[Counter counterWithStart:]` for a class method.
    public var description: String {
        "\(isClassMethod ? "+" : "-")[\(owner) \(selector)]"
    }

    /// The runtime, and the class to look the method up in: the metaclass for a class
    /// method. Checks that the class can take a hook.
    func resolved() throws(ObjCHookError) -> MethodRegistry.Target {
        let runtime = try ObjCRuntime.loaded()
        let cls = owner.opaque
        switch runtime.kind(of: owner.pointer) {
        case FFH_OBJC_CLASS, FFH_OBJC_METACLASS: break
        case FFH_OBJC_OBJECT:
            throw ObjCHookError(
                code: .invalidClass,
                message: "the pointer given as a class is an object (hook one object with ObjCObject)",
                selector: selector, isClassMethod: isClassMethod)
        default:
            throw ObjCHookError(
                code: .invalidClass, message: "the pointer given as a class points to no class of the runtime",
                selector: selector, isClassMethod: isClassMethod)
        }
        let name = runtime.className(cls)
        func failure(_ code: ObjCHookError.Code, _ message: String) -> ObjCHookError {
            ObjCHookError(
                code: code, message: message, className: name, selector: selector, isClassMethod: isClassMethod)
        }
        guard !runtime.isMetaclass(cls) else {
            throw failure(
                .invalidClass, "the class given is a metaclass; name the class itself and hook a class method")
        }
        // A class made with objc_allocateClassPair is found by name only once registered.
        guard runtime.lookUpClass(name) == cls else {
            throw failure(
                .classNotRegistered,
                "the class is not registered with the runtime (objc_registerClassPair was not called)"
            )
        }
        // A subclass the library made for per-instance hooks (which an object's dispatch class
        // names): a class-wide hook there would run for every object later given hooks of its
        // own, not for one.
        guard ffh_objc_instance_class_find(runtime.functions, cls) != cls else {
            throw failure(
                .invalidClass,
                "the class is one the library made for the objects given hooks of their own; hook those objects (ObjCObject) or the class they report"
            )
        }
        guard isClassMethod else {
            return MethodRegistry.Target(
                runtime: runtime, cls: cls, className: name, selector: selector, isClassMethod: false)
        }
        guard let metaclass = runtime.classOf(cls) else {
            throw failure(.invalidClass, "the runtime reports no metaclass for the class")
        }
        // Every registered metaclass has a superclass (a root class's metaclass has the root
        // class): none means the runtime reads the metaclass as still under construction.
        guard runtime.superclass(of: metaclass) != nil else {
            throw failure(
                .metaclassUnderConstruction,
                "the runtime marks the class's metaclass as under construction (as clang's GNU-runtime output does), and loses methods added to it"
            )
        }
        return MethodRegistry.Target(
            runtime: runtime, cls: metaclass, className: name, selector: selector, isClassMethod: true)
    }
}
