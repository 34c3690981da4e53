internal import CFFI
import Synchronization

/// The hook state of one function-pointer slot: its closure, original and current hooks.
///
/// One entry (and one closure) serves every hook of a slot. The call path reads the
/// current ``HookSnapshot`` with one atomic load inside a ``CallEpoch`` registration, so it
/// takes no lock and allocates nothing. Writers (the registry, under its lock) publish new
/// snapshots and retire old ones, which are freed once the epoch shows no call can still
/// read them.
///
/// An entry lives as long as the process: after its last hook is removed the closure may
/// still be reached by a thread that read the slot just before the original was written
/// back, or by another library that chained to it, so it stays valid as a pass-through to
/// the original. Hooking the same slot again reuses it.
package final class SlotEntry: @unchecked Sendable {
    // Sendable: `closure` is set once during creation, before the entry is shared;
    // `retired` and `pendingDrain` are only touched under the registry's lock.

    /// The slot's address.
    package let slot: UnsafeMutableRawPointer
    /// The call interface of the slot's signature (shared, interned).
    let interface: CallInterface
    private(set) var closure: Closure!
    /// The function the hooks wrap (0 for a NULL slot that an instead hook filled).
    let original = Atomic<UInt>(0)
    /// The published snapshot, retained once on behalf of the call path.
    private let current = Atomic<UnsafeRawPointer?>(nil)
    let epoch = CallEpoch()
    /// A copy of ``ThreadState/key``.
    private let threadKey = ThreadState.key
    /// This entry's address, which marks it in a thread's record.
    private var address: UInt { UInt(bitPattern: Unmanaged.passUnretained(self).toOpaque()) }
    /// Snapshots replaced but perhaps still read by a call.
    var retired: [HookSnapshot] = []
    /// Retired snapshots that wait only for the calls of this parity to drain.
    var draining: (parity: Int, snapshots: [HookSnapshot])?
    /// How many bytes of the return buffer a call whose instead blocks set nothing zeroes.
    let returnZeroSize: Int
    /// Whether the return value is an integer narrower than a machine word, which libffi
    /// closures return widened to one.
    let widensReturn: Bool

    init(slot: UnsafeMutableRawPointer, interface: CallInterface) throws(HookError) {
        self.slot = slot
        self.interface = interface
        let returnType = interface.signature.returnType
        if case .primitive(let primitive) = returnType.kind, primitive.isInteger, primitive.size < 8 {
            widensReturn = true
        } else {
            widensReturn = false
        }
        #if arch(x86_64)
            let inMemory = SysVArgumentPlan.returnsInMemory(returnType)
        #else
            let inMemory = returnType.size > 16
        #endif
        returnZeroSize = returnType.isVoid ? 0 : inMemory ? returnType.size : max(returnType.size, 8)
        current.store(Unmanaged.passRetained(HookSnapshot()).toOpaque(), ordering: .releasing)
        do {
            closure = try Closure.make(
                cif: interface.cif.cif, handler: slotEntryHandler,
                userData: Unmanaged.passUnretained(self).toOpaque())
        } catch {
            let code: HookError.Code =
                switch error {
                case .allocation: .closureAllocationFailed
                case .preparation(let status): .closurePreparationFailed(status: status)
                }
            throw HookError(slot: UInt(bitPattern: slot), signature: interface.signature.encoding, code: code)
        }
    }

    deinit {
        if let raw = current.load(ordering: .acquiring) {
            Unmanaged<HookSnapshot>.fromOpaque(raw).release()
        }
    }

    /// The signature of the slot.
    var signature: Signature { interface.signature }

    // MARK: - Writers (registry lock held)

    /// The snapshot writers start from.
    var snapshot: HookSnapshot {
        Unmanaged<HookSnapshot>.fromOpaque(current.load(ordering: .acquiring)!).takeUnretainedValue()
    }

    /// Publishes `snapshot` and retires the one it replaces.
    func publish(_ snapshot: HookSnapshot) {
        let new = Unmanaged.passRetained(snapshot).toOpaque()
        let old = current.exchange(new, ordering: .acquiringAndReleasing)!
        retired.append(Unmanaged<HookSnapshot>.fromOpaque(old).takeRetainedValue())
    }

    /// Frees the retired snapshots that no call can still read, without waiting.
    /// Returns whether nothing is left to free.
    @discardableResult
    func reclaim() -> Bool {
        while true {
            if let draining {
                guard epoch.isDrained(draining.parity) else { return false }
                self.draining = nil
            }
            guard !retired.isEmpty else { return true }
            draining = (epoch.advance(), retired)
            retired = []
        }
    }

    var hasRetiredSnapshots: Bool { draining != nil || !retired.isEmpty }

    // MARK: - Call path

    /// Runs one call through the closure.
    @inline(__always)
    func dispatch(returnValue: UnsafeMutableRawPointer?, arguments: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        let parity = epoch.enter()
        defer { epoch.leave(parity) }
        let raw = current.load(ordering: .acquiring)!
        Unmanaged<HookSnapshot>.fromOpaque(raw)._withUnsafeGuaranteedRef { snapshot in
            run(snapshot, returnValue: returnValue, arguments: arguments)
        }
    }

    private func run(
        _ snapshot: HookSnapshot, returnValue: UnsafeMutableRawPointer?,
        arguments: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) {
        if snapshot.isEmpty {
            callOriginal(returnValue: returnValue, arguments: arguments)
            return
        }
        let record = ThreadState.record(threadKey)
        let address = address
        let reentered = ThreadState.isActive(address, in: record)
        let marked = ThreadState.push(address, in: record)
        defer { if marked { ThreadState.pop(in: record) } }
        let frame = CallFrame(
            entry: self, snapshot: snapshot, returnValue: returnValue, arguments: arguments,
            reentered: reentered, marked: marked, threadRecord: record)

        for hook in snapshot.fastBefore {
            hook._withUnsafeGuaranteedRef { hook in
                guard frame.claim(hook) else { return }
                hook.block(Invocation(frame: frame, position: .before, insteadIndex: -1))
                frame.finish(hook)
            }
        }
        if let first = frame.nextInstead(after: -1) {
            if returnZeroSize > 0, let returnValue {
                returnValue.initializeMemory(as: UInt8.self, repeating: 0, count: returnZeroSize)
            }
            frame.runInstead(first)
        } else {
            frame.callOriginalUnmarked()
        }
        for hook in snapshot.fastAfter {
            hook._withUnsafeGuaranteedRef { hook in
                guard frame.claim(hook) else { return }
                hook.block(Invocation(frame: frame, position: .after, insteadIndex: -1))
                frame.finish(hook)
            }
        }
    }

    /// Calls the original with the arguments as they are now; a NULL original returns zero.
    func callOriginal(returnValue: UnsafeMutableRawPointer?, arguments: UnsafeMutablePointer<UnsafeMutableRawPointer?>)
    {
        let function = original.load(ordering: .acquiring)
        guard let pointer = UnsafeRawPointer(bitPattern: function) else {
            if returnZeroSize > 0, let returnValue {
                returnValue.initializeMemory(as: UInt8.self, repeating: 0, count: returnZeroSize)
            }
            return
        }
        interface.call(pointer, returnValue: returnValue, argumentList: arguments)
    }
}

/// The state of one dispatch, shared by the invocations of its blocks.
struct CallFrame {
    unowned(unsafe) let entry: SlotEntry
    unowned(unsafe) let snapshot: HookSnapshot
    let returnValue: UnsafeMutableRawPointer?
    let arguments: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    /// Whether this call came from inside a block of the same slot on this thread.
    let reentered: Bool
    /// Whether this dispatch marked the thread (and must unmark it around the original).
    let marked: Bool
    /// This thread's record of active entries.
    let threadRecord: UnsafeMutablePointer<UInt>

    /// Whether `hook` runs in this call; claims a `once` hook's single run.
    @inline(__always)
    func claim(_ hook: HookRecord) -> Bool {
        if reentered && !hook.allowsReentry { return false }
        if hook.options.contains(.once) {
            return hook.fired.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing)
                .exchanged
        }
        return true
    }

    /// Removes a `once` hook after its run.
    @inline(__always)
    func finish(_ hook: HookRecord) {
        if hook.options.contains(.once) { _ = hook.remove() }
    }

    /// The index of the next instead block to run after `index`, if any.
    func nextInstead(after index: Int) -> Int? {
        var next = index + 1
        while next < snapshot.instead.count {
            if claim(snapshot.instead[next]) { return next }
            next += 1
        }
        return nil
    }

    /// Runs the instead block at `index`; ``Invocation/callOriginal()`` continues inward.
    func runInstead(_ index: Int) {
        let hook = snapshot.instead[index]
        hook.block(Invocation(frame: self, position: .instead, insteadIndex: index))
        finish(hook)
    }

    /// Calls the original with this thread's mark lifted, so calls the original makes
    /// through the slot run the blocks again.
    func callOriginalUnmarked() {
        if marked { ThreadState.pop(in: threadRecord) }
        entry.callOriginal(returnValue: returnValue, arguments: arguments)
        if marked {
            _ = ThreadState.push(UInt(bitPattern: Unmanaged.passUnretained(entry).toOpaque()), in: threadRecord)
        }
    }
}

/// The libffi handler of every slot closure: `userData` is the slot's entry.
let slotEntryHandler: Closure.Handler = { _, returnValue, arguments, userData in
    Unmanaged<SlotEntry>.fromOpaque(userData!)._withUnsafeGuaranteedRef { entry in
        entry.dispatch(returnValue: returnValue, arguments: arguments!)
    }
}
