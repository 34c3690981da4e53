import CTestSupport
import Foundation
import Testing

@testable import FFIHook
@testable import FFIHookCore

extension FixtureTableTests {
    /// Hooks on variadic C functions, for one declared call shape.
    @Suite struct VariadicHookTests {
        /// `long ct_variadic_sum_longs(int count, ...)` called as `(2, a, b)`.
        static let sumOfTwo = try! Signature(variadic: "qiqq", fixedArgumentCount: 1)
        /// `double ct_variadic_sum_doubles(double first, int count, ...)` called as `(first, 2, a, b)`.
        static let doublesOfTwo = try! Signature(variadic: "ddidd", fixedArgumentCount: 2)

        @Test func beforeInsteadAndAfterSeeAndChangeTheDeclaredArguments() throws {
            let slot = try #require(ct_variadic_sum_longs_slot())
            defer { ct_variadic_free_slot(slot) }
            #expect(ct_variadic_call_sum_longs2(slot, 3, 4) == 7)
            let log = EventLog()
            let tokens = [
                try Hook.before(on: FunctionSlot(slot), signature: Self.sumOfTwo) { call in
                    let count = call.argument(0, as: Int32.self)
                    let first = call.argument(1, as: Int.self)
                    let second = call.argument(2, as: Int.self)
                    log.record("before \(count) \(first) \(second)")
                    call.setArgument(1, to: first * 10)
                },
                try Hook.instead(on: FunctionSlot(slot), signature: Self.sumOfTwo) { call in
                    log.record("instead \(call.argument(1, as: Int.self)) \(call.argument(2, as: Int.self))")
                    call.setArgument(2, to: call.argument(2, as: Int.self) + 1000)
                    call.callOriginal()
                    call.setReturnValue(call.returnValue(as: Int.self) + 1)
                },
                try Hook.after(on: FunctionSlot(slot), signature: Self.sumOfTwo) { call in
                    log.record("after \(call.argument(2, as: Int.self)) = \(call.returnValue(as: Int.self))")
                },
            ]
            // The original sums 30 and 1004, the instead block adds 1.
            #expect(ct_variadic_call_sum_longs2(slot, 3, 4) == 1035)
            #expect(log.all == ["before 2 3 4", "instead 30 4", "after 1004 = 1035"])
            #expect(tokens.allSatisfy { $0.remove() })
            #expect(ct_variadic_call_sum_longs2(slot, 3, 4) == 7)
        }

        @Test func variadicDoublesTravelInVectorRegisters() throws {
            let slot = try #require(ct_variadic_sum_doubles_slot())
            defer { ct_variadic_free_slot(slot) }
            let seen = EventLog()
            let token = try Hook.before(on: FunctionSlot(slot), signature: Self.doublesOfTwo) { call in
                let values = [0, 2, 3].map { call.argument($0, as: Double.self) }
                seen.record("\(values) \(call.argument(1, as: Int32.self))")
                call.setArgument(3, to: call.argument(3, as: Double.self) * 2)
            }
            defer { token.remove() }
            #expect(ct_variadic_call_sum_doubles2(slot, 0.5, 1.25, 2.5) == 6.75)
            #expect(seen.all == ["[0.5, 1.25, 2.5] 2"])
        }

        @Test func anInsteadBlockAloneProvidesTheResult() throws {
            let slot = try #require(ct_variadic_sum_longs_slot())
            defer { ct_variadic_free_slot(slot) }
            let token = try Hook.instead(on: FunctionSlot(slot), signature: Self.sumOfTwo) { call in
                call.setReturnValue(call.argument(1, as: Int.self) * call.argument(2, as: Int.self))
            }
            #expect(ct_variadic_call_sum_longs2(slot, 6, 7) == 42)
            #expect(token.remove())
            #expect(ct_variadic_call_sum_longs2(slot, 6, 7) == 13)
        }

        /// Typed blocks take the declared shape as their signature, checked against the Swift types.
        @Test func typedBlocksOnADeclaredShape() throws {
            let slot = try #require(ct_variadic_sum_longs_slot())
            defer { ct_variadic_free_slot(slot) }
            let seen = EventLog()
            let token = try Hook.after(
                on: FunctionSlot(slot), signature: Self.sumOfTwo, arguments: Int32.self, Int.self, Int.self,
                returning: Int.self
            ) { result, count, first, second in
                seen.record("\(count) \(first) \(second) = \(result)")
                return -result
            }
            #expect(ct_variadic_call_sum_longs2(slot, 8, 9) == -17)
            #expect(token.remove())
            #expect(seen.all == ["2 8 9 = 17"])
        }

        /// `open(path, flags, mode)` through a library's import table, as plthook users hook it.
        @Test func openThroughAnImportTableSeesTheMode() throws {
            let library = try ImportFixtures.open(ImportTableTests.fullRELRO)
            let create = try ImportFixtures.function(
                "cimportfixture_create", in: library, as: (@convention(c) (UnsafePointer<CChar>?) -> Int32).self)
            let directory = FileManager.default.temporaryDirectory.path + "/ffh-variadic-\(getpid())"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let plain = directory + "/plain"
            let widened = directory + "/widened"

            let seen = EventLog()
            let scope = ImportScope.object(ImportTableTests.fullRELRO)
            let signature = try Signature(variadic: "i*ii", fixedArgumentCount: 2)
            let before = try ImportTable.before(symbol: "open", in: scope, signature: signature) { call in
                let path = String(cString: call.argument(0, as: UnsafePointer<CChar>.self))
                let flags = call.argument(1, as: Int32.self)
                let mode = call.argument(2, as: UInt32.self)
                seen.record("\(path.hasSuffix("/widened") ? "widened" : "plain") \(flags) \(String(mode, radix: 8))")
                if path.hasSuffix("/widened") { call.setArgument(2, to: UInt32(0o644)) }
            }
            let after = try ImportTable.after(symbol: "open", in: scope, signature: signature) { call in
                seen.record("returned \(call.returnValue(as: Int32.self) >= 0)")
            }

            for path in [plain, widened] {
                let descriptor = create(path)
                #expect(descriptor >= 0)
                if descriptor >= 0 { close(descriptor) }
            }
            #expect(before.remove())
            #expect(after.remove())

            let flags = O_CREAT | O_WRONLY
            #expect(
                seen.all == [
                    "plain \(flags) 600", "returned true", "widened \(flags) 600", "returned true",
                ])
            let mask = Self.fileCreationMask()
            #expect(try Self.permissions(of: plain) == 0o600 & ~mask)
            #expect(try Self.permissions(of: widened) == 0o644 & ~mask)
        }

        /// `fcntl(fd, F_SETFD, FD_CLOEXEC)` through a library's import table: the block sees the
        /// command and its int argument, and the flag is set.
        @Test func fcntlThroughAnImportTableSeesItsArgument() throws {
            let library = try ImportFixtures.open(ImportTableTests.fullRELRO)
            let setCloseOnExec = try ImportFixtures.function(
                "cimportfixture_set_close_on_exec", in: library, as: (@convention(c) (Int32) -> Int32).self)
            var ends: [Int32] = [0, 0]
            #expect(pipe(&ends) == 0)
            defer { for end in ends { close(end) } }
            let readEnd = ends[0]
            let seen = EventLog()
            let token = try ImportTable.before(
                symbol: "fcntl", in: .object(ImportTableTests.fullRELRO),
                signature: Signature(variadic: "iiii", fixedArgumentCount: 2)
            ) { call in
                let descriptor = call.argument(0, as: Int32.self)
                let command = call.argument(1, as: Int32.self)
                seen.record("\(descriptor == readEnd) \(command) \(call.argument(2, as: Int32.self))")
            }
            #expect(setCloseOnExec(ends[0]) == 0)
            #expect(token.remove())
            #expect(seen.all == ["true \(F_SETFD) \(FD_CLOEXEC)"])
            #expect(fcntl(ends[0], F_GETFD) & FD_CLOEXEC != 0)
        }

        /// `ioctl(fd, FIONREAD, &count)` through a library's import table: an after block reads
        /// what the original wrote through the variadic pointer, an instead block answers alone.
        @Test func ioctlThroughAnImportTableReachesThePointer() throws {
            let library = try ImportFixtures.open(ImportTableTests.fullRELRO)
            let pending = try ImportFixtures.function(
                "cimportfixture_pending_bytes", in: library, as: (@convention(c) (Int32) -> Int32).self)
            var ends: [Int32] = [0, 0]
            #expect(pipe(&ends) == 0)
            defer { for end in ends { close(end) } }
            #expect(write(ends[1], "hello", 5) == 5)
            let scope = ImportScope.object(ImportTableTests.fullRELRO)
            let signature = try Signature(variadic: "iiQ^i", fixedArgumentCount: 2)
            let seen = EventLog()
            let after = try ImportTable.after(symbol: "ioctl", in: scope, signature: signature) { call in
                let count = call.argument(2, as: UnsafeMutablePointer<Int32>.self).pointee
                seen.record("\(UInt(call.argument(1, as: UInt64.self)) == UInt(FIONREAD)) \(count)")
            }
            #expect(pending(ends[0]) == 5)
            #expect(after.remove())
            #expect(seen.all == ["true 5"])

            let instead = try ImportTable.instead(symbol: "ioctl", in: scope, signature: signature) { call in
                call.argument(2, as: UnsafeMutablePointer<Int32>.self).pointee = 42
                call.setReturnValue(Int32(0))
            }
            #expect(pending(ends[0]) == 42)
            #expect(instead.remove())
            #expect(pending(ends[0]) == 5)
        }

        /// `snprintf(buffer, size, "%d %.2f", n, x)` through a library's import table: the
        /// double travels in a vector register, which the callee finds only if `%al` counts it.
        @Test func snprintfThroughAnImportTableFormatsTheChangedDouble() throws {
            let library = try ImportFixtures.open(ImportTableTests.fullRELRO)
            let format = try ImportFixtures.function(
                "cimportfixture_format", in: library,
                as: (@convention(c) (UnsafeMutablePointer<CChar>?, Int, Int32, Double) -> Int32).self)
            let scope = ImportScope.object(ImportTableTests.fullRELRO)
            let signature = try Signature(variadic: "i*Q*id", fixedArgumentCount: 3)
            func formatted(_ number: Int32, _ value: Double) -> String {
                var buffer = [CChar](repeating: 0, count: 64)
                let length = format(&buffer, buffer.count, number, value)
                return String(decoding: buffer.prefix(Int(max(length, 0))).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
            let before = try ImportTable.before(symbol: "snprintf", in: scope, signature: signature) { call in
                call.setArgument(4, to: call.argument(4, as: Double.self) * 2)
            }
            #expect(formatted(7, 1.25) == "7 2.50")
            #expect(before.remove())
            let instead = try ImportTable.instead(symbol: "snprintf", in: scope, signature: signature) { call in
                call.setArgument(3, to: Int32(8))
                call.callOriginal()
            }
            #expect(formatted(7, 1.25) == "8 1.25")
            #expect(instead.remove())
            #expect(formatted(7, 1.25) == "7 1.25")
        }

        @Test func aPromotableVariadicTypeIsRefused() throws {
            let slot = try #require(ct_variadic_sum_doubles_slot())
            defer { ct_variadic_free_slot(slot) }
            let signature = try Signature(variadic: "ddif", fixedArgumentCount: 2)
            let error = #expect(throws: HookError.self) {
                try Hook.before(on: FunctionSlot(slot), signature: signature) { _ in }
            }
            #expect(error?.code == .invalidSignature)
            #expect(error?.callInterfaceError?.code == .variadicPromotion)
            #expect(error?.callInterfaceError?.position == .argument(2))
            #expect(error?.callInterfaceError?.signature == signature)
            #expect(error?.description.contains("(variadic after 2 fixed arguments)") == true)
            #expect(
                UInt(bitPattern: unsafeBitCast(slot.pointee, to: Int.self))
                    == UInt(bitPattern: ct_variadic_sum_doubles_address()))
        }

        @Test(arguments: [4, -1])
        func aFixedCountOutsideTheArgumentsIsRefused(count: Int) throws {
            let slot = try #require(ct_variadic_sum_longs_slot())
            defer { ct_variadic_free_slot(slot) }
            let signature = try Signature(variadic: "qiqq", fixedArgumentCount: count)
            let error = #expect(throws: HookError.self) {
                try Hook.instead(on: FunctionSlot(slot), signature: signature) { _ in }
            }
            #expect(error?.code == .invalidSignature)
            #expect(error?.callInterfaceError?.code == .invalidFixedArgumentCount)
            #expect(ct_variadic_call_sum_longs2(slot, 1, 2) == 3)
        }

        @Test func aSlotHookedWithAnotherShapeIsAMismatch() throws {
            let slot = try #require(ct_variadic_sum_longs_slot())
            defer { ct_variadic_free_slot(slot) }
            let fixed = try Signature("qiqq")
            let token = try Hook.before(on: FunctionSlot(slot), signature: fixed) { _ in }
            let variadic = #expect(throws: HookError.self) {
                try Hook.before(on: FunctionSlot(slot), signature: Self.sumOfTwo) { _ in }
            }
            #expect(variadic?.is(.signatureMismatch(installed: "qiqq")) == true)
            #expect(token.remove())

            let shaped = try Hook.before(on: FunctionSlot(slot), signature: Self.sumOfTwo) { _ in }
            defer { shaped.remove() }
            for other in [fixed, fixed.variadic(fixedArgumentCount: 2)] {
                let error = #expect(throws: HookError.self) {
                    try Hook.after(on: FunctionSlot(slot), signature: other) { _ in }
                }
                #expect(error?.is(.signatureMismatch(installed: "qiqq", fixedArgumentCount: 1)) == true)
                #expect(error?.message.contains("\"qiqq\" (variadic after 1 fixed argument);") == true)
            }
            // The same shape, written differently, is the same signature.
            let same = try Hook.after(
                on: FunctionSlot(slot), signature: Signature("q24i0q8q16").variadic(fixedArgumentCount: 1)
            ) { _ in }
            #expect(same.remove())
            #expect(ct_variadic_call_sum_longs2(slot, 1, 2) == 3)
        }

        // MARK: - Helpers

        /// The process's file-creation mask, read without changing it.
        static func fileCreationMask() -> mode_t {
            let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("Umask:") }
            let value = line?.split(separator: "\t").last.flatMap {
                mode_t($0.trimmingCharacters(in: .whitespaces), radix: 8)
            }
            return value ?? 0o022
        }

        /// A file's permission bits.
        static func permissions(of path: String) throws -> mode_t {
            var information = stat()
            try #require(stat(path, &information) == 0)
            return information.st_mode & 0o777
        }
    }
}
