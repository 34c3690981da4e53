import FFIHook
import Testing

@Suite struct FacadeTests {
    @Test func facadeReexportsTheCore() throws {
        let signature = try Signature("i^vi")
        #expect(signature.argumentTypes.count == 2)
    }
}
