import CConsumerTable
import CConsumerZlib
import Dispatch
import FFIHook
import FFIHookInline
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// The README's attaches (no signature: the blocks read registers), and two uses a tracer
// makes of them: changing an argument and a result of a slot's function under a signature
// hook, and timing a library function patched inline.

func runAttachExamples() throws {
    // How many times, and for how long, the program's objects call write(2). print() would
    // not count: stdio calls write inside libc, through no import-table entry.
    let calls = Atomic<Int>(0)
    let nanoseconds = Atomic<UInt64>(0)
    let timing = try ImportTable.attach(symbol: "write", in: .all) { call in
        call.scratch = UInt64(DispatchTime.now().uptimeNanoseconds)  // handed to the leave block
    } onLeave: { call in
        calls.add(1, ordering: .relaxed)
        nanoseconds.add(UInt64(DispatchTime.now().uptimeNanoseconds) - call.scratch, ordering: .relaxed)
    }
    let line = "consumer: write through an attach\n"
    let written = line.withCString { write(1, $0, strlen($0)) }
    timing.remove()
    check(written == line.utf8.count, "write's result through the attach")
    check(calls.load(ordering: .relaxed) == 1, "the attach counted the write: \(calls.load(ordering: .relaxed))")
    check(nanoseconds.load(ordering: .relaxed) > 0, "the attach timed the write")
    _ = "consumer: write after the removal\n".withCString { write(1, $0, strlen($0)) }
    check(calls.load(ordering: .relaxed) == 1, "no count after the removal")

    // Every call of crc32, zlib's own included: the length (third argument, rdx) and the result.
    let seen = Mutex<[String]>([])
    let watched = try Hook.attach(on: .inline("crc32", in: "libz.so.1")) { call in
        seen.withLock { $0.append("crc32 of \(call.integerArgument(2)) bytes") }
    } onLeave: { call in
        seen.withLock { $0.append("= \(call.returnValue)") }
    }
    let bytes: [UInt8] = [1, 2, 3]
    let sum = bytes.withUnsafeBufferPointer { crc32(0, $0.baseAddress, 3) }
    watched.remove()
    check(
        seen.withLock { $0 } == ["crc32 of 3 bytes", "= \(sum)"], "the inline attach saw crc32: \(seen.withLock { $0 })"
    )
    check(bytes.withUnsafeBufferPointer { crc32(0, $0.baseAddress, 3) } == sum, "crc32 after the removal")

    // The table's add, with an argument and the result changed in registers, under a
    // signature hook installed first (the attach goes under it: the hook sees the caller's
    // arguments), removed before the hook.
    let slot = FunctionSlot.field(\callbacks.add, of: consumer_table()!)
    let order = Mutex<[String]>([])
    let logger = try Hook.before(on: slot, signature: Signature("iii")) { call in
        order.withLock { $0.append("before \(call.argument(0, as: Int32.self))") }
    }
    let changed = try Hook.attach(on: slot) { call in
        order.withLock { $0.append("enter \(Int32(truncatingIfNeeded: call.integerArgument(0)))") }
        call.setIntegerArgument(0, to: 10)  // a = 10
    } onLeave: { call in
        order.withLock { $0.append("leave \(Int32(truncatingIfNeeded: call.returnValue))") }
        call.returnValue += 1  // the caller gets the sum + 1
    }
    check(consumer_add(2, 3) == 14, "add with a changed argument and result")
    check(
        order.withLock { $0 } == ["before 2", "enter 2", "leave 13"],
        "the hook runs around the attach: \(order.withLock { $0 })")
    check(try Hook.statistics.attachCount == 1, "one attach installed")
    check(changed.remove(), "the attach comes out first")
    check(consumer_add(2, 3) == 5, "the hook alone")
    logger.remove()
    check(try Hook.statistics.attachCount == 0, "no attach left")

    // The README's blocks written in C: a count and a sum of the first arguments, with no
    // Swift closure on the call.
    let counts = UnsafeMutablePointer<Int>.allocate(capacity: 2)
    counts.initialize(repeating: 0, count: 2)
    let counting = try Hook.attach(
        on: slot, functions: AttachFunctions(onEnter: consumer_count_enter, onLeave: nil, context: counts))
    check(consumer_add(2, 3) == 5 && consumer_add(40, 2) == 42, "add through C attach functions")
    check(counts[0] == 2 && counts[1] == 42, "the C enter function counted: \(counts[0]) calls, sum \(counts[1])")
    check(counting.remove(), "the C functions' attach comes out")
    check(consumer_add(2, 3) == 5 && counts[0] == 2, "no count after the removal")
    counts.deallocate()

    // Every compress call timed per thread, with zlib's return code: compress is patched
    // inline, so the calls of other libraries count too.
    let durations = Mutex<[UInt64]>([])
    let lengths = Mutex<[UInt64]>([])
    let compressions = try Hook.attach(on: .inline("compress", in: "libz.so.1")) { call in
        lengths.withLock { $0.append(call.integerArgument(3)) }  // uLong sourceLen, in rcx
        call.scratch = UInt64(DispatchTime.now().uptimeNanoseconds)
    } onLeave: { call in
        durations.withLock { $0.append(UInt64(DispatchTime.now().uptimeNanoseconds) - call.scratch) }
        check(Int32(truncatingIfNeeded: call.returnValue) == Z_OK, "compress returned Z_OK")
    }
    let source = [UInt8](repeating: 7, count: 4096)
    var destination = [UInt8](repeating: 0, count: 8192)
    var destinationLength = uLongf(destination.count)
    let result = destination.withUnsafeMutableBufferPointer { out in
        source.withUnsafeBufferPointer {
            compress(out.baseAddress, &destinationLength, $0.baseAddress, uLong($0.count))
        }
    }
    compressions.remove()
    check(result == Z_OK && destinationLength < 100, "compress through the attach")
    check(lengths.withLock { $0 } == [4096], "the attach read compress's source length")
    check(durations.withLock { $0.count } == 1, "the attach timed the call")
}
