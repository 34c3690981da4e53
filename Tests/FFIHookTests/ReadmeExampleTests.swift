import FFIHook
import Foundation
import Testing

/// The README's example, kept compiling and true.
@Suite struct ReadmeExampleTests {
    @Test func callingAtan2() throws {
        let signature = try Signature("ddd")
        let interface = try CallInterface.shared(for: signature)
        let atan2Pointer = unsafeBitCast(
            atan2 as @convention(c) (Double, Double) -> Double, to: UnsafeRawPointer.self)
        let angle: Double = try interface.call(atan2Pointer, returning: Double.self, 1.0, 1.0)
        #expect(angle == atan2(1.0, 1.0))
    }

    @Test func structureOfAType() throws {
        let point = try CType(encoding: "{Point=\"x\"d\"y\"d}")
        #expect(point.size == 16)
        #expect(point.alignment == 8)
    }

    @Test func badInputExplainsItself() {
        let error = #expect(throws: EncodingError.self) { try Signature("{S=i") }
        #expect(error?.description == "unexpected end of encoding, expected '}' at offset 4 in \"{S=i\"")
    }

    @Test func variadicShape() throws {
        let shape = try CallInterface(variadic: Signature("ir*id"), fixedArgumentCount: 1)
        #expect(shape.fixedArgumentCount == 1)
    }
}
