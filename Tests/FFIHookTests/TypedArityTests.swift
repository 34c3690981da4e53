import CTestSupport
import FFIHookCore
import Testing

@testable import FFIHook

extension FixtureTableTests {
    /// Typed before and after blocks of every arity from one to seven: two to six arguments
    /// take the forms with a generic parameter per argument, one and seven the parameter-pack
    /// forms. The originals are C functions of mixed argument types called from C.
    @Suite struct TypedArityTests {
        /// What the C callers pass, as the blocks describe them.
        static let passed = ["-5", "2.5", "60000", "0.25", "-1099511627776", "text", "-2000000000"]

        @Test(arguments: 1...7)
        func blocksOfEveryArityReadWhatTheCallerPassed(count: Int) throws {
            let arity = Int32(count)
            let expected = ct_arity_call(arity)
            let expectedVoid = ct_arity_call_void(arity)
            #expect(expected == expectedVoid)
            let log = EventLog()
            let tokens = try install(
                count, returning: FunctionSlot(ct_arity_function_slot(arity)!),
                void: FunctionSlot(ct_arity_void_function_slot(arity)!), log: log)
            defer { for token in tokens { token.remove() } }

            #expect(ct_arity_call(arity) == expected + 1)
            #expect(ct_arity_call_void(arity) == expectedVoid)
            let arguments = Self.passed.prefix(count).joined(separator: " ")
            #expect(
                log.all == [
                    "before \(arguments)", "after \(expected) \(arguments)", "void before \(arguments)",
                    "void after \(arguments)",
                ])
        }

        private func install(
            _ count: Int, returning: FunctionSlot, void: FunctionSlot, log: EventLog
        ) throws -> [HookToken] {
            switch count {
            case 1:
                return [
                    try Hook.before(on: returning, arguments: Int8.self, returning: Int64.self) { a1 in
                        log.record("before " + describe(a1))
                    },
                    try Hook.after(on: returning, arguments: Int8.self, returning: Int64.self) { result, a1 in
                        log.record("after \(result) " + describe(a1))
                        return result + 1
                    },
                    try Hook.before(on: void, arguments: Int8.self) { a1 in
                        log.record("void before " + describe(a1))
                    },
                    try Hook.after(on: void, arguments: Int8.self) { a1 in
                        log.record("void after " + describe(a1))
                    },
                ]
            case 2:
                return [
                    try Hook.before(on: returning, arguments: Int8.self, Double.self, returning: Int64.self) { a1, a2 in
                        log.record("before " + describe(a1, a2))
                    },
                    try Hook.after(on: returning, arguments: Int8.self, Double.self, returning: Int64.self) {
                        result, a1, a2 in
                        log.record("after \(result) " + describe(a1, a2))
                        return result + 1
                    },
                    try Hook.before(on: void, arguments: Int8.self, Double.self) { a1, a2 in
                        log.record("void before " + describe(a1, a2))
                    },
                    try Hook.after(on: void, arguments: Int8.self, Double.self) { a1, a2 in
                        log.record("void after " + describe(a1, a2))
                    },
                ]
            case 3:
                return [
                    try Hook.before(
                        on: returning, arguments: Int8.self, Double.self, UInt16.self, returning: Int64.self
                    ) { a1, a2, a3 in
                        log.record("before " + describe(a1, a2, a3))
                    },
                    try Hook.after(on: returning, arguments: Int8.self, Double.self, UInt16.self, returning: Int64.self)
                    { result, a1, a2, a3 in
                        log.record("after \(result) " + describe(a1, a2, a3))
                        return result + 1
                    },
                    try Hook.before(on: void, arguments: Int8.self, Double.self, UInt16.self) { a1, a2, a3 in
                        log.record("void before " + describe(a1, a2, a3))
                    },
                    try Hook.after(on: void, arguments: Int8.self, Double.self, UInt16.self) { a1, a2, a3 in
                        log.record("void after " + describe(a1, a2, a3))
                    },
                ]
            case 4:
                return [
                    try Hook.before(
                        on: returning, arguments: Int8.self, Double.self, UInt16.self, Float.self, returning: Int64.self
                    ) { a1, a2, a3, a4 in
                        log.record("before " + describe(a1, a2, a3, a4))
                    },
                    try Hook.after(
                        on: returning, arguments: Int8.self, Double.self, UInt16.self, Float.self, returning: Int64.self
                    ) { result, a1, a2, a3, a4 in
                        log.record("after \(result) " + describe(a1, a2, a3, a4))
                        return result + 1
                    },
                    try Hook.before(on: void, arguments: Int8.self, Double.self, UInt16.self, Float.self) {
                        a1, a2, a3, a4 in
                        log.record("void before " + describe(a1, a2, a3, a4))
                    },
                    try Hook.after(on: void, arguments: Int8.self, Double.self, UInt16.self, Float.self) {
                        a1, a2, a3, a4 in
                        log.record("void after " + describe(a1, a2, a3, a4))
                    },
                ]
            case 5:
                return [
                    try Hook.before(
                        on: returning, arguments: Int8.self, Double.self, UInt16.self, Float.self, Int64.self,
                        returning: Int64.self
                    ) { a1, a2, a3, a4, a5 in
                        log.record("before " + describe(a1, a2, a3, a4, a5))
                    },
                    try Hook.after(
                        on: returning, arguments: Int8.self, Double.self, UInt16.self, Float.self, Int64.self,
                        returning: Int64.self
                    ) { result, a1, a2, a3, a4, a5 in
                        log.record("after \(result) " + describe(a1, a2, a3, a4, a5))
                        return result + 1
                    },
                    try Hook.before(on: void, arguments: Int8.self, Double.self, UInt16.self, Float.self, Int64.self) {
                        a1, a2, a3, a4, a5 in
                        log.record("void before " + describe(a1, a2, a3, a4, a5))
                    },
                    try Hook.after(on: void, arguments: Int8.self, Double.self, UInt16.self, Float.self, Int64.self) {
                        a1, a2, a3, a4, a5 in
                        log.record("void after " + describe(a1, a2, a3, a4, a5))
                    },
                ]
            case 6:
                return [
                    try Hook.before(
                        on: returning, arguments: Int8.self, Double.self, UInt16.self, Float.self, Int64.self,
                        UnsafePointer<CChar>.self, returning: Int64.self
                    ) { a1, a2, a3, a4, a5, a6 in
                        log.record("before " + describe(a1, a2, a3, a4, a5, a6))
                    },
                    try Hook.after(
                        on: returning, arguments: Int8.self, Double.self, UInt16.self, Float.self, Int64.self,
                        UnsafePointer<CChar>.self, returning: Int64.self
                    ) { result, a1, a2, a3, a4, a5, a6 in
                        log.record("after \(result) " + describe(a1, a2, a3, a4, a5, a6))
                        return result + 1
                    },
                    try Hook.before(
                        on: void, arguments: Int8.self, Double.self, UInt16.self, Float.self, Int64.self,
                        UnsafePointer<CChar>.self
                    ) { a1, a2, a3, a4, a5, a6 in
                        log.record("void before " + describe(a1, a2, a3, a4, a5, a6))
                    },
                    try Hook.after(
                        on: void, arguments: Int8.self, Double.self, UInt16.self, Float.self, Int64.self,
                        UnsafePointer<CChar>.self
                    ) { a1, a2, a3, a4, a5, a6 in
                        log.record("void after " + describe(a1, a2, a3, a4, a5, a6))
                    },
                ]
            case 7:
                return [
                    try Hook.before(
                        on: returning, arguments: Int8.self, Double.self, UInt16.self, Float.self, Int64.self,
                        UnsafePointer<CChar>.self, Int32.self, returning: Int64.self
                    ) { a1, a2, a3, a4, a5, a6, a7 in
                        log.record("before " + describe(a1, a2, a3, a4, a5, a6, a7))
                    },
                    try Hook.after(
                        on: returning, arguments: Int8.self, Double.self, UInt16.self, Float.self, Int64.self,
                        UnsafePointer<CChar>.self, Int32.self, returning: Int64.self
                    ) { result, a1, a2, a3, a4, a5, a6, a7 in
                        log.record("after \(result) " + describe(a1, a2, a3, a4, a5, a6, a7))
                        return result + 1
                    },
                    try Hook.before(
                        on: void, arguments: Int8.self, Double.self, UInt16.self, Float.self, Int64.self,
                        UnsafePointer<CChar>.self, Int32.self
                    ) { a1, a2, a3, a4, a5, a6, a7 in
                        log.record("void before " + describe(a1, a2, a3, a4, a5, a6, a7))
                    },
                    try Hook.after(
                        on: void, arguments: Int8.self, Double.self, UInt16.self, Float.self, Int64.self,
                        UnsafePointer<CChar>.self, Int32.self
                    ) { a1, a2, a3, a4, a5, a6, a7 in
                        log.record("void after " + describe(a1, a2, a3, a4, a5, a6, a7))
                    },
                ]
            default:
                Issue.record("no hooks for \(count) arguments")
                return []
            }
        }
    }
}

/// The arguments a block received, as ``TypedArityTests/passed`` spells them.
private func describe(
    _ a1: Int8, _ a2: Double? = nil, _ a3: UInt16? = nil, _ a4: Float? = nil, _ a5: Int64? = nil,
    _ a6: UnsafePointer<CChar>? = nil, _ a7: Int32? = nil
) -> String {
    var parts = ["\(a1)"]
    if let a2 { parts.append("\(a2)") }
    if let a3 { parts.append("\(a3)") }
    if let a4 { parts.append("\(a4)") }
    if let a5 { parts.append("\(a5)") }
    if let a6 { parts.append(a6 == ct_arity_text_address() ? "text" : "another pointer") }
    if let a7 { parts.append("\(a7)") }
    return parts.joined(separator: " ")
}
