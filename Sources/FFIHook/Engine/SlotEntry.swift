internal import CFFI
internal import CFFIHookSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The hook state of one function-pointer slot while it has hooks: its current hooks and
/// what the call path needs to run them.
///
/// One entry serves every hook of a slot, through the slot's closure, whose slot record
/// (``ffh_slot``) points at the entry. The call path marks its thread inside a
/// call (see ``ThreadState``), reads the entry from the record and the current
/// ``HookSnapshot`` from the entry with one atomic load each, so it takes no lock and
/// allocates nothing. Writers (the registry, under its lock) publish new snapshots and hand
/// the old ones to the registry, which frees them once no call can still read them.
///
/// When the last hook goes, the record's entry is cleared and the entry is freed the same
/// way: the closure, which may still be reached by a thread that read the slot just before
/// the original was written back, or by another library that chained to it, stays valid as
/// a pass-through to the original. Hooking the same slot again makes a new entry for the
/// same closure.
@usableFromInline
package final class SlotEntry: @unchecked Sendable {
    // Sendable: the stored properties are set in init, before the entry is shared, except
    // `readOnlyProtection` and `fallback`, which are only touched under the registry's lock.

    /// The slot's address.
    package let slot: UnsafeMutableRawPointer
    /// The call interface of the slot's signature (shared, interned).
    let interface: CallInterface
    /// The slot's closure, its code address and its slot record.
    let cell: ClosurePool.Cell
    let code: UInt
    let record: UnsafeMutablePointer<ffh_slot>
    /// The slot record's plan: set when the closure enters through the library's own entry,
    /// whose calls reach the original with their registers as they arrived.
    let entryPlan: UnsafeRawPointer?
    /// The published snapshot, retained once on behalf of the call path.
    private let current = Atomic<UnsafeRawPointer?>(nil)
    /// The function the hooks wrap (0 for a NULL slot that an instead hook filled). Set
    /// under the registry's lock before the entry is published in its slot record, whose
    /// release store orders it for the call path; changed after only by a replacement (a
    /// function's address: a call that reads either value reaches a function that exists).
    private let originalFunction = Atomic<UInt>(0)
    /// The resolver registered for the original (see ``OriginalResolvers``), set with it: a
    /// call whose original is the resolver's trampoline calls what the resolver returns
    /// instead. A call that reads an original and a resolver set at different times sees
    /// that the resolver's code is not its original and calls the original.
    private let originalResolver = Atomic<UnsafeRawPointer?>(nil)
    /// The protection to restore after writing the slot, when its page is read-only; set
    /// once, under the registry's lock, when the entry is made.
    var readOnlyProtection: SlotMemory.Protection?
    /// The fallback that became the original of a slot that held NULL (0 when the slot held
    /// a function): the slot gets NULL back, not the fallback, when the last hook goes. Only
    /// touched under the registry's lock.
    var fallback: UInt = 0
    /// Whether the slot lay in a loaded object as the entry was made (``ffh_elf_in_object``):
    /// where it no longer does, the object was unloaded (see the registry's removal).
    let inObject: Bool
    /// `interface` without reference counting, for the call path: a retain there would be a
    /// write to memory every calling thread shares. `interface` keeps it alive.
    fileprivate let callPathInterface: Unmanaged<CallInterface>
    /// Whether calls are marked by the function they reach rather than by the slot.
    let reentryByFunction: Bool
    /// What marks the slot in a thread's record for a call that reaches `original`: the slot
    /// record's address, which stays the same across the entries a slot gets as its hooks go
    /// and come back, so a block's call back into the slot is known as re-entry even when the
    /// slot's hooks changed meanwhile; or, for an entry made with `reentryByFunction`, the
    /// original function's address, which every import-table entry of a symbol shares (code
    /// addresses never equal a slot record's, which lives in closure memory).
    @inline(__always)
    func mark(for original: UInt, arguments: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> UInt {
        if reentryByReceiver, let receiver = arguments[0] {
            return UInt(bitPattern: record) ^ receiver.load(as: UInt.self)
        }
        return reentryByFunction && original != 0 ? original : UInt(bitPattern: record)
    }
    /// Whether calls are marked by the slot and the first argument's word together (the
    /// receiver of a method whose hooks each run for one object only): a block's message to
    /// another object of the class is then not re-entry, while one to its own object is.
    let reentryByReceiver: Bool
    /// The sizes the call path checks typed access against, without reference counting:
    /// each argument's size (a pointer's for an array), the return size (-1 for void), and
    /// how a result narrower than a word is stored.
    let argumentSizes: UnsafeMutableBufferPointer<Int>
    let returnSize: Int
    @usableFromInline let returnWidening: ReturnWidening

    init(
        slot: UnsafeMutableRawPointer, interface: CallInterface, cell: ClosurePool.Cell, code: UInt,
        record: UnsafeMutablePointer<ffh_slot>, reentryByFunction: Bool = false, reentryByReceiver: Bool = false
    ) {
        self.reentryByReceiver = reentryByReceiver
        self.slot = slot
        self.inObject = ffh_elf_in_object(slot) == 1
        self.reentryByFunction = reentryByFunction
        // A closure reused from a slot's earlier entry passes calls through to the original
        // it had; an install that takes the slot over sets the one it finds.
        let state = ffh_slot_state(record)
        if state & Self.hookedBit == 0 {
            let resolver = OriginalResolvers.resolver(for: state, entersDirectly: record.pointee.plan != nil)
            originalFunction.store(state, ordering: .relaxed)
            originalResolver.store(resolver, ordering: .relaxed)
            ffh_slot_set_original(record, state, resolver)
        }
        self.interface = interface
        self.cell = cell
        self.code = code
        self.record = record
        self.entryPlan = record.pointee.plan
        self.callPathInterface = Unmanaged.passUnretained(interface)
        let returnType = interface.signature.returnType
        returnWidening = ReturnWidening(returnType)
        returnSize = returnType.isVoid ? -1 : returnType.size
        let sizes = interface.signature.argumentTypes.map { type in
            if case .array = type.kind { MemoryLayout<UnsafeRawPointer>.size } else { type.size }
        }
        argumentSizes = .allocate(capacity: sizes.count)
        _ = argumentSizes.initialize(from: sizes)
        current.store(Unmanaged.passRetained(HookSnapshot()).toOpaque(), ordering: .releasing)
        ffh_slot_set_fast(record, nil)
    }

    deinit {
        argumentSizes.deallocate()
        if let raw = current.load(ordering: .acquiring) {
            Unmanaged<HookSnapshot>.fromOpaque(raw).release()
        }
    }

    /// The function the hooks wrap (0 for a NULL slot that an instead hook filled).
    var original: UInt { originalFunction.load(ordering: .relaxed) }

    /// Sets the function the hooks wrap: before the entry is published, or later, under the
    /// registry's lock, when a replacement goes in under the hooks or comes out (calls in
    /// flight finish with the function they read).
    func setOriginal(_ function: UInt) {
        let resolver = OriginalResolvers.resolver(for: function, entersDirectly: entryPlan != nil)
        originalResolver.store(resolver, ordering: .relaxed)
        originalFunction.store(function, ordering: .relaxed)
        ffh_slot_set_original(record, function, resolver)
    }

    /// The function a call reaches for `original`, read as the call started: what the
    /// original's resolver returns for the call's arguments, when it has one (asked as the
    /// original is called, as the resolver's trampoline would).
    @inline(__always)
    func function(
        for original: UInt, arguments: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> UInt {
        guard let resolver = originalResolver.load(ordering: .relaxed) else { return original }
        return Self.resolve(original, with: resolver, arguments: arguments)
    }

    /// The resolver's choice for a call, out of the call path's line (only per-instance
    /// Objective-C hooks have resolvers).
    @inline(never)
    private static func resolve(
        _ original: UInt, with raw: UnsafeRawPointer, arguments: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> UInt {
        let resolver = raw.assumingMemoryBound(to: ffh_original_resolver.self)
        guard resolver.pointee.code == original else { return original }
        // Never NULL in a registered resolver.
        return resolver.pointee.resolve.unsafelyUnwrapped(resolver.pointee.context, arguments)
    }

    /// The bit of a slot record's state that says it holds an entry.
    static let hookedBit = UInt(FFH_SLOT_HOOKED)

    /// What the entry's slot record holds while the entry is published there.
    var publishedState: UInt { UInt(bitPattern: Unmanaged.passUnretained(self).toOpaque()) | Self.hookedBit }

    /// The signature of the slot.
    var signature: Signature { interface.signature }

    /// Points the C closure handler at ``slotEntryDispatch``, and sets up its own path for plain
    /// before and after blocks (``blocksCalledFromC``), once, before the first closure.
    static let handlerReady: Void = {
        _ = blocksCalledFromC
        ffh_handler_setup(slotEntryDispatch, ThreadState.usesMembarrier ? 0 : 1, ThreadState.marksCallPath ? 1 : 0)
    }()

    /// Whether the C call path calls blocks itself (``ffh_fast_hooks/beforeBlocks``): a block is
    /// a function and a context, which C calls as Swift calls a closure (`swiftcall`), with an
    /// invocation it lays out as Swift does (``ffh_invocation``). Both are this compiler's
    /// choices, not promises, so a probe block is called that way first, and must read back
    /// every field it was given, with both positions (whose bytes C writes as constants,
    /// `FFH_POSITION_BEFORE` and `FFH_POSITION_AFTER`); otherwise C calls blocks through
    /// ``fastBlock``, a Swift function that makes each invocation (about 20 instructions more
    /// a block). Sets up the C path's block functions, once.
    static let blocksCalledFromC: Bool = {
        ffh_fast_setup(fastBlock, fastBlocks)
        let before = UInt8(FFH_POSITION_BEFORE)
        let after = UInt8(FFH_POSITION_AFTER)
        return unsafeBitCast(HookPosition.before, to: UInt8.self) == before
            && unsafeBitCast(HookPosition.after, to: UInt8.self) == after
            && CProbe.passes(before: before, after: after)
    }()

    /// `block`'s two words, as its function takes its arguments where the type says (a
    /// closure handed to a generic function directly, as to `unsafeBitCast`, is first wrapped
    /// in a thunk that takes them as a generic function's values; one in a struct is not).
    static func swiftBlock(_ block: @escaping HookRecord.Block) -> ffh_swift_block {
        struct Words { let block: HookRecord.Block }
        let (function, context) = unsafeBitCast(Words(block: block), to: (UnsafeRawPointer?, UnsafeRawPointer?).self)
        return ffh_swift_block(
            function: function, context: context, kind: UInt8(FFH_SWIFT_BLOCK_INVOCATION.rawValue), arity: 0,
            resultSize: 0, resultWidth: 0, resultSigned: 0)
    }

    /// Whether the C call path calls typed blocks of fixed arity itself (``TypedDirect``), as it
    /// does other blocks (``blocksCalledFromC``, which this needs): probe blocks of two and six
    /// arguments, reading ones and ones that return a result, called that way must read every
    /// argument they were given, and the results they return must reach the result's place,
    /// a narrow one widened.
    static let typedBlocksCalledFromC: Bool = blocksCalledFromC && TypedProbe.passes()

    /// The probe of ``typedBlocksCalledFromC``.
    private final class TypedProbe: @unchecked Sendable {
        // Written by the probe blocks on this thread alone, read after their calls return.
        var seen: [Int64] = []

        static func passes() -> Bool {
            let probe = TypedProbe()
            let reading2 = TypedReading2<Int32, Int64> { a, b in probe.seen += [Int64(a), b] }
            let reading6 = TypedReading6<Int8, Int16, Int32, Int64, UInt8, Int64> { a, b, c, d, e, f in
                probe.seen += [Int64(a), Int64(b), Int64(c), d, Int64(e), f]
            }
            let result2 = TypedHolder<@Sendable (Int32, Int32, Int64) -> Int32> { result, a, b in
                probe.seen += [Int64(result), Int64(a), b]
                return result - a
            }
            let result6 = TypedHolder<@Sendable (Int64, Int8, Int16, Int32, Int64, UInt8, Int64) -> Int64> {
                result, a, b, c, d, e, f in
                probe.seen += [result, Int64(a), Int64(b), Int64(c), d, Int64(e), f]
                return result + f
            }
            // Argument words with something in the bytes above each value's, as a register
            // carries them.
            var words: [UInt64] = [
                0xAAAA_AAAA_FFFF_FFF9, 0x0000_0000_0000_1234, 0xAAAA_AAAA_AAAA_FF85, 0xAAAA_AAAA_AAAA_8001,
                0xAAAA_AAAA_8000_0002, 0x7000_0000_0000_0003, 0xAAAA_AAAA_AAAA_AAFE, 0xFFFF_FFFF_FFFF_FFFE,
            ]
            return words.withUnsafeMutableBufferPointer { words in
                let base = UnsafeMutableRawPointer(words.baseAddress!)
                var arguments: [UnsafeMutableRawPointer?] = (0..<8).map { base + 8 * $0 }
                var result: UInt64 = 0
                return arguments.withUnsafeMutableBufferPointer { list in
                    withUnsafeMutablePointer(to: &result) { result in
                        func call(_ direct: TypedDirect?, list offset: Int, width: Int, signed: Bool) {
                            guard let direct else { return }
                            var block = direct.block(
                                widening: ReturnWidening(width: width, isSigned: signed))
                            var invocation = ffh_invocation(
                                record: nil, entry: nil, returnValue: UnsafeMutableRawPointer(result),
                                arguments: list.baseAddress! + offset, thread: nil, position: 0, insteadIndex: -1)
                            ffh_swift_block_call(&block, &invocation)
                        }
                        call(TypedDirect(reading: reading2, arity: 2), list: 0, width: 0, signed: false)
                        call(TypedDirect(reading: reading6, arity: 6), list: 2, width: 0, signed: false)
                        // The result as the original left it: -5, widened.
                        result.pointee = UInt64(bitPattern: -5)
                        call(
                            TypedDirect(result: result2, arity: 2, resultSize: 4), list: 0, width: 32, signed: true)
                        let narrow = result.pointee
                        result.pointee = 1 << 40
                        call(
                            TypedDirect(result: result6, arity: 6, resultSize: 8), list: 2, width: 0, signed: false)
                        let wide = result.pointee
                        let expected: [Int64] = [
                            -7, 0x1234, -123, -32767, -2_147_483_646, 0x7000_0000_0000_0003, 254, -2,
                            -5, -7, 0x1234,
                            1 << 40, -123, -32767, -2_147_483_646, 0x7000_0000_0000_0003, 254, -2,
                        ]
                        return withExtendedLifetime((reading2, reading6, result2, result6)) {
                            probe.seen == expected && narrow == UInt64(bitPattern: 2) && wide == (1 << 40) - 2
                        }
                    }
                }
            }
        }
    }

    /// The probe of ``blocksCalledFromC``: what a block called from C read of its invocation.
    private final class CProbe: @unchecked Sendable {
        // Written by the probe block on this thread alone, read after its call returns.
        var words: [UInt] = []
        var positions: [HookPosition] = []

        static func passes(before: UInt8, after: UInt8) -> Bool {
            let probe = CProbe()
            let block: HookRecord.Block = { invocation in
                let frame = invocation.frame
                probe.words += [
                    UInt(bitPattern: frame.record), UInt(bitPattern: frame.unmanagedEntry.toOpaque()),
                    UInt(bitPattern: frame.returnValue), UInt(bitPattern: frame.arguments),
                    UInt(bitPattern: frame.threadRecord), UInt(bitPattern: invocation.insteadIndex),
                ]
                probe.positions.append(invocation.position)
            }
            // Distinct addresses no one reads: the probe only compares them.
            let given: [UInt] = [0x1_0000, 0x2_0000, 0x3_0000, 0x4_0000, 0x5_0000, UInt(bitPattern: -1)]
            func pointer<T>(_ index: Int) -> UnsafeMutablePointer<T> { UnsafeMutablePointer(bitPattern: given[index])! }
            var function = swiftBlock(block)
            for position in [before, after] {
                var invocation = ffh_invocation(
                    record: UnsafePointer(pointer(0) as UnsafeMutablePointer<ffh_fast_call>),
                    entry: UnsafeRawPointer(bitPattern: given[1]),
                    returnValue: UnsafeMutableRawPointer(bitPattern: given[2]),
                    arguments: pointer(3), thread: pointer(4), position: position, insteadIndex: -1)
                ffh_swift_block_call(&function, &invocation)
            }
            return withExtendedLifetime(block) { probe.words == given + given && probe.positions == [.before, .after] }
        }
    }

    // MARK: - Writers (registry lock held)

    /// The snapshot writers start from.
    var snapshot: HookSnapshot {
        Unmanaged<HookSnapshot>.fromOpaque(current.load(ordering: .acquiring)!).takeUnretainedValue()
    }

    /// Publishes `snapshot`; returns the one it replaces, which calls may still be reading.
    /// The C call path's view (``HookSnapshot/fast``) changes first: a call that starts after
    /// the old snapshot is retired reads the new one's, or none.
    func publish(_ snapshot: HookSnapshot) -> HookSnapshot {
        ffh_slot_set_fast(record, snapshot.fast)
        let new = Unmanaged.passRetained(snapshot).toOpaque()
        let old = current.exchange(new, ordering: .sequentiallyConsistent)!
        return Unmanaged<HookSnapshot>.fromOpaque(old).takeRetainedValue()
    }

    // MARK: - Call path

    /// Runs one call through the closure; `thread` is the caller's record, which the C
    /// handler has marked inside a call (nil when no record could be had: then the call goes
    /// straight to the original and reads nothing that reclamation frees).
    @inline(__always)
    func dispatch(
        returnValue: UnsafeMutableRawPointer?, arguments: UnsafeMutablePointer<UnsafeMutableRawPointer?>,
        thread: UnsafeMutablePointer<ffh_thread>
    ) {
        let raw = current.load(ordering: .acquiring)!
        Unmanaged<HookSnapshot>.fromOpaque(raw)._withUnsafeGuaranteedRef { snapshot in
            run(snapshot, record: thread, returnValue: returnValue, arguments: arguments)
        }
    }

    private func run(
        _ snapshot: HookSnapshot, record: UnsafeMutablePointer<ffh_thread>,
        returnValue: UnsafeMutableRawPointer?,
        arguments: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) {
        if let table = snapshot.receiverTable {
            // Hooks for several receivers: the snapshot of this call's receiver.
            let receiver = arguments[0].unsafelyUnwrapped.load(as: UInt.self)
            snapshot.chosen(for: receiver, in: table)._withUnsafeGuaranteedRef { chosen in
                run(chosen, record: record, returnValue: returnValue, arguments: arguments)
            }
            return
        }
        // Read once: a replacement may change the original while the call runs.
        let original = original
        if snapshot.isEmpty {
            let function = function(for: original, arguments: arguments)
            callPathInterface._withUnsafeGuaranteedRef { interface in
                interface.callOriginal(
                    function, returnValue: returnValue, arguments: arguments, entryPlan: entryPlan, thread: record)
            }
            return
        }
        let mark = mark(for: original, arguments: arguments)
        let reentered = ffh_thread_is_marked(record, mark) != 0
        let marked = ffh_thread_mark(record, mark) != 0
        defer { if marked { ffh_thread_unmark(record) } }
        var call = ffh_fast_call(
            entry: UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque()),
            snapshot: UnsafeRawPointer(Unmanaged.passUnretained(snapshot).toOpaque()), original: original, mark: mark,
            returnValue: returnValue, arguments: arguments, thread: record, marked: marked ? 1 : 0,
            reentered: reentered ? 1 : 0)
        withUnsafeMutablePointer(to: &call) { CallFrame(call: $0).runHooks() }
    }
}

extension CallFrame {
    /// Runs the blocks of the call's snapshot and the original (the Swift dispatch).
    @inline(__always)
    fileprivate func runHooks() {
        unmanagedSnapshot._withUnsafeGuaranteedRef { runHooks(of: $0) }
    }

    @inline(__always)
    private func runHooks(of snapshot: HookSnapshot) {
        let frame = self
        for hook in snapshot.before {
            hook._withUnsafeGuaranteedRef { hook in
                guard frame.claim(hook) else { return }
                frame.runBlock(hook.block, Invocation(frame: frame, position: .before, insteadIndex: -1))
                frame.finish(hook)
            }
        }
        if snapshot.instead.isEmpty {
            frame.callOriginalUnmarked()
        } else {
            frame.proceed(after: -1)
        }
        for hook in snapshot.after {
            hook._withUnsafeGuaranteedRef { hook in
                guard frame.claim(hook) else { return }
                frame.runBlock(hook.block, Invocation(frame: frame, position: .after, insteadIndex: -1))
                frame.finish(hook)
            }
        }
    }
}

/// The state of one dispatch, shared by the invocations of its blocks: what the call read
/// once as it started, and the entry, whose fixed facts (interface, sizes) it reads where
/// they are rather than copying them.
///
/// Five words: the address of the call's record (an `ffh_fast_call`), which the C call path
/// fills as it starts a call and the Swift dispatch on its own stack, and which outlives every
/// invocation made from it; and the record's fields that blocks read most, and that code
/// which runs inside a block reads. An invocation is made for each block, so a frame of every
/// field, ten words, was most of the work a no-op block cost. (More than four words: frames
/// and invocations are passed by address, so an unoptimised build's accessors make no zeroed
/// copy of them, through `memset`, a function a program may have hooked, inside a block.)
@usableFromInline
struct CallFrame {
    /// The record (`ffh_fast_call`).
    let record: UnsafePointer<ffh_fast_call>
    /// The entry without reference counting (the dispatch keeps it alive): a retain on the
    /// call path is a write to memory every calling thread shares.
    @usableFromInline let unmanagedEntry: Unmanaged<SlotEntry>
    /// The call's return-value buffer and argument list, as libffi gives them to the handler
    /// (read inline by typed blocks, in the module that installs them).
    @usableFromInline let returnValue: UnsafeMutableRawPointer?
    @usableFromInline let arguments: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    /// This thread's record of active entries.
    let threadRecord: UnsafeMutablePointer<ffh_thread>

    init(call: UnsafePointer<ffh_fast_call>) {
        record = call
        unmanagedEntry = Unmanaged.fromOpaque(call.pointee.entry.unsafelyUnwrapped)
        returnValue = call.pointee.returnValue
        arguments = call.pointee.arguments.unsafelyUnwrapped
        threadRecord = call.pointee.thread.unsafelyUnwrapped
    }

    /// The snapshot, as the entry (see above).
    var unmanagedSnapshot: Unmanaged<HookSnapshot> { Unmanaged.fromOpaque(record.pointee.snapshot.unsafelyUnwrapped) }
    /// The original the call reaches, read once as it started (a replacement may change
    /// the entry's meanwhile).
    var original: UInt { record.pointee.original }
    /// What marks the slot in the thread's record for this call (see ``SlotEntry/mark(for:)``).
    var mark: UInt { record.pointee.mark }
    /// Whether this call came from inside a block of the same slot on this thread.
    var reentered: Bool { record.pointee.reentered != 0 }
    /// Whether this dispatch marked the thread (and must unmark it around the original).
    var marked: Bool { record.pointee.marked != 0 }

    /// The call interface of the slot's signature, without reference counting.
    var interface: Unmanaged<CallInterface> { unmanagedEntry._withUnsafeGuaranteedRef { $0.callPathInterface } }
    /// The checks' sizes (see ``SlotEntry/argumentSizes``).
    var argumentSizes: UnsafeMutableBufferPointer<Int> {
        unmanagedEntry._withUnsafeGuaranteedRef { $0.argumentSizes }
    }
    var returnSize: Int { unmanagedEntry._withUnsafeGuaranteedRef { $0.returnSize } }
    @inlinable
    var returnWidening: ReturnWidening { unmanagedEntry._withUnsafeGuaranteedRef { $0.returnWidening } }

    /// Whether `hook` runs in this call; claims a `once` hook's single run.
    @inline(__always)
    func claim(_ hook: HookRecord) -> Bool {
        if reentered && !hook.allowsReentry { return false }
        // A hook for one receiver is only ever installed on a method, whose first argument
        // is the receiver.
        if hook.receiver != 0 && arguments[0].unsafelyUnwrapped.load(as: UInt.self) != hook.receiver {
            return false
        }
        if hook.isLimited && !hook.limit.matchesCaller() { return false }
        if hook.options.contains(.once) {
            return hook.fired.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing)
                .exchanged
        }
        return true
    }

    /// Removes a `once` hook after its run.
    @inline(__always)
    func finish(_ hook: HookRecord) {
        if hook.options.contains(.once) { SlotRegistry.shared.removeAfterRun(hook) }
    }

    /// The entry, for code off the call path (invocations' checks).
    var entry: SlotEntry { unmanagedEntry.takeUnretainedValue() }

    /// The index of the next instead block to run after `index`, if any.
    @inline(__always)
    func nextInstead(after index: Int) -> Int? {
        let instead = unmanagedSnapshot._withUnsafeGuaranteedRef { $0.instead }
        var next = index + 1
        while next < instead.count {
            if instead[next]._withUnsafeGuaranteedRef({ claim($0) }) { return next }
            next += 1
        }
        return nil
    }

    /// Continues the call inward from the instead block at `index` (-1 from outside them):
    /// runs the next instead block that takes part in the call, or the original. Runs as
    /// the library's own code (``ffh_thread/busy``) and leaves the thread so. The
    /// outermost instead block starts from a zero result, which stands if no block sets one.
    func proceed(after index: Int) {
        if let next = nextInstead(after: index) {
            if index < 0 { interface._withUnsafeGuaranteedRef { $0.zeroResult(returnValue) } }
            runInstead(next)
        } else {
            callOriginalUnmarked()
        }
    }

    /// Runs a block with the thread out of the library's own code (``ffh_thread/busy``) for
    /// the block's length alone, where the call path is marked (``ThreadState/marksCallPath``):
    /// the block and its invocation are made before, so that what the thread runs unmarked
    /// is the program's code.
    @inline(__always)
    func runBlock(_ block: HookRecord.Block, _ invocation: consuming Invocation) {
        #if DEBUG
            ffh_thread_set_busy(threadRecord, 0)
            block(invocation)
            ffh_thread_set_busy(threadRecord, 1)
        #else
            block(invocation)
        #endif
    }

    /// Runs the instead block at `index`; ``Invocation/callOriginal()`` continues inward.
    func runInstead(_ index: Int) {
        let instead = unmanagedSnapshot._withUnsafeGuaranteedRef { $0.instead }
        instead[index]._withUnsafeGuaranteedRef { hook in
            runBlock(hook.block, Invocation(frame: self, position: .instead, insteadIndex: index))
            finish(hook)
        }
    }

    /// Calls the original with this thread's mark lifted, so calls the original makes
    /// through the slot run the blocks again.
    @inline(__always)
    func callOriginalUnmarked() {
        if marked { ffh_thread_unmark(threadRecord) }
        let (entryPlan, function) = unmanagedEntry._withUnsafeGuaranteedRef {
            ($0.entryPlan, $0.function(for: original, arguments: arguments))
        }
        interface._withUnsafeGuaranteedRef { interface in
            interface.callOriginal(
                function, returnValue: returnValue, arguments: arguments, entryPlan: entryPlan, thread: threadRecord)
        }
        if marked { _ = ffh_thread_mark(threadRecord, mark) }
    }
}

/// Runs blocks for the C call path (``ffh_fast_hooks``) where it does not call them itself (see
/// ``SlotEntry/blocksCalledFromC``): the blocks of `count` records (unretained
/// ``HookRecord``s of the snapshot the call read), in order, each with an invocation of the call
/// as the Swift dispatch would make it. The hooks take part in every call, so there is nothing
/// to claim. ``fastBlock`` serves a position with one block, ``fastBlocks`` one with more.
let fastBlocks: ffh_fast_block = { records, count, call, after in
    let frame = CallFrame(call: call.unsafelyUnwrapped)
    let position: HookPosition = after != 0 ? .after : .before
    let records = records.unsafelyUnwrapped
    for index in 0..<Int(count) {
        Unmanaged<HookRecord>.fromOpaque(records[index].unsafelyUnwrapped)._withUnsafeGuaranteedRef { hook in
            frame.runBlock(hook.block, Invocation(frame: frame, position: position, insteadIndex: -1))
        }
    }
}

/// ``fastBlocks`` for one block: the record itself, so that the C function the compiler makes of
/// it uses every argument and is the function, not a thunk in front of it.
let fastBlock: ffh_fast_block_one = { record, call, after in
    let frame = CallFrame(call: call.unsafelyUnwrapped)
    Unmanaged<HookRecord>.fromOpaque(record.unsafelyUnwrapped)._withUnsafeGuaranteedRef { hook in
        frame.runBlock(
            hook.block, Invocation(frame: frame, position: after != 0 ? .after : .before, insteadIndex: -1))
    }
}

/// What the C handler calls for each call through a slot closure: `slot` is the closure's
/// slot record. A slot with hooks runs them through its entry; a slot whose hooks are gone,
/// or a call that got no thread record, passes straight through to the original, through
/// the interface the slot record holds.
let slotEntryDispatch: ffh_dispatch = { returnValue, arguments, slot, thread in
    let slot = slot!
    func entry(_ state: UInt) -> Unmanaged<SlotEntry> {
        Unmanaged<SlotEntry>.fromOpaque(UnsafeRawPointer(bitPattern: state & ~SlotEntry.hookedBit)!)
    }
    let function: UInt
    if let thread {
        let state = ffh_slot_state(slot)
        if state & SlotEntry.hookedBit != 0 {
            entry(state)._withUnsafeGuaranteedRef { entry in
                entry.dispatch(returnValue: returnValue, arguments: arguments!, thread: thread)
            }
            return
        }
        function = state
    } else {
        // No record marks this call inside: the count keeps an entry whose original it
        // reads from being freed meanwhile.
        let state = ffh_recordless_begin(slot)
        function = state & SlotEntry.hookedBit != 0 ? entry(state)._withUnsafeGuaranteedRef { $0.original } : state
        ffh_recordless_end()
    }
    // The original's resolver, when it has one (a function that reads its return address is
    // still called as from its caller, with the hooks gone or not yet there).
    let called = slot.pointee.plan == nil ? function : UInt(ffh_slot_function(slot, function, arguments))
    Unmanaged<CallInterface>.fromOpaque(slot.pointee.interface!)._withUnsafeGuaranteedRef { interface in
        interface.callOriginal(
            called, returnValue: returnValue, arguments: arguments!, entryPlan: slot.pointee.plan, thread: thread)
    }
}

/// Trampolines that look their target up on each call and jump there, each with what hooked
/// calls use in its place (``ffh_original_resolver``): a hook whose original is such a
/// trampoline calls the function it would have reached, without the trampoline's second
/// entry (saving and restoring every argument register once more). FFIHookObjC's forwarders
/// to a superclass's implementation, the original of each per-instance hook, are the ones
/// registered. Read and written off the call path only.
package enum OriginalResolvers {
    /// Taken across fork, after every other lock (inside it, only libffi's and the allocator's
    /// own locks are taken).
    private static let table: Locked<[UInt: UnsafeRawPointer]> = {
        let lock = Locked<[UInt: UnsafeRawPointer]>([:])
        lock.protectAcrossFork(rank: SlotRegistry.forkRank + 11)
        return lock
    }()

    /// Registers a resolver, which lives for the life of the process, for its trampoline.
    package static func register(_ resolver: UnsafeRawPointer) {
        let code = resolver.assumingMemoryBound(to: ffh_original_resolver.self).pointee.code
        table.withLock { $0[code] = resolver }
    }

    /// The resolver registered for `function`, if any; for a function that reads its return
    /// address (``ReadsReturnAddress``), one that has the hooked call's caller's object seen as
    /// its caller (`ffh_as_caller_resolver`), where the slot's closure enters by its register
    /// plan (`entersDirectly`: the resolver finds the caller above the entry's frame).
    static func resolver(for function: UInt, entersDirectly: Bool) -> UnsafeRawPointer? {
        guard function != 0 else { return nil }
        if let registered = table.withLock({ $0[function] }) { return registered }
        guard entersDirectly else { return nil }
        // The function itself, or an attach's stub in front of it (attached before the hook).
        var target = function
        for _ in 0..<4 {
            if ReadsReturnAddress.functions.contains(function: target) { return asCaller(function) }
            target = ffh_attach_stub_original(target)
            if target == 0 { break }
        }
        return nil
    }

    /// A resolver for `function` that has it called as from the hooked call's caller (its shim
    /// in code memory of its own), registered; nil without memory. Both live for the process:
    /// one per function (or attach stub in front of one) ever hooked so.
    private static func asCaller(_ function: UInt) -> UnsafeRawPointer? {
        if let registered = table.withLock({ $0[function] }) { return registered }
        var code: UnsafeMutableRawPointer?
        guard let writable = ffi_closure_alloc(Int(FFH_ENTRY_TRAMPOLINE_SIZE), &code), let code else { return nil }
        ffh_as_caller_write(writable, function)
        guard let made = ffh_as_caller_resolver(function, code) else {
            ffi_closure_free(writable)
            return nil
        }
        let resolver = UnsafeRawPointer(made)
        return table.withLock { table in
            if let registered = table[function] {
                ffi_closure_free(writable)
                free(UnsafeMutableRawPointer(mutating: resolver))
                return registered
            }
            table[function] = resolver
            return resolver
        }
    }
}
