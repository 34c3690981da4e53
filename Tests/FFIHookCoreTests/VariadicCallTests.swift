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
                signature: signature, position: .argument(index),
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
            throws: CallInterfaceError(signature: signature, position: nil, problem: .invalidFixedArgumentCount(count))
        ) {
            try CallInterface(variadic: signature, fixedArgumentCount: count)
        }
    }
}
