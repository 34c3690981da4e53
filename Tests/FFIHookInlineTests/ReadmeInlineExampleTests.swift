import CTestSupport
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

        @Test func theReadmeBatchExample() throws {
            let zlib = try InlineBatch(library: "libz.so.1")
            #expect(zlib.functions.count == 88 && zlib.refusals.isEmpty)
            let counts = Mutex<[String: Int]>([:])
            // This thread's calls only: tests of other suites may use zlib meanwhile.
            let me = at_gettid()
            let group = try Hook.attach(on: zlib) { function in
                (
                    { call in
                        if call.threadID == me { counts.withLock { $0[function.name, default: 0] += 1 } }
                    }, nil
                )
            }
            let input = [UInt8](repeating: 7, count: 1000)
            var output = [UInt8](repeating: 0, count: 2000)
            var length = UInt(output.count)
            #expect(compress2(&output, &length, input, UInt(input.count), 6) == Z_OK)
            group.remove()
            let counted = counts.withLock { $0 }
            #expect(counted["compress2"] == 1)
            #expect(counted["deflateInit_"] == 1 && counted["deflate"] == 1 && counted["deflateEnd"] == 1)
            #expect(!zlib.functions.contains { $0.isPatched })
        }
    }
}
