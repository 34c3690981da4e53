import FFIHookObjC
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The Objective-C fixture library (`Tests/Fixtures/ObjCFixture`), opened the way a plug-in
/// is (`RTLD_LOCAL`: the runtime it links is not in the global scope), and its C functions,
/// which send messages as gcc compiles them.
enum ObjCFixture {
    typealias ID = OpaquePointer
    typealias SEL = OpaquePointer

    struct Rect: Equatable, BitwiseCopyable {
        var x, y, width, height: Double
    }
    struct Pair: Equatable, BitwiseCopyable {
        var key: Int64
        var value: Double
    }
    struct Big: Equatable, BitwiseCopyable {
        var values: (Int64, Int64, Int64, Int64, Int64)
        static func == (lhs: Big, rhs: Big) -> Bool {
            withUnsafeBytes(of: lhs.values) { left in
                withUnsafeBytes(of: rhs.values) { right in left.elementsEqual(right) }
            }
        }
    }

    nonisolated(unsafe) static let handle: UnsafeMutableRawPointer = {
        let path = FixtureLibraries.path("libObjCFixture.so")
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            fatalError("cannot open \(path): \(String(cString: dlerror()))")
        }
        return handle
    }()

    static func function<Function>(_ name: String, as type: Function.Type = Function.self) -> Function {
        guard let symbol = dlsym(handle, name) else { fatalError("the fixture has no \(name)") }
        return unsafeBitCast(symbol, to: Function.self)
    }

    /// Loads the fixture (and with it the runtime); returns the class called `name`.
    static func `class`(_ name: String) throws -> ObjCClass {
        _ = handle
        return try ObjCClass(named: name)
    }

    /// Runs each body on a thread of its own (threads the runtime did not make, as a C
    /// program's are) and returns once all have finished.
    static func runThreads(_ bodies: [@Sendable () -> Void]) {
        let finished = DispatchGroup()
        for body in bodies {
            finished.enter()
            Thread.detachNewThread {
                body()
                finished.leave()
            }
        }
        finished.wait()
    }

    static func new(_ className: String) -> ID {
        function("ofx_new", as: (@convention(c) (UnsafePointer<CChar>) -> ID?).self)(className)!
    }
    static func release(_ object: ID) {
        function("ofx_release", as: (@convention(c) (ID) -> Void).self)(object)
    }
    /// An object's or selector's address, for comparing with what a block reads.
    static func address(_ pointer: OpaquePointer?) -> UInt {
        UInt(bitPattern: Int(bitPattern: pointer))
    }
    static func selectorName(_ selector: UInt) -> String {
        let name = function("ofx_selector_name", as: (@convention(c) (UInt) -> UnsafePointer<CChar>?).self)(selector)
        return name.map { String(cString: $0) } ?? "?"
    }
    static func selector(_ name: String) -> SEL {
        function("ofx_selector", as: (@convention(c) (UnsafePointer<CChar>) -> SEL?).self)(name)!
    }
    /// The implementation the runtime dispatches to now.
    static func implementation(_ className: String, _ selector: String, classMethod: Bool = false) -> UInt {
        let pointer = function(
            "ofx_implementation",
            as: (@convention(c) (UnsafePointer<CChar>, UnsafePointer<CChar>, Int32) -> UnsafeRawPointer?).self)(
                className, selector, classMethod ? 1 : 0)
        return UInt(bitPattern: pointer)
    }

    /// The implementation the method holds (`method_getImplementation`).
    static func methodImplementation(_ className: String, _ selector: String) -> UInt {
        let pointer = function(
            "ofx_method_implementation",
            as: (@convention(c) (UnsafePointer<CChar>, UnsafePointer<CChar>) -> UnsafeRawPointer?).self)(
                className, selector)
        return UInt(bitPattern: pointer)
    }
    /// The address of the class's dispatch table, which the runtime replaces when it refreshes it.
    static func dispatchTable(_ className: String, classMethod: Bool = false) -> UInt {
        let pointer = function(
            "ofx_dispatch_table", as: (@convention(c) (UnsafePointer<CChar>, Int32) -> UnsafeRawPointer?).self)(
                className, classMethod ? 1 : 0)
        return UInt(bitPattern: pointer)
    }
    /// Another swizzler sets -[OFXSwizzled value:] to add 1000 (`which` 0) or 2000 (1).
    static let swizzleValue = function("ofx_swizzle_value", as: (@convention(c) (Int32) -> Void).self)

    // The messages.
    static let add = function("ofx_add", as: (@convention(c) (ID, Int32, Int32) -> Int32).self)
    static let negateChar = function("ofx_negate_char", as: (@convention(c) (ID, Int8) -> Int8).self)
    static let twiceShort = function("ofx_twice_short", as: (@convention(c) (ID, UInt16) -> UInt16).self)
    static let multiply = function("ofx_multiply", as: (@convention(c) (ID, Int64, Int64) -> Int64).self)
    static let complement = function("ofx_complement", as: (@convention(c) (ID, UInt32) -> UInt32).self)
    static let isPositive = function("ofx_is_positive", as: (@convention(c) (ID, Int32) -> Int8).self)
    static let halfOf = function("ofx_half_of", as: (@convention(c) (ID, Float) -> Float).self)
    static let mix = function("ofx_mix", as: (@convention(c) (ID, Double, Double) -> Double).self)
    static let scale = function(
        "ofx_scale",
        as: (@convention(c) (ID, UnsafeRawPointer, Int32, UnsafeMutableRawPointer) -> Void).self)
    static let skipFirst = function(
        "ofx_skip_first", as: (@convention(c) (ID, UnsafePointer<CChar>) -> UnsafePointer<CChar>?).self)
    static let echoSelector = function("ofx_echo_selector", as: (@convention(c) (ID, SEL) -> SEL?).self)
    static let echoObject = function("ofx_echo_object", as: (@convention(c) (ID, ID?) -> ID?).self)
    static let inset = function(
        "ofx_inset", as: (@convention(c) (ID, UnsafeRawPointer, Double, UnsafeMutableRawPointer) -> Void).self)
    static let swapPair = function(
        "ofx_swap_pair", as: (@convention(c) (ID, UnsafeRawPointer, UnsafeMutableRawPointer) -> Void).self)
    static let bigFrom = function(
        "ofx_big_from", as: (@convention(c) (ID, Int64, UnsafeMutableRawPointer) -> Void).self)
    static let tick = function("ofx_tick", as: (@convention(c) (ID) -> Void).self)
    static let ticks = function("ofx_ticks", as: (@convention(c) (ID) -> Int32).self)
    static let classAdd = function(
        "ofx_class_add", as: (@convention(c) (UnsafePointer<CChar>, Int32, Int32) -> Int32).self)
    static let identity = function("ofx_identity", as: (@convention(c) (ID, Int32) -> Int32).self)
    static let value = function("ofx_value", as: (@convention(c) (ID, Int32) -> Int32).self)
    static let swizzleAdd = function("ofx_swizzle_add", as: (@convention(c) (UnsafePointer<CChar>) -> Void).self)
    static let observe = function(
        "ofx_observe", as: (@convention(c) (ID, ID, UnsafePointer<CChar>) -> Void).self)
    static let unobserve = function(
        "ofx_unobserve", as: (@convention(c) (ID, ID, UnsafePointer<CChar>) -> Void).self)
    static let notifications = function("ofx_notifications", as: (@convention(c) (ID) -> Int32).self)
    static let lastValue = function("ofx_last_value", as: (@convention(c) (ID) -> Int32).self)
    static let setLevel = function("ofx_set_level", as: (@convention(c) (ID, Int32) -> Void).self)
    static let level = function("ofx_level", as: (@convention(c) (ID) -> Int32).self)
    /// The name of the class the object reports (`[object class]`).
    static func reportedClass(_ object: ID) -> String {
        String(cString: function("ofx_reported_class", as: (@convention(c) (ID) -> UnsafePointer<CChar>).self)(object))
    }
    /// The name of the class the runtime dispatches the object's messages through.
    static func dispatchClass(_ object: ID) -> String {
        String(cString: function("ofx_dispatch_class", as: (@convention(c) (ID) -> UnsafePointer<CChar>).self)(object))
    }
    static func object(_ object: ID) -> ObjCObject {
        ObjCObject(UnsafeRawPointer(object))
    }
    static let freshValue = function(
        "ofx_fresh_value", as: (@convention(c) (UnsafePointer<CChar>) -> Int32).self)
    static let twice = function("ofx_twice", as: (@convention(c) (ID, Int32) -> Int32).self)
    static let triple = function("ofx_triple", as: (@convention(c) (ID, Int32) -> Int32).self)
    static let tryThrow = function("ofx_try_throw", as: (@convention(c) (ID, Int32) -> Int32).self)
    static func events() -> String {
        String(cString: function("ofx_events", as: (@convention(c) () -> UnsafePointer<CChar>).self)())
    }
    static let resetEvents = function("ofx_events_reset", as: (@convention(c) () -> Void).self)
    static let newComponent = function("ofx_component_new", as: (@convention(c) (CChar) -> ID).self)
    static let launches = function("ofx_component_launches", as: (@convention(c) (ID) -> Int32).self)
    static let lastCode = function("ofx_component_last_code", as: (@convention(c) (ID) -> Int32).self)
    static let didLaunch = function("ofx_did_launch", as: (@convention(c) (ID, Int32) -> Void).self)
    static let willTerminate = function("ofx_will_terminate", as: (@convention(c) (ID) -> Void).self)
    static let setDelegate = function("ofx_app_set_delegate", as: (@convention(c) (ID, ID?) -> Void).self)
    static let moveToNewSubclass = function(
        "ofx_move_to_new_subclass",
        as: (@convention(c) (ID, UnsafePointer<CChar>, UnsafePointer<CChar>, Int32) -> Void).self)
    static let solo = function("ofx_solo", as: (@convention(c) (ID, Int32) -> Int32).self)
    static let unregisteredClass = function("ofx_unregistered_class", as: (@convention(c) () -> UnsafeRawPointer).self)
    static let metaclass = function(
        "ofx_metaclass", as: (@convention(c) (UnsafePointer<CChar>) -> UnsafeRawPointer).self)
}
