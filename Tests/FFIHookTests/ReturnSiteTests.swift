import CTestSupport
import Glibc
import Testing

/// The `ret` through which the library calls the loader's functions that read their return
/// address (dlopen, dlsym, ...) so that the loader sees the real caller's object: found in the
/// executable segment that holds the caller, a function's last instruction where there is one.
@Suite struct ReturnSiteTests {
    /// Places in the code of several objects: the test binary, libc, libm, the dynamic loader.
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
            // A pop or a leave before it: the last instruction of a function.
            #expect(Self.endsAFunction(found), "\(name)")
            // The first such from the caller on (then from the segment's start): the search
            // starts at the caller, not at the segment's start (over a megabyte away in libc).
            let skipped = address >= caller ? [caller..<address] : [caller..<(end - 1), (start + 1)..<address]
            var earlier = 0
            for range in skipped {
                for place in range where Self.endsAFunction(UnsafeRawPointer(bitPattern: place)!) { earlier += 1 }
            }
            #expect(earlier == 0, "\(name)")
        }
    }

    /// A `ret` with a pop or a leave before it and padding or a function's first byte after it.
    static func endsAFunction(_ byte: UnsafeRawPointer) -> Bool {
        let before = byte.load(fromByteOffset: -1, as: UInt8.self)
        let after = byte.load(fromByteOffset: 1, as: UInt8.self)
        return byte.load(as: UInt8.self) == 0xC3 && ((0x58...0x5F).contains(before) || before == 0xC9)
            && [0xCC, 0x90, 0x0F, 0x66, 0xF3, 0x55, 0x41, 0x53].contains(after)
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
