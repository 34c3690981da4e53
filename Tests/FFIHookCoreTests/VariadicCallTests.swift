import CTestSupport
import Testing

@testable import FFIHookCore

@Suite struct VariadicCallTests {
    @Test func sumsVariadicLongs() throws {
        let signature = try Signature("qi" + String(repeating: "q", count: 9))
        let interface = try CallInterface(variadic: signature, fixedArgumentCount: 1)
        let sum: Int = try interface.call(
            ct_variadic_sum_longs_address(), returning: Int.self,
            Int32(9), 1, 2, 3, 4, 5, 6, 7, 8, -9)
        #expect(sum == 27)
    }

    @Test func foldsMixedVariadicArguments() throws {
        let format = "ildpD"
        let signature = try Signature("dr*iqd^vD")
        let interface = try CallInterface(variadic: signature, fixedArgumentCount: 1)
        let pointer = UnsafeRawPointer(bitPattern: 0x1234)!
        let folded: Double = try format.withCString { text in
            try interface.call(
                ct_variadic_fold_address(),
                returning: Double.self, text, Int32(-7), 40_000_000_000, 2.5, pointer, Float80(-0.125))
        }
        var expected = 0.0
        for value in [-7, 40_000_000_000, 2.5, Double(0x1234), -0.125] { expected = expected * 3 + value }
        #expect(folded == expected)
    }

    @Test func variadicDoublesSpillToTheStack() throws {
        let signature = try Signature("ddi" + String(repeating: "d", count: 11))
        let interface = try CallInterface(variadic: signature, fixedArgumentCount: 2)
        let sum: Double = try interface.call(
            ct_variadic_sum_doubles_address(),
            returning: Double.self, 0.5, Int32(11), 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0)
        #expect(sum == 66.5)
    }

    @Test(arguments: [
        ("vif", 1, "d"), ("vic", 1, "i"), ("viC", 1, "i"), ("vis", 1, "i"), ("viS", 1, "i"), ("viB", 1, "i"),
        ("vidfi", 2, "d"),
    ])
    func refusesPromotableVariadicArguments(encoding: String, index: Int, promoted: String) throws {
        let signature = try Signature(encoding)
        #expect(
            throws: CallInterfaceError(
                signature: signature.variadic(fixedArgumentCount: 1), position: .argument(index),
                problem: .variadicPromotion(promotedEncoding: promoted))
        ) {
            try CallInterface(variadic: signature, fixedArgumentCount: 1)
        }
    }

    @Test func promotableTypesAreFineAmongTheFixedArguments() throws {
        _ = try CallInterface(variadic: Signature("vfcsBi"), fixedArgumentCount: 4)
    }

    @Test(arguments: [-1, 3])
    func refusesFixedCountsOutsideTheArguments(count: Int) throws {
        let signature = try Signature("vii")
        #expect(
            throws: CallInterfaceError(
                signature: signature.variadic(fixedArgumentCount: count), position: nil,
                problem: .invalidFixedArgumentCount(count))
        ) {
            try CallInterface(variadic: signature, fixedArgumentCount: count)
        }
    }
}

/// A signature that carries its variadic call shape.
@Suite struct VariadicSignatureTests {
    @Test func theFixedCountIsPartOfTheSignature() throws {
        let fixed = try Signature("i*ii")
        let shape = try Signature(variadic: "i*ii", fixedArgumentCount: 2)
        #expect(fixed.fixedArgumentCount == nil)
        #expect(shape.fixedArgumentCount == 2)
        #expect(shape == fixed.variadic(fixedArgumentCount: 2))
        #expect(shape != fixed)
        #expect(shape != fixed.variadic(fixedArgumentCount: 1))
        #expect(shape.encoding == "i*ii")
        #expect(shape.description == "i*ii (variadic after 2 fixed arguments)")
        #expect(fixed.variadic(fixedArgumentCount: 1).description == "i*ii (variadic after 1 fixed argument)")
        #expect(shape.abiKey != fixed.abiKey)
    }

    @Test func aVariadicShapeInternsApartFromTheFixedSignature() throws {
        let fixed = try CallInterface.shared(for: Signature("qiqq"))
        let shape = try CallInterface.shared(for: Signature(variadic: "qiqq", fixedArgumentCount: 1))
        let other = try CallInterface.shared(for: Signature(variadic: "qiqq", fixedArgumentCount: 2))
        #expect(fixed !== shape && shape !== other && fixed !== other)
        #expect(fixed.fixedArgumentCount == nil && shape.fixedArgumentCount == 1 && other.fixedArgumentCount == 2)
        #expect(try CallInterface.shared(for: Signature(variadic: "q8i0q4q4", fixedArgumentCount: 1)) === shape)
        #expect(!shape.usesRegisterPath)
        let sum: Int = try shape.call(ct_variadic_sum_longs_address(), returning: Int.self, Int32(2), 20, 22)
        #expect(sum == 42)
    }

    @Test func bothInitialisersMakeTheSameInterface() throws {
        let signature = try Signature("ddidd")
        let fromSignature = try CallInterface(signature.variadic(fixedArgumentCount: 2))
        let fromCount = try CallInterface(variadic: signature, fixedArgumentCount: 2)
        #expect(fromSignature.signature == fromCount.signature)
        #expect(fromCount.signature.fixedArgumentCount == 2 && fromCount.fixedArgumentCount == 2)
        let sum: Double = try fromSignature.call(
            ct_variadic_sum_doubles_address(), returning: Double.self, 0.5, Int32(2), 1.0, 2.0)
        #expect(sum == 3.5)
    }

    @Test func refusalsCarryTheVariadicSignature() throws {
        let signature = try Signature(variadic: "vif", fixedArgumentCount: 1)
        let error = #expect(throws: CallInterfaceError.self) { try CallInterface.shared(for: signature) }
        #expect(error?.signature == signature)
        #expect(error?.code == .variadicPromotion)
        #expect(
            error?.description
                == "argument 1 (f) cannot be variadic: C promotes it, write 'd'; in signature \"vif\" (variadic after 1 fixed argument)"
        )
    }
}
