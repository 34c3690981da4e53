import CTestSupport
import FFIHook
import FFIHookObjC
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Objective-C method hooks in odd processes. Part of the serialized suite of class-wide
/// hooks: both hook the same classes.
extension ObjCMethodHookTests {
    /// fork, twenty times, while another thread installs and removes class-wide and
    /// per-instance hooks in a loop: in each child, hooks go in and out of methods of the
    /// same classes and messages reach them (the method registry's lock is never held
    /// across a fork by a thread the child does not have).
    @Test(
        .disabled(
            if: ProcessLifeTests.underThreadSanitizer,
            "the Swift runtime's lazy globals are not fork-safe under ThreadSanitizer"))
    func forkWhileAnotherThreadChangesMethodHooks() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            ProcessLifeTests.startChild()
            let plain = try ObjCFixture.class("OFXPlain")
            let counter = try ObjCFixture.class("OFXCounter")
            let churned = ObjCMethod.instance("identity:", of: plain)
            let object = ObjCFixture.new("OFXPlain")
            let address = UInt(bitPattern: object)
            let stop = Atomic<Bool>(false)
            let changes = Atomic<Int>(0)
            let changer = JoinableThread {
                while !stop.load(ordering: .relaxed) {
                    do {
                        let classWide = try ObjCHook.before(on: churned) { _ in }
                        let mine = ObjCObject(UnsafeRawPointer(bitPattern: address)!)
                        let own = try ObjCHook.after(on: mine, "identity:") { _ in }
                        classWide.remove()
                        own.remove()
                    } catch {
                        ProcessLifeTests.fail("installing on -[OFXPlain identity:] threw \(error)")
                    }
                    changes.add(1, ordering: .relaxed)
                }
            }
            for _ in 0..<20 {
                let before = changes.load(ordering: .relaxed)
                while changes.load(ordering: .relaxed) <= before { sched_yield() }
                let child = pf_fork()
                if child == 0 {
                    ProcessLifeTests.runForkedChild {
                        let added = try ObjCHook.after(on: .instance("add:to:", of: counter)) { call in
                            call.setReturnValue(call.returnValue(as: Int32.self) + 1000)
                        }
                        let sum = ObjCFixture.new("OFXCounter")
                        ProcessLifeTests.check(ObjCFixture.add(sum, 1, 2) == 1003, "-add:to: hooked", forked: true)
                        let own = try ObjCHook.instead(on: ObjCObject(UnsafeRawPointer(object)), "identity:") { call in
                            call.setReturnValue(Int32(-1))
                        }
                        ProcessLifeTests.check(
                            ObjCFixture.identity(object, 5) == -1, "-identity: hooked for the object", forked: true)
                        ProcessLifeTests.check(added.remove() && own.remove(), "removals", forked: true)
                        ProcessLifeTests.check(ObjCFixture.add(sum, 1, 2) == 3, "-add:to: unhooked", forked: true)
                        ProcessLifeTests.check(
                            ObjCFixture.identity(object, 5) == 5, "-identity: unhooked", forked: true)
                        try Hook.waitForReclamation()
                    }
                }
                ProcessLifeTests.checkForkedChild(child)
            }
            stop.store(true, ordering: .relaxed)
            changer.join()
            exit(0)
        }
    }

    /// Two threads fork at once, over and over, while a third installs and removes hooks:
    /// each fork takes the locks and gives them back on both sides by itself (the second
    /// fork's handlers, run as soon as the first gave the locks back, once overwrote what the
    /// first fork's child was to give back, and children hung).
    @Test(
        .disabled(
            if: ProcessLifeTests.underThreadSanitizer,
            "the Swift runtime's lazy globals are not fork-safe under ThreadSanitizer"))
    func twoThreadsForkAtOnceWhileHooksChange() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            ProcessLifeTests.startChild()
            let plain = try ObjCFixture.class("OFXPlain")
            let counter = try ObjCFixture.class("OFXCounter")
            let churned = ObjCMethod.instance("identity:", of: plain)
            // What the children do, done here first: a child that made Swift metadata for the
            // first time could wait for the Swift runtime's lock, held by another thread of
            // the parent at the fork (the runtime's, not this library's).
            let warm = try ObjCHook.after(on: .instance("add:to:", of: counter)) { _ in }
            ProcessLifeTests.check(ObjCFixture.add(ObjCFixture.new("OFXCounter"), 1, 2) == 3, "-add:to:")
            ProcessLifeTests.check(warm.remove(), "removal")
            try Hook.waitForReclamation()
            let stop = Atomic<Bool>(false)
            let changes = Atomic<Int>(0)
            let changer = Self.churn(
                churned, while: { !stop.load(ordering: .relaxed) }, counting: { changes.add(1, ordering: .relaxed) })
            let forkers = (0..<2).map { _ in
                JoinableThread {
                    for _ in 0..<15 {
                        let child = pf_fork()
                        if child == 0 {
                            ProcessLifeTests.runForkedChild {
                                let added = try ObjCHook.after(on: .instance("add:to:", of: counter)) { call in
                                    call.setReturnValue(call.returnValue(as: Int32.self) + 1000)
                                }
                                let sum = ObjCFixture.new("OFXCounter")
                                ProcessLifeTests.check(
                                    ObjCFixture.add(sum, 1, 2) == 1003, "-add:to: hooked", forked: true)
                                ProcessLifeTests.check(added.remove(), "removal", forked: true)
                                try Hook.waitForReclamation()
                            }
                        }
                        ProcessLifeTests.checkForkedChild(child)
                    }
                }
            }
            for forker in forkers { forker.join() }
            stop.store(true, ordering: .relaxed)
            changer.join()
            exit(0)
        }
    }

    /// A `+initialize` that installs and removes a hook, sent while another thread installs
    /// and removes hooks in a loop: the runtime holds its lock while it sends `+initialize`,
    /// and the other thread calls the runtime while it holds the module's lock; both finish.
    @Test func hooksInstalledFromInitializeWhileAnotherThreadInstalls() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            ProcessLifeTests.startChild()
            let plain = try ObjCFixture.class("OFXPlain")
            let churned = ObjCMethod.instance("identity:", of: plain)
            let stop = Atomic<Bool>(false)
            let changes = Atomic<Int>(0)
            let changer = Self.churn(
                churned, while: { !stop.load(ordering: .relaxed) }, counting: { changes.add(1, ordering: .relaxed) })
            typealias Callback = @convention(c) (OpaquePointer?) -> Void
            let setCallback = ObjCFixture.function(
                "ofx_set_initialize_callback", as: (@convention(c) (Callback?) -> Void).self)
            let make = ObjCFixture.function(
                "ofx_make_initializing_class", as: (@convention(c) (UnsafePointer<CChar>) -> OpaquePointer?).self)
            let newOf = ObjCFixture.function("ofx_new_of", as: (@convention(c) (OpaquePointer) -> OpaquePointer?).self)
            setCallback { cls in
                // Hooks a method of the class being initialized, and one of another class.
                do {
                    let own = try ObjCHook.after(on: .instance("identity:", of: ObjCClass(UnsafeRawPointer(cls!)))) {
                        _ in
                    }
                    let other = try ObjCHook.after(on: .instance("add:to:", of: ObjCFixture.class("OFXCounter"))) { _ in
                    }
                    own.remove()
                    other.remove()
                } catch {
                    ProcessLifeTests.fail("installing from +initialize threw \(error)")
                }
            }
            for index in 0..<150 {
                let before = changes.load(ordering: .relaxed)
                while changes.load(ordering: .relaxed) <= before { sched_yield() }
                guard let cls = make("OFXInitializing\(index)") else { ProcessLifeTests.fail("making a class") }
                ProcessLifeTests.check(newOf(cls) != nil, "the first message to a class made at run time")
            }
            stop.store(true, ordering: .relaxed)
            changer.join()
            setCallback(nil)
            exit(0)
        }
    }

    /// A thread that installs and removes a before hook on `method` while `running` says so,
    /// calling `counting` after each round.
    static func churn(
        _ method: ObjCMethod, while running: @escaping @Sendable () -> Bool,
        counting: @escaping @Sendable () -> Void
    ) -> JoinableThread {
        JoinableThread {
            while running() {
                do {
                    try ObjCHook.before(on: method) { _ in }.remove()
                } catch {
                    ProcessLifeTests.fail("installing on \(method) threw \(error)")
                }
                counting()
            }
        }
    }
}
