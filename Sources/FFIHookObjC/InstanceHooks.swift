internal import CFFIHookObjC
import FFIHook
import Synchronization

// Per-instance hooks: an object with hooks of its own is moved to a subclass made for its
// class (one per class, reused: the GNU runtime cannot dispose of a registered class), whose
// `-class` reports the class the object reported before and whose `-dealloc` forgets the
// object's hooks. The hooks are installed on the subclass's methods, each block running only
// for its object; other instances keep their class and never reach them.
//
// Key-value observing also moves an object to a subclass (GNUstep makes one per observed
// class and moves the object there, and back to `[self class]` when the last observer
// goes). To keep both working in either order, the registry hooks the observer registration
// methods of NSObject: after each, an object with hooks of its own that finds itself on
// another class gets the subclass made for that class (observation's, say), and its hooks
// are installed there.

/// One object's per-instance hooks and the subclass it is on.
final class ObjectHooks {
    let object: UInt
    /// The class made for per-instance hooks that the object is on.
    var cls: OpaquePointer
    var hooks: [InstanceHook] = []

    init(object: UInt, cls: OpaquePointer) {
        self.object = object
        self.cls = cls
    }
}

/// One per-instance hook: it follows its object from subclass to subclass, so its engine
/// record can change; the token removes whichever is current. The engine runs the record's
/// block only for messages to the object (``HookRecord`` receiver).
final class InstanceHook: HookHandle, @unchecked Sendable {
    // Sendable: `record` and `isRemoved` are touched only under the registry's
    // lock; the rest is constant.
    let object: UInt
    let selector: String
    let position: HookPosition
    let options: HookOptions
    /// Orders the object's before and after blocks (higher first), as slot hooks' priorities do.
    let priority: Int
    let block: @Sendable (borrowing Invocation) -> Void
    let prepared: MethodRegistry.Prepared
    var record: HookRecord?
    var isRemoved = false
    /// Mirrors `isRemoved`, and the record in use, for reading without the lock.
    private let removedFlag = Atomic<Bool>(false)
    private let currentRecord = Atomic<UInt>(0)
    let targetDescription: String

    init(
        object: UInt, selector: String, position: HookPosition, options: HookOptions, priority: Int,
        block: @escaping @Sendable (borrowing Invocation) -> Void, prepared: MethodRegistry.Prepared,
        targetDescription: String
    ) {
        self.object = object
        self.selector = selector
        self.position = position
        self.options = options
        self.priority = priority
        self.block = block
        self.prepared = prepared
        self.targetDescription = targetDescription
    }

    /// Records the engine record now in use (under the registry's lock).
    func use(_ record: HookRecord) {
        self.record = record
        currentRecord.store(UInt(bitPattern: Unmanaged.passUnretained(record).toOpaque()), ordering: .releasing)
    }

    func markRemoved() {
        isRemoved = true
        removedFlag.store(true, ordering: .releasing)
    }

    func remove() -> Bool {
        MethodRegistry.shared.removeInstanceHook(self)
    }

    /// Whether the hook is installed: not removed, and not a `once` hook that has run. The
    /// records it has used are kept alive by the registry's list of the object's hooks.
    var isActive: Bool {
        guard !removedFlag.load(ordering: .acquiring) else { return false }
        guard let raw = UnsafeRawPointer(bitPattern: currentRecord.load(ordering: .acquiring)) else { return true }
        return Unmanaged<HookRecord>.fromOpaque(raw).takeUnretainedValue().isActive
    }

    var summary: String { "\(position) on \(targetDescription)" }
}

extension MethodRegistry {
    /// Installs a hook that runs only for `object`.
    func installInstance(
        object: UInt, selector: String, signature given: Signature?, position: HookPosition, options: HookOptions,
        priority: Int = 0, block: @escaping @Sendable (borrowing Invocation) -> Void,
        checking check: (Signature, String) throws(ObjCHookError) -> Void = { _, _ in }
    ) throws(ObjCHookError) -> HookToken {
        let runtime = try ObjCRuntime.loaded()
        guard let pointer = OpaquePointer(bitPattern: object) else {
            throw ObjCHookError(code: .invalidClass, message: "the object is nil", selector: selector)
        }
        switch runtime.kind(of: UnsafeRawPointer(pointer)) {
        case FFH_OBJC_OBJECT: break
        case FFH_OBJC_CLASS, FFH_OBJC_METACLASS:
            let name = runtime.className(pointer)
            throw ObjCHookError(
                code: .invalidClass,
                message:
                    "the pointer given as an object is the class \(name) (hook its methods with ObjCMethod: .instance(\"\(selector)\", of:) or .class(\"\(selector)\", of:))",
                className: name, selector: selector)
        default:
            throw ObjCHookError(
                code: .invalidClass, message: "the pointer given as an object points to no object of the runtime",
                selector: selector)
        }
        followObservation(runtime)
        // Its class changed since its last hook went in, by a path not followed: move first.
        reassert(object)
        try refuseReentry { ObjCHookError(code: $0, message: $1, selector: selector) }
        var follows = false
        let token = try state.withLock { (state: inout State) throws(ObjCHookError) -> HookToken in
            guard let isa = runtime.classOf(pointer) else {
                throw ObjCHookError(code: .invalidClass, message: "the object has no class", selector: selector)
            }
            var cls = isa
            if let existing = state.objects[object] {
                cls = existing.cls
            } else if ffh_objc_instance_class_find(runtime.functions, isa) == isa,
                let superclass = runtime.superclass(of: isa)
            {
                cls = superclass
            }
            let reportedName = runtime.className(runtime.reportedClass(of: pointer) ?? isa)
            let lookup = Target(
                runtime: runtime, cls: cls, className: reportedName, selector: selector, isClassMethod: false)
            let prepared = try Self.prepare(lookup, signature: given, checking: check)
            let objects: ObjectHooks
            let registered = state.objects[object] != nil
            if let existing = state.objects[object] {
                objects = existing
            } else {
                let made = try Self.instanceClass(
                    for: cls, object: pointer, runtime: runtime, state: &state, failure: lookup.failure)
                objects = ObjectHooks(object: object, cls: made)
            }
            let target = Target(
                runtime: runtime, cls: objects.cls, className: reportedName, selector: selector, isClassMethod: false)
            let hook = InstanceHook(
                object: object, selector: selector, position: position, options: options, priority: priority,
                block: block, prepared: prepared,
                targetDescription: "-[\(reportedName) \(selector)] of 0x\(String(object, radix: 16))")
            let (record, _) = try Self.installLocked(
                target, prepared, position: position, options: options, receiver: object, priority: priority,
                block: block, state: &state)
            hook.use(record)
            objects.hooks.append(hook)
            state.objects[object] = objects
            // From the class read above only: a class another thread set meanwhile (key-value
            // observing, starting or ending) is followed as its registration's end follows it
            // (``reassert(_:)``). A plain store put the object back on a class made for the
            // class before, and an observer that had just started lost every notification.
            // An object already on a class made for its hooks that is on another one now was
            // moved by such a thread before this install: it too is followed.
            if isa != objects.cls && (registered || !runtime.exchangeClass(of: pointer, from: isa, to: objects.cls)) {
                follows = true
            }
            return HookToken(handle: hook)
        }
        if follows { reassert(object) }
        return token
    }

    /// The class made for per-instance hooks on `base`, made and registered the first time.
    private static func instanceClass(
        for base: OpaquePointer, object: OpaquePointer, runtime: ObjCRuntime, state: inout State,
        failure: (ObjCHookError.Code, String, String?, HookError?) -> ObjCHookError
    ) throws(ObjCHookError) -> OpaquePointer {
        if let made = state.instanceClasses[base] { return made }
        let baseName = runtime.className(base)
        var name = "FFIHook_" + baseName
        var suffix = 2
        while runtime.lookUpClass(name) != nil {
            name = "FFIHook_\(baseName)_\(suffix)"
            suffix += 1
        }
        guard let made = runtime.functions.pointee.objc_allocateClassPair(base, name, 0) else {
            throw failure(.methodNotAdded, "the runtime could not make a subclass for per-instance hooks", nil, nil)
        }
        let reported = runtime.reportedClass(of: object) ?? base
        guard let classSelector = runtime.selector("class"), let deallocSelector = runtime.selector("dealloc"),
            let superclassSelector = runtime.selector("superclass")
        else {
            throw failure(
                .methodNotAdded, "the runtime cannot register the selectors class, superclass and dealloc", nil, nil)
        }
        let classMethod: @convention(c) (OpaquePointer?, OpaquePointer?) -> OpaquePointer? =
            ffh_objc_instance_class_method
        let deallocMethod: @convention(c) (OpaquePointer?, OpaquePointer?) -> Void = ffh_objc_instance_dealloc_method
        let superclassMethod: @convention(c) (OpaquePointer?, OpaquePointer?) -> OpaquePointer? =
            ffh_objc_instance_superclass_method
        _ = runtime.addMethod(
            to: made, selector: classSelector, implementation: unsafeBitCast(classMethod, to: UnsafeRawPointer.self),
            types: "#16@0:8")
        _ = runtime.addMethod(
            to: made, selector: superclassSelector,
            implementation: unsafeBitCast(superclassMethod, to: UnsafeRawPointer.self), types: "#16@0:8")
        _ = runtime.addMethod(
            to: made, selector: deallocSelector,
            implementation: unsafeBitCast(deallocMethod, to: UnsafeRawPointer.self), types: "v16@0:8")
        runtime.functions.pointee.objc_registerClassPair(made)
        ObjCRuntime.changes.add(1, ordering: .relaxed)
        ffh_objc_count_change()
        ffh_objc_instance_class_register(made, reported)
        state.instanceClasses[base] = made
        return made
    }

    /// Removes a per-instance hook; the object gets its class back with its last one.
    func removeInstanceHook(_ hook: InstanceHook) -> Bool {
        guard let runtime = ObjCRuntime.current else { return false }
        // A `once` hook that has run removed its engine record itself: the object still leaves
        // the class made for its hooks here, but the hook was already removed, as a slot's
        // `once` hook is (false).
        var alreadyRan = false
        let removed: HookRecord?? = state.withLock { state in
            guard !hook.isRemoved else { return nil }
            alreadyRan = hook.record.map { !$0.isActive } ?? false
            hook.markRemoved()
            if let objects = state.objects[hook.object] {
                objects.hooks.removeAll { $0 === hook }
                if objects.hooks.isEmpty {
                    state.objects[hook.object] = nil
                    // Only from the class made for its hooks: another class set meanwhile (an
                    // observation's) stays.
                    if let pointer = OpaquePointer(bitPattern: hook.object),
                        let superclass = runtime.superclass(of: objects.cls)
                    {
                        _ = runtime.exchangeClass(of: pointer, from: objects.cls, to: superclass)
                    }
                }
            }
            return hook.record
        }
        guard let removed else { return false }
        finishRemoval(removed)
        return !alreadyRan
    }

    /// Takes an engine record out, outside the lock (the engine takes its own). The method
    /// keeps the closure, which passes messages through once its last hook is gone: the
    /// subclass's method is set once, and objects come and go by their class word alone.
    private func finishRemoval(_ record: HookRecord?) {
        _ = record?.remove()
    }

    /// An object with per-instance hooks is being deallocated: its hooks go with it. Its
    /// class is left as it is, so that the deallocation goes on through it.
    func objectDying(_ object: UInt) {
        let hooks: [InstanceHook] = state.withLock { state in
            guard let objects = state.objects.removeValue(forKey: object) else { return [] }
            for hook in objects.hooks { hook.markRemoved() }
            return objects.hooks
        }
        for hook in hooks { finishRemoval(hook.record) }
    }

    /// After something else changed `object`'s class (key-value observing, starting or
    /// ending): moves the object back onto a class made for per-instance hooks, the one for
    /// its new class, and its hooks with it.
    func reassert(_ object: UInt) {
        guard let runtime = ObjCRuntime.current, let pointer = OpaquePointer(bitPattern: object) else { return }
        // Again while another thread changes the class between the read and the move (a bound:
        // a class that keeps changing is left to the next registration's end).
        for _ in 0..<100 where !reassertOnce(object, pointer, runtime) {}
    }

    /// One try of ``reassert(_:)``: false when the class changed between its read and the move.
    private func reassertOnce(_ object: UInt, _ pointer: OpaquePointer, _ runtime: ObjCRuntime) -> Bool {
        var moved = true
        let old: [HookRecord?] = state.withLock { state in
            guard let objects = state.objects[object], let isa = runtime.classOf(pointer), isa != objects.cls,
                ffh_objc_instance_class_find(runtime.functions, isa) != isa
            else { return [] }
            let name = runtime.className(runtime.reportedClass(of: pointer) ?? isa)
            func failure(_ code: ObjCHookError.Code, _ message: String, _: String?, _: HookError?) -> ObjCHookError {
                ObjCHookError(code: code, message: message, className: name)
            }
            guard
                let made = try? Self.instanceClass(
                    for: isa, object: pointer, runtime: runtime, state: &state, failure: failure)
            else { return [] }
            var old: [HookRecord?] = []
            // A once hook that has run stays behind: nothing would run it again.
            for hook in objects.hooks where !hook.isRemoved && hook.record?.isActive != false {
                let target = Target(
                    runtime: runtime, cls: made, className: name, selector: hook.selector, isClassMethod: false)
                guard
                    let (record, _) = try? Self.installLocked(
                        target, hook.prepared, position: hook.position, options: hook.options, receiver: object,
                        priority: hook.priority, limit: hook.record?.limit, block: hook.block, state: &state)
                else { continue }
                old.append(hook.record)
                hook.use(record)
            }
            objects.cls = made
            moved = runtime.exchangeClass(of: pointer, from: isa, to: made)
            return old
        }
        for record in old { finishRemoval(record) }
        return moved
    }

    /// Hooks NSObject's observer registration methods, once, so that per-instance hooks
    /// survive key-value observing (see the top of this file). Where GNUstep Base is not
    /// loaded there is nothing to follow.
    private func followObservation(_ runtime: ObjCRuntime) {
        let first = state.withLock { state in
            defer { state.followsObservation = true }
            return !state.followsObservation
        }
        guard first else { return }
        ffh_objc_instance_set_dealloc_handler { object in
            MethodRegistry.shared.objectDying(UInt(bitPattern: object))
        }
        guard let root = runtime.lookUpClass("NSObject") else { return }
        let selectors = [
            "addObserver:forKeyPath:options:context:", "removeObserver:forKeyPath:",
            "removeObserver:forKeyPath:context:",
        ]
        for selector in selectors {
            let target = Target(
                runtime: runtime, cls: root, className: "NSObject", selector: selector, isClassMethod: false)
            _ = try? install(target, signature: nil, position: .after, options: .allowsReentry) { call in
                MethodRegistry.shared.reassert(call.argument(0, as: UInt.self))
            }
        }
    }
}
