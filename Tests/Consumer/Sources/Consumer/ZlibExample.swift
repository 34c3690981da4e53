import CConsumerZlib
import FFIHook
import Foundation
import Synchronization

// Counting zlib's allocations on a fresh z_stream, whose zalloc and zfree are NULL until
// deflateInit puts zlib's own functions there: hooks with fallbacks (the documentation's
// "Slots that hold NULL").

typealias ZAlloc = @convention(c) (UnsafeMutableRawPointer?, UInt32, UInt32) -> UnsafeMutableRawPointer?
typealias ZFree = @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void

/// Blocks that zlib allocated and freed through functions the program set itself.
let programAllocations = Atomic<Int>(0)
let programFrees = Atomic<Int>(0)

/// Compresses some bytes on `stream`, from deflateInit to deflateEnd.
func compressSample(_ stream: UnsafeMutablePointer<z_stream>) {
    var input = [UInt8]((0..<100_000).map { UInt8(truncatingIfNeeded: $0 % 251) })
    var output = [UInt8](repeating: 0, count: Int(compressBound(UInt(input.count))))
    check(CConsumerZlib_deflateInit(stream, Z_DEFAULT_COMPRESSION) == Z_OK, "deflateInit")
    input.withUnsafeMutableBufferPointer { source in
        output.withUnsafeMutableBufferPointer { target in
            stream.pointee.next_in = source.baseAddress
            stream.pointee.avail_in = UInt32(source.count)
            stream.pointee.next_out = target.baseAddress
            stream.pointee.avail_out = UInt32(target.count)
            check(deflate(stream, Z_FINISH) == Z_STREAM_END, "deflate")
        }
    }
    check(deflateEnd(stream) == Z_OK, "deflateEnd")
}

func runZlibExample() throws {
    // What zlib allocates for such a stream, with counting functions the program sets.
    var direct = z_stream()
    direct.zalloc = { _, items, size in
        programAllocations.add(1, ordering: .relaxed)
        return calloc(Int(items), Int(size))
    }
    direct.zfree = { _, address in
        programFrees.add(1, ordering: .relaxed)
        free(address)
    }
    compressSample(&direct)
    let expected = programAllocations.load(ordering: .relaxed)
    check(expected > 0 && programFrees.load(ordering: .relaxed) == expected, "zlib's own count")

    // The task: a fresh stream, hooks that only count, and fallbacks that do what zlib's
    // defaults would (calloc and free).
    let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    defer { stream.deallocate() }
    stream.initialize(to: z_stream())
    let alloc: ZAlloc = { _, items, size in calloc(Int(items), Int(size)) }
    let release: ZFree = { _, address in free(address) }
    let live = Mutex<(allocated: Int, freed: Int, blocks: Set<UInt>)>((0, 0, []))
    let allocations = try Hook.after(
        on: FunctionSlot.field(\z_stream.zalloc, of: stream).withFallback(alloc), signature: Signature("^v^vII")
    ) { call in
        let block = call.returnValue(as: UInt.self)
        live.withLock {
            $0.allocated += 1
            $0.blocks.insert(block)
        }
    }
    let frees = try Hook.before(
        on: FunctionSlot.field(\z_stream.zfree, of: stream).withFallback(release), signature: Signature("v^v^v")
    ) { call in
        let block = call.argument(1, as: UInt.self)
        live.withLock {
            $0.freed += 1
            $0.blocks.remove(block)
        }
    }
    compressSample(stream)
    allocations.remove()
    frees.remove()

    let counted = live.withLock { $0 }
    check(counted.allocated == expected, "the hooks counted zlib's \(expected) allocations: \(counted.allocated)")
    check(counted.freed == expected, "and as many frees: \(counted.freed)")
    check(counted.blocks.isEmpty, "every block allocated was freed")
    check(stream.pointee.zalloc == nil && stream.pointee.zfree == nil, "the fresh stream's fields NULL again")
}
