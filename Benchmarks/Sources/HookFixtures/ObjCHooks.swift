import CHookBench
import CObjCForward
public import FFIHook
public import FFIHookObjC

/// This library's hooks on the Objective-C methods of `HBTarget` (CObjCForward), one method
/// per signature.
public enum ObjCHooks {
    /// The method of `signature` (`-[HBTarget add:to:]` for `int (int, int)`).
    public static func method(of signature: BenchSignature) throws -> ObjCMethod {
        let owner = try ObjCClass(named: String(cString: objcfwd_class_name()))
        return .instance(String(cString: objcfwd_selector_name(signature.c)), of: owner)
    }

    /// Installs a no-op Invocation before block and a no-op Invocation after block on the
    /// class's own method: every instance's message runs them.
    public static func installBeforeAfter(on signature: BenchSignature) throws -> [HookToken] {
        let method = try method(of: signature)
        let before = try ObjCHook.before(on: method) { _ in }
        do {
            return [before, try ObjCHook.after(on: method) { _ in }]
        } catch {
            before.remove()
            throw error
        }
    }

    /// Installs a no-op Invocation before block and a no-op Invocation after block for the
    /// one instance the messages go to: it moves to a subclass made for per-instance hooks.
    public static func installInstanceBeforeAfter(on signature: BenchSignature) throws -> [HookToken] {
        guard let receiver = objcfwd_receiver() else {
            throw ObjCHookError(code: .invalidClass, message: "no receiver")
        }
        let object = ObjCObject(receiver)
        let selector = String(cString: objcfwd_selector_name(signature.c))
        let before = try ObjCHook.before(on: object, selector) { _ in }
        do {
            return [before, try ObjCHook.after(on: object, selector) { _ in }]
        } catch {
            before.remove()
            throw error
        }
    }

    /// Installs a hook on the class's own method and removes it: the method keeps the
    /// library's closure, which passes messages through.
    public static func leavePassThrough(on signature: BenchSignature) throws {
        try ObjCHook.before(on: method(of: signature)) { _ in }.remove()
    }

    /// Gives every method the library hooked, and that has no hooks now, its compiled
    /// implementation back.
    public static func restoreImplementations() throws {
        try ObjCHook.restoreOriginalImplementations()
    }

    /// Whether the receiver is on a subclass made for per-instance hooks.
    public static var receiverHasHooksOfItsOwn: Bool {
        String(cString: objcfwd_receiver_dispatch_class()).hasPrefix("FFIHook_")
    }

    /// Whether the method of `signature` runs something other than its compiled
    /// implementation or the forwarding entry: a hook of this library, once installed.
    public static func isHookedByLibrary(_ signature: BenchSignature) -> Bool {
        objcfwd_method_state(signature.c) == OBJCFWD_OTHER
    }
}

extension BenchSignature {
    /// The Objective-C method of the signature, as `-[HBTarget add:to:]`.
    public var methodTitle: String {
        "-[\(String(cString: objcfwd_class_name())) \(String(cString: objcfwd_selector_name(c)))]"
    }
}
