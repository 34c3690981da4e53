import CSQLite
import CZlib
import FFIHook
import FFIHookCore
import Foundation
import Synchronization
import Testing

@testable import FFIHookInline

#if canImport(Glibc)
    import Glibc
#endif

/// Whole libraries as one batch each (issue #31): every function that the toolchain's
/// `libswiftCore.so` and `libFoundation.so`, Debian's `libc.so.6`, `libsqlite3.so.0` and
/// `libz.so.1` export, planned with ``InlineBatch/init(library:options:)``, patched as a
/// pass-through in one stop, then attached to with no-op enter and leave blocks in one stop,
/// with a workload run at each step (SQLite, zlib, the C library's string, number and time
/// functions, and the test process's own Swift and Foundation work) that must compute the same
/// as before; then the attaches removed and the patches taken out, every function's bytes back.
///
/// Each library runs in a child process of its own (an exit test), where nothing else of the
/// test run calls the library meanwhile, and prints its survey (planned, refused by reason,
/// times), which the test prints in turn for the CI log. What it asserts: the workloads'
/// results, that every planned function was patched and attached, the bytes restored, no
/// function refused because its code crosses a page boundary (`undecodable`), and at most 5 %
/// of a library refused.
extension InlineSuites {
    @Suite struct InlineLibraryCorpusTests {
        /// The libraries, by the name `InlineBatch(library:)` takes; `FFH_CORPUS_LIBRARIES`
        /// (names, comma-separated) narrows them (the AddressSanitizer pass of `Scripts/test.sh`
        /// takes SQLite and zlib: the two Swift ones, 16,500 functions, take minutes there).
        static let libraries: [String] = {
            let all = ["libz.so.1", "libsqlite3.so.0", "libc.so.6", "libswiftCore.so", "libFoundation.so"]
            guard let only = ProcessInfo.processInfo.environment["FFH_CORPUS_LIBRARIES"] else { return all }
            return only.split(separator: ",").map(String.init).filter(all.contains)
        }()

        @Test(arguments: libraries)
        func everyExportPatchedAndAttachedLeavesTheWorkloadsUnchanged(library: String) async throws {
            let result = await #expect(
                processExitsWith: .success, observing: [\.standardOutputContent, \.standardErrorContent]
            ) {
                [library] in
                try InlineLibraryCorpusTests.survey(library)
            }
            let output = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
            for line in output.split(separator: "\n") where line.hasPrefix("corpus") { print(line) }
            let errors = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
            #expect(output.contains("corpus: \(library): done"), "\(output)\n\(errors.suffix(3000))")
        }

        /// The child's work for `library`; ends the process with a failure at the first check
        /// that fails.
        static func survey(_ library: String) throws {
            func say(_ line: String) {
                print("corpus: \(library): " + line)
                fflush(nil)
            }
            func check(_ condition: Bool, _ message: @autoclosure () -> String) {
                guard !condition else { return }
                print("corpus: \(library): FAILED: \(message())")
                fflush(nil)
                exit(1)
            }
            say("started")
            let expected = try Workload.run()
            let clock = ContinuousClock()
            var start = clock.now
            func lap() -> String {
                let elapsed = clock.now - start
                start = clock.now
                return
                    "\(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000) ms"
            }
            say("workloads ran")
            let batch = try InlineBatch(library: library)
            let planned = lap()
            var reasons: [String: Int] = [:]
            for refusal in batch.refusals { reasons["\(refusal.reason)", default: 0] += 1 }
            let exported = batch.functions.count + batch.refusals.count
            print(
                "corpus: \(library): \(exported) exported functions, \(batch.functions.count) planned, "
                    + "\(batch.refusals.count) refused \(reasons.sorted { $0.key < $1.key })")
            for refusal in batch.refusals.prefix(12) { print("corpus: \(library): refused \(refusal)") }
            check(reasons["undecodable", default: 0] == 0, "functions refused as undecodable")
            check(batch.refusals.count * 20 <= exported, "more than 5 % refused")
            let original = batch.functions.map { codeBytes($0.address, 4 + $0.overwrittenLength) }
            // What the int3 protocol (an int3 over the first byte, the rest written, then the
            // first byte, every processor serialised between) could write without stopping the
            // threads: only a patch whose jump covers no start of an instruction but its first,
            // since a thread preempted at such a start would resume in the middle of the jump.
            let single = batch.functions.filter { function in
                let record = function.plan.record
                let start = Int(record.patchOffset)
                return (start + 1..<start + 5).allSatisfy { record.instructionStarts & (1 << UInt32($0)) == 0 }
            }.count
            say("\(single) of \(batch.functions.count) patches replace a single instruction with their jump")

            start = clock.now
            let notPatched = try batch.patch()
            let patched = lap()
            check(notPatched.isEmpty, "\(notPatched.count) not patched: \(notPatched.prefix(3))")
            check(batch.functions.allSatisfy { $0.isPatched }, "a function is not patched")
            say("patched")
            check(try Workload.run() == expected, "the workloads differ with every function patched")

            let entered = Atomic<Int>(0)
            let left = Atomic<Int>(0)
            start = clock.now
            let group = try Hook.attach(on: batch) { function in
                // Functions that return twice (setjmp, vfork, ...) get the enter block only.
                ({ _ in entered.add(1, ordering: .relaxed) }, { _ in left.add(1, ordering: .relaxed) })
            }
            let attached = lap()
            say("attached")
            check(group.refusals.isEmpty, "attach refused \(group.refusals.prefix(3))")
            check(group.tokens.count == batch.functions.count, "\(group.tokens.count) attaches")
            check(try Workload.run() == expected, "the workloads differ with every function attached")
            let enters = entered.load(ordering: .relaxed)
            let leaves = left.load(ordering: .relaxed)
            check(enters > 0, "no attached function was entered")

            start = clock.now
            group.remove()
            try batch.unpatch()
            let removed = lap()
            let restored = batch.functions.map { codeBytes($0.address, 4 + $0.overwrittenLength) }
            check(restored == original, "bytes not restored")
            check(!batch.functions.contains { $0.isPatched }, "a function is still patched")
            check(try Workload.run() == expected, "the workloads differ after the batch came out")
            print(
                "corpus: \(library): planned in \(planned), patched in \(patched), attached in \(attached) "
                    + "(the workloads entered \(enters) calls and left \(leaves)), removed and unpatched in \(removed)")
            print("corpus: \(library): done")
            fflush(nil)
        }
    }
}

/// What the workloads computed, to compare runs.
struct Workload: Equatable {
    var sqlite: SQLiteOutcome
    var zlib: ZlibOutcome
    var c: UInt64
    var swift: UInt64
    var foundation: UInt64

    static func run() throws -> Workload {
        Workload(
            sqlite: try sqliteTransaction(), zlib: try zlibRoundTrip(zlibInput()), c: cWork(), swift: swiftWork(),
            foundation: try foundationWork())
    }

    /// The C library's string, number, sorting, memory and time functions.
    static func cWork() -> UInt64 {
        var digest = Digest()
        var buffer = [CChar](repeating: 0, count: 256)
        for index in 0..<300 {
            let length = withVaList([Int32(index), Double(index) / 7, UInt32(index * 31)]) { arguments in
                vsnprintf(&buffer, 256, "%d:%.3f:text:%x", arguments)
            }
            digest.add(length)
            digest.add(strlen(buffer))
            digest.add(UInt64(strtod("\(index).25", nil) * 4))
            digest.add(strtol("\(index * 3)", nil, 10))
            digest.add(UInt64(bitPattern: Int64(strcmp(buffer, "150"))))
        }
        var numbers = (0..<2_000).map { Int32(truncatingIfNeeded: ($0 * 7_919) % 2_003) }
        numbers.withUnsafeMutableBufferPointer { buffer in
            qsort(buffer.baseAddress!, buffer.count, 4) { a, b in
                let x = a!.load(as: Int32.self)
                let y = b!.load(as: Int32.self)
                return x < y ? -1 : x > y ? 1 : 0
            }
        }
        for number in numbers { digest.add(number) }
        let memory = malloc(4096)!
        memset(memory, 0x5A, 4096)
        let copy = malloc(4096)!
        memcpy(copy, memory, 4096)
        digest.add(Int64(memcmp(memory, copy, 4096)))
        free(memory)
        free(copy)
        var time = tm()
        var seconds = time_t(1_700_000_000)
        gmtime_r(&seconds, &time)
        let written = strftime(&buffer, 256, "%Y-%m-%d %H:%M:%S", &time)
        digest.add(buffer.prefix(written).map { UInt8(bitPattern: $0) })
        return UInt64(digest.description.dropFirst(2), radix: 16) ?? 0
    }

    /// The Swift standard library's collections, strings and numbers.
    static func swiftWork() -> UInt64 {
        var digest = Digest()
        var numbers = (0..<20_000).map { ($0 &* 2_654_435_761) % 100_003 }
        numbers.sort()
        digest.add(numbers.reduce(0, &+))
        var words: [String: Int] = [:]
        for index in 0..<5_000 { words["word\(index % 997)", default: 0] += index }
        for key in words.keys.sorted() {
            digest.add(Array(key.utf8))
            digest.add(words[key]!)
        }
        let text = (0..<500).map { "line \($0): \(Double($0) / 7)" }.joined(separator: "\n")
        digest.add(Array(text.uppercased().utf8))
        digest.add(text.split(separator: "\n").count)
        let unique = Set(numbers.map { $0 % 1_000 })
        digest.add(unique.count)
        digest.add(numbers.filter { $0.isMultiple(of: 3) }.map { $0 / 3 }.max() ?? 0)
        return UInt64(digest.description.dropFirst(2), radix: 16) ?? 0
    }

    /// Foundation's JSON coding, dates, data and URLs.
    static func foundationWork() throws -> UInt64 {
        struct Record: Codable, Equatable {
            var name: String
            var value: Double
            var tags: [String]
        }
        var digest = Digest()
        let records = (0..<300).map {
            Record(name: "record \($0)", value: Double($0) * 1.5, tags: ["a\($0 % 5)", "b"])
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(records)
        digest.add(data)
        let decoded = try JSONDecoder().decode([Record].self, from: data)
        digest.add(decoded == records ? 1 : 0)
        digest.add(Array(data.base64EncodedString().utf8))
        let formatter = ISO8601DateFormatter()
        digest.add(Array(formatter.string(from: Date(timeIntervalSince1970: 1_700_000_000)).utf8))
        let url = URL(string: "https://example.com/a/b?c=d&e=f")!
        digest.add(Array((url.host ?? "").utf8))
        digest.add(Array(url.path.utf8))
        digest.add(Array(String(format: "%05d|%.2f", 42, 3.14159).utf8))
        return UInt64(digest.description.dropFirst(2), radix: 16) ?? 0
    }
}
