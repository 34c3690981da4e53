import FFIHook
import FFIHookObjC
import Synchronization
import Testing

/// Objective-C hooks in a scope, limited to its task. Part of the serialized suite of
/// class-wide hooks: both hook the same classes.
extension ObjCMethodHookTests {
    /// A scope removes a class-wide method hook as it removes any other.
    @Test func aScopeRemovesAMethodHook() throws {
        let counterClass = try F.class("OFXCounter")
        let counter = F.new("OFXCounter")
        defer { F.release(counter) }
        let sum = try Hook.scoped {
            try ObjCHook.instead(on: .instance("add:to:", of: counterClass)) { call in
                call.setReturnValue(Int32(-1))
            }
        } during: {
            F.add(counter, 1, 2)
        }
        #expect(sum == -1)
        #expect(F.add(counter, 1, 2) == 3)
        #expect(try ObjCHook.restoreOriginalImplementation(of: .instance("add:to:", of: counterClass)))
    }

    /// A per-instance hook limited to the scope's task keeps its limit when key-value
    /// observing, started from another task, moves its object to another class: the hook
    /// is installed again there for the same calls.
    @Test func anInstanceHookKeepsItsTaskLimitWhenItsObjectChangesClass() async throws {
        _ = try F.class("OFXObserved")
        let object = F.new("OFXObserved")
        let observer = F.new("OFXObserver")
        let objectAddress = UInt(bitPattern: object)
        let observerAddress = UInt(bitPattern: observer)
        defer {
            F.release(object)
            F.release(observer)
        }
        let hooked = Atomic<Int>(0)
        try await Hook.scoped {
            try ObjCHook.after(on: F.object(object), "setLevel:", options: .inCurrentTaskOnly) { _ in
                hooked.add(1, ordering: .relaxed)
            }
        } during: {
            await Task.detached {
                F.observe(
                    OpaquePointer(bitPattern: objectAddress)!, OpaquePointer(bitPattern: observerAddress)!, "level")
            }.value
            F.setLevel(object, 5)
            #expect(hooked.load(ordering: .relaxed) == 1)
            await Task.detached { F.setLevel(OpaquePointer(bitPattern: objectAddress)!, 6) }.value
            #expect(hooked.load(ordering: .relaxed) == 1)
            #expect(F.notifications(observer) == 2)
            F.unobserve(object, observer, "level")
        }
        #expect(F.reportedClass(object) == "OFXObserved")
    }
}
