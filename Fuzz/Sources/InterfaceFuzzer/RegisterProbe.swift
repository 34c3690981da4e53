import CFuzzSupport
import FFIHookCore

/// A call through an interface to a C probe that records its argument registers.
///
/// Only shapes whose values are all scalars that travel in registers qualify: integers up
/// to 64 bits, `_Bool`, pointers of every kind (an array argument is passed as a pointer),
/// `float` and `double`, at most six in general-purpose and eight in vector registers, and
/// a return type among those or `void`. The x86-64 System V convention assigns such values
/// to registers by class and order alone, so the probe, declared with six 64-bit integers
/// and eight doubles, receives each argument where a compiled callee of the signature would;
/// registers that carry nothing are read as they are and ignored. A scalar narrower than its
/// register leaves the upper bits unspecified, so only its own bits are compared.
struct RegisterProbe {
    private enum Value {
        case general(bits: Int)
        case floating(bits: Int)
    }

    private let checker: InterfaceChecker
    private let interface: CallInterface
    private let arguments: [Value]
    private let returnValue: Value?

    /// The probe for `interface`, or `nil` when its signature does not qualify.
    init?(checker: InterfaceChecker, interface: CallInterface) {
        #if arch(x86_64)
            let signature = interface.signature
            var arguments: [Value] = []
            for type in signature.argumentTypes {
                guard let value = Self.value(of: type) else { return nil }
                arguments.append(value)
            }
            let general = arguments.filter { if case .general = $0 { true } else { false } }.count
            guard general <= 6, arguments.count - general <= 8 else { return nil }
            if signature.returnType.isVoid {
                returnValue = nil
            } else {
                guard let value = Self.value(of: signature.returnType) else { return nil }
                returnValue = value
            }
            self.checker = checker
            self.interface = interface
            self.arguments = arguments
        #else
            return nil
        #endif
    }

    private static func value(of type: CType) -> Value? {
        switch type.kind {
        case .primitive(let primitive):
            switch primitive {
            case .float, .double: return .floating(bits: primitive.size * 8)
            case .longDouble, .int128, .unsignedInt128: return nil
            default: return .general(bits: primitive.size * 8)
            }
        case .pointer, .cString, .object, .block, .objectClass, .selector, .unknown, .array:
            return .general(bits: 64)
        case .void, .structure, .union, .complex, .bitField:
            return nil
        }
    }

    /// Calls the probe with values made from the input and checks what it received and what
    /// the call returned.
    func check() {
        var random = SplitMix(seed: checker.bytes)
        let values = arguments.map { _ in random.next() }
        let result = random.next()
        let returnSize = max(interface.returnBufferSize, 16)
        let storage = UnsafeMutableRawPointer.allocate(byteCount: 16 * max(arguments.count, 1), alignment: 16)
        let returnBuffer = UnsafeMutableRawPointer.allocate(byteCount: returnSize, alignment: 16)
        defer {
            storage.deallocate()
            returnBuffer.deallocate()
        }
        let buffers = values.indices.map { index in
            let buffer = storage + 16 * index
            buffer.storeBytes(of: values[index], as: UInt64.self)
            return buffer
        }
        returnBuffer.initializeMemory(as: UInt8.self, repeating: 0xA5, count: returnSize)

        cfuzz_probe_prepare(result)
        let returnsFloating = if case .floating = returnValue { true } else { false }
        interface.call(cfuzz_probe_address(returnsFloating ? 1 : 0), returnValue: returnBuffer, arguments: buffers)

        var seen = cfuzz_probe_registers()
        let calls = cfuzz_probe_collect(&seen)
        checker.require(calls == 1, "the probe ran \(calls) times for one call")
        let general = withUnsafeBytes(of: seen.general) { Array($0.bindMemory(to: UInt64.self)) }
        let floating = withUnsafeBytes(of: seen.floating) { Array($0.bindMemory(to: UInt64.self)) }
        var nextGeneral = 0
        var nextFloating = 0
        for (index, argument) in arguments.enumerated() {
            let (received, bits, register): (UInt64, Int, String)
            switch argument {
            case .general(let width):
                (received, bits, register) = (general[nextGeneral], width, "general register \(nextGeneral)")
                nextGeneral += 1
            case .floating(let width):
                (received, bits, register) = (floating[nextFloating], width, "vector register \(nextFloating)")
                nextFloating += 1
            }
            checker.require(
                received & mask(bits) == values[index] & mask(bits),
                "argument \(index) (\(interface.signature.argumentTypes[index])) arrived in \(register) as "
                    + "\(hex64(received)), expected the low \(bits) bits of \(hex64(values[index]))"
                    + " (interface prepared for fixed-argument count \(String(describing: interface.fixedArgumentCount)))"
            )
        }
        let returned = returnBuffer.loadUnaligned(as: UInt64.self)
        switch returnValue {
        case .general(let bits)?, .floating(let bits)?:
            checker.require(
                returned & mask(bits) == result & mask(bits),
                "the return value reads \(hex64(returned)), expected the low \(bits) bits of \(hex64(result))")
        case nil:
            break
        }
    }

    private func mask(_ bits: Int) -> UInt64 {
        bits >= 64 ? ~0 : (1 << UInt64(bits)) - 1
    }
}

private func hex64(_ value: UInt64) -> String {
    "0x" + String(value, radix: 16)
}

/// A small deterministic generator seeded from the input, for argument values.
private struct SplitMix {
    private var state: UInt64

    init(seed bytes: [UInt8]) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        state = hash
    }

    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
