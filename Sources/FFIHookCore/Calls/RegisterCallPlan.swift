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
    /// Whether interfaces the calling thread makes from now on get plans (register plans, and
    /// on x86-64 System V plans, which also decide whether slot closures enter through the
    /// library's own entry); tests switch it off to exercise `ffi_call` and libffi's closure
    /// entry. Read when an interface is made, never on a call.
    static var isEnabled: Bool { ffh_plans_off_here() == 0 }

    /// Switches plans on or off for the interfaces the calling thread makes from now on (for
    /// tests of both paths; per thread, so that other threads' hooks, in tests running beside
    /// them, keep their interfaces); ``CallInterface/shared(for:)`` keeps the two kinds apart.
    package static func setEnabled(_ enabled: Bool) {
        ffh_set_plans_off_here(enabled ? 0 : 1)
    }

    /// How `type` travels in a register, or `nil` when it does not travel in one.
    static func kind(of type: CType) -> ffh_value_kind? {
        switch type.kind {
        case .primitive(let primitive):
            switch primitive {
            case .int128, .unsignedInt128, .longDouble: return nil
            case .float: return ffh_value_kind(FFH_VALUE_FLOAT)
            case .double: return ffh_value_kind(FFH_VALUE_DOUBLE)
            default:
                switch (primitive.size, primitive.isSigned) {
                case (1, true): return ffh_value_kind(FFH_VALUE_SIGNED_8)
                case (2, true): return ffh_value_kind(FFH_VALUE_SIGNED_16)
                case (4, true): return ffh_value_kind(FFH_VALUE_SIGNED_32)
                case (1, false): return ffh_value_kind(FFH_VALUE_UNSIGNED_8)
                case (2, false): return ffh_value_kind(FFH_VALUE_UNSIGNED_16)
                case (4, false): return ffh_value_kind(FFH_VALUE_UNSIGNED_32)
                default: return ffh_value_kind(FFH_VALUE_64)
                }
            }
        case .pointer, .cString, .object, .block, .objectClass, .selector, .unknown, .array:
            return ffh_value_kind(FFH_VALUE_64)
        default:
            return nil
        }
    }

    /// The plan as the C side reads it (`ffh_call_plan`'s), in memory the owning interface
    /// frees with ``deallocate()`` (a Swift array here would be retained on every call, a
    /// write to memory all calling threads share).
    let plan: UnsafeMutablePointer<ffh_plan>

    /// The plan for `signature`, or `nil` when a value does not travel in registers.
    init?(_ signature: Signature) {
        guard ffh_register_calls_available() != 0 else { return nil }
        let generalCount = Int(FFH_GENERAL_REGISTERS)
        let floatingCount = Int(FFH_FLOATING_REGISTERS)
        var steps: [ffh_plan_step] = []
        var general = 0
        var floating = 0
        for (index, type) in signature.argumentTypes.enumerated() {
            guard let kind = Self.kind(of: type) else { return nil }
            let isFloatingPoint = kind == ffh_value_kind(FFH_VALUE_FLOAT) || kind == ffh_value_kind(FFH_VALUE_DOUBLE)
            if isFloatingPoint {
                guard floating < floatingCount else { return nil }
                steps.append(ffh_plan_step(argument: UInt16(index), kind: kind, reg: UInt8(floating)))
                floating += 1
            } else {
                guard general < generalCount else { return nil }
                steps.append(ffh_plan_step(argument: UInt16(index), kind: kind, reg: UInt8(general)))
                general += 1
            }
        }
        let result: ffh_value_kind
        if signature.returnType.isVoid {
            result = ffh_value_kind(FFH_VALUE_VOID)
        } else {
            guard let kind = Self.kind(of: signature.returnType) else { return nil }
            result = kind
        }
        let buffer = UnsafeMutableBufferPointer<ffh_plan_step>.allocate(capacity: max(steps.count, 1))
        _ = buffer.initialize(from: steps)
        plan = .allocate(capacity: 1)
        plan.initialize(
            to: ffh_plan(
                steps: UnsafePointer(buffer.baseAddress), count: UInt32(steps.count), result: result,
                usesFloatingRegisters: floating > 0 ? 1 : 0))
    }

    /// Frees the plan; the owner calls it once, when it is done with the plan.
    func deallocate() {
        UnsafeMutablePointer(mutating: plan.pointee.steps)?.deallocate()
        plan.deallocate()
    }
}
