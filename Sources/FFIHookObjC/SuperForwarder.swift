internal import CFFI
internal import CFFIHookObjC
import FFIHookCore

/// The method this module adds to a class that inherits the hooked method: a libffi closure
/// that sends each call on to the superclass's implementation as it is at that moment (as
/// `[super …]` would), so that the hooks cover this class and its subclasses alone, and a
/// hook installed on the superclass later still runs.
///
/// A class cannot lose a method in the GNU runtime, so the method, its closure and this
/// object stay for the life of the process; once the hooks are gone it is a pass-through.
final class SuperForwarder: @unchecked Sendable {
    // Sendable: every stored property is set in init and only read afterwards.
    let interface: CallInterface
    let runtime: ObjCRuntime
    let superclass: OpaquePointer
    let selector: OpaquePointer
    /// The closure's code address: the added method's implementation.
    private(set) var code: UnsafeRawPointer?

    private init(interface: CallInterface, runtime: ObjCRuntime, superclass: OpaquePointer, selector: OpaquePointer) {
        self.interface = interface
        self.runtime = runtime
        self.superclass = superclass
        self.selector = selector
    }

    /// A forwarder for `selector` to `superclass`'s implementation, or nil when libffi cannot
    /// make the closure.
    static func make(
        interface: CallInterface, runtime: ObjCRuntime, superclass: OpaquePointer, selector: OpaquePointer
    ) -> SuperForwarder? {
        let forwarder = SuperForwarder(
            interface: interface, runtime: runtime, superclass: superclass, selector: selector)
        var code: UnsafeMutableRawPointer?
        guard let closure = ffi_closure_alloc(MemoryLayout<ffi_closure>.size, &code),
            let code
        else { return nil }
        let data = Unmanaged.passRetained(forwarder).toOpaque()
        guard
            ffi_prep_closure_loc(
                closure.assumingMemoryBound(to: ffi_closure.self), interface.cif.cif, handler, data, code) == FFI_OK
        else {
            Unmanaged<SuperForwarder>.fromOpaque(data).release()
            ffi_closure_free(closure)
            return nil
        }
        forwarder.code = UnsafeRawPointer(code)
        return forwarder
    }

    /// The closure's handler: finds the superclass's implementation for the receiver and
    /// calls it with the arguments as they came. Allocates nothing and takes no lock (the
    /// runtime's lookup takes its own only the first time a class is messaged).
    private static let handler:
        @convention(c) (
            UnsafeMutablePointer<ffi_cif>?, UnsafeMutableRawPointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
            UnsafeMutableRawPointer?
        ) -> Void = { _, result, arguments, data in
            let forwarder = Unmanaged<SuperForwarder>.fromOpaque(data!).takeUnretainedValue()
            let receiver = arguments![0]!.load(as: OpaquePointer?.self)
            var target = ffh_objc_super(receiver: receiver, super_class: forwarder.superclass)
            let implementation = forwarder.runtime.functions.pointee.objc_msg_lookup_super(
                &target, forwarder.selector)
            forwarder.interface.call(
                unsafeBitCast(implementation, to: UnsafeRawPointer.self), returnValue: result, argumentList: arguments!)
        }
}
