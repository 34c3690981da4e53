import CZlib
import FFIHook
import FFIHookInline
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The README's inline-hook example, kept compiling and true (its prints become records).
extension InlineSuites {
    @Suite struct ReadmeInlineExampleTests {
        @Test func theReadmeExample() throws {
            let lengths = Mutex<[UInt32]>([])
            let crc = try InlineFunction(symbol: "crc32", in: "libz.so.1")
            let counted = try Hook.after(on: crc.slot, signature: Signature("QQ^CI"), options: .onInstallingThreadOnly)
            {
                call in
                lengths.withLock { $0.append(call.argument(2, as: UInt32.self)) }
            }
            let data = [UInt8](repeating: 1, count: 5)
            let hooked = data.withUnsafeBufferPointer { crc32(0, $0.baseAddress, 5) }
            counted.remove()
            #expect(lengths.withLock { $0 } == [5])
            #expect(data.withUnsafeBufferPointer { crc32(0, $0.baseAddress, 5) } == hooked)
            #expect(!(crc.isPatched))

            let fixed = try Hook.replace(on: .inline("rand"), with: { 4 } as @convention(c) () -> Int32)
            #expect(rand() == 4)
            #expect(rand() == 4)
            fixed.remove()
            srand(7)
            let first = rand()
            srand(7)
            #expect(rand() == first)
        }
    }
}
