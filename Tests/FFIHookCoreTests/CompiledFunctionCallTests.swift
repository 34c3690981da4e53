import CTestSupport
import Testing

@testable import FFIHookCore

/// Calls every compiler-built function of the test-support table through a call interface
/// made from its encoding. Each callee compares its arguments byte for byte with what it
/// expects and records the first that differs; the test then checks the returned bytes.
@Suite struct CompiledFunctionCallTests {
    static let indices = 0..<Int(ct_call_count())

    static func entry(_ index: Int) -> ct_call { ct_call_at(Int32(index))!.pointee }

    @Test func tableCoversEnoughFunctions() {
        #expect(Self.indices.count >= 100)
    }

    @Test(arguments: indices)
    func callThroughFreshInterface(index: Int) throws {
        let entry = Self.entry(index)
        try Self.check(entry, through: CallInterface(Signature(String(cString: entry.encoding))))
    }

    /// The same calls through `ffi_call` only, for the signatures the register path takes.
    @Test(arguments: indices)
    func callThroughLibffiOnly(index: Int) throws {
        let entry = Self.entry(index)
        try Self.check(entry, through: CallInterface(Signature(String(cString: entry.encoding))), registerPath: false)
    }

    @Test func registerPathCoversScalarSignatures() throws {
        let covered = try Self.indices.filter { index in
            try CallInterface(Signature(String(cString: Self.entry(index).encoding))).usesRegisterPath
        }
        #expect(covered.count >= 20)
        #expect(try CallInterface(Signature("iii")).usesRegisterPath)
        #expect(try CallInterface(Signature("dqqqqqqq")).usesRegisterPath == false)  // seven integers
        #expect(try CallInterface(Signature("i{?=ii}")).usesRegisterPath == false)
        #expect(try CallInterface(Signature("D")).usesRegisterPath == false)
    }

    /// On x86-64 no compiler-built function of the table needs `ffi_call`: the scalar
    /// register path or the System V call plan takes every one.
    @Test func everyShapeSkipsLibffiOnX8664() throws {
        #if arch(x86_64)
            for index in Self.indices {
                let entry = Self.entry(index)
                let signature = try Signature(String(cString: entry.encoding))
                #expect(CallInterface.hasCallPlan(for: signature), "\(String(cString: entry.name)) \(signature)")
            }
            for encoding in ["D", "v{?=D}iT", "{?=D}", "jD", "{?=qqq}{?=ccc}", "t", "dqqqqqqq"] {
                #expect(try CallInterface.hasCallPlan(for: Signature(encoding)), "\(encoding)")
            }
        #endif
    }

    @Test(arguments: indices)
    func callThroughSharedInterface(index: Int) throws {
        let entry = Self.entry(index)
        try Self.check(entry, through: CallInterface.shared(for: Signature(String(cString: entry.encoding))))
    }

    static func check(_ entry: ct_call, through interface: CallInterface, registerPath: Bool = true) {
        let name = String(cString: entry.name)
        let signature = interface.signature
        let count = Int(entry.argument_count)
        #expect(signature.argumentTypes.count == count, "\(name)")
        guard signature.argumentTypes.count == count else { return }
        for (index, type) in signature.argumentTypes.enumerated() {
            #expect(type.size == entry.argument_sizes[index], "\(name) argument \(index) \(type)")
        }
        #expect(signature.returnType.size == entry.return_size, "\(name) return \(signature.returnType)")

        let buffers = (0..<count).map { index in
            let size = max(entry.argument_sizes[index], 1)
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
            buffer.initializeMemory(as: UInt8.self, repeating: 0, count: size)
            entry.fill_argument(Int32(index), buffer)
            return buffer
        }
        defer {
            for buffer in buffers { buffer.deallocate() }
        }
        let returnSize = max(interface.returnBufferSize, entry.return_size)
        let returnValue = UnsafeMutableRawPointer.allocate(byteCount: returnSize, alignment: 16)
        defer { returnValue.deallocate() }
        returnValue.initializeMemory(as: UInt8.self, repeating: 0xA5, count: returnSize)

        _ = ct_take_report()
        withUnsafeTemporaryAllocation(of: UnsafeMutableRawPointer?.self, capacity: max(count, 1)) { list in
            for (index, buffer) in buffers.enumerated() { list[index] = buffer }
            if registerPath {
                interface.call(entry.function, returnValue: returnValue, argumentList: list.baseAddress!)
            } else {
                interface.callThroughLibFFI(entry.function, returnValue: returnValue, argumentList: list.baseAddress!)
            }
        }
        let report = ct_take_report()
        #expect(report.calls == 1, "\(name) ran \(report.calls) times")
        #expect(
            report.failed_argument == 0,
            "\(name) \(signature): argument \(report.failed_argument - 1) arrived wrong")
        if entry.return_size > 0 {
            #expect(entry.check_return(returnValue) == 0, "\(name) \(signature): wrong return value")
        }
    }
}
