import CFFIHookPatch
import Glibc
import Testing

/// The batch writer reads and writes neighbouring requests of one window together: each
/// request still succeeds or fails on its own, and no byte outside the requests written
/// changes.
@Suite struct PatchWindowTests {
    /// Three pages of read-and-execute memory filled with a pattern; the third is unmapped when
    /// `unmapThird` (then only the first two are unmapped at the end: the hole may be someone
    /// else's mapping by then).
    final class Pages {
        let base: UnsafeMutableRawPointer
        let size = 3 * 4096
        let mappedSize: Int
        init(unmapThird: Bool) throws {
            let memory = try #require(
                mmap(nil, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
            #expect(memory != MAP_FAILED)
            base = memory
            for offset in 0..<size { base.storeBytes(of: Self.pattern(offset), toByteOffset: offset, as: UInt8.self) }
            #expect(mprotect(base, size, PROT_READ | PROT_EXEC) == 0)
            if unmapThird { #expect(munmap(base + 2 * 4096, 4096) == 0) }
            mappedSize = unmapThird ? 2 * 4096 : size
        }
        deinit { munmap(base, mappedSize) }
        static func pattern(_ offset: Int) -> UInt8 { UInt8(truncatingIfNeeded: offset &* 7 &+ 3) }
        func byte(_ offset: Int) -> UInt8 { base.load(fromByteOffset: offset, as: UInt8.self) }
    }

    /// One request: `length` bytes at `offset`; expecting the pattern unless `wrongExpectation`.
    struct Write {
        var offset: Int
        var length: Int
        var wrongExpectation = false
        var newByte: UInt8 { UInt8(truncatingIfNeeded: 0xC0 &+ offset) }
    }

    /// Runs `writes` as one batch over `pages` (in the order given) and returns each status.
    func run(_ writes: [Write], on pages: Pages) -> [ffh_patch_status] {
        let expected = writes.map { write in
            (0..<write.length).map { Pages.pattern(write.offset + $0) &+ (write.wrongExpectation ? 1 : 0) }
        }
        let bytes = writes.map { [UInt8](repeating: $0.newByte, count: $0.length) }
        let expectedPointers = expected.map { array in
            let pointer = UnsafeMutablePointer<UInt8>.allocate(capacity: array.count)
            pointer.initialize(from: array, count: array.count)
            return pointer
        }
        let bytePointers = bytes.map { array in
            let pointer = UnsafeMutablePointer<UInt8>.allocate(capacity: array.count)
            pointer.initialize(from: array, count: array.count)
            return pointer
        }
        defer {
            for pointer in expectedPointers + bytePointers { pointer.deallocate() }
        }
        var requests = writes.enumerated().map { position, write in
            var request = ffh_patch_request()
            request.address = pages.base + write.offset
            request.expected = UnsafePointer(expectedPointers[position])
            request.bytes = UnsafePointer(bytePointers[position])
            request.length = write.length
            request.protection = PROT_READ | PROT_EXEC
            return request
        }
        var result = ffh_patch_result()
        let status = requests.withUnsafeMutableBufferPointer {
            ffh_patch_write_batch($0.baseAddress, $0.count, &result)
        }
        #expect(status == FFH_PATCH_DONE)
        return requests.map(\.status)
    }

    /// Every byte of the mapped pages is the pattern, or the new byte of a request in `done`.
    func check(_ pages: Pages, done: [Write], mappedPages: Int) {
        #expect(differences(pages, done: done, mappedPages: mappedPages) == 0)
    }

    /// How many bytes of the mapped pages are neither the pattern nor the new byte of a request
    /// in `done`.
    func differences(_ pages: Pages, done: [Write], mappedPages: Int) -> Int {
        var differences = 0
        for offset in 0..<(mappedPages * 4096) {
            let write = done.first { offset >= $0.offset && offset < $0.offset + $0.length }
            let want = write?.newByte ?? Pages.pattern(offset)
            if pages.byte(offset) != want { differences += 1 }
        }
        return differences
    }

    @Test func neighboursAreWrittenTogetherAndEachAnswersForItself() throws {
        let pages = try Pages(unmapThird: false)
        let writes = [
            Write(offset: 16, length: 5), Write(offset: 21, length: 5),
            Write(offset: 100, length: 5, wrongExpectation: true), Write(offset: 200, length: 14),
            // Across the first page's end, and the last of the window.
            Write(offset: 4094, length: 5),
            // The window is full: the next begins.
            Write(offset: 4200, length: 5), Write(offset: 8000, length: 5, wrongExpectation: true),
        ]
        let statuses = run(writes, on: pages)
        #expect(statuses == expected(.done, .done, .changed, .done, .done, .done, .changed))
        check(pages, done: zip(writes, statuses).filter { $1 == FFH_PATCH_DONE }.map(\.0), mappedPages: 3)
    }

    /// In a process of its own: a mapping made by another test's thread (or the runtime's)
    /// can take the unmapped page between the unmapping and the batch, and the writes meant to
    /// find it unmapped then land in that mapping.
    @Test func aWindowRunningIntoUnmappedMemoryGoesRequestByRequest() async {
        await #expect(processExitsWith: .success) {
            guard let pages = try? Pages(unmapThird: true) else { exit(2) }
            let writes = [
                Write(offset: 4000, length: 5), Write(offset: 8000, length: 5), Write(offset: 8190, length: 5),
                Write(offset: 8300, length: 5), Write(offset: 8200, length: 5),
            ]
            let statuses = PatchWindowTests().run(writes, on: pages)
            // 4000 is alone (8000 is too far for its window); the window from 8000 to 8305 reads
            // short: 8000 is written, 8190 runs into the unmapped page, 8300 lies in it; 8200
            // comes out of address order and is alone.
            if statuses != expected(.done, .done, .unmapped, .unmapped, .unmapped) { exit(3) }
            let differences = PatchWindowTests().differences(pages, done: [writes[0], writes[1]], mappedPages: 2)
            exit(differences == 0 ? 0 : 4)
        }
    }

    @Test func requestsOutOfOrderOrOverlappingAreEachWrittenAlone() throws {
        let pages = try Pages(unmapThird: false)
        let writes = [
            Write(offset: 300, length: 5), Write(offset: 200, length: 5),
            // Overlaps the one before: it finds that one's bytes, not the pattern.
            Write(offset: 202, length: 5), Write(offset: 400, length: 5),
        ]
        let statuses = run(writes, on: pages)
        #expect(statuses == expected(.done, .done, .changed, .done))
        check(pages, done: [writes[0], writes[1], writes[3]], mappedPages: 3)
    }
}

/// The statuses named.
private func expected(_ names: Expected...) -> [ffh_patch_status] { names.map(\.status) }

/// Names for statuses in expectations.
private enum Expected {
    case done, changed, unmapped
    var status: ffh_patch_status {
        switch self {
        case .done: FFH_PATCH_DONE
        case .changed: FFH_PATCH_CHANGED
        case .unmapped: FFH_PATCH_UNMAPPED
        }
    }
}
