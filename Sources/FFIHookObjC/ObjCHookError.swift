public import FFIHook
import FFIHookCore

/// An Objective-C method that could not be hooked.
///
/// Tell problems apart by ``code-swift.property``; ``message`` says what went wrong in words,
/// and ``className``, ``selector``, ``encoding`` and ``hookError`` carry the inputs it
/// concerns. The description names the method the way Objective-C writes it:
///
/// ```
/// cannot hook -[Counter add:to:]: the class has no method for this selector and inherits none
/// ```
public struct ObjCHookError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem it is: one of the static members below.
    ///
    /// A struct rather than an enum, so that new kinds can be added without breaking a
    /// `switch` in code that uses the library: compare with `==`.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Value: String, Sendable {
            case runtimeNotLoaded, classNotFound, invalidClass, classNotRegistered, metaclassUnderConstruction
            case selectorNotFound, invalidSignature, signatureMismatch, methodNotAdded, hookFailed, hooksInstalled
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// No Objective-C runtime (gcc's `libobjc`) is loaded in the process, or the loaded
        /// one lacks a function this module needs.
        public static var runtimeNotLoaded: Self { Self(.runtimeNotLoaded) }
        /// No class of the given name is registered with the runtime.
        public static var classNotFound: Self { Self(.classNotFound) }
        /// The pointer given as a class or an object is NULL, points to nothing the runtime
        /// made, or is the other kind (an object where a class is expected, or the reverse).
        public static var invalidClass: Self { Self(.invalidClass) }
        /// The class was made with `objc_allocateClassPair` and is not registered yet: its
        /// methods are not in use, and the runtime does not update it as it does registered
        /// classes.
        public static var classNotRegistered: Self { Self(.classNotRegistered) }
        /// The class's metaclass carries the runtime's "under construction" mark (clang's
        /// GNU-runtime output sets it on classes it emits): the runtime reports no superclass
        /// for it and loses or refuses methods added to it, so its class methods are not hooked.
        public static var metaclassUnderConstruction: Self { Self(.metaclassUnderConstruction) }
        /// Neither the class nor a superclass has a method for the selector. A selector the
        /// class only answers through message forwarding is refused too: the runtime's
        /// forwarding entry is never installed as a method's implementation.
        public static var selectorNotFound: Self { Self(.selectorNotFound) }
        /// The method's type encoding, as the runtime gives it, cannot be parsed or passed
        /// (``ObjCHookError/encoding`` is the encoding, ``ObjCHookError/hookError`` the cause
        /// when libffi cannot pass one of its types).
        public static var invalidSignature: Self { Self(.invalidSignature) }
        /// The signature given for the hook does not describe the method's types as the
        /// runtime records them.
        public static var signatureMismatch: Self { Self(.signatureMismatch) }
        /// The method is inherited, and the runtime did not take the overriding method this
        /// module adds to the class so that the hook covers the class alone.
        public static var methodNotAdded: Self { Self(.methodNotAdded) }
        /// The hook engine refused the hook; ``ObjCHookError/hookError`` says why.
        public static var hookFailed: Self { Self(.hookFailed) }
        /// Hooks are installed on the method whose implementation was asked back
        /// (``ObjCHook/restoreOriginalImplementation(of:)``): it is given back only once
        /// every hook on it has been removed.
        public static var hooksInstalled: Self { Self(.hooksInstalled) }

        /// The code's name, as the static member is spelled (`selectorNotFound`).
        public var description: String { value.rawValue }
    }

    /// What kind of problem it is.
    public var code: Code
    /// What went wrong, in words, without the method's name.
    public var message: String
    /// The name of the class, when the error concerns one.
    public var className: String?
    /// The selector, when the error concerns one (`add:to:`).
    public var selector: String?
    /// Whether the method is a class method (`+`) rather than an instance method (`-`).
    public var isClassMethod: Bool
    /// The method's type encoding as the runtime records it, when there is one.
    public var encoding: String?
    /// The hook engine's error, for ``Code-swift.struct/hookFailed`` and for a signature
    /// libffi cannot pass.
    public var hookError: HookError?

    /// Creates an error.
    public init(
        code: Code, message: String, className: String? = nil, selector: String? = nil, isClassMethod: Bool = false,
        encoding: String? = nil, hookError: HookError? = nil
    ) {
        self.code = code
        self.message = message
        self.className = className
        self.selector = selector
        self.isClassMethod = isClassMethod
        self.encoding = encoding
        self.hookError = hookError
    }

    /// Why the runtime cannot register a selector named `name`: it is empty, or holds a NUL
    /// byte.
    static func unregistrable(selector name: String) -> String {
        if name.isEmpty { return "the selector's name is empty: the runtime cannot register it" }
        if let nul = name.utf8.firstIndex(of: 0) {
            return
                "the selector's name holds a NUL byte (at byte \(name.utf8.distance(from: name.utf8.startIndex, to: nul))): "
                + "the runtime cannot register it"
        }
        return "the runtime cannot register the selector's name"
    }

    /// Whether the error came from giving a method its implementation back
    /// (``ObjCHook/restoreOriginalImplementation(of:)``): its description says `restore`.
    var restoring = false

    /// `cannot hook -[Counter add:to:]: …` (`cannot restore` for
    /// ``Code-swift.struct/hooksInstalled`` and the other errors of a restore), or the message
    /// alone when no method is named.
    public var description: String {
        let verb = restoring || code == .hooksInstalled ? "restore" : "hook"
        guard let selector else {
            guard let className else { return message }
            return "cannot \(verb) a method of \(className): \(message)"
        }
        let method = "\(isClassMethod ? "+" : "-")[\(className ?? "?") \(escaped(selector))]"
        return "cannot \(verb) \(method): \(message)"
    }
}
