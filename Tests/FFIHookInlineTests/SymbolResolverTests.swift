import CTestSupport
import CZlib
import Dispatch
import Testing

@testable import FFIHookInline

#if canImport(Glibc)
    import Glibc
#endif

/// The symbol resolver against what the compiler, the assembler, the loader and the object files
/// say by other means: the `.size` of hand-written functions, a C function's section bounds,
/// `dlsym`, `dladdr`, and a plain scan of a library's `.dynsym` on disk.
@Suite struct SymbolResolverTests {
    /// The main program's file, as the kernel names it.
    static var executable: String {
        let resolved = realpath("/proc/self/exe", nil)!
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// What `dlsym(RTLD_DEFAULT, name)` gives.
    static func dlsymDefault(_ name: String) -> UInt? {
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), name).map { UInt(bitPattern: $0) }
    }

    /// A plain scan of the loaded object's `.dynsym` on disk (ct_dynsym_lookup).
    static func dynamicSymbol(_ name: String, in object: String) -> (address: UInt, size: Int, type: UInt8)? {
        var address: UInt = 0
        var size: UInt64 = 0
        var type: UInt8 = 0
        guard ct_dynsym_lookup(object, name, &address, &size, &type) != 0 else { return nil }
        return (address, Int(size), type)
    }

    /// The error `resolve` throws, nil when it returns.
    static func failure(_ symbol: String, in object: String?) -> SymbolLookupError? {
        do throws(SymbolLookupError) {
            _ = try SymbolResolver.resolve(symbol: symbol, in: object)
            return nil
        } catch {
            return error
        }
    }

    // MARK: - Extents of the main program's functions

    /// One hand-written function of inline_fixtures_x86_64.S and the size its `.size` gives.
    struct Fixture: CustomStringConvertible, Sendable {
        let name: String
        let address: UInt
        let size: Int
        var description: String { name }

        typealias Binary = @convention(c) (Int64, Int64) -> Int64
        typealias Small = @convention(c) (Int32) -> Int32

        static let all: [Fixture] = [
            .init(
                name: "ct_inline_plain", address: SymbolResolverTests.address(of: ct_inline_plain as Binary),
                size: ct_inline_plain_size),
            .init(
                name: "ct_inline_rip", address: SymbolResolverTests.address(of: ct_inline_rip as Unary),
                size: ct_inline_rip_size),
            .init(
                name: "ct_inline_jmp8", address: SymbolResolverTests.address(of: ct_inline_jmp8 as Unary),
                size: ct_inline_jmp8_size),
            .init(
                name: "ct_inline_jcc8", address: SymbolResolverTests.address(of: ct_inline_jcc8 as Unary),
                size: ct_inline_jcc8_size),
            .init(
                name: "ct_inline_call", address: SymbolResolverTests.address(of: ct_inline_call as Unary),
                size: ct_inline_call_size),
            .init(
                name: "ct_inline_loop", address: SymbolResolverTests.address(of: ct_inline_loop as Unary),
                size: ct_inline_loop_size),
            .init(
                name: "ct_inline_jrcxz", address: SymbolResolverTests.address(of: ct_inline_jrcxz as Unary),
                size: ct_inline_jrcxz_size),
            .init(
                name: "ct_inline_endbr", address: SymbolResolverTests.address(of: ct_inline_endbr as Unary),
                size: ct_inline_endbr_size),
            .init(
                name: "ct_inline_backward", address: SymbolResolverTests.address(of: ct_inline_backward as Unary),
                size: ct_inline_backward_size),
            .init(
                name: "ct_inline_tiny", address: SymbolResolverTests.address(of: ct_inline_tiny as Small),
                size: ct_inline_tiny_size),
        ]

        init(name: String, address: UInt, size: Int64) {
            self.name = name
            self.address = address
            self.size = Int(size)
        }
    }

    /// The address of a C function.
    static func address<Function>(of function: Function) -> UInt {
        UInt(bitPattern: unsafeBitCast(function, to: UnsafeRawPointer.self))
    }

    @Test(arguments: Fixture.all) func extentOfHandWrittenFunction(_ fixture: Fixture) throws {
        let extent = try #require(SymbolResolver.extent(of: fixture.address))
        #expect(extent.start == fixture.address)
        #expect(extent.size == fixture.size)
        #expect(extent.symbol == fixture.name)
        #expect(extent.objectPath == Self.executable)
        #expect(extent.loadBias == ct_load_bias(nil))
        #expect(!extent.isIndirect)
    }

    @Test(arguments: Fixture.all) func extentOfEveryByteOfHandWrittenFunction(_ fixture: Fixture) throws {
        for offset in 0..<fixture.size {
            let extent = try #require(SymbolResolver.extent(of: fixture.address + UInt(offset)))
            #expect(extent.start == fixture.address, "offset \(offset)")
            #expect(extent.size == fixture.size, "offset \(offset)")
        }
    }

    /// A `static` C function: no dynamic symbol names it (dladdr gives no name), only `.symtab`.
    @Test func extentOfStaticFunctionComesFromSymtab() throws {
        let function = try #require(ct_symbol_static_function())
        #expect(function(4) == 13)
        let address = Self.address(of: function)
        #expect(ct_dladdr_name(UnsafeRawPointer(bitPattern: address)) == nil)
        #expect(UInt(bitPattern: ct_symbol_static_section_start()) == address)
        let extent = try #require(SymbolResolver.extent(of: address + 1))
        #expect(extent.start == address)
        #expect(extent.size == ct_symbol_static_size())
        #expect(extent.symbol == "ct_symbol_static_triple")
        #expect(extent.objectPath == Self.executable)
    }

    @Test func extentOfAnonymousMappingIsNil() throws {
        let page = try #require(mmap(nil, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        #expect(page != MAP_FAILED)
        defer { munmap(page, 4096) }
        #expect(SymbolResolver.extent(of: UInt(bitPattern: page) + 16) == nil)
        #expect(SymbolResolver.extent(of: 0) == nil)
        #expect(SymbolResolver.extent(of: 0x10) == nil)
    }

    @Test func extentsFromManyThreadsAgree() throws {
        let expected = Fixture.all.map { SymbolResolver.extent(of: $0.address + 1) }
        let mismatches = PerThreadCounts(threads: 4)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for round in 0..<20 {
                let fixture = (thread + round) % Fixture.all.count
                if SymbolResolver.extent(of: Fixture.all[fixture].address + 1) != expected[fixture] {
                    mismatches.add(1, for: thread)
                }
            }
        }
        #expect(mismatches.values == [0, 0, 0, 0])
    }

    // MARK: - Shared libraries

    @Test func getpidFromGlobalScopeAndLibc() throws {
        let expected = try #require(Self.dlsymDefault("getpid"))
        #expect(try SymbolResolver.resolve(symbol: "getpid", in: nil) == expected)
        #expect(try SymbolResolver.resolve(symbol: "getpid", in: "libc.so.6") == expected)
        let declared = try #require(Self.dynamicSymbol("getpid", in: "libc.so.6"))
        #expect(declared.address == expected)
        let extent = try #require(SymbolResolver.extent(of: expected + 3))
        #expect(extent.start == expected)
        #expect(extent.size == declared.size)
        #expect(extent.symbol == "getpid" || extent.symbol == "__getpid")
        #expect(extent.loadBias == ct_load_bias("libc.so.6"))
        #expect(extent.objectPath.hasSuffix("/libc.so.6"))
        #expect(!extent.isIndirect)
    }

    /// memset is an IFUNC: its symbol's address is the resolver; resolve gives the code that
    /// the resolver picks, as glibc's dlsym does (it calls the resolver).
    @Test func memsetResolvesToItsImplementation() throws {
        let resolver = try #require(Self.dynamicSymbol("memset", in: "libc.so.6"))
        #expect(resolver.type == 10)  // STT_GNU_IFUNC
        let implementation = try SymbolResolver.resolve(symbol: "memset", in: "libc.so.6")
        #expect(implementation != resolver.address)
        // In the global scope, the first definition wins: libc's, or the executable's own
        // where a sanitizer's runtime defines memset there.
        #expect(try SymbolResolver.resolve(symbol: "memset", in: nil) == Self.dlsymDefault("memset"))
        // x86-64 resolvers take no arguments; asked again, this one picks the same code.
        let pick = unsafeBitCast(UnsafeRawPointer(bitPattern: resolver.address)!, to: (@convention(c) () -> UInt).self)
        #expect(pick() == implementation)

        typealias Memset = @convention(c) (UnsafeMutableRawPointer?, Int32, Int) -> UnsafeMutableRawPointer?
        let fill = unsafeBitCast(UnsafeRawPointer(bitPattern: implementation)!, to: Memset.self)
        var buffer = [UInt8](repeating: 0, count: 300)
        buffer.withUnsafeMutableBytes { _ = fill($0.baseAddress! + 7, 0x5A, 290) }
        #expect(buffer[..<7].allSatisfy { $0 == 0 })
        #expect(buffer[7..<297].allSatisfy { $0 == 0x5A })
        #expect(buffer[297...].allSatisfy { $0 == 0 })

        let resolverExtent = try #require(SymbolResolver.extent(of: resolver.address))
        #expect(resolverExtent.isIndirect)
        #expect(resolverExtent.start == resolver.address)
        #expect(resolverExtent.size == resolver.size)
        #expect(resolverExtent.symbol == "memset")
        let code = try #require(SymbolResolver.extent(of: implementation))
        #expect(code.objectPath == resolverExtent.objectPath)
        #expect(!code.isIndirect)
    }

    @Test func zlibCRC32() throws {
        typealias CRC = @convention(c) (UInt, UnsafePointer<UInt8>?, UInt32) -> UInt
        let function: CRC = crc32
        let expected = Self.address(of: function)
        let declared = try #require(Self.dynamicSymbol("crc32", in: "libz.so.1"))
        #expect(declared.address == expected)
        #expect(try SymbolResolver.resolve(symbol: "crc32", in: "libz.so.1") == expected)
        #expect(try SymbolResolver.resolve(symbol: "crc32", in: nil) == expected)
        let extent = try #require(SymbolResolver.extent(of: expected))
        #expect(extent.start == expected)
        #expect(extent.size == declared.size)
        #expect(extent.symbol == "crc32")
        #expect(extent.loadBias == ct_load_bias("libz.so.1"))
        // The object named by its path, its real path, and a name only the loader's search finds.
        #expect(try SymbolResolver.resolve(symbol: "crc32", in: extent.objectPath) == expected)
        let real = try #require(realpath(extent.objectPath, nil))
        defer { free(real) }
        #expect(try SymbolResolver.resolve(symbol: "crc32", in: String(cString: real)) == expected)
        if access("/usr/lib/x86_64-linux-gnu/libz.so", F_OK) == 0 {
            #expect(try SymbolResolver.resolve(symbol: "crc32", in: "libz.so") == expected)
        }
    }

    /// The vDSO: no file, and a read-only dynamic section whose addresses the loader left as
    /// they were linked. Skipped where the kernel maps none.
    @Test func vdsoFunction() throws {
        let vdso = "linux-vdso.so.1"
        guard Self.failure("__vdso_clock_gettime", in: vdso)?.code != .objectNotLoaded else { return }
        let address = try SymbolResolver.resolve(symbol: "__vdso_clock_gettime", in: vdso)
        let extent = try #require(SymbolResolver.extent(of: address + 1))
        #expect(extent.start == address)
        #expect((extent.size ?? 0) > 1)
        #expect(extent.symbol == "__vdso_clock_gettime" || extent.symbol == "clock_gettime")
        #expect(extent.objectPath == vdso)
        typealias ClockGetTime = @convention(c) (clockid_t, UnsafeMutablePointer<timespec>?) -> Int32
        let call = unsafeBitCast(UnsafeRawPointer(bitPattern: address)!, to: ClockGetTime.self)
        var time = timespec()
        #expect(call(CLOCK_REALTIME, &time) == 0)
        #expect(time.tv_sec > 1_600_000_000)
    }

    // MARK: - Refusals

    @Test func missingSymbol() {
        let error = Self.failure("ct_no_such_symbol_anywhere", in: nil)
        #expect(error == SymbolLookupError(code: .symbolNotFound, symbol: "ct_no_such_symbol_anywhere", object: nil))
        #expect(error?.description.contains("ct_no_such_symbol_anywhere") == true)
        #expect(
            Self.failure("ct_no_such_symbol_anywhere", in: "libc.so.6")
                == SymbolLookupError(code: .symbolNotFound, symbol: "ct_no_such_symbol_anywhere", object: "libc.so.6"))
        // An empty name is said to be one, not left as a gap in the sentence.
        #expect(
            Self.failure("", in: nil)?.description == #"symbol "" (an empty name) is not defined in the global scope"#)
    }

    /// A symbol that an object's dependency defines is not defined in the object.
    @Test func symbolOfADependencyIsNotTheObjects() {
        #expect(Self.failure("malloc", in: "libz.so.1")?.code == .symbolNotFound)
    }

    @Test func objectNotLoaded() {
        let error = Self.failure("crc32", in: "libct-not-loaded.so.9")
        #expect(error == SymbolLookupError(code: .objectNotLoaded, symbol: "crc32", object: "libct-not-loaded.so.9"))
        #expect(error?.description.contains("libct-not-loaded.so.9") == true)
        #expect(Self.failure("crc32", in: "")?.code == .objectNotLoaded)
    }

    @Test func dataIsNotAFunction() {
        #expect(
            Self.failure("environ", in: nil) == SymbolLookupError(code: .notAFunction, symbol: "environ", object: nil))
        #expect(Self.failure("stdout", in: "libc.so.6")?.code == .notAFunction)
        // An untyped symbol outside the code: the main program's `_end`, named by file name.
        let name = String(Self.executable.split(separator: "/").last!)
        #expect(Self.failure("_end", in: name)?.code == .notAFunction)
        #expect(Self.failure("environ", in: nil)?.description.contains("environ") == true)
    }
}

/// One counter per thread, each written by its thread only.
final class PerThreadCounts: @unchecked Sendable {
    // Sendable: thread i touches only counts[i]; `values` is read after the threads ended.
    private let counts: UnsafeMutablePointer<Int>
    private let threads: Int

    init(threads: Int) {
        self.threads = threads
        counts = .allocate(capacity: threads)
        counts.initialize(repeating: 0, count: threads)
    }

    deinit { counts.deallocate() }

    func add(_ amount: Int, for thread: Int) { counts[thread] += amount }

    var values: [Int] { (0..<threads).map { counts[$0] } }
}
