import CFFIHookPatch
import FFIHook
import Foundation
import Synchronization
import Testing

@testable import FFIHookInline

#if canImport(Glibc)
    import Glibc
#endif

/// The writer of fresh code (``ffh_patch_write_code``) in a run of writes
/// (``ffh_patch_code_writes_begin``), which keeps one descriptor of `/proc/self/mem` for the
/// thread that began it: every write lands in read-and-execute memory, the descriptor goes
/// with the run's end, and a descriptor the program closed and gave to another file is neither
/// written to nor closed.
@Suite struct CodeWriterTests {
    /// Whether `descriptor` is open on this process's memory (`/proc/<pid>/mem`).
    static func isMemory(_ descriptor: Int) -> Bool {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)"))
            == "/proc/\(getpid())/mem"
    }

    /// Begins a run that this thread owns, with its descriptor, waiting while another test's
    /// planning owns one (up to 10 s); nil when none came.
    static func beginOwnRun() -> Int? {
        for _ in 0..<10_000 {
            let descriptor = ffh_patch_code_writes_begin()
            if descriptor >= 0 { return descriptor }
            ffh_patch_code_writes_end()
            usleep(1000)
        }
        return nil
    }

    /// A page mapped read-and-execute, as the library maps code.
    static func withCodePage(_ body: (UnsafeMutableRawPointer, Int) throws -> Void) throws {
        let size = Int(sysconf(Int32(_SC_PAGESIZE)))
        let page = try #require(mmap(nil, size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        #expect(page != MAP_FAILED)
        defer { munmap(page, size) }
        try body(page, size)
    }

    /// Writes `bytes` at `offset` of `page`; whether the write succeeded and the bytes are there.
    static func write(_ bytes: [UInt8], at offset: Int, of page: UnsafeMutableRawPointer, size: Int) -> Bool {
        let status = bytes.withUnsafeBytes { ffh_patch_write_code(page + offset, $0.baseAddress, $0.count, page, size) }
        return status == 0
            && (0..<bytes.count).allSatisfy { page.load(fromByteOffset: offset + $0, as: UInt8.self) == bytes[$0] }
    }

    @Test func writesInARunLandAndTheRunClosesItsDescriptor() throws {
        try Self.withCodePage { page, size in
            let kept = try #require(Self.beginOwnRun())
            #expect(Self.isMemory(kept))
            // Nested runs of the same thread share it.
            #expect(ffh_patch_code_writes_begin() == kept)
            for index in 0..<64 {
                #expect(Self.write([0xC3, UInt8(index)], at: index * 2, of: page, size: size))
            }
            ffh_patch_code_writes_end()
            #expect(Self.isMemory(kept))
            #expect(Self.write([0x90], at: 200, of: page, size: size))
            ffh_patch_code_writes_end()
            #expect(!Self.isMemory(kept))
            // Without a run, as before.
            #expect(Self.write([0xCC], at: 300, of: page, size: size))
        }
    }

    @Test func aDescriptorTheProgramReusedIsNotWrittenTo() throws {
        try Self.withCodePage { page, size in
            let kept = try #require(Self.beginOwnRun())
            // The program closes the run's descriptor and a file of its own takes the number.
            // (A file in memory: a write at the code's address, far past its end, would land.)
            let path = "/dev/shm/code-writer-\(getpid())"
            let file = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
            unlink(path)
            #expect(file >= 0)
            #expect(dup2(file, Int32(kept)) == Int32(kept))
            close(file)
            #expect(Self.write([0xC3, 0x90, 0x90], at: 0, of: page, size: size))
            var status = stat()
            #expect(fstat(Int32(kept), &status) == 0)
            #expect(status.st_size == 0, "the code went into the program's file")
            // The run's end leaves the program's descriptor open.
            ffh_patch_code_writes_end()
            #expect(fcntl(Int32(kept), F_GETFD) >= 0)
            close(Int32(kept))
        }
    }

    /// A child forked during its parent's run takes the run over with a descriptor of its own
    /// memory, and closes the one it inherited (its parent's memory): its writes land in its
    /// own copy of the page, never in the parent's.
    @Test func aChildForkedDuringARunWritesItsOwnMemory() throws {
        try Self.withCodePage { page, size in
            let kept = try #require(Self.beginOwnRun())
            defer { ffh_patch_code_writes_end() }
            let child = fork()
            if child == 0 {
                // (C calls only, in the child.)
                let own = ffh_patch_code_writes_begin()
                let inheritedClosed = own == kept || fcntl(Int32(kept), F_GETFD) < 0
                var bytes: (UInt8, UInt8) = (0xC3, 0x90)
                let status = ffh_patch_write_code(page + 16, &bytes, 2, page, size)
                let landed = page.load(fromByteOffset: 16, as: UInt8.self) == 0xC3
                ffh_patch_code_writes_end()
                _exit(own >= 0 && inheritedClosed && status == 0 && landed ? 0 : 1)
            }
            #expect(child > 0)
            var status: Int32 = 0
            #expect(waitpid(child, &status, 0) == child)
            #expect(status == 0, "the child's run: wait status \(status)")
            #expect(page.load(fromByteOffset: 16, as: UInt8.self) == 0, "the child wrote into its parent's memory")
        }
    }

    @Test func anotherThreadsWritesDuringARunLand() throws {
        try Self.withCodePage { page, size in
            _ = try #require(Self.beginOwnRun())
            defer { ffh_patch_code_writes_end() }
            let address = UInt(bitPattern: page)
            let written = Thread.detachNewThreadAndWait {
                let page = UnsafeMutableRawPointer(bitPattern: address)!
                // Not this thread's run: its writes open their own descriptor.
                let descriptor = ffh_patch_code_writes_begin()
                defer { ffh_patch_code_writes_end() }
                return descriptor == -1 && Self.write([0xC3, 0xCC], at: 64, of: page, size: size)
            }
            #expect(written)
            #expect(Self.write([0x90], at: 128, of: page, size: size))
        }
    }
}

extension Thread {
    /// Runs `body` on a new thread and returns what it returned.
    fileprivate static func detachNewThreadAndWait<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: T?
        Thread.detachNewThread {
            result = body()
            done.signal()
        }
        done.wait()
        return result!
    }
}

/// A slab's plans added while the planner defers its writes (``CodeSlab/deferWrites()``): their
/// code goes in with one write at the pass's end and they are published then; a plan whose
/// code cannot be written is named, and never found again.
@Suite struct CodeSlabDeferredWriteTests {
    @Test func aPassWritesItsPlansAtOnceAndForgetsThoseItCouldNotWrite() throws {
        let near = UInt(bitPattern: dlsym(dlopen(nil, RTLD_NOW), "main"))
        let slab = try #require(CodeSlab.map(plans: 8, near: near...near, mappings: MemoryMapping.all()))
        defer { munmap(UnsafeMutableRawPointer(bitPattern: slab.base), slab.codeSize + slab.capacity * 8) }
        func record(_ function: UInt) -> PlanRecord {
            var record = PlanRecord()
            record.function = function
            return record
        }
        func byte(_ address: UInt) -> UInt8 { UnsafePointer<UInt8>(bitPattern: address)!.pointee }

        slab.deferWrites()
        let first = try #require(slab.add(record(0x1000), trampoline: [0x90, 0xC3]))
        let second = try #require(slab.add(record(0x2000), trampoline: [0xC3]))
        // Planned and found, but not written nor published yet.
        #expect(slab.plan(of: 0x1000) == first)
        #expect(slab.publishedCount.load(ordering: .acquiring) == 0)
        #expect(byte(slab.stub(first)) == 0)
        #expect(slab.writePending().isEmpty)
        #expect(slab.publishedCount.load(ordering: .acquiring) == 2)
        // Each stub (jmp [rip + disp32] to its cell, then int3 padding) and trampoline is there.
        for (index, trampoline) in [(first, [UInt8]([0x90, 0xC3])), (second, [0xC3])] {
            #expect(byte(slab.stub(index)) == 0xFF && byte(slab.stub(index) + 1) == 0x25)
            #expect(trampoline.indices.allSatisfy { byte(slab.trampoline(index) + UInt($0)) == trampoline[$0] })
        }

        // A pass whose code cannot go in (the mapping is gone): its plan is named and forgotten;
        // the plans written before stay.
        slab.deferWrites()
        let lost = try #require(slab.add(record(0x3000), trampoline: [0xC3]))
        #expect(munmap(UnsafeMutableRawPointer(bitPattern: slab.base), slab.codeSize) == 0)
        #expect(slab.writePending() == [lost])
        #expect(slab.plan(of: 0x3000) == nil)
        #expect(slab.plan(of: 0x2000) == second)
    }
}
