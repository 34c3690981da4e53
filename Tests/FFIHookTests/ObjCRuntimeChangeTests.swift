import FFIHook
import FFIHookObjC
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The runtime is changed once per method, not once per hook: after a method's first hook,
/// installs and removals change only the engine's snapshots. Part of the serialized suite of
/// class-wide hooks: they hook the same classes.
extension ObjCMethodHookTests {
    // MARK: - Once per method

    /// After the first hook, install and removal cycles set no implementation, add no method
    /// and replace no dispatch table: the method keeps the closure, and the class's and a
    /// subclass's tables stay the ones they were. (The subclass's own answer depends on what
    /// other tests left on it, a swizzler's implementation say: only its change is checked.)
    @Test func hooksAfterTheFirstLeaveTheRuntimeAlone() throws {
        let counter = try F.class("OFXCounter")
        let method = ObjCMethod.instance("add:to:", of: counter)
        let object = F.new("OFXCounter")
        let leaf = F.new("OFXLeaf")
        defer {
            F.release(object)
            F.release(leaf)
        }
        let leafAnswer = F.add(leaf, 0, 1)  // the subclass's table is built
        try ObjCHook.before(on: method) { _ in }.remove()
        let closure = F.methodImplementation("OFXCounter", "add:to:")
        let tables = (F.dispatchTable("OFXCounter"), F.dispatchTable("OFXLeaf"))
        let changes = ObjCHook.runtimeChangeCount
        let runs = Atomic<Int>(0)
        for round in 0..<200 {
            let before = try ObjCHook.before(on: method) { _ in runs.add(1, ordering: .relaxed) }
            let after = try ObjCHook.after(on: method) { call in
                call.setReturnValue(call.returnValue(as: Int32.self) + 100)
            }
            #expect(F.add(object, Int32(round), 1) == Int32(round) + 101)
            #expect(F.add(leaf, 0, 1) == leafAnswer + 100)
            if round.isMultiple(of: 2) {
                #expect(before.remove() && after.remove())
            } else {
                #expect(after.remove() && before.remove())
            }
            #expect(F.add(object, Int32(round), 1) == Int32(round) + 1)
        }
        #expect(runs.load(ordering: .relaxed) == 400)
        #expect(ObjCHook.runtimeChangeCount == changes)
        #expect(F.methodImplementation("OFXCounter", "add:to:") == closure)
        #expect(F.implementation("OFXCounter", "add:to:") == closure)
        #expect(F.dispatchTable("OFXCounter") == tables.0)
        #expect(F.dispatchTable("OFXLeaf") == tables.1)
    }

    /// Per-instance hooks: the subclass made for the class gets its method once; after that
    /// an object moves onto it and back with `object_setClass` alone, hook after hook.
    @Test func instanceHooksAfterTheFirstLeaveTheRuntimeAlone() throws {
        _ = try F.class("OFXCounter")
        let object = F.new("OFXCounter")
        defer { F.release(object) }
        let mine = F.object(object)
        try ObjCHook.instead(on: mine, "add:to:") { call in call.setReturnValue(Int32(-1)) }.remove()
        let hooked = try ObjCHook.before(on: mine, "add:to:") { _ in }
        let subclass = F.dispatchClass(object)
        hooked.remove()
        #expect(F.dispatchClass(object) == "OFXCounter")
        let table = F.dispatchTable(subclass)
        let closure = F.methodImplementation(subclass, "add:to:")
        let changes = ObjCHook.runtimeChangeCount
        for round in 0..<200 {
            let token = try ObjCHook.instead(on: mine, "add:to:") { call in call.setReturnValue(Int32(-round)) }
            #expect(F.dispatchClass(object) == subclass)
            #expect(F.add(object, 1, 2) == Int32(-round))
            #expect(token.remove())
            #expect(F.dispatchClass(object) == "OFXCounter")
            #expect(F.add(object, 1, 2) == 3)
        }
        #expect(ObjCHook.runtimeChangeCount == changes)
        #expect(F.methodImplementation(subclass, "add:to:") == closure)
        #expect(F.dispatchTable(subclass) == table)
    }

    /// Six class-wide hooks removed in every one of the 720 orders: after each removal the
    /// hooks left, and only they, run; the runtime is not changed once.
    @Test func sixHooksRemovedInEveryOrder() throws {
        let plain = try F.class("OFXPlain")
        let method = ObjCMethod.instance("identity:", of: plain)
        let object = F.new("OFXPlain")
        defer { F.release(object) }
        try ObjCHook.before(on: method) { _ in }.remove()
        let changes = ObjCHook.runtimeChangeCount
        let ran = Atomic<Int>(0)
        func permutations(_ items: [Int]) -> [[Int]] {
            guard items.count > 1 else { return [items] }
            return items.indices.flatMap { index in
                var rest = items
                let first = rest.remove(at: index)
                return permutations(rest).map { [first] + $0 }
            }
        }
        let orders = permutations(Array(0..<6))
        #expect(orders.count == 720)
        var wrong = 0
        for order in orders {
            let tokens = try (0..<6).map { (bit: Int) throws -> HookToken in
                try ObjCHook.install(on: method, position: bit < 3 ? .before : .after) { _ in
                    ran.bitwiseOr(1 << bit, ordering: .relaxed)
                }
            }
            var left = 0b111111
            for index in order {
                ran.store(0, ordering: .relaxed)
                if F.identity(object, 7) != 7 || ran.load(ordering: .relaxed) != left { wrong += 1 }
                if !tokens[index].remove() { wrong += 1 }
                left &= ~(1 << index)
            }
            ran.store(0, ordering: .relaxed)
            if F.identity(object, 7) != 7 || ran.load(ordering: .relaxed) != 0 { wrong += 1 }
        }
        #expect(wrong == 0)
        #expect(ObjCHook.runtimeChangeCount == changes)
    }

    // MARK: - Giving implementations back

    /// The closure stays when the hooks go; the explicit call gives the method its own
    /// implementation back (dispatch tables included), is refused while a hook is in, and a
    /// later hook makes the same closure the implementation again.
    @Test func restoringGivesTheImplementationBack() throws {
        let counter = try F.class("OFXCounter")
        let method = ObjCMethod.instance("mix:with:", of: counter)
        let object = F.new("OFXCounter")
        let derived = F.new("OFXDerived")
        defer {
            F.release(object)
            F.release(derived)
        }
        #expect(F.mix(derived, 1, 3) == F.mix(object, 1, 3))  // the subclass's table is built
        try ObjCHook.restoreOriginalImplementations()
        let own = F.methodImplementation("OFXCounter", "mix:with:")
        let expected = F.mix(object, 1, 3)
        let token = try ObjCHook.after(on: method) { call in call.setReturnValue(-1.0) }
        let closure = F.methodImplementation("OFXCounter", "mix:with:")
        #expect(closure != own)
        #expect(F.mix(object, 1, 3) == -1)
        #expect {
            try ObjCHook.restoreOriginalImplementation(of: method)
        } throws: { error in
            (error as? ObjCHookError)?.code == .hooksInstalled
                && "\(error)".hasPrefix("cannot restore -[OFXCounter mix:with:]: hooks are installed")
        }
        #expect(F.methodImplementation("OFXCounter", "mix:with:") == closure)
        #expect(token.remove())
        #expect(F.methodImplementation("OFXCounter", "mix:with:") == closure)
        #expect(F.mix(object, 1, 3) == expected)
        let changes = ObjCHook.runtimeChangeCount
        #expect(try ObjCHook.restoreOriginalImplementation(of: method))
        #expect(ObjCHook.runtimeChangeCount == changes + 1)
        #expect(F.methodImplementation("OFXCounter", "mix:with:") == own)
        #expect(F.implementation("OFXCounter", "mix:with:") == own)
        #expect(F.implementation("OFXDerived", "mix:with:") == own)
        #expect(try !ObjCHook.restoreOriginalImplementation(of: method))
        // Not hooked for the subclass itself: nothing of its own to give back.
        #expect(try !ObjCHook.restoreOriginalImplementation(of: .instance("mix:with:", of: F.class("OFXDerived"))))
        let again = try ObjCHook.instead(on: method) { call in call.setReturnValue(-2.0) }
        #expect(F.methodImplementation("OFXCounter", "mix:with:") == closure)
        #expect(F.mix(derived, 1, 3) == -2)
        again.remove()
        #expect(F.mix(derived, 1, 3) == expected)
    }

    /// The call for every method gives back those without hooks and leaves a method with
    /// hooks as it is, its hooks running.
    @Test func restoringEveryMethodSkipsMethodsWithHooks() throws {
        let counter = try F.class("OFXCounter")
        let object = F.new("OFXCounter")
        defer { F.release(object) }
        let unhooked = ObjCMethod.instance("multiply:by:", of: counter)
        try ObjCHook.before(on: unhooked) { _ in }.remove()
        try ObjCHook.before(on: F.object(object), "complement:") { _ in }.remove()
        let kept = try ObjCHook.instead(on: .instance("twiceShort:", of: counter)) { call in
            call.setReturnValue(UInt16(7))
        }
        let closure = F.methodImplementation("OFXCounter", "twiceShort:")
        let restored = try ObjCHook.restoreOriginalImplementations()
        #expect(restored >= 2)
        #expect(F.methodImplementation("OFXCounter", "twiceShort:") == closure)
        #expect(F.twiceShort(object, 4) == 7)
        #expect(try ObjCHook.restoreOriginalImplementations() == 0)
        kept.remove()
        #expect(F.twiceShort(object, 4) == 8)
        #expect(F.multiply(object, 6, 7) == 42)
        #expect(F.complement(object, 0) == ~0)
    }

    // MARK: - Other writers and threads

    /// Another swizzler sets the method's implementation over and over while hooks come and
    /// go on another thread: each of its changes stays in effect (reached through whatever
    /// closure wraps it), none is overwritten by an install; the implementation is read and
    /// set under the runtime's lock, which `method_setImplementation` takes too.
    @Test func anotherSwizzlerRacingInstallsIsNeverLost() throws {
        let swizzled = try F.class("OFXSwizzled")
        let method = ObjCMethod.instance("value:", of: swizzled)
        let object = F.new("OFXSwizzled")
        defer { F.release(object) }
        let stop = Atomic<Bool>(false)
        let cycles = Atomic<Int>(0)
        let failures = Atomic<Int>(0)
        let churner = JoinableThread {
            while !stop.load(ordering: .relaxed) {
                do {
                    try ObjCHook.before(on: method) { _ in }.remove()
                } catch {
                    failures.add(1, ordering: .relaxed)
                }
                cycles.add(1, ordering: .relaxed)
            }
        }
        var lost = 0
        for round in 0..<300 {
            let which = Int32(round % 2)
            F.swizzleValue(which)
            let seen = cycles.load(ordering: .relaxed)
            while cycles.load(ordering: .relaxed) < seen + 2 { sched_yield() }
            if F.value(object, 1) != 1001 + 1000 * which { lost += 1 }
        }
        stop.store(true, ordering: .relaxed)
        churner.join()
        #expect(lost == 0)
        #expect(failures.load(ordering: .relaxed) == 0)
    }

    /// Two threads send a message while a third installs and removes class-wide and
    /// per-instance hooks on the same class, in a child process: no message is lost or
    /// crashes (dispatch tables were replaced under the senders at every removal once).
    @Test func messagesWhileClassWideAndInstanceHooksChurn() async {
        await #expect(processExitsWith: .success, ProcessLifeTests.childReport()) {
            ProcessLifeTests.startChild()
            let counter = try ObjCFixture.class("OFXCounter")
            let method = ObjCMethod.instance("add:to:", of: counter)
            let churned = UInt(bitPattern: ObjCFixture.new("OFXCounter"))
            let done = Atomic<Int>(0)
            let wrong = Atomic<Int>(0)
            let cycles = Atomic<Int>(0)
            let perThread =
                ProcessLifeTests.underAddressSanitizer || ProcessLifeTests.underThreadSanitizer ? 200_000 : 1_000_000
            let senders = (0..<2).map { _ in
                JoinableThread {
                    let object = ObjCFixture.new("OFXCounter")
                    for value in 0..<Int32(perThread) where ObjCFixture.add(object, value, 1) != value + 1 {
                        wrong.add(1, ordering: .relaxed)
                    }
                    done.add(1, ordering: .relaxed)
                }
            }
            let churner = JoinableThread {
                while done.load(ordering: .relaxed) < 2 {
                    do {
                        let classWide = try ObjCHook.before(on: method) { _ in }
                        let own = try ObjCHook.after(on: ObjCObject(UnsafeRawPointer(bitPattern: churned)!), "add:to:")
                        {
                            _ in
                        }
                        classWide.remove()
                        own.remove()
                    } catch {
                        ProcessLifeTests.fail("installing on -[OFXCounter add:to:] threw \(error)")
                    }
                    cycles.add(1, ordering: .relaxed)
                }
            }
            for sender in senders { sender.join() }
            churner.join()
            ProcessLifeTests.check(wrong.load(ordering: .relaxed) == 0, "every message reaches the original")
            ProcessLifeTests.check(cycles.load(ordering: .relaxed) > 0, "hooks came and went")
            exit(0)
        }
    }
}
