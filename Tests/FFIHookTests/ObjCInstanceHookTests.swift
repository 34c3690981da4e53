import FFIHook
import FFIHookObjC
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Per-instance hooks on GNUstep objects built by gcc, and their composition with class-wide
/// hooks and key-value observing. Part of the serialized suite of class-wide hooks: both
/// hook the same classes.
extension ObjCMethodHookTests {
    /// A hook of one object runs for that object only; the object reports its class as before
    /// and gets its class back with its last hook.
    @Test func instanceHooksRunForTheirObjectAlone() throws {
        _ = try F.class("OFXCounter")
        let mine = F.new("OFXCounter")
        let other = F.new("OFXCounter")
        defer {
            F.release(mine)
            F.release(other)
        }
        let seen = Mutex<[String]>([])
        let before = try ObjCHook.before(on: F.object(mine), "add:to:") { call in
            seen.withLock { $0.append("mine \(call.argument(2, as: Int32.self))") }
        }
        #expect(F.dispatchClass(mine) == "FFIHook_OFXCounter")
        #expect(F.reportedClass(mine) == "OFXCounter")
        #expect(F.dispatchClass(other) == "OFXCounter")
        #expect(F.object(mine).reportedClass?.name == "OFXCounter")
        // The subclass the object is on is the library's: a class-wide hook there (which would
        // run for every object later given hooks of its own) is refused.
        let made = try #require(F.object(mine).dispatchClass)
        let refusal = #expect(throws: ObjCHookError.self) {
            try ObjCHook.before(on: .instance("add:to:", of: made)) { _ in }
        }
        #expect(refusal?.code == .invalidClass)
        #expect(F.add(mine, 1, 2) == 3)
        #expect(F.add(other, 3, 4) == 7)
        // A second object with a hook of its own shares the subclass, not the hooks.
        let second = try ObjCHook.instead(on: F.object(other), "add:to:") { call in
            call.callOriginal()
            call.setReturnValue(call.returnValue(as: Int32.self) * 10)
        }
        #expect(F.add(mine, 5, 6) == 11)
        #expect(F.add(other, 5, 6) == 110)
        #expect(before.remove())
        #expect(F.dispatchClass(mine) == "OFXCounter")
        #expect(F.dispatchClass(other) == "FFIHook_OFXCounter")
        #expect(F.add(mine, 7, 8) == 15)
        #expect(second.remove())
        #expect(!second.remove())
        #expect(F.dispatchClass(other) == "OFXCounter")
        #expect(F.add(other, 1, 1) == 2)
        #expect(seen.withLock { $0 } == ["mine 1", "mine 5"])
        #expect(before.description.contains("-[OFXCounter add:to:]"))
    }

    /// Hooks of many objects on one method: each message runs its receiver's hooks alone, in
    /// their order (before, instead, after), whatever the other objects have, and
    /// a message to an object without hooks runs none; `once` hooks fire once for their own
    /// object; removing them in any order leaves the rest as they were. The call path finds a
    /// receiver's hooks by a probe of a table once two objects or more have hooks, not by a look
    /// at every hook: a message costs the same with one object hooked as with hundreds.
    @Test func manyObjectsEachRunTheirOwnHooks() throws {
        _ = try F.class("OFXCounter")
        let count = 60
        let objects = (0..<count).map { _ in F.new("OFXCounter") }
        let plain = F.new("OFXCounter")
        defer {
            for object in objects { F.release(object) }
            F.release(plain)
        }
        let seen = Mutex<[String]>([])
        var tokens: [(Int, HookToken)] = []
        for (index, object) in objects.enumerated() {
            let note: @Sendable (String) -> Void = { text in seen.withLock { $0.append("\(index) \(text)") } }
            switch index % 4 {
            case 0:
                tokens.append((index, try ObjCHook.before(on: F.object(object), "add:to:") { _ in note("before") }))
            case 1:
                tokens.append(
                    (
                        index,
                        try ObjCHook.instead(on: F.object(object), "add:to:") { call in
                            call.callOriginal()
                            call.setReturnValue(call.returnValue(as: Int32.self) + Int32(index))
                        }
                    ))
            case 2:
                tokens.append((index, try ObjCHook.after(on: F.object(object), "add:to:") { _ in note("after") }))
                tokens.append(
                    (
                        index,
                        try ObjCHook.before(on: F.object(object), "add:to:", options: .once) { _ in note("once") }
                    ))
            default:
                // Two before blocks: they run in the order they went in.
                tokens.append((index, try ObjCHook.before(on: F.object(object), "add:to:") { _ in note("first") }))
                tokens.append((index, try ObjCHook.before(on: F.object(object), "add:to:") { _ in note("second") }))
            }
        }
        func expected(_ index: Int, round: Int) -> [String] {
            switch index % 4 {
            case 0: ["\(index) before"]
            case 1: []
            case 2: round == 0 ? ["\(index) once", "\(index) after"] : ["\(index) after"]
            default: ["\(index) first", "\(index) second"]
            }
        }
        for round in 0..<2 {
            for (index, object) in objects.enumerated() {
                seen.withLock { $0 = [] }
                #expect(F.add(object, 2, 3) == 5 + (index % 4 == 1 ? Int32(index) : 0), "object \(index)")
                #expect(seen.withLock { $0 } == expected(index, round: round), "object \(index), round \(round)")
            }
            seen.withLock { $0 = [] }
            #expect(F.add(plain, 2, 3) == 5)
            #expect(seen.withLock { $0 }.isEmpty)
        }
        // Removed in a shuffled order (a fixed one): after each removal, every object runs what
        // it still has.
        var generator = SplitMix(seed: 0x5EED)
        tokens.shuffle(using: &generator)
        while let (removedIndex, token) = tokens.popLast() {
            token.remove()
            let left = Set(tokens.map(\.0))
            for (index, object) in objects.enumerated() where index % 7 == removedIndex % 7 {
                seen.withLock { $0 = [] }
                let result = F.add(object, 2, 3)
                let hooks = seen.withLock { $0 }
                if !left.contains(index) {
                    #expect(result == 5 && hooks.isEmpty, "object \(index) after its last hook")
                } else {
                    // What remains of its hooks runs; nothing of another object's.
                    #expect(hooks.allSatisfy { $0.hasPrefix("\(index) ") }, "object \(index)")
                }
            }
        }
        for object in objects { #expect(F.dispatchClass(object) == "OFXCounter") }
    }

    /// Messages to many hooked objects on other threads while their hooks come and go: each
    /// gets its own hook's result or the method's, never another object's or a freed table's.
    @Test func manyObjectsHooksComeAndGoUnderMessages() throws {
        _ = try F.class("OFXCounter")
        let count = 24
        let objects = (0..<count).map { _ in F.new("OFXCounter") }
        defer { for object in objects { F.release(object) } }
        let addresses = objects.map { F.address($0) }
        let hook: @Sendable (Int) throws -> HookToken = { index in
            try ObjCHook.instead(on: F.object(OpaquePointer(bitPattern: addresses[index])!), "add:to:") { call in
                call.callOriginal()
                call.setReturnValue(call.returnValue(as: Int32.self) + 1000 * Int32(index + 1))
            }
        }
        // Half the objects keep a hook throughout.
        let kept = try (0..<count).filter { $0.isMultiple(of: 2) }.map(hook)
        let done = Atomic<Bool>(false)
        let wrong = Atomic<Int>(0)
        let sent = Atomic<Int>(0)
        let sender: @Sendable () -> Void = {
            var generator = SplitMix(seed: UInt64(sent.add(1, ordering: .relaxed).newValue))
            while !done.load(ordering: .acquiring) {
                let index = Int(generator.next() % UInt64(count))
                let object = OpaquePointer(bitPattern: addresses[index])!
                let result = F.add(object, 2, 3)
                let hooked = 5 + 1000 * Int32(index + 1)
                if result != 5 && result != hooked { wrong.add(1, ordering: .relaxed) }
                if index.isMultiple(of: 2) && result != hooked { wrong.add(1, ordering: .relaxed) }
            }
        }
        let churn: @Sendable () -> Void = {
            for round in 0..<200 {
                let index = 1 + 2 * (round % (count / 2))
                if let token = try? hook(index) { token.remove() }
            }
            done.store(true, ordering: .releasing)
        }
        F.runThreads([sender, sender, churn])
        #expect(wrong.load(ordering: .relaxed) == 0)
        for token in kept { token.remove() }
        for object in objects { #expect(F.add(object, 2, 3) == 5) }
    }

    /// An object's own hooks run around the class's: its before first, its after last.
    @Test func instanceHooksWrapClassWideHooks() throws {
        let counter = try F.class("OFXCounter")
        let object = F.new("OFXDerived")
        defer { F.release(object) }
        let order = Mutex<[String]>([])
        func note(_ text: String) -> @Sendable (borrowing Invocation) -> Void {
            { _ in order.withLock { $0.append(text) } }
        }
        let tokens = [
            try ObjCHook.before(on: .instance("mix:with:", of: counter), note("class before")),
            try ObjCHook.after(on: .instance("mix:with:", of: counter), note("class after")),
            try ObjCHook.before(on: F.object(object), "mix:with:", note("object before")),
            try ObjCHook.after(on: F.object(object), "mix:with:", note("object after")),
        ]
        #expect(F.mix(object, 1, 2) == 5)
        for token in tokens { token.remove() }
        #expect(order.withLock { $0 } == ["object before", "class before", "class after", "object after"])
        #expect(F.dispatchClass(object) == "OFXDerived")
    }

    /// Typed per-instance blocks, and a once hook that runs for its object's first message.
    @Test func typedAndOnceInstanceHooks() throws {
        _ = try F.class("OFXCounter")
        let object = F.new("OFXLeaf")
        defer { F.release(object) }
        let runs = Atomic<Int>(0)
        let once = try ObjCHook.before(on: F.object(object), "add:to:", options: .once) { _ in
            runs.add(1, ordering: .relaxed)
        }
        let typed = try ObjCHook.after(
            on: F.object(object), "add:to:", arguments: Int32.self, Int32.self, returning: Int32.self
        ) { _, sum, a, _ in sum + a }
        #expect(F.add(object, 2, 3) == 7)
        #expect(F.add(object, 2, 3) == 7)
        #expect(runs.load(ordering: .relaxed) == 1)
        #expect(!once.isActive)
        #expect(typed.isActive)
        #expect(throws: ObjCHookError.self) {
            try ObjCHook.before(on: F.object(object), "add:to:", arguments: Float.self, returning: Int32.self) { _, _ in
            }
        }
        #expect(typed.remove())
        // The once hook removed itself when it ran: its token says so, as a slot's does, and
        // still takes the object off the class made for its hooks.
        #expect(F.dispatchClass(object) == "FFIHook_OFXLeaf")
        #expect(!once.remove())
        #expect(F.dispatchClass(object) == "OFXLeaf")
        #expect(!once.remove())
    }

    /// A class given where an object is wanted is refused, by its name.
    @Test func aClassGivenAsAnObjectIsRefusedByName() throws {
        let counter = try F.class("OFXCounter")
        let error = #expect(throws: ObjCHookError.self) {
            try ObjCHook.before(on: ObjCObject(counter.pointer), "add:to:") { _ in }
        }
        #expect(error?.code == .invalidClass)
        #expect(error?.className == "OFXCounter")
        #expect(error?.description.contains("-[OFXCounter add:to:]") == true)
    }

    /// An object deallocated with hooks of its own takes them with it.
    @Test func deallocationRemovesAnObjectsHooks() throws {
        _ = try F.class("OFXPlain")
        let object = F.new("OFXPlain")
        let runs = Atomic<Int>(0)
        let token = try ObjCHook.before(on: F.object(object), "identity:") { _ in runs.add(1, ordering: .relaxed) }
        #expect(F.identity(object, 4) == 4)
        F.release(object)
        #expect(!token.isActive)
        #expect(!token.remove())
        // New objects, at that address or another, do not run it.
        let later = (0..<8).map { _ in F.new("OFXPlain") }
        for item in later { #expect(F.identity(item, 5) == 5) }
        for item in later { F.release(item) }
        #expect(runs.load(ordering: .relaxed) == 1)
    }

    /// A per-instance block that sends the message to another object of the class runs that
    /// object's hooks (each object's hooks are its own); sent to its own object, the message
    /// is re-entry, as for any hook.
    @Test func anObjectsBlockMessagingAnotherObjectRunsThatObjectsHooks() throws {
        _ = try F.class("OFXPlain")
        let first = F.new("OFXPlain")
        let second = F.new("OFXPlain")
        defer {
            F.release(first)
            F.release(second)
        }
        let secondAddress = F.address(second)
        let firstAddress = F.address(first)
        let secondRuns = Atomic<Int>(0)
        let firstRuns = Atomic<Int>(0)
        let outer = try ObjCHook.before(on: F.object(first), "identity:") { call in
            firstRuns.add(1, ordering: .relaxed)
            let value = call.argument(2, as: Int32.self)
            guard value < 100 else { return }
            // To the other object, then to its own.
            _ = F.identity(OpaquePointer(bitPattern: secondAddress)!, value + 100)
            _ = F.identity(OpaquePointer(bitPattern: firstAddress)!, value + 100)
        }
        let inner = try ObjCHook.before(on: F.object(second), "identity:") { _ in
            secondRuns.add(1, ordering: .relaxed)
        }
        #expect(F.identity(first, 1) == 1)
        #expect(secondRuns.load(ordering: .relaxed) == 1)
        #expect(firstRuns.load(ordering: .relaxed) == 1)
        outer.remove()
        inner.remove()
    }

    /// A per-instance hook on `-dealloc` that removes itself, the object's last hook (which
    /// gives the object its class back while its deallocation runs): the class's own
    /// `-dealloc` still runs, to the end. Also when another thread removes the hook while the
    /// object is released.
    @Test func deallocationFinishesWhenItsHookRemovesItself() throws {
        _ = try F.class("OFXCounted")
        let count = F.function("ofx_counted_deallocation_count", as: (@convention(c) () -> Int32).self)
        final class TokenBox: Sendable {
            let token = Mutex<HookToken?>(nil)
        }
        let start = count()
        for _ in 0..<20 {
            let object = F.new("OFXCounted")
            let box = TokenBox()
            let token = try ObjCHook.before(on: F.object(object), "dealloc") { _ in
                // Taken out of the box: a box keeping the token would keep the block.
                _ = box.token.withLock { $0.take() }?.remove()
            }
            box.token.withLock { $0 = token }
            F.release(object)
        }
        #expect(count() - start == 20)
        let racing = 200
        for _ in 0..<racing {
            let object = F.new("OFXCounted")
            let token = try ObjCHook.before(on: F.object(object), "dealloc") { _ in }
            let address = F.address(object)
            F.runThreads([
                { _ = token.remove() },
                { F.release(OpaquePointer(bitPattern: address)!) },
            ])
        }
        #expect(count() - start == 20 + Int32(racing))
    }

    /// Classes another library makes after an object's hooks moved it to a subclass: their
    /// overrides of the hooked selector run. (Setting the implementation of a method of a
    /// class no message had reached wrote into the runtime's shared placeholder table, which
    /// every class without a table of its own then dispatched through.)
    @Test func classesMadeLaterKeepTheirOverrides() throws {
        _ = try F.class("OFXSolo")
        let hooked = F.new("OFXSolo")
        let other = F.new("OFXSolo")
        defer {
            F.release(hooked)
            F.release(other)
        }
        let token = try ObjCHook.after(on: F.object(hooked), "solo:") { call in
            call.setReturnValue(call.returnValue(as: Int32.self) + 1)
        }
        #expect(F.solo(hooked, 1) == 2)
        F.moveToNewSubclass(other, "OFXSolo", "OFXSoloPlain", 0)
        #expect(F.solo(other, 2) == 2)
        F.moveToNewSubclass(other, "OFXSoloPlain", "OFXSoloOverriding", 1)
        #expect(F.solo(other, 3) == 7003)
        token.remove()
        #expect(F.solo(hooked, 4) == 4)
    }

    /// One object's plain before and after blocks on a method: another object in the same
    /// made subclass (through a hook on another method) sends the method through the same
    /// implementation and runs neither block, and gets the class's result; the hooked object's
    /// block messaging itself again runs no block for that message, messaging the other
    /// object runs none either.
    @Test func oneObjectsBlocksSkipOtherObjectsOfItsSubclass() throws {
        _ = try F.class("OFXCounter")
        let objects = [F.new("OFXCounter"), F.new("OFXCounter")]
        defer { objects.forEach(F.release) }
        let (mine, other) = (objects[0], objects[1])
        let (mineAddress, otherAddress) = (F.address(mine), F.address(other))
        let seen = Mutex<[String]>([])
        let before = try ObjCHook.before(on: F.object(mine), "add:to:") { call in
            let a = call.argument(2, as: Int32.self)
            seen.withLock { $0.append("before \(a)") }
            guard a < 100 else { return }
            let inner = F.add(OpaquePointer(bitPattern: mineAddress)!, a + 100, 0)
            let beside = F.add(OpaquePointer(bitPattern: otherAddress)!, a + 200, 0)
            seen.withLock { $0.append("inside \(inner) \(beside)") }
        }
        let after = try ObjCHook.after(on: F.object(mine), "add:to:") { call in
            seen.withLock { $0.append("after \(call.returnValue(as: Int32.self))") }
        }
        let elsewhere = try ObjCHook.before(on: F.object(other), "tick") { _ in seen.withLock { $0.append("tick") } }
        #expect(F.dispatchClass(mine) == F.dispatchClass(other))
        #expect(F.add(other, 3, 4) == 7)
        #expect(F.add(mine, 1, 2) == 3)
        F.tick(other)
        #expect(F.add(other, 5, 6) == 11)
        #expect(seen.withLock { $0 } == ["before 1", "inside 101 201", "after 3", "tick"])
        before.remove()
        after.remove()
        elsewhere.remove()
        #expect(F.add(mine, 7, 8) == 15)
        #expect(F.dispatchClass(mine) == "OFXCounter")
    }

    /// An object's hooks reach the class's implementation as it is at each message: another
    /// swizzler's changes made after the hook went in take effect under it, and the blocks
    /// see their results.
    @Test func oneObjectsHooksFollowTheClassImplementation() throws {
        _ = try F.class("OFXSwizzled")
        let object = F.new("OFXSwizzled")
        defer { F.release(object) }
        F.swizzleValue(0)
        let results = Mutex<[Int32]>([])
        let before = try ObjCHook.before(on: F.object(object), "value:") { _ in }
        let after = try ObjCHook.after(on: F.object(object), "value:") { call in
            results.withLock { $0.append(call.returnValue(as: Int32.self)) }
        }
        #expect(F.value(object, 1) == 1001)
        F.swizzleValue(1)
        #expect(F.value(object, 2) == 2002)
        F.swizzleValue(0)
        #expect(F.value(object, 3) == 1003)
        before.remove()
        after.remove()
        #expect(results.withLock { $0 } == [1001, 2002, 1003])
        #expect(F.value(object, 4) == 1004)
    }

    // MARK: - Key-value observing

    /// An observer added on one thread while another installs the object's first hook, both at
    /// once, round after round: each round's change is notified and runs the hook. The install
    /// stored its subclass over the class observation had just set, and 2 to 165 of 3,000
    /// observers never heard of the object again (a stranger's run).
    @Test func observationStartingAsTheFirstHookGoesInKeepsBoth() throws {
        _ = try F.class("OFXObserved")
        final class Round: @unchecked Sendable {
            var object: UInt = 0
            var observer: UInt = 0
            var token: HookToken?
        }
        let rounds = 400
        let round = Round()
        let go = Atomic<Int>(-1)
        let observed = Atomic<Int>(-1)
        let hooked = Atomic<Int>(-1)
        let ran = Atomic<Int>(0)
        let failures = Mutex<[String]>([])
        F.runThreads([
            {
                for index in 0..<rounds {
                    while go.load(ordering: .acquiring) < index { sched_yield() }
                    F.observe(
                        OpaquePointer(bitPattern: round.object)!, OpaquePointer(bitPattern: round.observer)!, "level")
                    observed.store(index, ordering: .releasing)
                }
            },
            {
                for index in 0..<rounds {
                    while go.load(ordering: .acquiring) < index { sched_yield() }
                    round.token = try? ObjCHook.after(
                        on: F.object(OpaquePointer(bitPattern: round.object)!), "setLevel:"
                    ) {
                        _ in ran.add(1, ordering: .relaxed)
                    }
                    hooked.store(index, ordering: .releasing)
                }
            },
            {
                for index in 0..<rounds {
                    round.object = F.address(F.new("OFXObserved"))
                    round.observer = F.address(F.new("OFXObserver"))
                    go.store(index, ordering: .releasing)
                    while observed.load(ordering: .acquiring) < index { sched_yield() }
                    while hooked.load(ordering: .acquiring) < index { sched_yield() }
                    let object = OpaquePointer(bitPattern: round.object)!
                    let observer = OpaquePointer(bitPattern: round.observer)!
                    let before = (F.notifications(observer), ran.load(ordering: .relaxed))
                    F.setLevel(object, Int32(index))
                    if F.notifications(observer) != before.0 + 1 || ran.load(ordering: .relaxed) != before.1 + 1 {
                        let seen = "round \(index): on \(F.dispatchClass(object)), hook token \(round.token != nil)"
                        failures.withLock { $0.append(seen) }
                    }
                    F.unobserve(object, observer, "level")
                    round.token?.remove()
                    F.release(object)
                    F.release(observer)
                }
            },
        ])
        #expect(failures.withLock { $0 } == [])
    }

    /// Observation added after the object's hook, then either removed first: every change is
    /// notified, the hook runs while installed, and the object reports its class throughout.
    @Test(arguments: [false, true])
    func observationAfterAnInstanceHook(removingTheHookFirst: Bool) throws {
        _ = try F.class("OFXObserved")
        let object = F.new("OFXObserved")
        let observer = F.new("OFXObserver")
        defer {
            F.release(object)
            F.release(observer)
        }
        let hooked = Atomic<Int>(0)
        let token = try ObjCHook.after(on: F.object(object), "setLevel:") { _ in hooked.add(1, ordering: .relaxed) }
        F.observe(object, observer, "level")
        #expect(F.reportedClass(object) == "OFXObserved")
        F.setLevel(object, 5)
        #expect(F.notifications(observer) == 1)
        #expect(F.lastValue(observer) == 5)
        #expect(hooked.load(ordering: .relaxed) == 1)
        if removingTheHookFirst {
            token.remove()
            F.setLevel(object, 6)
            #expect(F.notifications(observer) == 2)
            #expect(hooked.load(ordering: .relaxed) == 1)
            F.unobserve(object, observer, "level")
        } else {
            F.unobserve(object, observer, "level")
            F.setLevel(object, 6)
            #expect(F.notifications(observer) == 1)
            #expect(hooked.load(ordering: .relaxed) == 2)
            #expect(F.reportedClass(object) == "OFXObserved")
            token.remove()
        }
        F.setLevel(object, 7)
        #expect(F.level(object) == 7)
        #expect(F.notifications(observer) == (removingTheHookFirst ? 2 : 1))
        #expect(F.dispatchClass(object) == "OFXObserved")
        #expect(F.reportedClass(object) == "OFXObserved")
    }

    /// A hook added to an object already observed, then either removed first.
    @Test(arguments: [false, true])
    func instanceHookOnAnObservedObject(removingTheHookFirst: Bool) throws {
        _ = try F.class("OFXObserved")
        let object = F.new("OFXObserved")
        let observer = F.new("OFXObserver")
        defer {
            F.release(object)
            F.release(observer)
        }
        F.observe(object, observer, "level")
        let observedClass = F.dispatchClass(object)
        let hooked = Atomic<Int>(0)
        let token = try ObjCHook.before(on: F.object(object), "setLevel:") { call in
            hooked.add(1, ordering: .relaxed)
            call.setArgument(2, to: call.argument(2, as: Int32.self) + 1)
        }
        #expect(F.reportedClass(object) == "OFXObserved")
        F.setLevel(object, 5)
        #expect(F.notifications(observer) == 1)
        #expect(F.lastValue(observer) == 6)
        #expect(hooked.load(ordering: .relaxed) == 1)
        if removingTheHookFirst {
            token.remove()
            #expect(F.dispatchClass(object) == observedClass)
            F.setLevel(object, 8)
            #expect(F.notifications(observer) == 2)
            #expect(F.lastValue(observer) == 8)
            F.unobserve(object, observer, "level")
        } else {
            F.unobserve(object, observer, "level")
            F.setLevel(object, 8)
            #expect(F.level(object) == 9)
            #expect(F.notifications(observer) == 1)
            #expect(hooked.load(ordering: .relaxed) == 2)
            token.remove()
        }
        #expect(F.dispatchClass(object) == "OFXObserved")
        #expect(F.reportedClass(object) == "OFXObserved")
        F.setLevel(object, 3)
        #expect(F.level(object) == 3)
    }
}
