import FFIHook
import FFIHookObjC
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Class-wide hooks on methods of real GNUstep classes built by gcc, called through message
/// sends gcc compiled (`Tests/Fixtures/ObjCFixture`). Serialized: several tests hook the same
/// methods and count calls.
@Suite(.serialized) struct ObjCMethodHookTests {
    typealias F = ObjCFixture

    // MARK: - One method

    /// Before and after blocks see self, `_cmd` and the arguments as sent, the after block
    /// the result; removal leaves the closure in the method, passing messages through, and
    /// the explicit call gives the method its implementation back.
    @Test func beforeAndAfterSeeTheMessage() throws {
        let counter = try F.class("OFXCounter")
        let object = F.new("OFXCounter")
        defer { F.release(object) }
        let original = F.implementation("OFXCounter", "add:to:")
        let seen = Mutex<[String]>([])
        let objectAddress = F.address(object)
        let before = try ObjCHook.before(on: .instance("add:to:", of: counter)) { call in
            let receiver = call.argument(0, as: UInt.self)
            let selector = F.selectorName(call.argument(1, as: UInt.self))
            seen.withLock {
                $0.append(
                    "before \(receiver == objectAddress) \(selector) \(call.argument(2, as: Int32.self)) \(call.argument(3, as: Int32.self))"
                )
            }
        }
        let after = try ObjCHook.after(on: .instance("add:to:", of: counter)) { call in
            seen.withLock { $0.append("after \(call.returnValue(as: Int32.self))") }
        }
        let closure = F.implementation("OFXCounter", "add:to:")
        #expect(closure != original)
        #expect(F.add(object, 20, 22) == 42)
        #expect(seen.withLock { $0 } == ["before true add:to: 20 22", "after 42"])
        #expect(before.remove())
        #expect(after.remove())
        #expect(!before.remove())
        #expect(F.implementation("OFXCounter", "add:to:") == closure)
        #expect(F.add(object, 1, 2) == 3)
        #expect(seen.withLock { $0.count } == 2)
        #expect(try ObjCHook.restoreOriginalImplementation(of: .instance("add:to:", of: counter)))
        #expect(F.implementation("OFXCounter", "add:to:") == original)
        #expect(F.add(object, 1, 2) == 3)
    }

    /// An instead block replaces the result, calls the original with changed arguments, and
    /// the method's other senders see it.
    @Test func insteadChangesArgumentsAndResult() throws {
        let counter = try F.class("OFXCounter")
        let object = F.new("OFXCounter")
        defer { F.release(object) }
        let token = try ObjCHook.instead(on: .instance("add:to:", of: counter)) { call in
            call.setArgument(2, to: call.argument(2, as: Int32.self) * 10)
            call.callOriginal()
            call.setReturnValue(call.returnValue(as: Int32.self) + 1)
        }
        defer { token.remove() }
        #expect(F.add(object, 4, 2) == 43)
    }

    /// A variadic method, hooked with one call shape given as a variadic signature (its
    /// encoding lists the fixed arguments alone): the blocks see every argument, and the
    /// original gets them all, in registers and on the stack.
    @Test func aVariadicMethodWithItsCallShape() throws {
        let variadic = try F.class("OFXVariadic")
        let sumOfSeven = F.function("ofx_sum_of_seven", as: (@convention(c) (F.ID) -> Int32).self)
        let object = F.new("OFXVariadic")
        defer { F.release(object) }
        #expect(sumOfSeven(object) == 28)
        let shape = try Signature(variadic: "i@:iiiiiiii", fixedArgumentCount: 3)
        let seen = Mutex<[Int32]>([])
        let method = ObjCMethod.instance("sumOf:", of: variadic)
        let before = try ObjCHook.before(on: method, signature: shape) { call in
            seen.withLock { $0 = (2..<10).map { call.argument($0, as: Int32.self) } }
        }
        let after = try ObjCHook.after(on: method, signature: shape) { call in
            call.setReturnValue(call.returnValue(as: Int32.self) + 1000)
        }
        #expect(sumOfSeven(object) == 1028)
        #expect(seen.withLock { $0 } == [7, 1, 2, 3, 4, 5, 6, 7])
        before.remove()
        after.remove()
        #expect(sumOfSeven(object) == 28)
        // A shape whose fixed part is not the method's is refused.
        let wrong = try Signature(variadic: "i@:dii", fixedArgumentCount: 3)
        #expect(throws: ObjCHookError.self) { try ObjCHook.before(on: method, signature: wrong) { _ in } }
    }

    /// A variadic method hooked with its encoding (the fixed arguments alone) and then unhooked:
    /// its messages of any shape reach it whole again, the stack's arguments too, and a
    /// per-instance hook with a call shape serves its object through the class's closure. The
    /// closure that stays in the method passed messages on by the encoding's register plan,
    /// and a sum of seven came back wrong for the rest of the process.
    @Test func aVariadicMethodGetsEveryMessageWholeOnceItsHooksAreGone() throws {
        let variadic = try F.class("OFXVariadic")
        let sumOfSeven = F.function("ofx_sum_of_seven", as: (@convention(c) (F.ID) -> Int32).self)
        let object = F.new("OFXVariadic")
        defer { F.release(object) }
        #expect(sumOfSeven(object) == 28)
        let method = ObjCMethod.instance("sumOf:", of: variadic)
        let runs = Atomic<Int>(0)
        let token = try ObjCHook.before(on: method) { _ in runs.add(1, ordering: .relaxed) }
        _ = sumOfSeven(object)
        #expect(runs.load(ordering: .relaxed) == 1)
        token.remove()
        for _ in 0..<3 { #expect(sumOfSeven(object) == 28) }
        #expect(runs.load(ordering: .relaxed) == 1)
        let shape = try Signature(variadic: "i@:iiiiiiii", fixedArgumentCount: 3)
        let mine = try ObjCHook.after(on: F.object(object), method.selector, signature: shape) { call in
            call.setReturnValue(call.returnValue(as: Int32.self) + 100)
        }
        #expect(sumOfSeven(object) == 128)
        mine.remove()
        #expect(sumOfSeven(object) == 28)
    }

    /// A once hook runs for one message only.
    @Test func onceRunsOnce() throws {
        let plain = try F.class("OFXPlain")
        let object = F.new("OFXPlain")
        defer { F.release(object) }
        let runs = Atomic<Int>(0)
        let token = try ObjCHook.before(on: .instance("identity:", of: plain), options: .once) { _ in
            runs.add(1, ordering: .relaxed)
        }
        for value in 0..<5 { #expect(F.identity(object, Int32(value)) == Int32(value)) }
        #expect(runs.load(ordering: .relaxed) == 1)
        #expect(!token.isActive)
        // The next install on the method puts the closure back to work.
        let again = try ObjCHook.before(on: .instance("identity:", of: plain)) { _ in runs.add(1, ordering: .relaxed) }
        #expect(F.identity(object, 9) == 9)
        #expect(runs.load(ordering: .relaxed) == 2)
        again.remove()
    }

    // MARK: - Typed blocks

    /// Typed blocks get the receiver and the arguments as Swift values, the after block the
    /// result to replace, the instead block the original to call with other arguments.
    @Test func typedBlocks() throws {
        let counter = try F.class("OFXCounter")
        let object = F.new("OFXCounter")
        defer { F.release(object) }
        let objectAddress = F.address(object)
        let add = ObjCMethod.instance("add:to:", of: counter)
        let seen = Mutex<[String]>([])
        let tokens = [
            try ObjCHook.before(on: add, arguments: Int32.self, Int32.self, returning: Int32.self) { receiver, a, b in
                seen.withLock { $0.append("before \(receiver.address == objectAddress) \(a) \(b)") }
            },
            try ObjCHook.after(on: add, arguments: Int32.self, Int32.self, returning: Int32.self) { _, sum, a, b in
                seen.withLock { $0.append("after \(sum) \(a) \(b)") }
                return sum * 2
            },
            try ObjCHook.instead(on: add, arguments: Int32.self, Int32.self, returning: Int32.self) {
                original, _, a, b in
                let result = original(a + 1, b + 1)
                return result + 100
            },
        ]
        // The instead block's arguments are what the after block sees.
        #expect(F.add(object, 3, 4) == 2 * (3 + 1 + 4 + 1 + 100))
        for token in tokens { token.remove() }
        #expect(seen.withLock { $0 } == ["before true 3 4", "after 109 4 5"])

        // A method of one argument, its instead block a single expression (the compiler infers
        // it for a one-argument form; a parameter pack of one it did not), class-wide and for
        // one object.
        let complement = try ObjCHook.instead(
            on: .instance("complement:", of: counter), arguments: UInt32.self, returning: UInt32.self
        ) { original, _, x in original(x << 4) }
        #expect(F.complement(object, 0x0F0F_0F0F) == ~UInt32(0xF0F0_F0F0))
        complement.remove()
        let own = try ObjCHook.instead(
            on: F.object(object), "complement:", arguments: UInt32.self, returning: UInt32.self
        ) { original, _, x in original(x) & 0xFF }
        #expect(F.complement(object, 0) == 0xFF)
        own.remove()
        #expect(F.complement(object, 0) == ~0)

        // A void method, and a struct argument and result.
        let ticks = Atomic<Int>(0)
        let tick = try ObjCHook.after(on: .instance("tick", of: counter)) { (_: ObjCObject) in
            ticks.add(1, ordering: .relaxed)
        }
        F.tick(object)
        tick.remove()
        #expect(ticks.load(ordering: .relaxed) == 1)
        #expect(F.ticks(object) == 1)
        let inset = try ObjCHook.after(
            on: .instance("inset:by:", of: counter), arguments: F.Rect.self, Double.self, returning: F.Rect.self
        ) { _, result, rect, amount in
            F.Rect(x: result.x, y: result.y, width: rect.width, height: amount)
        }
        var result = F.Rect(x: 0, y: 0, width: 0, height: 0)
        withUnsafePointer(to: F.Rect(x: 1, y: 1, width: 9, height: 9)) { F.inset(object, $0, 1, &result) }
        inset.remove()
        #expect(result == F.Rect(x: 2, y: 2, width: 9, height: 1))
    }

    /// A typed block's `id` argument or result taken as an `ObjCObject` may be `nil`: the value
    /// says so (address 0), prints as `nil` and has no classes, where printing it stopped the
    /// program (its class was asked of address 0; a stranger's finding).
    @Test func aNilObjectInATypedBlockPrintsAsNil() throws {
        let counter = try F.class("OFXCounter")
        let object = F.new("OFXCounter")
        defer { F.release(object) }
        let other = F.new("OFXCounter")
        defer { F.release(other) }
        let seen = Mutex<[String]>([])
        let echo = ObjCMethod.instance("echoObject:", of: counter)
        let token = try ObjCHook.after(on: echo, arguments: ObjCObject.self, returning: ObjCObject.self) {
            _, result, argument in
            seen.withLock {
                $0.append(
                    "\(argument) \(argument.isNil) \(argument.reportedClass == nil) \(argument.dispatchClass == nil) "
                        + "\(result)")
            }
            return result
        }
        defer { token.remove() }
        #expect(F.echoObject(object, nil) == nil)
        #expect(F.echoObject(object, other) == other)
        let lines = seen.withLock { $0 }
        #expect(lines.count == 2)
        #expect(lines.first == "nil true true true nil")
        #expect(lines.last?.hasPrefix("<OFXCounter: 0x") == true)
        // A nil component is refused, not read.
        let dispatcher = ObjCLifecycleDispatcher(delegate: nil, selectors: ["tick"])
        let nilObject = unsafeBitCast(UInt(0), to: ObjCObject.self)
        #expect(nilObject.isNil && nilObject.description == "nil")
        #expect(throws: ObjCHookError.self) { _ = try dispatcher.register(nilObject) }
    }

    /// Giving a method that cannot be found its implementation back says it could not restore
    /// it (the error said `cannot hook`).
    @Test func aRestoreThatFailsSaysRestore() throws {
        let counter = try F.class("OFXCounter")
        let error = #expect(throws: ObjCHookError.self) {
            try ObjCHook.restoreOriginalImplementation(of: .instance("noSuchMethod:", of: counter))
        }
        #expect(error?.code == .selectorNotFound)
        #expect(
            error?.description.hasPrefix("cannot restore -[OFXCounter noSuchMethod:]: ") == true,
            "\(String(describing: error))")
    }

    /// Swift types that do not match the method's types are refused at install.
    @Test func typedBlocksOfTheWrongTypesAreRefused() throws {
        let add = ObjCMethod.instance("add:to:", of: try F.class("OFXCounter"))
        for attempt: () throws -> HookToken in [
            { try ObjCHook.before(on: add, arguments: Double.self, Int32.self, returning: Int32.self) { _, _, _ in } },
            { try ObjCHook.before(on: add, arguments: Int32.self, returning: Int32.self) { _, _ in } },
            { try ObjCHook.before(on: add, arguments: Int32.self, Int32.self, returning: Void.self) { _, _, _ in } },
        ] {
            #expect {
                try attempt().remove()
            } throws: { error in
                (error as? ObjCHookError)?.code == .signatureMismatch
            }
        }
        // A count that differs is said in the block's terms, the receiver and selector aside.
        #expect {
            try ObjCHook.before(on: add, arguments: Int32.self, returning: Int32.self) { _, _ in }.remove()
        } throws: { error in
            (error as? ObjCHookError)?.message.hasPrefix(
                "1 argument type given where the method takes 2 after the receiver and selector") == true
        }
    }

    // MARK: - Every kind of value

    /// Arguments and results of every width and class, read by before and after blocks and
    /// passed through to the original, must be what a compiled message send passes.
    ///
    /// Three ways: hooks on the class's own methods; on a subclass that inherits them (its
    /// added methods send each message on to the superclass's, struct results through a
    /// hidden pointer and x87 results included); and on one object of that subclass.
    @Test(arguments: ["own", "inherited", "object"])
    func valuesOfEveryKindPassByteExact(_ hooked: String) throws {
        let className = hooked == "own" ? "OFXCounter" : "OFXLeaf"
        let cls = try F.class(className)
        let object = F.new(className)
        let other = F.new("OFXPlain")
        defer {
            F.release(object)
            F.release(other)
        }
        // Each case: hook, send, check what the blocks saw and what the sender got.
        func check<Argument: BitwiseCopyable & Equatable & Sendable, Result: BitwiseCopyable & Equatable & Sendable>(
            _ selector: String, argument index: Int, _ argument: Argument, result expected: Result,
            sourceLocation: SourceLocation = #_sourceLocation, send: () -> Result
        ) throws {
            let seen = Mutex<(Argument?, Result?)>((nil, nil))
            let reading: @Sendable (borrowing Invocation) -> Void = { call in
                let value = call.argument(index, as: Argument.self)
                seen.withLock { $0.0 = value }
            }
            let resulting: @Sendable (borrowing Invocation) -> Void = { call in
                let value = call.returnValue(as: Result.self)
                seen.withLock { $0.1 = value }
            }
            let before =
                hooked == "object"
                ? try ObjCHook.before(on: F.object(object), selector, reading)
                : try ObjCHook.before(on: .instance(selector, of: cls), reading)
            let after =
                hooked == "object"
                ? try ObjCHook.after(on: F.object(object), selector, resulting)
                : try ObjCHook.after(on: .instance(selector, of: cls), resulting)
            let result = send()
            before.remove()
            after.remove()
            #expect(result == expected, "\(selector) result", sourceLocation: sourceLocation)
            #expect(seen.withLock { $0.0 } == argument, "\(selector) argument", sourceLocation: sourceLocation)
            #expect(seen.withLock { $0.1 } == expected, "\(selector) result seen", sourceLocation: sourceLocation)
            #expect(send() == expected, "\(selector) unhooked", sourceLocation: sourceLocation)
        }
        try check("negateChar:", argument: 2, Int8(-100), result: Int8(100)) { F.negateChar(object, -100) }
        try check("twiceShort:", argument: 2, UInt16(30000), result: UInt16(60000)) { F.twiceShort(object, 30000) }
        try check("multiply:by:", argument: 3, Int64(1) << 33, result: Int64(3) << 33) {
            F.multiply(object, 3, 1 << 33)
        }
        try check("complement:", argument: 2, UInt32(0x0F0F_0F0F), result: UInt32(0xF0F0_F0F0)) {
            F.complement(object, 0x0F0F_0F0F)
        }
        try check("isPositive:", argument: 2, Int32(7), result: Int8(1)) { F.isPositive(object, 7) }
        try check("halfOf:", argument: 2, Float(5), result: Float(2.5)) { F.halfOf(object, 5) }
        try check("mix:with:", argument: 3, 0.25, result: 1.75) { F.mix(object, 0.5, 0.25) }
        let text = "xhello"
        try text.withCString { pointer in
            try check("skipFirst:", argument: 2, UInt(bitPattern: pointer), result: UInt(bitPattern: pointer + 1)) {
                UInt(bitPattern: F.skipFirst(object, pointer))
            }
        }
        let selector = F.selector("mix:with:")
        try check("echoSelector:", argument: 2, F.address(selector), result: F.address(selector)) {
            F.address(F.echoSelector(object, selector))
        }
        try check("echoObject:", argument: 2, F.address(other), result: F.address(other)) {
            F.address(F.echoObject(object, other))
        }
        // long double (x87, 16 bytes in memory): compared as its ten significant bytes.
        var x: Float80 = 1.5
        try check("scale:by:", argument: 3, Int32(-4), result: Float80(-6)) {
            var result: Float80 = 0
            F.scale(object, &x, -4, &result)
            return result
        }
        let rect = F.Rect(x: 1, y: 2, width: 30, height: 40)
        try check("inset:by:", argument: 2, rect, result: F.Rect(x: 3, y: 4, width: 26, height: 36)) {
            var result = F.Rect(x: 0, y: 0, width: 0, height: 0)
            withUnsafePointer(to: rect) { F.inset(object, $0, 2, &result) }
            return result
        }
        let pair = F.Pair(key: -7, value: 9)
        try check("swapPair:", argument: 2, pair, result: F.Pair(key: 9, value: -7)) {
            var result = F.Pair(key: 0, value: 0)
            withUnsafePointer(to: pair) { F.swapPair(object, $0, &result) }
            return result
        }
        try check("bigFrom:", argument: 2, Int64(3), result: F.Big(values: (3, 6, 9, 12, 15))) {
            var result = F.Big(values: (0, 0, 0, 0, 0))
            F.bigFrom(object, 3, &result)
            return result
        }
    }

    // MARK: - Inheritance

    /// A hook on a method the class inherits covers that class and its subclasses, not the
    /// superclass; a hook installed on the superclass afterwards runs for both.
    @Test func inheritedMethodsAreHookedForTheClassAlone() throws {
        let counter = try F.class("OFXCounter")
        let derived = try F.class("OFXDerived")
        let base = F.new("OFXCounter")
        let middle = F.new("OFXDerived")
        let leaf = F.new("OFXLeaf")
        defer { for object in [base, middle, leaf] { F.release(object) } }
        let calls = Mutex<[String]>([])
        let derivedHook = try ObjCHook.before(on: .instance("multiply:by:", of: derived)) { call in
            calls.withLock { $0.append("derived \(call.argument(2, as: Int64.self))") }
        }
        #expect(F.multiply(base, 1, 2) == 2)
        #expect(F.multiply(middle, 2, 2) == 4)
        #expect(F.multiply(leaf, 3, 2) == 6)
        #expect(calls.withLock { $0 } == ["derived 2", "derived 3"])
        let counterHook = try ObjCHook.before(on: .instance("multiply:by:", of: counter)) { call in
            calls.withLock { $0.append("counter \(call.argument(2, as: Int64.self))") }
        }
        calls.withLock { $0 = [] }
        #expect(F.multiply(base, 4, 2) == 8)
        #expect(F.multiply(leaf, 5, 2) == 10)
        #expect(calls.withLock { $0 } == ["counter 4", "derived 5", "counter 5"])
        derivedHook.remove()
        counterHook.remove()
        calls.withLock { $0 = [] }
        #expect(F.multiply(middle, 6, 2) == 12)
        #expect(F.multiply(base, 7, 2) == 14)
        #expect(calls.withLock { $0 }.isEmpty)
        // Hooking it again uses the method added the first time.
        let again = try ObjCHook.after(on: .instance("multiply:by:", of: derived)) { call in
            calls.withLock { $0.append("again \(call.returnValue(as: Int64.self))") }
        }
        #expect(F.multiply(leaf, 8, 2) == 16)
        #expect(F.multiply(base, 9, 2) == 18)
        again.remove()
        #expect(calls.withLock { $0 } == ["again 16"])
    }

    /// A method that overrides and calls `super`: hooks of both classes run, the subclass's
    /// around the superclass's.
    @Test func overridingMethodsCallingSuperRunBothHooks() throws {
        let counter = try F.class("OFXCounter")
        let overrider = try F.class("OFXOverrider")
        let object = F.new("OFXOverrider")
        defer { F.release(object) }
        let calls = Mutex<[String]>([])
        let tokens = [
            try ObjCHook.before(on: .instance("add:to:", of: overrider)) { _ in calls.withLock { $0.append("sub") } },
            try ObjCHook.after(on: .instance("add:to:", of: counter)) { call in
                calls.withLock { $0.append("super \(call.returnValue(as: Int32.self))") }
            },
        ]
        #expect(F.add(object, 1, 2) == 1003)
        for token in tokens { token.remove() }
        #expect(calls.withLock { $0 } == ["sub", "super 3"])
    }

    /// Class methods, the class's own and inherited by a subclass.
    @Test func classMethods() throws {
        let counter = try F.class("OFXCounter")
        let derived = try F.class("OFXDerived")
        let calls = Mutex<[String]>([])
        let own = try ObjCHook.after(on: .class("classAdd:to:", of: counter)) { call in
            calls.withLock { $0.append("counter \(call.returnValue(as: Int32.self))") }
            call.setReturnValue(call.returnValue(as: Int32.self) + 1)
        }
        #expect(F.classAdd("OFXCounter", 1, 2) == 13)
        #expect(F.classAdd("OFXDerived", 2, 3) == 24)
        let inherited = try ObjCHook.before(on: .class("classAdd:to:", of: derived)) { call in
            calls.withLock { $0.append("derived \(call.argument(2, as: Int32.self))") }
        }
        #expect(F.classAdd("OFXDerived", 4, 5) == 46)
        #expect(F.classAdd("OFXCounter", 6, 7) == 68)
        own.remove()
        inherited.remove()
        #expect(F.classAdd("OFXDerived", 1, 1) == 11)
        #expect(
            calls.withLock { $0 } == ["counter 12", "counter 23", "derived 4", "counter 45", "counter 67"])
    }

    /// A class method the class inherits, hooked before any message reached the class (its
    /// dispatch tables not built yet), and an instance method likewise.
    @Test func inheritedMethodsOfClassesNeverMessaged() throws {
        let fresh = try F.class("OFXFreshSub")
        let runs = Atomic<Int>(0)
        let value = try ObjCHook.after(on: .class("value", of: fresh)) { call in
            runs.add(1, ordering: .relaxed)
            call.setReturnValue(call.returnValue(as: Int32.self) + 1)
        }
        let twice = try ObjCHook.before(on: .instance("twice:", of: fresh)) { _ in runs.add(1, ordering: .relaxed) }
        #expect(F.freshValue("OFXFreshSub") == 42)
        #expect(F.freshValue("OFXFreshBase") == 41)
        let object = F.new("OFXFreshSub")
        let base = F.new("OFXFreshBase")
        #expect(F.twice(object, 4) == 8)
        #expect(F.twice(base, 4) == 8)
        value.remove()
        twice.remove()
        #expect(F.freshValue("OFXFreshSub") == 41)
        #expect(F.twice(object, 5) == 10)
        F.release(object)
        F.release(base)
        #expect(runs.load(ordering: .relaxed) == 2)
    }

    /// A hook on a superclass's own method reaches subclasses whose dispatch tables were
    /// built before it (the runtime's method_setImplementation updates the defining class's
    /// table alone), and leaves them when removed.
    @Test func superclassHooksReachSubclassesAlreadyMessaged() throws {
        let base = try F.class("OFXStaleBase")
        // The subclasses first: building their tables builds the superclass's.
        let subclasses = ["OFXStaleSub", "OFXStaleLeaf"].map { F.new($0) }
        defer { for object in subclasses { F.release(object) } }
        for object in subclasses { #expect(F.triple(object, 1) == 3) }
        let token = try ObjCHook.instead(on: .instance("triple:", of: base)) { call in
            call.setReturnValue(Int32(-1))
        }
        let plain = F.new("OFXStaleBase")
        defer { F.release(plain) }
        for object in [plain] + subclasses { #expect(F.triple(object, 2) == -1) }
        token.remove()
        for object in [plain] + subclasses { #expect(F.triple(object, 2) == 6) }
    }

    /// Classes built by clang: their instance methods hook as gcc's do; their class methods
    /// are refused, the runtime reading their metaclasses as under construction.
    @Test func classesBuiltByClang() throws {
        _ = ObjCFixture.handle
        let path = FixtureLibraries.path("libObjCClangFixture.so")
        let library = try #require(dlopen(path, RTLD_NOW | RTLD_LOCAL))
        func function<Function>(_ name: String, as type: Function.Type) -> Function {
            unsafeBitCast(dlsym(library, name)!, to: Function.self)
        }
        let value = function("ofxc_value", as: (@convention(c) (UnsafePointer<CChar>) -> Int32).self)
        let twice = function("ofxc_twice", as: (@convention(c) (OpaquePointer, Int32) -> Int32).self)
        let make = function("ofxc_new", as: (@convention(c) (UnsafePointer<CChar>) -> OpaquePointer).self)
        let release = function("ofxc_release", as: (@convention(c) (OpaquePointer) -> Void).self)
        let base = try ObjCClass(named: "OFXClangBase")
        let sub = try ObjCClass(named: "OFXClangSub")
        for owner in [base, sub] {
            do {
                _ = try ObjCHook.before(on: .class("clangValue", of: owner)) { _ in }
                Issue.record("a class method of a clang-built class was hooked")
            } catch {
                #expect(error.code == .metaclassUnderConstruction)
            }
        }
        #expect(value("OFXClangSub") == 5)
        let object = make("OFXClangSub")
        defer { release(object) }
        let runs = Atomic<Int>(0)
        let own = try ObjCHook.before(on: .instance("clangTwice:", of: base)) { _ in runs.add(1, ordering: .relaxed) }
        let inherited = try ObjCHook.after(on: .instance("clangTwice:", of: sub)) { call in
            call.setReturnValue(call.returnValue(as: Int32.self) + 1)
        }
        #expect(twice(object, 4) == 9)
        own.remove()
        inherited.remove()
        #expect(twice(object, 4) == 8)
        #expect(runs.load(ordering: .relaxed) == 1)
    }

    // MARK: - Other writers

    /// Another swizzler replaces the hooked method's implementation with one that calls ours:
    /// removing the hook leaves theirs, which still reaches the original through the closure;
    /// a new hook wraps theirs, and giving the method its implementation back after that
    /// gives it theirs.
    @Test func anotherSwizzlersImplementationStays() throws {
        let derived = try F.class("OFXLeaf")
        let object = F.new("OFXLeaf")
        defer { F.release(object) }
        let runs = Atomic<Int>(0)
        let first = try ObjCHook.before(on: .instance("add:to:", of: derived)) { _ in runs.add(1, ordering: .relaxed) }
        F.swizzleAdd("OFXLeaf")
        let theirs = F.implementation("OFXLeaf", "add:to:")
        #expect(F.add(object, 1, 1) == 102)
        #expect(runs.load(ordering: .relaxed) == 1)
        first.remove()
        #expect(F.implementation("OFXLeaf", "add:to:") == theirs)
        #expect(F.add(object, 1, 1) == 102)
        #expect(runs.load(ordering: .relaxed) == 1)
        let second = try ObjCHook.after(on: .instance("add:to:", of: derived)) { call in
            runs.add(1, ordering: .relaxed)
            #expect(call.returnValue(as: Int32.self) == 102)
        }
        #expect(F.add(object, 1, 1) == 102)
        #expect(runs.load(ordering: .relaxed) == 2)
        second.remove()
        #expect(F.implementation("OFXLeaf", "add:to:") != theirs)
        #expect(F.add(object, 1, 1) == 102)
        #expect(try ObjCHook.restoreOriginalImplementation(of: .instance("add:to:", of: derived)))
        #expect(F.implementation("OFXLeaf", "add:to:") == theirs)
        #expect(F.add(object, 1, 1) == 102)
        #expect(runs.load(ordering: .relaxed) == 2)
    }

    // MARK: - Refusals

    @Test func refusalsNameTheMethodAndTheReason() throws {
        let counter = try F.class("OFXCounter")
        func code(_ body: () throws -> HookToken) -> ObjCHookError.Code? {
            do {
                let token = try body()
                token.remove()
                return nil
            } catch let error as ObjCHookError {
                return error.code
            } catch {
                Issue.record("not an ObjCHookError: \(error)")
                return nil
            }
        }
        #expect(throws: ObjCHookError.self) { try ObjCClass(named: "OFXNoSuchClass") }
        do {
            _ = try ObjCClass(named: "OFXNoSuchClass")
        } catch {
            #expect(error.code == .classNotFound)
            #expect(error.className == "OFXNoSuchClass")
        }
        #expect(
            code { try ObjCHook.before(on: .instance("noSuchSelector:", of: counter)) { _ in } } == .selectorNotFound)
        #expect(code { try ObjCHook.before(on: .class("add:to:", of: counter)) { _ in } } == .selectorNotFound)
        // A NUL byte would cut the name short for the runtime (here to a method that exists).
        #expect(code { try ObjCHook.before(on: .instance("add:to:\0tail", of: counter)) { _ in } } == .selectorNotFound)
        #expect(code { try ObjCHook.before(on: .instance("", of: counter)) { _ in } } == .selectorNotFound)
        // Their messages say which, with the NUL escaped.
        let cut = #expect(throws: ObjCHookError.self) {
            try ObjCHook.before(on: .instance("add:to:\0tail", of: counter)) { _ in }
        }
        #expect(
            cut?.description
                == "cannot hook -[OFXCounter add:to:\\u{0}tail]: the selector's name holds a NUL byte (at byte 7): "
                + "the runtime cannot register it")
        let empty = #expect(throws: ObjCHookError.self) { try ObjCHook.before(on: .instance("", of: counter)) { _ in } }
        #expect(empty?.message == "the selector's name is empty: the runtime cannot register it")
        let wrong = try Signature("d@:dd")
        let right = try Signature("i@:ii")
        #expect(
            code { try ObjCHook.before(on: .instance("add:to:", of: counter), signature: wrong) { _ in } }
                == .signatureMismatch)
        #expect(code { try ObjCHook.before(on: .instance("add:to:", of: counter), signature: right) { _ in } } == nil)
        let unregistered = ObjCClass(F.unregisteredClass())
        #expect(
            code { try ObjCHook.before(on: .instance("identity:", of: unregistered)) { _ in } } == .classNotRegistered)
        // Pointers that are not what they are given as, or nothing at all.
        let object = F.new("OFXPlain")
        defer { F.release(object) }
        #expect(
            code { try ObjCHook.before(on: .instance("identity:", of: ObjCClass(UnsafeRawPointer(object)))) { _ in } }
                == .invalidClass)
        #expect(code { try ObjCHook.before(on: ObjCObject(counter.pointer), "add:to:") { _ in } } == .invalidClass)
        let zeroes = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 16)
        zeroes.initializeMemory(as: UInt8.self, repeating: 0, count: 64)
        defer { zeroes.deallocate() }
        #expect(
            code { try ObjCHook.before(on: .instance("identity:", of: ObjCClass(zeroes))) { _ in } } == .invalidClass)
        #expect(code { try ObjCHook.before(on: ObjCObject(zeroes), "identity:") { _ in } } == .invalidClass)
        let unmapped = UnsafeRawPointer(bitPattern: 0x10)!
        #expect(
            code { try ObjCHook.before(on: .instance("identity:", of: ObjCClass(unmapped))) { _ in } } == .invalidClass)
        #expect(code { try ObjCHook.before(on: ObjCObject(unmapped), "identity:") { _ in } } == .invalidClass)
        #expect(throws: ObjCHookError.self) { try ObjCClass.of(unmapped) }
        #expect(throws: ObjCHookError.self) { try ObjCClass(named: "OFXPlain\u{0}garbage") }
        let metaclass = ObjCClass(F.metaclass("OFXCounter"))
        #expect(metaclass.description == "OFXCounter (metaclass)")
        #expect(counter.description == "OFXCounter")
        #expect(code { try ObjCHook.before(on: .instance("classAdd:to:", of: metaclass)) { _ in } } == .invalidClass)
        do {
            _ = try ObjCHook.before(on: .instance("noSuchSelector:", of: counter)) { _ in }
        } catch {
            #expect(
                error.description
                    == "cannot hook -[OFXCounter noSuchSelector:]: the class has no method for this selector and inherits none"
            )
        }
        #expect(try ObjCMethod.instance("add:to:", of: counter).typeEncoding == "i24@0:8i16i20")
        // A packed struct reads as an unpacked one; the frame offsets give it away.
        let odd = try F.class("OFXOdd")
        #expect(try ObjCMethod.instance("packedSum:", of: odd).typeEncoding == "i25@0:8{?=cd}16")
        do {
            _ = try ObjCHook.before(on: .instance("packedSum:", of: odd)) { _ in }
            Issue.record("a packed struct argument was accepted")
        } catch {
            #expect(error.code == .invalidSignature)
            #expect(error.message.contains("frame"))
        }
        #expect(ObjCMethod.class("classAdd:to:", of: counter).description == "+[OFXCounter classAdd:to:]")
    }

    /// Without an Objective-C runtime in the process every entry point says so (in a child
    /// process, which has not loaded the fixture).
    @Test func withoutARuntimeEveryEntryPointThrows() async {
        await #expect(processExitsWith: .success) {
            guard !ObjCHook.isRuntimeLoaded else { exit(2) }
            do {
                _ = try ObjCClass(named: "NSObject")
                exit(3)
            } catch let error as ObjCHookError {
                guard error.code == .runtimeNotLoaded else { exit(4) }
            } catch {
                exit(8)
            }
            let somewhere = ObjCClass(UnsafeRawPointer(bitPattern: 0x1000)!)
            do {
                _ = try ObjCHook.before(on: .instance("description", of: somewhere)) { _ in }
                exit(5)
            } catch let error as ObjCHookError {
                guard error.code == .runtimeNotLoaded else { exit(6) }
            } catch {
                exit(9)
            }
            guard somewhere.name == nil else { exit(7) }
            exit(0)
        }
    }

    // MARK: - Exceptions

    /// An Objective-C exception thrown through a hooked method reaches the sender's @catch,
    /// and the thread is left as if the hooked call had returned: it can wait for
    /// reclamation, later calls run their hooks, and a thread that then exits (which runs the
    /// thread's cleanup list) does not trip over what the unwound call left behind.
    @Test func exceptionsThroughHookedMethods() async {
        await #expect(processExitsWith: .success) {
            alarm(30)
            guard let thrower = try? ObjCFixture.class("OFXThrower") else { exit(2) }
            let runs = Atomic<Int>(0)
            let method = ObjCMethod.instance("maybeThrow:", of: thrower)
            guard
                let before = try? ObjCHook.before(on: method, { _ in runs.add(1, ordering: .relaxed) }),
                let instead = try? ObjCHook.instead(on: method, { call in call.callOriginal() }),
                let after = try? ObjCHook.after(on: method, { _ in runs.add(100, ordering: .relaxed) })
            else { exit(3) }
            let object = ObjCFixture.new("OFXThrower")
            guard ObjCFixture.tryThrow(object, 1) == -2, runs.load(ordering: .relaxed) == 1 else { exit(4) }
            guard (try? Hook.waitForReclamation()) != nil else { exit(5) }
            guard ObjCFixture.tryThrow(object, 0) == 1, runs.load(ordering: .relaxed) == 102 else { exit(6) }
            // On a thread of its own, which then exits through pthread_exit.
            var thread = pthread_t()
            let started = pthread_create(
                &thread, nil,
                { object in
                    let object = OpaquePointer(object!)
                    for _ in 0..<3 where ObjCFixture.tryThrow(object, 7) != -2 { exit(7) }
                    pthread_exit(nil)
                }, UnsafeMutableRawPointer(object))
            guard started == 0, pthread_join(thread, nil) == 0 else { exit(8) }
            for token in [before, instead, after] { token.remove() }
            guard (try? Hook.waitForReclamation()) != nil else { exit(9) }
            guard ObjCFixture.tryThrow(object, 1) == -2 else { exit(10) }
            exit(0)
        }
    }

    // MARK: - Threads

    /// Two threads send messages while a third installs and removes hooks on the same
    /// method: every message reaches the original, and the permanent hook counts them all.
    @Test func messagesWhileHooksComeAndGo() throws {
        final class Counts: Sendable {
            let counted = Atomic<Int>(0)
            let done = Atomic<Int>(0)
            let wrong = Atomic<Int>(0)
        }
        let plain = try F.class("OFXPlain")
        let method = ObjCMethod.instance("identity:", of: plain)
        let counts = Counts()
        let permanent = try ObjCHook.before(on: method) { _ in counts.counted.add(1, ordering: .relaxed) }
        let perThread = 1_000_000
        let sender: @Sendable () -> Void = {
            let object = F.new("OFXPlain")
            for value in 0..<perThread where F.identity(object, Int32(value)) != Int32(value) {
                counts.wrong.add(1, ordering: .relaxed)
            }
            F.release(object)
            counts.done.add(1, ordering: .relaxed)
        }
        F.runThreads([
            sender, sender,
            {
                while counts.done.load(ordering: .relaxed) < 2 {
                    guard let token = try? ObjCHook.after(on: method, { _ in }) else {
                        counts.wrong.add(1, ordering: .relaxed)
                        return
                    }
                    token.remove()
                }
            },
        ])
        permanent.remove()
        #expect(counts.wrong.load(ordering: .relaxed) == 0)
        #expect(counts.counted.load(ordering: .relaxed) == 2 * perThread)
    }
}
