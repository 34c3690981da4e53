public import FFIHook

/// A function a batch left out, and why: an ``InlineBatch`` reports one per function it could
/// not plan (``InlineBatch/refusals``), and ``InlineBatch/patch()`` one per function whose
/// patch it could not write. A hook installed on a batch names the functions it could not
/// patch or hook in ``/FFIHook/HookGroupToken/refusals``, as ``/FFIHook/HookError``s whose
/// ``/FFIHook/HookError/symbol`` is the function's name.
///
/// ```swift
/// let zlib = try InlineBatch(library: "libz.so.1")
/// for refusal in zlib.refusals where refusal.reason == .branchIntoPatch {
///     print(refusal.name, refusal.error.message)
/// }
/// ```
public struct InlineRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why a function was left out, in kinds a program can count or test: compare with `==`.
    ///
    /// A struct over a private enum, so that new kinds can be added without breaking a
    /// `switch` in code that uses the library. ``InlineRefusal/error`` says the rest in words.
    public struct Reason: Sendable, Hashable, CustomStringConvertible {
        private enum Value: String, Sendable {
            case notCode, indirectFunction, notAFunctionStart, tooShort, undecodable, unrelocatable
            case ripRelativeOutOfRange, callReturnsIntoPatch, branchIntoPatch, tooManyInstructions
            case noMemory, symbolNotFound, patchFailed, unsupportedPlatform, libraryCode
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The address is not in readable, executable memory.
        public static var notCode: Self { Self(.notCode) }
        /// The address is an IFUNC resolver (`STT_GNU_IFUNC`), which picks the code that runs,
        /// an old version of an IFUNC symbol, whose implementation cannot be asked for, or an
        /// IFUNC symbol whose implementation is another object's (libc's `gettimeofday`, the
        /// vDSO's), to be hooked there.
        public static var indirectFunction: Self { Self(.indirectFunction) }
        /// The address lies inside a function, not at its start.
        public static var notAFunctionStart: Self { Self(.notAFunctionStart) }
        /// The function (with any padding after it) ends before the bytes the patch needs.
        public static var tooShort: Self { Self(.tooShort) }
        /// An instruction in the bytes the patch needs cannot be decoded.
        public static var undecodable: Self { Self(.undecodable) }
        /// An instruction in the bytes the patch needs cannot be moved into a trampoline.
        public static var unrelocatable: Self { Self(.unrelocatable) }
        /// A RIP-relative operand in the bytes the patch needs is beyond reach of the trampoline.
        public static var ripRelativeOutOfRange: Self { Self(.ripRelativeOutOfRange) }
        /// A `call` in the bytes the patch needs would return into the patch: a thread inside
        /// the function it calls would come back into overwritten bytes.
        public static var callReturnsIntoPatch: Self { Self(.callReturnsIntoPatch) }
        /// A branch from elsewhere in the function lands inside the bytes the patch overwrites
        /// (the branch scan proves the patch unsafe).
        public static var branchIntoPatch: Self { Self(.branchIntoPatch) }
        /// The patch would cover more instructions than a plan keeps (16).
        public static var tooManyInstructions: Self { Self(.tooManyInstructions) }
        /// No memory could be mapped, or written, for the function's trampoline.
        public static var noMemory: Self { Self(.noMemory) }
        /// A symbol asked for is not defined as a function in the object.
        public static var symbolNotFound: Self { Self(.symbolNotFound) }
        /// The patch could not be written (a thread sat where it could not be moved, the code
        /// changed, the threads did not stop).
        public static var patchFailed: Self { Self(.patchFailed) }
        /// The function is the library's own: its C and Swift code (symbols `ffh_…`,
        /// `swift_ffi_hook_…`, and Swift functions whose mangled names involve the modules
        /// `FFIHook`, `FFIHookCore`, `FFIHookInline` and `FFIHookObjC` or its C types,
        /// specializations and thunks included, wherever the compiler put them), which every
        /// hooked call runs before it can tell a call of its own from a caller's; or, given by
        /// address, a trampoline or stub in one of its code slabs, a hook's closure or an
        /// attach's stub.
        public static var libraryCode: Self { Self(.libraryCode) }
        /// Inline hooks do not work on this platform.
        public static var unsupportedPlatform: Self { Self(.unsupportedPlatform) }

        /// The reason's name, as the static member is spelled (`branchIntoPatch`).
        public var description: String { value.rawValue }
    }

    /// The function's symbol, or its address in hexadecimal.
    public let name: String
    /// The function's address, when one was found.
    public var address: UnsafeRawPointer? { UnsafeRawPointer(bitPattern: addressBits) }
    private let addressBits: UInt
    /// Why it was left out.
    public let reason: Reason
    /// The error that says so in words (``/FFIHook/HookError/message``), with the symbol.
    public let error: HookError

    init(name: String, address: UInt, reason: Reason, error: HookError) {
        self.name = name
        self.addressBits = address
        self.reason = reason
        self.error = error
    }

    /// The name, the reason and the error's message.
    public var description: String { "\(name): \(reason): \(error.message)" }
}
