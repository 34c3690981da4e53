import CTestSupport
import FFIHook
import Foundation
import Synchronization
import Testing

/// Every suite that touches the C fixture table, its counters or process-wide hook state,
/// run one test at a time.
@Suite(.serialized) enum FixtureTableTests {}

/// The slot of one field of the C fixture table.
func fixtureSlot(_ field: PartialKeyPath<ct_fix_table>) -> FunctionSlot {
    FunctionSlot.field(field, of: ct_fix_table_get())
}

/// A C `int (*)(int, int)` function pointer.
typealias AddFunction = @convention(c) (Int32, Int32) -> Int32

/// The address of the fixture's `add` original.
let addOriginalAddress = unsafeBitCast(ct_fix_add as AddFunction, to: UInt.self)

/// A fresh slot outside the fixture table, holding `ct_fix_add`; the caller deallocates it.
func makeAddSlot() -> UnsafeMutablePointer<AddFunction?> {
    let slot = UnsafeMutablePointer<AddFunction?>.allocate(capacity: 1)
    slot.initialize(to: ct_fix_add)
    return slot
}

/// The address a slot holds.
func address(in slot: UnsafeMutablePointer<AddFunction?>) -> UInt {
    slot.pointee.map { unsafeBitCast($0, to: UInt.self) } ?? 0
}

/// The address a C function pointer field currently holds.
func fixtureField(_ field: KeyPath<ct_fix_table, (@convention(c) (Int32, Int32) -> Int32)?>) -> UInt {
    unsafeBitCast(ct_fix_table_get().pointee[keyPath: field], to: UInt.self)
}

/// A counter shared by blocks and the test.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    func increment() { value.add(1, ordering: .relaxed) }
    var count: Int { value.load(ordering: .relaxed) }
}

/// An ordered log shared by blocks and the test.
final class EventLog: Sendable {
    private let events = Locked<[String]>([])
    func record(_ event: String) { events.withLock { $0.append(event) } }
    var all: [String] { events.withLock { $0 } }
}

/// Signatures of the fixture table's functions.
enum FixtureSignature {
    static let add = try! Signature("iii")
    static let mix = try! Signature("didfq")
    static let notify = try! Signature("vi")
    static let offset = try! Signature("{ct_fix_point=dd}{ct_fix_point=dd}d")
    static let negate = try! Signature("cc")
    static let countdown = try! Signature("ii")
}

/// A value guarded by a lock that ThreadSanitizer sees.
final class Locked<Value>: @unchecked Sendable {
    // Sendable: `value` is only touched with `lock` held.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&value) }
    }
}

extension HookError {
    /// Whether this is the error `problem` makes: its code and its message.
    func `is`(_ problem: HookError.Problem) -> Bool {
        code == problem.code && message == problem.message
    }
}
