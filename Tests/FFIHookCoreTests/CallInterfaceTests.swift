import CTestSupport
import Foundation
import Testing

@testable import FFIHookCore

/// The address of a C function, as the call interface takes it.
func address<F>(of function: F) -> UnsafeRawPointer {
    unsafeBitCast(function, to: UnsafeRawPointer.self)
}

@Suite struct CallInterfaceTests {
    /// A `Bool` result stands for a byte as C reads a truth value: any nonzero byte is `true`
    /// (a byte of 2 read as a `Bool` kept its lowest bit alone).
    @Test func aNonzeroByteResultIsTrue() throws {
        let identity: @convention(c) (UInt8) -> UInt8 = ct_fix_byte_identity
        let interface = try CallInterface(Signature("CC"))
        let two = try interface.call(address(of: identity), returning: Bool.self, UInt8(2))
        #expect(two == true && two)
        let zero = try interface.call(address(of: identity), returning: Bool.self, UInt8(0))
        #expect(zero == false && !zero)
    }

    @Test func typedCallOfLibcFunctions() throws {
        let atan2Function: @convention(c) (Double, Double) -> Double = atan2
        let interface = try CallInterface(Signature("ddd"))
        let angle: Double = try interface.call(address(of: atan2Function), returning: Double.self, 1.0, 1.0)
        #expect(angle == atan2(1.0, 1.0))

        let labsFunction: @convention(c) (Int) -> Int = labs
        let absolute = try CallInterface(Signature("qq")).call(address(of: labsFunction), returning: Int.self, -42)
        #expect(absolute == 42)

        let strlenFunction: @convention(c) (UnsafePointer<CChar>) -> Int = strlen
        let length = try "hooks".withCString { text in
            try CallInterface(Signature("Qr*")).call(address(of: strlenFunction), returning: UInt.self, text)
        }
        #expect(length == 5)
    }

    @Test func bufferCallOfLibcFunction() throws {
        let ldexpFunction: @convention(c) (Double, Int32) -> Double = ldexp
        let interface = try CallInterface(Signature("ddi"))
        var mantissa = 0.75
        var exponent: Int32 = 4
        var result = [UInt8](repeating: 0, count: interface.returnBufferSize)
        withUnsafeMutableBytes(of: &mantissa) { m in
            withUnsafeMutableBytes(of: &exponent) { e in
                result.withUnsafeMutableBytes { r in
                    interface.call(
                        address(of: ldexpFunction), returnValue: r.baseAddress,
                        arguments: [m.baseAddress!, e.baseAddress!])
                }
            }
        }
        #expect(result.withUnsafeBytes { $0.load(as: Double.self) } == 12.0)
    }

    @Test func typedCallRefusesWrongSwiftTypes() throws {
        let interface = try CallInterface(Signature("ddd"))
        let atan2Function: @convention(c) (Double, Double) -> Double = atan2
        #expect(
            throws: CallInterfaceError(
                signature: interface.signature, position: .argument(1),
                problem: .typeMismatch(swiftType: "Int64"))
        ) {
            _ = try interface.call(address(of: atan2Function), returning: Double.self, 1.0, Int64(1))
        }
        #expect(
            throws: CallInterfaceError(
                signature: interface.signature, position: nil,
                problem: .argumentCountMismatch(expected: 2, actual: 1))
        ) {
            _ = try interface.call(address(of: atan2Function), returning: Double.self, 1.0)
        }
        #expect(
            throws: CallInterfaceError(
                signature: interface.signature, position: .returnValue,
                problem: .typeMismatch(swiftType: "Float"))
        ) {
            _ = try interface.call(address(of: atan2Function), returning: Float.self, 1.0, 2.0)
        }
        // The public shape: a code to compare, the value at fault, and the message.
        let error = #expect(throws: CallInterfaceError.self) {
            _ = try interface.call(address(of: atan2Function), returning: Double.self, 1.0, Int64(1))
        }
        #expect(error?.code == .typeMismatch)
        #expect(error?.code.description == "typeMismatch")
        #expect(error?.position == .argument(1))
        #expect(error?.type == (try CType("d")))
        #expect(error?.message == "argument 1 (d) does not match the Swift type Int64")
        #expect(error?.description == #"argument 1 (d) does not match the Swift type Int64; in signature "ddd""#)
    }

    /// A floating-point Swift value cannot stand for an address: it would travel in a
    /// floating-point register where the callee reads an integer one.
    @Test func aFloatingPointValueIsNoPointer() throws {
        for encoding in ["q*", "q^v", "q@", "q:", "q#", "q[4i]"] {
            let interface = try CallInterface(Signature(encoding))
            let error = #expect(throws: CallInterfaceError.self, "\(encoding)") {
                _ = try interface.call(UnsafeRawPointer(bitPattern: 0x1000)!, returning: Int.self, 1.5)
            }
            #expect(error?.code == .typeMismatch, "\(encoding)")
            #expect(error?.position == .argument(0), "\(encoding)")
        }
    }

    @Test(arguments: [
        ("v{E=}", CallInterfaceError.Position.argument(0)),
        ("{E=}", .returnValue),
        ("[4i]", .returnValue),
    ])
    func refusesValuesWithoutACallingConvention(encoding: String, position: CallInterfaceError.Position) throws {
        let signature = try Signature(encoding)
        let error = try #require(throws: CallInterfaceError.self) { try CallInterface(signature) }
        #expect(error.position == position)
        guard error.code == .unsupportedValue else {
            Issue.record("expected unsupportedValue, got \(error)")
            return
        }
        #expect(error.description.contains(position.description))
    }

    @Test func arrayArgumentIsPassedAsPointer() throws {
        let strlenFunction: @convention(c) (UnsafePointer<CChar>) -> Int = strlen
        let length = try "array".withCString { text in
            try CallInterface(Signature("Q[6c]")).call(address(of: strlenFunction), returning: UInt.self, text)
        }
        #expect(length == 5)
    }

    // MARK: - Interning

    @Test func sharedInterfacesAreInternedByABIShape() throws {
        let first = try CallInterface.shared(for: Signature("{Point=\"x\"d\"y\"d}r^{Point=dd}i"))
        let second = try CallInterface.shared(for: Signature("{?=dd}^{Other=dd}i"))
        #expect(first === second)
        let other = try CallInterface.shared(for: Signature("{?=dd}^{Other=dd}I"))
        #expect(first !== other)
    }

    @Test func sharedInterfaceIsFreedWithItsLastReference() throws {
        let signature = try Signature("{Unique7731=qqq}q")
        weak var weakInterface: CallInterface?
        do {
            let interface = try CallInterface.shared(for: signature)
            weakInterface = interface
            #expect(InterfaceCache.shared.lookup(signature.abiKey) === interface)
        }
        #expect(weakInterface == nil)
        #expect(InterfaceCache.shared.lookup(signature.abiKey) == nil)
        let again = try CallInterface.shared(for: signature)
        #expect(InterfaceCache.shared.lookup(signature.abiKey) === again)
    }

    @Test func sharedIsSafeUnderConcurrentUse() throws {
        let signatures = try (0..<16).map { try Signature("{S\($0)=[\($0 + 1)i]}i") }
        let interfaces = Locked<[ObjectIdentifier: Int]>([:])
        DispatchQueue.concurrentPerform(iterations: 2_000) { iteration in
            let signature = signatures[iteration % signatures.count]
            guard let interface = try? CallInterface.shared(for: signature) else { return }
            interfaces.withLock { $0[ObjectIdentifier(interface), default: 0] += 1 }
            withExtendedLifetime(interface) {}
        }
        #expect(interfaces.withLock { $0.values.reduce(0, +) } == 2_000)
    }
}
