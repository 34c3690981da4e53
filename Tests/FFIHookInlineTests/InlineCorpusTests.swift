import FFIHook
import Testing

@testable import FFIHookInline

#if canImport(Glibc)
    import Glibc
#endif

/// The corpus run of issue #24 (as frida-gum's `attach_performance`): every function that
/// Debian's `libsqlite3.so.0` and `libz.so.1` export, both linked into this test executable,
/// planned as an inline hook, every hookable one patched as a pass-through (its entry jumps
/// through the stub to its own relocated first instructions), a real SQLite transaction and
/// zlib round trip run with all of them patched, then all unpatched.
///
/// What it prints (for the CI log and the issue's note): per library, how many functions are
/// hookable, how many are refused and why (the part of the message after the instruction),
/// and which instructions are refused. What it asserts is only what must hold: the workloads
/// compute the same results patched as unpatched, every function's first 32 bytes are back
/// exactly after unpatching, each symbol resolves to the library's own definition, every
/// planned patch can be written, no planned patch overruns its function or is the target of a
/// branch from the rest of it (checked against the sizes in the dynamic symbol table, apart
/// from the planner's own reading), and no fewer functions are hookable than the floors below.
extension InlineSuites {
    @Suite(.serialized) struct InlineCorpusTests {
        /// A library of the corpus and the least share of its exports that must be hookable.
        struct Library: CustomStringConvertible {
            /// The soname, as `InlineFunction(symbol:in:)` takes it.
            let soname: String
            /// How the mapped file's name starts.
            let filePrefix: String
            /// The floor, a little under what Debian 12's builds give (measured when the test was
            /// written: see the comment at `libraries`).
            let hookableShare: Double

            var description: String { soname }
        }

        /// The floors, measured on Debian 12 when the test was written. SQLite 3.40.1 exports
        /// 1,370 functions (Debian builds it without hidden visibility, so its internal
        /// `sqlite3Foo` functions are exported too): 1,339 hookable (97.7 %) when the planner
        /// knows no function's size, where the 31 others end in a `ret` or `jmp` within 5 bytes;
        /// all 1,370 when it reads the size from the symbol tables and lets a short function's
        /// patch cover the alignment padding after it. zlib 1.2.13 exports 88 functions, all
        /// hookable either way. The floor is 95 % of the exports for both.
        static let libraries = [
            Library(soname: "libsqlite3.so.0", filePrefix: "libsqlite3.so", hookableShare: 0.95),
            Library(soname: "libz.so.1", filePrefix: "libz.so", hookableShare: 0.95),
        ]

        /// One planned function: its export, its plan, and its first bytes before the plan.
        struct Planned {
            let library: Library
            let export: ExportedFunctions.Function
            let function: InlineFunction
            let bytes: [UInt8]
        }

        /// One library's survey.
        struct Survey {
            var library: Library
            var exported = 0
            var planned: [Planned] = []
            /// Refused functions by reason: (function, instruction, message).
            var refused: [String: [(name: String, instruction: String, message: String)]] = [:]
            /// Errors other than a refusal (`.symbolNotFound`, `.patchFailed`, ...): must be none.
            var failures: [String] = []
            /// Symbols that resolved elsewhere than the library's own definition: must be none.
            var misresolved: [String] = []

            /// Exported IFUNC symbols, left out (their address is a resolver).
            var indirect = 0
            /// Planned functions that the symbol table's size shows are not safe to patch.
            var overlooked: [String] = []

            var refusedCount: Int { refused.values.reduce(0) { $0 + $1.count } }
        }

        @Test func everyExportedFunctionPatchedAsAPassThroughLeavesTheWorkloadsUnchanged() throws {
            let input = zlibInput()
            let sqliteBefore = try sqliteTransaction()
            let zlibBefore = try zlibRoundTrip(input)
            #expect(sqliteBefore.count == 1000 && sqliteBefore.closeResult == 0)
            #expect(
                zlibBefore.inflatedMatches && zlibBefore.uncompressedMatches
                    && zlibBefore.crc32 == zlibBefore.combinedCRC32
            )

            let clock = ContinuousClock()
            var mark = clock.now
            var times: [String] = []
            func lap(_ what: String) {
                let (seconds, attoseconds) = (clock.now - mark).components
                let hundredths = Int(seconds) * 100 + Int(attoseconds / 10_000_000_000_000_000)
                times.append("\(what) \(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100) s")
                mark = clock.now
            }
            var surveys: [Survey] = []
            for library in Self.libraries {
                surveys.append(try Self.survey(library))
            }
            lap("planning")
            for survey in surveys { Self.report(survey) }
            let planned = surveys.flatMap(\.planned)
            // Whatever fails below, no function stays patched for the tests that run after.
            defer { for entry in planned { try? entry.function.unpatch() } }

            // Everything hookable patched, as a pass-through.
            var patchFailures: [String] = []
            for entry in planned {
                do {
                    try entry.function.patch()
                } catch {
                    patchFailures.append("\(entry.export.name): \(error)")
                }
            }
            lap("patching")
            #expect(patchFailures.isEmpty, "patch() failed: \(patchFailures)")
            let notPatched = planned.filter {
                !$0.function.isPatched || codeBytes($0.function.address, $0.bytes.count) == $0.bytes
            }
            #expect(notPatched.isEmpty, "not patched: \(notPatched.map(\.export.name))")
            print("corpus: \(planned.count - patchFailures.count) functions patched; running the workloads")

            let sqlitePatched = try sqliteTransaction()
            let zlibPatched = try zlibRoundTrip(input)
            lap("workloads")
            #expect(sqlitePatched == sqliteBefore)
            #expect(zlibPatched == zlibBefore)

            var unpatchFailures: [String] = []
            for entry in planned {
                do {
                    try entry.function.unpatch()
                } catch {
                    unpatchFailures.append("\(entry.export.name): \(error)")
                }
            }
            lap("unpatching")
            #expect(unpatchFailures.isEmpty, "unpatch() failed: \(unpatchFailures)")
            let notRestored = planned.filter {
                $0.function.isPatched || codeBytes($0.function.address, $0.bytes.count) != $0.bytes
            }
            #expect(notRestored.isEmpty, "not restored: \(notRestored.map(\.export.name))")
            print("corpus: \(planned.count - notRestored.count) functions unpatched and restored byte for byte")
            print("corpus: times: " + times.joined(separator: ", "))

            #expect(try sqliteTransaction() == sqliteBefore)
            #expect(try zlibRoundTrip(input) == zlibBefore)

            for survey in surveys {
                #expect(survey.failures.isEmpty, "\(survey.library): \(survey.failures)")
                #expect(survey.misresolved.isEmpty, "\(survey.library): \(survey.misresolved)")
                #expect(survey.overlooked.isEmpty, "\(survey.library): \(survey.overlooked)")
                let floor = Int((Double(survey.exported) * survey.library.hookableShare).rounded(.up))
                #expect(
                    survey.planned.count >= floor,
                    "\(survey.library): \(survey.planned.count) of \(survey.exported) hookable, under the floor \(floor)"
                )
            }
        }

        @Test func refusalsAreGroupedByWhatFollowsTheInstruction() {
            let ends = Self.reason(
                of: "`ret` at offset 3 ends the function before the bytes the patch overwrites end (0 ..< 5)")
            #expect(ends.reason == "ends the function before the bytes the patch overwrites end (N ..< N)")
            #expect(ends.instruction == "ret")
            let call = Self.reason(
                of: "`call 0x7f0012345678` at offset 2 would be overwritten with the instruction it returns to "
                    + "(offset 7): a thread inside the called function would return into the patch")
            #expect(
                call.reason
                    == "would be overwritten with the instruction it returns to (offset N): a thread inside the called "
                    + "function would return into the patch")
            #expect(call.instruction == "call X")
            let branch = Self.reason(
                of: "`jnz 0x55aa00001002` at offset 8 branches to offset 2, inside the bytes the patch overwrites")
            #expect(branch.reason == "branches to offset N, inside the bytes the patch overwrites")
            #expect(branch.instruction == "jnz X")
            let far = Self.reason(
                of: "cannot relocate `mov rax, [0x1234]` at offset 0: its RIP-relative address is beyond ±2 GB of "
                    + "the trampoline, and it uses every register that could hold the address")
            #expect(
                far.reason
                    == "cannot relocate: its RIP-relative address is beyond ±N GB of the trampoline, and it uses every "
                    + "register that could hold the address")
            #expect(far.instruction == "mov rax, [X]")
            let scan = Self.reason(
                of: "the function's body cannot be decoded at offset 40 (bytes 06 0f 1f 44) to look for branches into "
                    + "the patch: Zydis knows no valid instruction beginning with them")
            #expect(
                scan.reason
                    == "the function's body cannot be decoded at offset N (bytes X) to look for branches into the patch: "
                    + "Zydis knows no valid instruction beginning with them")
            #expect(scan.instruction == "")
            let cut = Self.reason(
                of: "the function's code ends at the end of mapped executable memory (offset 4): the 3 bytes left at "
                    + "offset 1 (48 b8 01) begin an instruction but do not hold it")
            #expect(
                cut.reason
                    == "the function's code ends at the end of mapped executable memory (offset N): the N bytes left at "
                    + "offset N (X) begin an instruction but do not hold it")
        }

        // MARK: - Planning

        /// Plans every exported function of `library`.
        static func survey(_ library: Library) throws -> Survey {
            let exports = try ExportedFunctions(mappedFileNamed: library.filePrefix)
            var survey = Survey(library: library, exported: exports.functions.count)
            let mappings = MemoryMapping.all()
            for export in exports.functions {
                let end =
                    mappings.first { $0.start <= export.address && export.address < $0.end }?.end ?? export.address
                let bytes = codeBytes(UnsafeRawPointer(bitPattern: export.address)!, Int(min(32, end - export.address)))
                do {
                    let function = try InlineFunction(symbol: export.name, in: library.soname)
                    if UInt(bitPattern: function.address) != export.address {
                        survey.misresolved.append(
                            "\(export.name) at 0x\(String(UInt(bitPattern: function.address), radix: 16)), "
                                + "not 0x\(String(export.address, radix: 16)) (\(exports.path))")
                        continue
                    }
                    survey.planned.append(Planned(library: library, export: export, function: function, bytes: bytes))
                    if let problem = Self.overlooked(function, export) { survey.overlooked.append(problem) }
                } catch  where error.code == .unhookableFunction {
                    let (reason, instruction) = Self.reason(of: error.message)
                    survey.refused[reason, default: []].append((export.name, instruction, error.message))
                } catch {
                    survey.failures.append("\(export.name): \(error)")
                }
            }
            survey.indirect = exports.indirectCount
            return survey
        }

        /// What the function's size in the dynamic symbol table shows the plan overlooked: the
        /// function ends (padding aside) before the bytes the patch overwrites do, or a branch
        /// from the rest of the function lands inside them.
        static func overlooked(_ function: InlineFunction, _ export: ExportedFunctions.Function) -> String? {
            guard export.size > 0 else { return nil }
            let patch = function.plan.record
            let start = Int(patch.patchOffset)
            let code = UnsafeRawPointer(bitPattern: export.address)!
            let available = export.size + Relocator.paddingLength(after: code, size: export.size)
            if Int(patch.copiedLength) > available {
                return "\(export.name): \(export.size) bytes (\(available) with padding), "
                    + "the patch overwrites \(start)..<\(patch.copiedLength)"
            }
            do {
                let branches = try Relocator.branches(
                    into: start..<Int(patch.copiedLength), function: code, size: export.size)
                if let branch = branches.first {
                    return "\(export.name): `\(branch.instruction)` at offset \(branch.offset) branches to offset "
                        + "\(branch.target), inside \(start)..<\(patch.copiedLength) (\(branches.count) such)"
                }
            } catch {
                return "\(export.name): its \(export.size) bytes do not decode: \(error)"
            }
            return nil
        }

        /// A refusal's reason (the message without its instruction and the instruction's offset,
        /// bytes in hex as `X`, numbers as `N`) and its instruction (the first one in backquotes)
        /// with constants as `X`: "cannot relocate `jmp 0x7f…` at offset 2: …" gives "cannot
        /// relocate: …" and "jmp X".
        static func reason(of message: String) -> (reason: String, instruction: String) {
            let parts = message.split(separator: "`", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { return (numbersReplaced(bytesReplaced(message)), "") }
            let lead = String(parts[0].reversed().drop { $0 == " " }.reversed())
            var rest = Substring(parts[2])
            if rest.hasPrefix(" at offset ") {
                rest = rest.dropFirst(" at offset ".count).drop { $0.isNumber }
            }
            rest = rest.drop { $0 == " " }
            let reason = lead.isEmpty ? String(rest) : rest.hasPrefix(":") ? lead + rest : lead + " " + rest
            return (numbersReplaced(bytesReplaced(reason)), constantsReplaced(String(parts[1])))
        }

        /// Each parenthesized run of bytes in hex as `X`: `(bytes 06 cc)` as `(bytes X)`, `(48 b8)`
        /// as `(X)`.
        static func bytesReplaced(_ text: String) -> String {
            var result = ""
            var rest = Substring(text)
            while let open = rest.firstIndex(of: "(") {
                result += rest[..<open]
                guard let close = rest[open...].firstIndex(of: ")") else {
                    rest = rest[open...]
                    break
                }
                let inside = rest[rest.index(after: open)..<close]
                let lead = inside.hasPrefix("bytes ") ? "bytes " : ""
                let words = inside.dropFirst(lead.count).split(separator: " ")
                let isHex = !words.isEmpty && words.allSatisfy { $0.count == 2 && $0.allSatisfy(\.isHexDigit) }
                result += isHex ? "(" + lead + "X)" : "(" + inside + ")"
                rest = rest[rest.index(after: close)...]
            }
            return result + rest
        }

        static func numbersReplaced(_ text: String) -> String {
            var result = ""
            for character in text {
                if character.isNumber {
                    if !result.hasSuffix("N") { result.append("N") }
                } else {
                    result.append(character)
                }
            }
            return result
        }

        /// `jmp 0x7f12345678` as `jmp X`, `mov rax, [0x7f…]` as `mov rax, [X]`.
        static func constantsReplaced(_ text: String) -> String {
            var result = ""
            var characters = Substring(text)
            while let first = characters.first {
                if characters.hasPrefix("0x") {
                    characters = characters.dropFirst(2).drop { $0.isHexDigit }
                    result += "X"
                } else {
                    result.append(first)
                    characters = characters.dropFirst()
                }
            }
            return result
        }

        // MARK: - Report

        static func report(_ survey: Survey) {
            let name = survey.library.soname
            Swift.print(
                "corpus: \(name): \(survey.exported) exported functions, \(survey.planned.count) hookable, "
                    + "\(survey.refusedCount) refused, \(survey.failures.count + survey.misresolved.count) failed"
                    + (survey.indirect > 0 ? " (and \(survey.indirect) IFUNC symbols, left out)" : ""))
            for (reason, refusals) in survey.refused.sorted(by: { $0.value.count > $1.value.count }) {
                Swift.print("corpus: \(name): refused \(refusals.count): \(reason)")
                var instructions: [String: Int] = [:]
                for refusal in refusals { instructions[refusal.instruction, default: 0] += 1 }
                let list = instructions.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
                Swift.print(
                    "corpus: \(name):     instructions: "
                        + list.map { "`\($0.key)` \($0.value)" }.joined(separator: ", "))
            }
            for refusals in survey.refused.values {
                for refusal in refusals { Swift.print("corpus: \(name): refused \(refusal.name): \(refusal.message)") }
            }
            for failure in survey.failures + survey.misresolved { Swift.print("corpus: \(name): FAILED \(failure)") }
            Swift.print(
                "corpus: \(name): \(survey.overlooked.count) planned although the symbol's size shows it unsafe")
            for problem in survey.overlooked { Swift.print("corpus: \(name): OVERLOOKED \(problem)") }
        }
    }
}
