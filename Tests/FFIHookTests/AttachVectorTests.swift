internal import CFFIHookSupport
import CTestSupport
import FFIHook
import Testing

/// Attach passes vector arguments and results on whole: a `__m256d` (ymm) or `__m512d` (zmm)
/// reaches the function, and its result the caller, with every lane as it was, though the
/// blocks run code that writes every lane of every vector register (as the C library's string
/// functions do on a machine with AVX, whose `vzeroupper` clears the upper lanes).
@Suite struct AttachVectorTests {
    /// In a process of its own: the test sets how wide the entries keep the registers (every
    /// width this machine has, and the xmm halves alone to see the lanes lost without the
    /// wider saves), which would change it under other tests' attached calls.
    @Test func wholeVectorArgumentsAndResultsPassThroughBlocksThatUseEveryLane() async {
        await #expect(processExitsWith: .success) { try AttachVectorTests.passVectorsWhole() }
    }

    static func passVectorsWhole() throws {
        // A machine without AVX has no lanes above the xmm registers' to lose.
        guard vf_has_avx() != 0 else { return }
        let widest = Int(ffh_attach_vector_width())
        #expect(widest == (vf_has_avx512() != 0 ? 64 : 32))
        #expect(vf_check256(20) == 0 && (vf_has_avx512() == 0 || vf_check512(20) == 0), "unhooked")
        for width in [64, 32] where width <= widest {
            #expect(Int(ffh_attach_set_vector_width(Int32(width))) == width)
            try passThroughBlocks(width: width)
        }
        // Without the wider saves, the blocks' code leaves its ones in every upper lane: the
        // check above can fail.
        #expect(ffh_attach_set_vector_width(16) == 16)
        let token = try Hook.attach(
            on: FunctionSlot(UnsafeMutableRawPointer(vf_slot256())), onEnter: { _ in vf_clobber() }, onLeave: nil)
        let wrong = vf_check256(20)
        #expect(wrong == 20, "the xmm halves alone: \(wrong) of 20 wrong")
        token.remove()
        ffh_attach_set_vector_width(Int32(widest))
    }

    /// Both blocks, an enter block alone and a leave block alone, each running code that writes
    /// every lane, on the `__m256d` function (and the `__m512d` one where the entries keep zmm).
    static func passThroughBlocks(width: Int) throws {
        let slots: [(String, UnsafeMutableRawPointer, (Int32) -> Int32)] =
            [("__m256d", UnsafeMutableRawPointer(vf_slot256()), vf_check256)]
            + (width == 64 ? [("__m512d", UnsafeMutableRawPointer(vf_slot512()), vf_check512)] : [])
        for (type, slot, check) in slots {
            let calls = Counter()
            var token = try Hook.attach(on: FunctionSlot(slot)) { _ in
                vf_clobber()
                calls.increment()
            } onLeave: { _ in
                vf_clobber()
                calls.increment()
            }
            #expect(check(20) == 0, "\(type), \(width)-byte saves: both blocks")
            token.remove()
            token = try Hook.attach(
                on: FunctionSlot(slot),
                onEnter: { _ in
                    vf_clobber()
                    calls.increment()
                }, onLeave: nil)
            #expect(check(20) == 0, "\(type), \(width)-byte saves: an enter block")
            token.remove()
            token = try Hook.attach(
                on: FunctionSlot(slot), onEnter: nil,
                onLeave: { _ in
                    vf_clobber()
                    calls.increment()
                })
            #expect(check(20) == 0, "\(type), \(width)-byte saves: a leave block")
            token.remove()
            #expect(calls.count == 80, "\(type), \(width)-byte saves: every block ran")
        }
    }
}
