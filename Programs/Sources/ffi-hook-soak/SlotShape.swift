internal import CSoakSupport
import FFIHook

/// The values of one call: `a` carries the before blocks' marks, `b` and the extras are
/// the other arguments. All are below 256.
struct CallInput: Sendable {
    var a: Int64
    var b: Int64
    var extra: (Int64, Int64, Int64, Int64, Int64, Int64)

    /// Fresh values from `random`.
    init(_ random: inout SoakRandom) {
        a = random.byte()
        b = random.byte()
        extra = (random.byte(), random.byte(), random.byte(), random.byte(), random.byte(), random.byte())
    }

    /// Values derived from `seed` without a generator (for calls made inside blocks).
    init(seed: Int) {
        let value = Int64(seed & 0xFF)
        a = value
        b = 255 - value
        extra = (value, value ^ 1, value ^ 2, value ^ 3, value ^ 4, value ^ 5)
    }
}

/// One slot of the C table: its signature, and how the soak calls it, reads and changes a
/// call from a block, and encodes results (see ``Marks``).
///
/// Each slot has a different C signature: `int32_t(int32_t, int32_t)`, `double(double,
/// double)`, a struct of an integer and a double passed and returned in registers, a
/// 24-byte struct passed and returned in memory, and eight arguments of which one travels
/// on the stack and one is a float.
enum SlotShape: Int, CaseIterable, Sendable, CustomStringConvertible {
    case add
    case fadd
    case mix
    case shift
    case wide

    var description: String {
        switch self {
        case .add: "add  int32(int32, int32)"
        case .fadd: "fadd double(double, double)"
        case .mix: "mix  pair(pair{int64, double}, int32)"
        case .shift: "shift triple(triple{3 x int64}, int32)"
        case .wide: "wide int64(7 x int64, float)"
        }
    }

    /// The C signature, as a type encoding.
    var encoding: String {
        switch self {
        case .add: "iii"
        case .fadd: "ddd"
        case .mix: "{soak_pair=qd}{soak_pair=qd}i"
        case .shift: "{soak_triple=qqq}{soak_triple=qqq}i"
        case .wide: "qqqqqqqqf"
        }
    }

    /// The slot in the process's table.
    var slot: FunctionSlot {
        let table = soak_table_pointer()
        return switch self {
        case .add: FunctionSlot.field(\soak_table.add, of: table)
        case .fadd: FunctionSlot.field(\soak_table.fadd, of: table)
        case .mix: FunctionSlot.field(\soak_table.mix, of: table)
        case .shift: FunctionSlot.field(\soak_table.shift, of: table)
        case .wide: FunctionSlot.field(\soak_table.wide, of: table)
        }
    }

    /// What the original adds to `a`.
    func rest(_ input: CallInput) -> Int64 {
        switch self {
        case .add, .fadd, .mix, .shift: input.b
        case .wide:
            input.b + input.extra.0 + input.extra.1 + input.extra.2 + input.extra.3 + input.extra.4 + input.extra.5
        }
    }

    // MARK: - Calling through the table

    /// Calls the slot through C with `input`; the encoded result, or `nil` when its parts
    /// disagree (a struct's two copies of the result differ, an echoed field changed, a
    /// double is not a whole number).
    func call(_ input: CallInput) -> Int64? {
        switch self {
        case .add:
            return Int64(soak_call_add(Int32(input.a), Int32(input.b)))
        case .fadd:
            return Int64(exactly: soak_call_fadd(Double(input.a), Double(input.b)))
        case .mix:
            let pair = soak_call_mix(soak_pair(tag: input.a, value: Double(input.a)), Int32(input.b))
            return Double(pair.tag) == pair.value ? pair.tag : nil
        case .shift:
            let triple = soak_call_shift(soak_triple(a: input.a, b: input.extra.0, c: input.extra.1), Int32(input.b))
            return triple.b == input.extra.0 + 1 && triple.c == input.extra.1 + 2 ? triple.a : nil
        case .wide:
            let extra = input.extra
            return soak_call_wide(
                input.a, input.b, extra.0, extra.1, extra.2, extra.3, extra.4, Float(extra.5))
        }
    }

    // MARK: - Inside a block

    /// Argument `a` as the block sees it, or `nil` when the argument is inconsistent.
    func a(of call: borrowing Invocation) -> Int64? {
        switch self {
        case .add: Int64(call.argument(0, as: Int32.self))
        case .fadd: Int64(exactly: call.argument(0, as: Double.self))
        case .mix: Self.check(call.argument(0, as: soak_pair.self))
        case .shift: call.argument(0, as: soak_triple.self).a
        case .wide: call.argument(0, as: Int64.self)
        }
    }

    /// Replaces argument `a` for the blocks that follow and the original.
    func setA(of call: borrowing Invocation, to value: Int64) {
        switch self {
        case .add: call.setArgument(0, to: Int32(truncatingIfNeeded: value))
        case .fadd: call.setArgument(0, to: Double(value))
        case .mix: call.setArgument(0, to: soak_pair(tag: value, value: Double(value)))
        case .shift:
            var triple = call.argument(0, as: soak_triple.self)
            triple.a = value
            call.setArgument(0, to: triple)
        case .wide: call.setArgument(0, to: value)
        }
    }

    /// Argument `b`.
    func b(of call: borrowing Invocation) -> Int64 {
        switch self {
        case .add, .mix, .shift: Int64(call.argument(1, as: Int32.self))
        case .fadd: Int64(call.argument(1, as: Double.self))
        case .wide: call.argument(1, as: Int64.self)
        }
    }

    /// The encoded return value as it stands, or `nil` when it is inconsistent.
    func result(of call: borrowing Invocation) -> Int64? {
        switch self {
        case .add: Int64(call.returnValue(as: Int32.self))
        case .fadd: Int64(exactly: call.returnValue(as: Double.self))
        case .mix: Self.check(call.returnValue(as: soak_pair.self))
        case .shift: call.returnValue(as: soak_triple.self).a
        case .wide: call.returnValue(as: Int64.self)
        }
    }

    /// Sets the encoded return value. The echoed fields of a struct result are kept, or with
    /// `computingEchoes` computed from the arguments as the original would (for a block that
    /// answers in place of the original).
    func setResult(of call: borrowing Invocation, to value: Int64, computingEchoes: Bool = false) {
        switch self {
        case .add: call.setReturnValue(Int32(truncatingIfNeeded: value))
        case .fadd: call.setReturnValue(Double(value))
        case .mix: call.setReturnValue(soak_pair(tag: value, value: Double(value)))
        case .shift:
            var triple = call.returnValue(as: soak_triple.self)
            if computingEchoes {
                let argument = call.argument(0, as: soak_triple.self)
                triple = soak_triple(a: value, b: argument.b + 1, c: argument.c + 2)
            }
            triple.a = value
            call.setReturnValue(triple)
        case .wide: call.setReturnValue(value)
        }
    }

    /// Whether the arguments a block sees after the original ran are those the original
    /// got: the result's low bits (and a struct result's echoed fields) must follow from
    /// them. A replaced result must be `a ^ b` of them instead.
    func argumentsMatchResult(of call: borrowing Invocation) -> Bool {
        guard let result = result(of: call), let a = a(of: call) else { return false }
        let b = b(of: call)
        if result & Marks.replaced != 0 { return result & 0xFFFF == a ^ b }
        var rest = b
        switch self {
        case .add, .fadd, .mix: break
        case .shift:
            let argument = call.argument(0, as: soak_triple.self)
            let returned = call.returnValue(as: soak_triple.self)
            guard returned.b == argument.b + 1, returned.c == argument.c + 2 else { return false }
        case .wide:
            for index in 2..<7 { rest += call.argument(index, as: Int64.self) }
            rest += Int64(call.argument(7, as: Float.self))
        }
        return result & 0xFFFF == a + rest
    }

    private static func check(_ pair: soak_pair) -> Int64? {
        Double(pair.tag) == pair.value ? pair.tag : nil
    }
}

/// A small, fast generator (xorshift64*), one per thread.
struct SoakRandom {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    }

    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 0x2545_F491_4F6C_DD1D
    }

    /// A value in `0..<bound`.
    mutating func below(_ bound: Int) -> Int {
        Int(next() >> 33) % bound
    }

    /// A value in `0..<256`.
    mutating func byte() -> Int64 {
        Int64(next() >> 56)
    }

    /// True with probability `numerator / denominator`.
    mutating func chance(_ numerator: Int, in denominator: Int) -> Bool {
        below(denominator) < numerator
    }
}
