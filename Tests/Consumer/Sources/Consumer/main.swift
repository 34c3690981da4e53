import CConsumerTable
import FFIHook
import FFIHookObjC
import Foundation
import Synchronization

// The README's examples, run against the package as a versioned dependency. Each check that
// fails ends the program with a message and exit code 1.

/// What the lifecycle component's notify received.
let consumerNotified = Atomic<Int>(0)

func check(_ condition: Bool, _ message: String) {
    if !condition {
        FileHandle.standardError.write(Data("consumer: check failed: \(message)\n".utf8))
        exit(1)
    }
}

// Example: calling and describing C functions.
let signature = try Signature("ddd")
let interface = try CallInterface.shared(for: signature)
let atan2Pointer = unsafeBitCast(atan2 as @convention(c) (Double, Double) -> Double, to: UnsafeRawPointer.self)
let angle: Double = try interface.call(atan2Pointer, returning: Double.self, 1.0, 1.0)
check(angle == atan2(1.0, 1.0), "atan2 through a call interface")

let point = try CType("{Point=\"x\"d\"y\"d}")
check(point.size == 16 && point.alignment == 8, "the layout of {Point=dd}")

do {
    _ = try Signature("{S=i")
    check(false, "a malformed encoding is refused")
} catch {
    check(
        "\(error)" == "unexpected end of encoding, expected '}' at offset 4 in \"{S=i\"",
        "the message of a malformed encoding: \(error)")
}

let shape = try CallInterface(variadic: Signature("ir*id"), fixedArgumentCount: 1)
check(shape.fixedArgumentCount == 1, "a variadic call shape")

// Hooks on a slot of a C struct of callbacks.
let tablePointer = consumer_table()!
let slot = FunctionSlot.field(\callbacks.add, of: tablePointer)
let seen = Mutex<[String]>([])
let logger = try Hook.before(on: slot, signature: Signature("iii")) { call in
    seen.withLock { $0.append("add \(call.argument(0, as: Int32.self)) \(call.argument(1, as: Int32.self))") }
}
let doubler = try Hook.instead(on: slot, arguments: Int32.self, Int32.self, returning: Int32.self) {
    original, a, b in
    original(a, b) * 2
}
check(consumer_add(2, 3) == 10, "the doubled sum")
check(seen.withLock { $0 } == ["add 2 3"], "the logger saw the call")
logger.remove()
doubler.remove()
check(consumer_add(2, 3) == 5, "the original after the removals")

// A function written into the slot outright, under a hook.
let multiply: @convention(c) (Int32, Int32) -> Int32 = { a, b in a * b }
let plusHundred = try Hook.after(on: slot, signature: Signature("iii")) { call in
    call.setReturnValue(call.returnValue(as: Int32.self) + 100)
}
let replacement = try Hook.replace(on: slot, with: multiply)
let add = replacement.original(as: (@convention(c) (Int32, Int32) -> Int32).self)
check(consumer_add(2, 3) == 106, "the replacement under the hook")
check(add?(2, 3) == 5, "the replaced function")
replacement.remove()
plusHundred.remove()
check(consumer_add(2, 3) == 5, "the original after the replacement and the hook")

// A whole table from a declared layout.
let layout = TableLayout<callbacks>([
    .init("add", \.add, try Signature("iii")),
    .init("notify", \.notify, try Signature("vi")),
])
let returned = Mutex<[String]>([])
let group = try Hook.after(on: tablePointer, layout: layout) { field, call in
    returned.withLock { $0.append(field.name) }
}
_ = consumer_add(1, 1)
consumer_notify(7)
check(returned.withLock { $0 } == ["add", "notify"], "the table's after blocks")
group.remove()

// Components that get every call of the table's slots they fill.
let component = callbacks(add: nil, notify: { value in consumerNotified.add(Int(value), ordering: .relaxed) })
let dispatcher = LifecycleDispatcher(table: tablePointer, layout: layout)
let listener = try dispatcher.register(component, priority: 10)
consumer_notify(5)
check(consumerNotified.load(ordering: .relaxed) == 5, "the component's notify ran")
listener.remove()
consumer_notify(5)
check(consumerNotified.load(ordering: .relaxed) == 5, "no component after its removal")

// A C function as the main program calls it, through its import table.
let pids = Mutex(0)
let imports = try ImportTable.after(symbol: "getpid", in: .mainProgram, signature: Signature("i")) { call in
    pids.withLock { $0 += 1 }
}
check(consumer_pid() == getpid(), "getpid through the hooked import")
check(pids.withLock { $0 } >= 1, "the import-table block ran")
imports.remove()

// The same imports, fishhook-style: a compiled function in every entry.
let pid = getpid()  // before the replacement: this file's own calls go through the same table
let fixed: @convention(c) () -> Int32 = { 42 }
let replaced = try ImportTable.replace(symbol: "getpid", in: .mainProgram, with: fixed)
check(consumer_pid() == 42, "the replacement in the import table")
check(replaced.original(as: (@convention(c) () -> Int32).self)?() == pid, "the replaced getpid")
replaced.remove()
check(consumer_pid() == getpid(), "getpid after the replacement")

// Objective-C methods: every entry point says so while no runtime is loaded.
check(!ObjCHook.isRuntimeLoaded, "no Objective-C runtime before the plug-in is opened")
do {
    _ = try ObjCClass(named: "Counter")
    check(false, "a class found without a runtime")
} catch {
    check(error.code == .runtimeNotLoaded, "runtimeNotLoaded without a runtime")
}

// Then a runtime opened as a plug-in would open it, and a class made in it.
guard let object = consumer_objc_make_counter() else {
    print("consumer: gcc's Objective-C runtime (libobjc4) is not installed")
    exit(1)
}
let counter = try ObjCClass(named: "Counter")
let seenAdds = Mutex<[String]>([])
let addLogger = try ObjCHook.before(on: .instance("add:to:", of: counter)) { call in
    seenAdds.withLock { $0.append("add \(call.argument(2, as: Int32.self)) to \(call.argument(3, as: Int32.self))") }
}
let addReceivers = Mutex<[String]>([])
let addDoubler = try ObjCHook.after(
    on: .instance("add:to:", of: counter), arguments: Int32.self, Int32.self, returning: Int32.self
) { receiver, sum, a, b in
    addReceivers.withLock { $0.append("\(receiver)") }
    return sum * 2
}
let mine = try ObjCHook.instead(on: ObjCObject(object), "add:to:") { call in
    call.callOriginal()
    call.setReturnValue(call.returnValue(as: Int32.self) + 1)
}
check(consumer_objc_add(object, 2, 3) == 11, "the method through class-wide and per-instance hooks")
check(seenAdds.withLock { $0 } == ["add 2 to 3"], "the logger saw the message")
check(
    addReceivers.withLock { $0 } == ["<Counter: 0x\(String(UInt(bitPattern: object), radix: 16))>"],
    "the typed block's receiver prints as the object: \(addReceivers.withLock { $0 })")
check(ObjCObject(object).dispatchClass?.name != "Counter", "the object on a subclass of its own")
check(ObjCObject(object).reportedClass?.name == "Counter", "the object reports its class")
addLogger.remove()
addDoubler.remove()
mine.remove()
check(ObjCObject(object).dispatchClass?.name == "Counter", "the object's class back")
check(consumer_objc_add(object, 2, 3) == 5, "the method after the removals")

// Examples kept in files of their own.
try runZlibExample()
try runImportExamples()
try runReadmeImportExample()
try runInlineExamples()
try runAttachExamples()

print("consumer: every README example ran")
