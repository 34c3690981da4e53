internal import CFFIHookSupport
import Synchronization

/// A way to call a function whose arguments and result all travel in registers without
/// `ffi_call`: load the argument registers and call through a C thunk that passes all of
/// them (see `ffh_call.h`).
///
/// It applies when every argument is an integer, pointer, `float` or `double` and they fit
/// the argument registers (6 general and 8 floating-point on x86-64 System V, 8 and 8 on
/// AAPCS64), the result is one of those or void, and the call is not variadic. Integers
/// narrower than 64 bits are sign- or zero-extended as compilers expect of a caller; results
/// are widened as `ffi_call` widens them.
package struct RegisterCallPlan {
    /// Whether interfaces made from now on get register plans; tests switch it off to
    /// exercise `ffi_call`. Read when an interface is made, never on a call.
    static let isEnabled = Atomic<Bool>(true)

    /// Switches register plans on or off for the interfaces made from now on, process-wide
    /// (for tests of both paths); ``CallInterface/shared(for:)`` keeps the two kinds apart.
    package static func setEnabled(_ enabled: Bool) {
        isEnabled.store(enabled, ordering: .relaxed)
    }

    private enum Value {
        case signed(bytes: Int)
        case unsigned(bytes: Int)
        case float
        case double

        init?(_ type: CType) {
            switch type.kind {
            case .primitive(let primitive):
                switch primitive {
                case .int128, .unsignedInt128, .longDouble: return nil
                case .float: self = .float
                case .double: self = .double
                default: self = primitive.isSigned ? .signed(bytes: primitive.size) : .unsigned(bytes: primitive.size)
                }
            case .pointer, .cString, .object, .block, .objectClass, .selector, .unknown, .array:
                self = .unsigned(bytes: MemoryLayout<UnsafeRawPointer>.size)
            default:
                return nil
            }
        }

        var isFloatingPoint: Bool {
            switch self {
            case .float, .double: true
            case .signed, .unsigned: false
            }
        }

        /// The 64-bit register image of the value stored at `address`.
        @inline(__always)
        func load(from address: UnsafeRawPointer) -> UInt64 {
            switch self {
            case .signed(1): UInt64(bitPattern: Int64(address.loadUnaligned(as: Int8.self)))
            case .signed(2): UInt64(bitPattern: Int64(address.loadUnaligned(as: Int16.self)))
            case .signed(4): UInt64(bitPattern: Int64(address.loadUnaligned(as: Int32.self)))
            case .unsigned(1): UInt64(address.loadUnaligned(as: UInt8.self))
            case .unsigned(2): UInt64(address.loadUnaligned(as: UInt16.self))
            case .unsigned(4), .float: UInt64(address.loadUnaligned(as: UInt32.self))
            default: address.loadUnaligned(as: UInt64.self)
            }
        }

        /// Stores a result register as `ffi_call` stores results: integers widened to 64 bits.
        @inline(__always)
        func store(_ bits: UInt64, to address: UnsafeMutableRawPointer) {
            let widened: UInt64
            switch self {
            case .float:
                address.storeBytes(of: UInt32(truncatingIfNeeded: bits), as: UInt32.self)
                return
            case .signed(1): widened = UInt64(bitPattern: Int64(Int8(truncatingIfNeeded: bits)))
            case .signed(2): widened = UInt64(bitPattern: Int64(Int16(truncatingIfNeeded: bits)))
            case .signed(4): widened = UInt64(bitPattern: Int64(Int32(truncatingIfNeeded: bits)))
            case .unsigned(1): widened = UInt64(UInt8(truncatingIfNeeded: bits))
            case .unsigned(2): widened = UInt64(UInt16(truncatingIfNeeded: bits))
            case .unsigned(4): widened = UInt64(UInt32(truncatingIfNeeded: bits))
            default: widened = bits
            }
            address.storeBytes(of: widened, as: UInt64.self)
        }
    }

    private struct Step {
        let argument: Int
        let value: Value
        let register: Int
    }

    /// The argument loads, in a buffer the owning interface frees with ``deallocate()``: a
    /// Swift array here would be retained on every call, a write to memory all calling
    /// threads share.
    private let steps: UnsafeMutableBufferPointer<Step>
    /// The result's kind, `nil` for void.
    private let result: Value?

    /// The plan for `signature`, or `nil` when a value does not travel in registers.
    init?(_ signature: Signature) {
        guard ffh_register_calls_available() != 0 else { return nil }
        let generalCount = Int(FFH_GENERAL_REGISTERS)
        let floatingCount = Int(FFH_FLOATING_REGISTERS)
        var steps: [Step] = []
        var general = 0
        var floating = 0
        for (index, type) in signature.argumentTypes.enumerated() {
            guard let value = Value(type) else { return nil }
            if value.isFloatingPoint {
                guard floating < floatingCount else { return nil }
                steps.append(Step(argument: index, value: value, register: floating))
                floating += 1
            } else {
                guard general < generalCount else { return nil }
                steps.append(Step(argument: index, value: value, register: general))
                general += 1
            }
        }
        if signature.returnType.isVoid {
            result = nil
        } else {
            guard let value = Value(signature.returnType) else { return nil }
            result = value
        }
        self.steps = .allocate(capacity: steps.count)
        _ = self.steps.initialize(from: steps)
    }

    /// Frees the plan's buffer; the owner calls it once, when it is done with the plan.
    func deallocate() {
        steps.deallocate()
    }

    /// Calls `function` with the arguments `argumentList` points to; stores the result.
    @inline(__always)
    func call(
        _ function: UnsafeRawPointer, returnValue: UnsafeMutableRawPointer?,
        argumentList: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) {
        var registers = ffh_registers()
        withUnsafeMutableBytes(of: &registers.general) { general in
            withUnsafeMutableBytes(of: &registers.floating) { floating in
                for step in steps {
                    let bits = step.value.load(from: argumentList[step.argument]!)
                    let bank = step.value.isFloatingPoint ? floating : general
                    bank.storeBytes(of: bits, toByteOffset: step.register * 8, as: UInt64.self)
                }
            }
        }
        guard let result else {
            ffh_call_returning_void(function, &registers)
            return
        }
        let bits =
            result.isFloatingPoint
            ? ffh_call_returning_floating(function, &registers) : ffh_call_returning_integer(function, &registers)
        if let returnValue { result.store(bits, to: returnValue) }
    }
}
