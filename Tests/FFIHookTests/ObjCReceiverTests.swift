import FFIHook
import FFIHookObjC
import Foundation
import Synchronization
import Testing

/// Typed blocks get their receiver as an ObjCObject, which prints as GNUstep prints the
/// object. Part of the serialized suite of class-wide hooks: both hook the same classes.
extension ObjCMethodHookTests {
    /// What `-description` of GNUstep's NSObject says for `object`, from gcc-compiled code.
    static func gnustepDescription(_ object: F.ID) -> String {
        let text = F.function("ofx_description", as: (@convention(c) (F.ID) -> UnsafeMutablePointer<CChar>?).self)(
            object)!
        defer { free(text) }
        return String(cString: text)
    }

    @Test func typedReceiversPrintAsTheirObject() throws {
        let counter = try F.class("OFXCounter")
        let object = F.new("OFXCounter")
        defer { F.release(object) }
        let expected = Self.gnustepDescription(object)
        #expect(expected.hasPrefix("<OFXCounter: 0x"))
        #expect("\(ObjCObject(UnsafeRawPointer(object)))" == expected)

        let printed = Mutex<[String]>([])
        let classWide = try ObjCHook.before(
            on: .instance("add:to:", of: counter), arguments: Int32.self, Int32.self, returning: Int32.self
        ) { receiver, _, _ in
            printed.withLock { $0.append("\(receiver)") }
        }
        defer { classWide.remove() }
        #expect(F.add(object, 1, 2) == 3)
        #expect(printed.withLock { $0 } == [expected])

        // An object with hooks of its own reports its class as before, and prints so.
        let handle = F.object(object)
        let own = try ObjCHook.after(
            on: handle, "add:to:", arguments: Int32.self, Int32.self, returning: Int32.self
        ) { receiver, sum, _, _ in
            printed.withLock { $0.append("own \(receiver)") }
            #expect(receiver == handle)
            return sum
        }
        defer { own.remove() }
        #expect(F.add(object, 3, 4) == 7)
        #expect(printed.withLock { $0 } == [expected, expected, "own \(expected)"])
    }
}
