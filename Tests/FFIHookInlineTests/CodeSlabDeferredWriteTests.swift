import FFIHook
import Testing

@testable import FFIHookInline

#if canImport(Glibc)
    import Glibc
#endif

/// A slab's plans added while the planner defers its writes (``CodeSlab/deferWrites()``): their
/// code goes in with one write at the pass's end and they are published then; a plan whose
/// code cannot be written is named, and never found again.
@Suite struct CodeSlabDeferredWriteTests {
    /// In a process of its own: the test unmaps the slab's code, and any thread's next mapping
    /// could fill that hole (the write meant to fail would then land in it).
    @Test func aPassWritesItsPlansAtOnceAndForgetsThoseItCouldNotWrite() async {
        await #expect(processExitsWith: .success) { try CodeSlabDeferredWriteTests.writeAPass() }
    }

    static func writeAPass() throws {
        let near = UInt(bitPattern: dlsym(dlopen(nil, RTLD_NOW), "main"))
        let slab = try #require(CodeSlab.map(plans: 8, near: near...near, mappings: MemoryMapping.all()))
        // (The code is unmapped below; its cells at the end.)
        defer { munmap(UnsafeMutableRawPointer(bitPattern: slab.base + UInt(slab.codeSize)), slab.capacity * 8) }
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
