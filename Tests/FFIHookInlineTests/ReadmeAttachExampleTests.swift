import CZlib
import FFIHook
import FFIHookInline
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The README's attach example, kept compiling and true (its prints become records).
extension InlineSuites {
    @Suite struct ReadmeAttachExampleTests {
        @Test func theReadmeExample() throws {
            let calls = Atomic<Int>(0)
            let nanoseconds = Atomic<UInt64>(0)
            let me = UInt(pthread_self())
            let timing = try ImportTable.attach(symbol: "write", in: .all) { call in
                call.scratch = UInt64(DispatchTime.now().uptimeNanoseconds)  // handed to the leave block
            } onLeave: { call in
                guard UInt(pthread_self()) == me else { return }
                calls.add(1, ordering: .relaxed)
                nanoseconds.add(UInt64(DispatchTime.now().uptimeNanoseconds) - call.scratch, ordering: .relaxed)
            }
            // Foundation's FileHandle writes through its import of write (the test program's own
            // calls may reach a sanitizer's write, defined in the executable; zlib's allocations
            // are counted exactly by another suite running meanwhile).
            let file = try #require(FileHandle(forWritingAtPath: "/dev/null"))
            try file.write(contentsOf: Data("four".utf8))
            try file.close()
            timing.remove()
            #expect(calls.load(ordering: .relaxed) >= 1)
            #expect(nanoseconds.load(ordering: .relaxed) > 0)

            let seen = Mutex<[(UInt64, UInt64)]>([])
            let watched = try Hook.attach(on: .inline("crc32", in: "libz.so.1")) { call in
                guard UInt(pthread_self()) == me else { return }
                seen.withLock { $0.append((call.integerArgument(2), 0)) }
            } onLeave: { call in
                guard UInt(pthread_self()) == me else { return }
                seen.withLock { $0[$0.count - 1].1 = call.returnValue }
            }
            let data = [UInt8](repeating: 1, count: 5)
            let result = data.withUnsafeBufferPointer { crc32(0, $0.baseAddress, 5) }
            watched.remove()
            let records = seen.withLock { $0 }
            #expect(records.count == 1)
            #expect(records.first?.0 == 5)
            #expect(records.first?.1 == UInt64(result))
        }
    }
}
