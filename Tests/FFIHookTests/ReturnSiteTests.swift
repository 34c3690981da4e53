import CTestSupport
import Glibc
import Testing

/// The `ret` through which the library calls the loader's functions that read their return
/// address (dlopen, dlsym, ...) so that the loader sees the real caller's object: found in the
/// executable segment that holds the caller, a function's last instruction where there is one.
@Suite struct ReturnSiteTests {
    /// Places in the code of several objects: libc, libm and the test binary.
    static func callers() -> [(name: String, address: UnsafeRawPointer)] {
        var places: [(String, UnsafeRawPointer)] = []
        for (object, symbol) in [("libc.so.6", "strlen"), ("libc.so.6", "qsort"), ("libm.so.6", "cos")] {
            guard let handle = dlopen(object, RTLD_NOW | RTLD_NOLOAD), let address = dlsym(handle, symbol) else {
                continue
            }
            places.append(("\(object) \(symbol)", UnsafeRawPointer(address)))
        }
        places.append(("the test fixtures", unsafeBitCast(ct_symbol_static_function(), to: UnsafeRawPointer.self)))
        return places
    }

    /// const struct dwarf_fde *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases), whose
    /// bases are three pointers: the text and data bases, then the function's start.
    static let findDescription = unsafeBitCast(
        dlsym(nil, "_Unwind_Find_FDE")!,
        to: (@convention(c) (UnsafeRawPointer?, UnsafeMutablePointer<UInt>) -> UnsafeRawPointer?).self)

    @Test(arguments: [0, 1, 100, 4000])
    func theReturnIsAFunctionsEndInTheCallersSegment(offset: Int) throws {
        for (name, function) in Self.callers() {
            var start: UInt = 0
            var end: UInt = 0
            #expect(ct_executable_segment(function, &start, &end) == 1, "\(name)")
            let caller = min(UInt(bitPattern: function) + UInt(offset), end - 1)
            let found = try #require(ct_return_site(UnsafeRawPointer(bitPattern: caller)), "\(name)")
            let address = UInt(bitPattern: found)
            #expect(address >= start && address < end, "\(name): \(address) outside \(start)..<\(end)")
            #expect(found.load(as: UInt8.self) == 0xC3, "\(name)")
            #expect(Self.endsAFunction(found, in: start..<end), "\(name)")
            // The unwinder finds the rule of the byte before it, 32 bytes or more into its
            // function (past what an inline patch overwrites).
            var bases = [UInt](repeating: 0, count: 3)
            #expect(Self.findDescription(found - 1, &bases) != nil, "\(name)")
            #expect(address - bases[2] >= 32, "\(name): \(address - bases[2]) bytes into its function")
            // The same for every caller in the segment (found once).
            let again = ct_return_site(UnsafeRawPointer(bitPattern: start + (caller - start) / 2))
            #expect(again == found, "\(name)")
        }
    }

    /// A `ret` with padding or a function's first byte after it, after an instruction that
    /// leaves the stack pointer alone (a multi-byte no-op, `xor eax, eax`, `mov eax, edi`,
    /// `mov eax, imm32`): where an unwinder that looks up the byte before it finds the frame
    /// gone.
    /// The bytes around it lie in the segment [`start`, `end`).
    static func endsAFunction(_ byte: UnsafeRawPointer, in segment: Range<UInt>) -> Bool {
        let place = UInt(bitPattern: byte)
        func at(_ offset: Int) -> UInt8 {
            let address = UInt(bitPattern: Int(bitPattern: place) + offset)
            return segment.contains(address) ? byte.load(fromByteOffset: offset, as: UInt8.self) : 0
        }
        let endings: [[UInt8]] = [
            [0x31, 0xC0], [0x89, 0xF8], [0x0F, 0x1F, 0x00], [0x0F, 0x1F, 0x40, 0x00],
            [0x0F, 0x1F, 0x44, 0x00, 0x00], [0x66, 0x0F, 0x1F, 0x44, 0x00, 0x00],
            [0x0F, 0x1F, 0x80, 0x00, 0x00, 0x00, 0x00], [0x0F, 0x1F, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
            [0x66, 0x0F, 0x1F, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
            [0x66, 0x2E, 0x0F, 0x1F, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
        ]
        let plain =
            at(-5) == 0xB8
            || endings.contains { ending in ending.indices.allSatisfy { at($0 - ending.count) == ending[$0] } }
        return at(0) == 0xC3 && plain && [0xCC, 0x90, 0x0F, 0x66, 0xF3, 0x55, 0x41, 0x53].contains(at(1))
    }

    @Test func aCallerAtTheSegmentsEndFindsAReturnBeforeIt() throws {
        for (name, function) in Self.callers() {
            var start: UInt = 0
            var end: UInt = 0
            #expect(ct_executable_segment(function, &start, &end) == 1, "\(name)")
            let found = try #require(ct_return_site(UnsafeRawPointer(bitPattern: end - 1)), "\(name)")
            let address = UInt(bitPattern: found)
            #expect(address >= start && address < end, "\(name)")
            #expect(found.load(as: UInt8.self) == 0xC3, "\(name)")
        }
    }

    @Test func aCallerOutsideEveryObjectFindsOneInTheMainProgram() throws {
        // Anonymous memory: the loader places such a caller in the main program, and so does the
        // search.
        let memory = try #require(mmap(nil, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        defer { munmap(memory, 4096) }
        let found = try #require(ct_return_site(UnsafeRawPointer(memory)))
        var start: UInt = 0
        var end: UInt = 0
        #expect(ct_executable_segment(ct_main_program_entry(), &start, &end) == 1)
        let address = UInt(bitPattern: found)
        #expect(address >= start && address < end)
        #expect(found.load(as: UInt8.self) == 0xC3)
    }
}
