import CConsumerTable
import CConsumerZlib
import FFIHook
import FFIHookInline
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// The README's inline hooks, and a C function that only an inline hook reaches: called
// directly from another C function, through no pointer.

func runInlineExamples() throws {
    // Every call of crc32.
    let lengths = Mutex<[UInt32]>([])
    let crc = try InlineFunction(symbol: "crc32", in: "libz.so.1")
    let counted = try Hook.after(on: crc.slot, signature: Signature("QQ^CI")) { call in
        lengths.withLock { $0.append(call.argument(2, as: UInt32.self)) }
    }
    let bytes: [UInt8] = [1, 2, 3]
    let sum = bytes.withUnsafeBufferPointer { crc32(0, $0.baseAddress, 3) }
    counted.remove()
    check(lengths.withLock { $0 }.contains(3), "the inline crc32 hook saw the call")
    check(!crc.isPatched, "crc32's bytes back after the removal")
    check(bytes.withUnsafeBufferPointer { crc32(0, $0.baseAddress, 3) } == sum, "crc32 unchanged")

    // A compiled replacement.
    let fixed = try Hook.replace(on: .inline("rand"), with: { 4 } as @convention(c) () -> Int32)
    check(rand() == 4, "rand replaced")
    fixed.remove()

    // consumer_scale, called by consumer_scale_sum with a direct call.
    let scale = try InlineFunction(consumer_scale as @convention(c) (Int32) -> Int32)
    let raised = try Hook.instead(on: scale.slot, signature: Signature("ii")) { call in
        call.callOriginal()
        call.setReturnValue(call.returnValue(as: Int32.self) + 1)
    }
    check(consumer_scale_sum(2, 3) == 52, "the direct calls reached the inline hook")
    raised.remove()
    check(consumer_scale_sum(2, 3) == 50, "the direct calls after the removal")

    // A whole library at once: every zlib export attached to in one stop.
    let zlib = try InlineBatch(library: "libz.so.1")
    check(zlib.functions.count > 80 && zlib.refusals.isEmpty, "every zlib export planned")
    let counts = Mutex<[String: Int]>([:])
    let group = try Hook.attach(on: zlib) { function in
        ({ _ in counts.withLock { $0[function.name, default: 0] += 1 } }, nil)
    }
    let input = [UInt8](repeating: 7, count: 1000)
    var output = [UInt8](repeating: 0, count: 2000)
    var length = UInt(output.count)
    check(compress2(&output, &length, input, UInt(input.count), 6) == Z_OK, "compress2 with zlib attached")
    group.remove()
    check(counts.withLock { $0["deflate"] } == 1, "compress2's own call of deflate counted")
    check(!zlib.functions.contains { $0.isPatched }, "every zlib function's bytes back")
}
