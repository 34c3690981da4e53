internal import CFFIHookSupport
import Foundation
import Testing

@testable import FFIHook

/// The memory map as the library reads it, against the kernel's own text of it and the
/// protections a test gave its own pages.
@Suite(.serialized) struct MemoryMapTests {
    /// Pages of this test's own, mapped as `protections` say (nil: a hole, unmapped): each page
    /// its own mapping where its protection differs from its neighbour's. An inaccessible page
    /// on either side keeps other memory (which the kernel may place next to them, and other
    /// tests change) out of their mappings. Nothing else in the process changes them.
    final class Pages {
        let base: UInt
        let count: Int
        /// The pages left mapped (not holes).
        let mapped: [Int]
        static let size = UInt(sysconf(Int32(_SC_PAGESIZE)))

        init(_ protections: [Int32?]) throws {
            count = protections.count
            let mapped = try #require(
                mmap(nil, Int(Self.size) * (count + 2), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
            try #require(mapped != MAP_FAILED)
            base = UInt(bitPattern: mapped) + Self.size
            self.mapped = protections.indices.filter { protections[$0] != nil }
            for (page, protection) in protections.enumerated() {
                let address = UnsafeMutableRawPointer(bitPattern: base + UInt(page) * Self.size)
                if let protection {
                    try #require(mprotect(address, Int(Self.size), protection) == 0)
                } else {
                    try #require(munmap(address, Int(Self.size)) == 0)
                }
            }
        }

        func address(of page: Int) -> UInt { base + UInt(page) * Self.size }

        /// Unmaps the pages and the two beside them, not the holes (someone else's by now,
        /// perhaps).
        deinit {
            for page in [-1, count] + mapped {
                munmap(UnsafeMutableRawPointer(bitPattern: base &+ UInt(bitPattern: page) &* Self.size), Int(Self.size))
            }
        }
    }

    static let protections: [Int32?] = [
        PROT_READ, PROT_READ | PROT_WRITE, nil, PROT_READ | PROT_EXEC, PROT_NONE, PROT_READ | PROT_WRITE,
        PROT_READ | PROT_WRITE, PROT_READ,
    ]

    /// The protection a page was given, as a mapping's `PROT_*` bits (nil for the hole).
    static func expected(_ page: Int) -> Int32? { protections[page] }

    /// What the kernel's text of the map (`/proc/self/maps`, read whole) says of `address`.
    static func fromTheFile(_ address: UInt) -> MemoryMapping? {
        MemoryMapping.containing(address, in: MemoryMapping.all())
    }

    /// Runs `body` under a snapshot of this thread's: one thread at a time has one, and the
    /// walks of other tests take theirs meanwhile (a walk over a whole library's entries, under
    /// a sanitizer, for seconds): tried again, a millisecond apart, for up to two minutes.
    static func underOwnSnapshot(_ body: () -> Void) {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            let ran = MemoryMapping.withSnapshot { () -> Bool in
                // This library's own code is mapped: a snapshot of this thread's answers for it.
                guard MemoryMapping.snapshotted(UInt(bitPattern: #dsohandle)) != nil else { return false }
                body()
                return true
            }
            if ran { return }
            usleep(1000)
        }
        Issue.record("no snapshot of this thread's in two minutes")
    }

    /// Each page, its first and last byte, looked up one at a time (the kernel asked where it
    /// answers PROCMAP_QUERY), several at once, and under a snapshot, says what the file says
    /// and the protection the test gave it; the hole is no mapping's. In a process of its own:
    /// any thread's next mapping of a page may fill a hole the test made among its pages.
    @Test func everyWayOfLookingUpAnAddressAgreesWithTheFile() async {
        await #expect(processExitsWith: .success) { try MemoryMapTests.lookUpEveryWay() }
    }

    static func lookUpEveryWay() throws {
        let pages = try Pages(Self.protections)
        var addresses: [UInt] = []
        for page in 0..<pages.count {
            addresses += [pages.address(of: page), pages.address(of: page) + Pages.size - 1]
        }
        let together = MemoryMapping.current(at: addresses)
        var snapshotted: [MemoryMapping?] = []
        Self.underOwnSnapshot { snapshotted = addresses.map(MemoryMapping.snapshotted) }
        for (place, address) in addresses.enumerated() {
            let page = place / 2
            let file = Self.fromTheFile(address)
            let alone = MemoryMapping.containing(address)
            #expect(alone == file, "page \(page)")
            #expect(together[address] == file, "page \(page)")
            #expect(snapshotted[place] == file, "page \(page)")
            #expect(file?.protection == Self.expected(page), "page \(page)")
            if let file {
                #expect(file.start <= address && address < file.end)
            }
        }
        // Neighbours of one protection are one mapping.
        #expect(MemoryMapping.containing(pages.address(of: 5))?.end == pages.address(of: 7))
    }

    /// A snapshot keeps what it first learnt of a mapping, as the walk that changes
    /// protections itself relies on; a mapping it had not looked at is learnt as it is then.
    @Test func aSnapshotKeepsWhatItFirstLearntOfAMapping() throws {
        let pages = try Pages([PROT_READ, PROT_NONE, PROT_READ])
        Self.underOwnSnapshot {
            #expect(MemoryMapping.snapshotted(pages.address(of: 0))?.protection == PROT_READ)
            #expect(
                mprotect(
                    UnsafeMutableRawPointer(bitPattern: pages.address(of: 0)), Int(Pages.size), PROT_READ | PROT_WRITE)
                    == 0)
            #expect(
                mprotect(
                    UnsafeMutableRawPointer(bitPattern: pages.address(of: 2)), Int(Pages.size), PROT_READ | PROT_WRITE)
                    == 0)
            #expect(MemoryMapping.snapshotted(pages.address(of: 0))?.protection == PROT_READ)
            #expect(MemoryMapping.containing(pages.address(of: 0))?.protection == PROT_READ)
            #expect(MemoryMapping.snapshotted(pages.address(of: 2))?.protection == PROT_READ | PROT_WRITE)
        }
        // Outside a snapshot, as it is now.
        #expect(MemoryMapping.containing(pages.address(of: 0))?.protection == PROT_READ | PROT_WRITE)
    }

    /// Asked through a descriptor that is not the memory map's, the query says the kernel
    /// cannot answer (where the library falls back on the file); through the map, it answers
    /// as the file does, and says so of an unmapped address (in a process of its own, as
    /// `everyWayOfLookingUpAnAddressAgreesWithTheFile`).
    @Test func theQueryAnswersThroughTheMapAloneAndSaysWhenItCannot() async {
        await #expect(processExitsWith: .success) { try MemoryMapTests.queryThroughTheMap() }
    }

    static func queryThroughTheMap() throws {
        let pages = try Pages([PROT_READ, nil, PROT_READ | PROT_WRITE])
        var mapping = ffh_mapping()
        let null = open("/dev/null", O_RDONLY)
        defer { close(null) }
        #expect(ffh_mapping_query(null, pages.address(of: 0), &mapping) == -1)
        #expect(ffh_mapping_query(-1, pages.address(of: 0), &mapping) == -1)
        let maps = ffh_maps_open()
        defer { ffh_maps_close(maps) }
        try #require(maps >= 0)
        let answer = ffh_mapping_query(maps, pages.address(of: 2), &mapping)
        if answer == -1 {
            // A kernel before 6.11: the file is what the library reads.
            #expect(ffh_mapping_of(pages.address(of: 2), &mapping) == 1)
        }
        #expect(mapping.protection == PROT_READ | PROT_WRITE)
        #expect(UInt(mapping.start) == pages.address(of: 2) && UInt(mapping.end) == pages.address(of: 3))
        #expect(MemoryMapping.containing(pages.address(of: 2)) == Self.fromTheFile(pages.address(of: 2)))
        #expect(mapping.file_backed == 0)
        #expect(ffh_mapping_of(pages.address(of: 1), &mapping) == 0)
        if answer != -1 { #expect(ffh_mapping_query(maps, pages.address(of: 1), &mapping) == 0) }
        // A file's mapping is one: this library's code.
        #expect(ffh_mapping_of(UInt(bitPattern: #dsohandle), &mapping) == 1 && mapping.file_backed != 0)
    }
}
