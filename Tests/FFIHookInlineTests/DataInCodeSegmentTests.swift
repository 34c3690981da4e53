import CTestSupport
import FFIHook
import FFIHookCore
import Testing

@testable import FFIHookInline

#if canImport(Glibc)
    import Glibc
#endif

/// Read-only data that a linker placed in an executable segment (gold does so by default, and
/// the GNU linker with `-z noseparate-code`) is not code: bytes of it that would decode as a
/// branch into a function's first bytes do not refuse that function.
@Suite struct DataInCodeSegmentTests {
    /// A library whose read-only data holds, after sixteen one-byte `nop`s that bring any
    /// decoder in step, a `jmp` to the second byte of `dcs_triple`, linked so that the data
    /// shares the code's segment.
    static let source = """
        #include <stdint.h>
        int64_t dcs_triple(int64_t a) { return a * 3 + 1; }
        extern int64_t dcs_triple_here(int64_t) __attribute__((alias("dcs_triple"), visibility("hidden")));
        __asm__(".pushsection .rodata.dcs_branchy,\\"a\\"\\n"
                ".globl dcs_branchy\\n"
                "dcs_branchy:\\n"
                ".fill 16, 1, 0x90\\n"
                ".byte 0xe9\\n"
                ".long dcs_triple_here + 1 - (. + 4)\\n"
                ".popsection\\n");

        """

    /// Builds the library in a fresh directory and gives its path to `body`.
    static func withLibrary(_ body: (String) throws -> Void) throws {
        var template = Array("/tmp/ffh-data-in-code-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        try #require(made != nil)
        let directory = String(cString: made!)
        let sourcePath = directory + "/library.c"
        let libraryPath = directory + "/libdatainocode.so"
        defer {
            unlink(sourcePath)
            unlink(libraryPath)
            rmdir(directory)
        }
        let file = try #require(fopen(sourcePath, "w"))
        fputs(source, file)
        fclose(file)
        let command = ["cc", "-shared", "-fPIC", "-O0", "-Wl,-z,noseparate-code", "-o", libraryPath, sourcePath]
        var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) }
        argv.append(nil)
        defer { for argument in argv { free(argument) } }
        try #require(pf_run(&argv) == 0, "cc could not build the fixture library")
        try body(libraryPath)
    }

    @Test func aBranchReadInDataOfTheCodeSegmentDoesNotRefuseTheFunction() throws {
        try Self.withLibrary { path in
            let handle = try #require(dlopen(path, RTLD_NOW | RTLD_LOCAL))
            defer { dlclose(handle) }
            let function = try #require(dlsym(handle, "dcs_triple"))
            let data = try #require(dlsym(handle, "dcs_branchy"))
            // The premise, from the kernel's map: the data lies in executable memory, and its
            // bytes are the branch into the function.
            try #require(MemoryMapping.containing(UInt(bitPattern: data))?.executable == true)
            let jump = UnsafeRawPointer(data) + 16
            try #require(jump.load(as: UInt8.self) == 0xE9)
            let target = jump + 5 + Int(jump.loadUnaligned(fromByteOffset: 1, as: Int32.self))
            try #require(target == UnsafeRawPointer(function) + 1)

            typealias Triple = @convention(c) (Int64) -> Int64
            let triple = unsafeBitCast(function, to: Triple.self)
            let inline = try InlineFunction(address: UnsafeRawPointer(function))
            let token = try Hook.instead(on: inline.slot, signature: Signature("qq")) { call in
                call.callOriginal()
                call.setReturnValue(call.returnValue(as: Int64.self) + 1)
            }
            #expect(triple(5) == 17)
            token.remove()
            #expect(triple(5) == 16)
        }
    }

    @Test func theCodeSectionsAreTheExecutableOnes() throws {
        try Self.withLibrary { path in
            let table = try #require(ELFSymbolTable(path: path))
            let handle = try #require(dlopen(path, RTLD_NOW | RTLD_LOCAL))
            defer { dlclose(handle) }
            let functionPointer = try #require(dlsym(handle, "dcs_triple"))
            let dataPointer = try #require(dlsym(handle, "dcs_branchy"))
            let function = UInt(bitPattern: functionPointer)
            let data = UInt(bitPattern: dataPointer)
            let bias = try #require(ImportWalk.withLoadedObject(containing: function) { $0?.bias })
            let functionValue = UInt64(function - bias)
            let dataValue = UInt64(data - bias)
            #expect(table.codeSections.contains { $0.contains(functionValue) })
            #expect(!table.codeSections.contains { $0.contains(dataValue) })
            #expect(
                zip(table.codeSections, table.codeSections.dropFirst()).allSatisfy { $0.upperBound <= $1.lowerBound })
        }
    }
}
