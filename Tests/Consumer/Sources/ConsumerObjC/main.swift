import CConsumerGreeter
import FFIHookObjC
import Foundation
import Synchronization

// A GNUstep class that this package compiles itself (the target CConsumerGreeter, set up as
// the documentation's "Objective-C targets on Linux" says), hooked for one object. A program
// of its own: it links the runtime, which the first program checks is absent until it opens
// one. Each check that fails ends the program with a message and exit code 1.

func check(_ condition: Bool, _ message: String) {
    if !condition {
        FileHandle.standardError.write(Data("consumer-objc: check failed: \(message)\n".utf8))
        exit(1)
    }
}

/// What GNUstep's `-description` says for `object`.
func gnustepDescription(_ object: UnsafeMutableRawPointer) -> String {
    let text = greeter_description(object)!
    defer { free(text) }
    return String(cString: text)
}

check(ObjCHook.isRuntimeLoaded, "the runtime, linked with the class, is found")
let mine = greeter_new()!
let other = greeter_new()!
let described = gnustepDescription(mine)
check(described.hasPrefix("<Greeter: 0x"), "GNUstep's description of a Greeter: \(described)")
let salutation = greeter_salutation(mine)!
check(String(cString: salutation) == "hello", "a constant string of the class")
free(salutation)

// One object's messages only, with a typed block whose receiver prints as the object.
let greetings = Mutex<[String]>([])
let token = try ObjCHook.before(on: ObjCObject(mine), "greet:", arguments: Int32.self, returning: Int32.self) {
    receiver, times in
    greetings.withLock { $0.append("\(receiver) greets \(times)") }
}
check(greeter_greet(mine, 2) == 2, "the hooked object's method ran")
check(greeter_greet(other, 5) == 5, "another object's method ran")
check(
    greetings.withLock { $0 } == ["\(described) greets 2"],
    "the hook ran for its object alone: \(greetings.withLock { $0 })")
check(ObjCObject(mine).reportedClass?.name == "Greeter", "the hooked object still reports its class")
check(ObjCObject(mine).dispatchClass?.name != "Greeter", "the hooked object on a subclass of its own")
check(token.remove(), "the hook removed")
check(ObjCObject(mine).dispatchClass?.name == "Greeter", "the object's class back")
check(greeter_greet(mine, 1) == 3, "the method after the removal")
check(greetings.withLock { $0.count } == 1, "no block after the removal")

// An exception raised in a hooked method reaches the sender's @catch (the target's flags have
// -fexceptions, as the documentation's setup says).
let refusals = Atomic<Int>(0)
let refusing = try ObjCHook.before(on: ObjCObject(mine), "refuse") { _ in refusals.add(1, ordering: .relaxed) }
check(greeter_refusal_caught(mine) == 1, "an exception through a hooked method caught by the sender")
check(refusals.load(ordering: .relaxed) == 1, "the hook on the raising method ran")
check(refusing.remove(), "that hook removed")
greeter_release(mine)
greeter_release(other)

print("consumer-objc: a per-instance hook on a GNUstep class built by the package ran")
