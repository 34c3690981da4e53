internal import CFFIHookPatch
internal import CFFIHookSupport
internal import FFIHook
internal import Glibc

/// Writes and takes out the patches of planned functions, any number of them in one stop of
/// the other threads (``ffh_patch_write_batch``), and records what each write did in its plan's
/// state. Called with the registry's lock held.
enum PatchWriter {
    /// One function to patch (`patching`) or unpatch.
    struct Item {
        let slab: CodeSlab
        let index: Int
        let patching: Bool
    }

    /// What a batch of writes did.
    struct Outcome {
        /// Why the threads could not be stopped (nothing was written), nil when they were.
        var failure: String?
        /// Each item's outcome, in the order given.
        var items: [ItemOutcome]
        /// How many threads the stop stopped.
        var stopped: Int
    }

    /// One item's outcome.
    struct ItemOutcome {
        /// Why it was not written, nil when it was (or when nothing was written at all).
        var failure: String?
        /// The write's status.
        var status: ffh_patch_status
    }

    /// How many times the process's threads have been stopped to write code.
    static var stopCount: UInt64 { ffh_patch_stop_count() }

    /// Stops the other threads and returns where each one that parked was (its instruction
    /// pointer), then releases them; nil when they could not be stopped.
    static func parkedInstructionPointers() -> [UInt]? {
        var places = [UInt](repeating: 0, count: 256)
        var result = ffh_patch_result()
        let count = Int(ffh_patch_sample(&places, places.count, &result))
        guard count >= 0 else { return nil }
        if count > places.count {
            places = [UInt](repeating: 0, count: count + 64)
            let again = Int(ffh_patch_sample(&places, places.count, &result))
            guard again >= 0, again <= places.count else { return nil }
            return Array(places.prefix(again))
        }
        return Array(places.prefix(count))
    }

    /// The bytes of plan `index`'s patch: a `jmp rel32` to its stub, or the 14-byte absolute
    /// jump from a far slab, then `int3` over the rest of the last instruction it touches.
    static func patchBytes(_ slab: CodeSlab, _ index: Int) -> [UInt8] {
        let record = slab.records[index]
        return [UInt8](unsafeUninitializedCapacity: Int(record.copiedLength) - Int(record.patchOffset)) {
            buffer, count in
            count = writePatch(slab, record, into: buffer.baseAddress!)
        }
    }

    /// Writes the bytes of the patch of `record` (a plan of `slab`) at `target`, which has room
    /// for them (the record's overwritten bytes); returns how many.
    private static func writePatch(_ slab: CodeSlab, _ record: PlanRecord, into target: UnsafeMutablePointer<UInt8>)
        -> Int
    {
        let stub = slab.base + UInt(record.stubOffset)
        let length = Int(record.copiedLength) - Int(record.patchOffset)
        // The planner overwrites at least the jump's bytes.
        precondition(length >= (slab.isNear ? 5 : 14), "a plan overwrites fewer bytes than its jump")
        let raw = UnsafeMutableRawPointer(target)
        var jump: Int
        if slab.isNear {
            target[0] = 0xE9
            raw.storeBytes(
                of: Int32(Int(stub) - Int(record.patchStart + 5)).littleEndian, toByteOffset: 1, as: Int32.self)
            jump = 5
        } else {
            (target[0], target[1], target[2], target[3], target[4], target[5]) = (0xFF, 0x25, 0, 0, 0, 0)
            raw.storeBytes(of: UInt64(stub).littleEndian, toByteOffset: 6, as: UInt64.self)
            jump = 14
        }
        while jump < length {
            target[jump] = 0xCC
            jump += 1
        }
        return length
    }

    /// Writes, from `target` on, where a thread stopped inside the overwritten bytes of
    /// `record` (a plan of `slab`) goes: the copy of its instruction in the trampoline. Returns
    /// how many.
    private static func writeMoves(
        _ slab: CodeSlab, _ record: PlanRecord, into target: UnsafeMutablePointer<ffh_patch_move>
    ) -> Int {
        let trampoline = slab.base + UInt(record.stubOffset) + UInt(CodeSlab.stubSize)
        var written = 0
        var ordinal = 0
        for offset in 0..<Int(record.copiedLength) where record.instructionStarts & (1 << UInt32(offset)) != 0 {
            if offset > Int(record.patchOffset) {
                target[written] = ffh_patch_move(
                    from: record.function + UInt(offset), to: trampoline + UInt(record.trampolineOffsets[ordinal]))
                written += 1
            }
            ordinal += 1
        }
        return written
    }

    /// Writes `items` in one stop; marks each written plan patched or not, and counts the
    /// threads moved.
    static func write(_ items: [Item]) -> Outcome {
        guard !items.isEmpty else { return Outcome(failure: nil, items: [], stopped: 0) }
        let outcome = writeItems(items)
        // The requests of a large batch take a few hundred bytes a function, all freed by now.
        if items.count >= InlineBatch.trimmedBatchSize { ffh_release_free_memory() }
        return outcome
    }

    private static func writeItems(_ items: [Item]) -> Outcome {
        // Every byte and move the requests point at, in buffers that live through the write.
        var byteCount = 0
        var moveCount = 0
        for item in items {
            let record = item.slab.records[item.index]
            byteCount += Int(record.copiedLength) - Int(record.patchOffset)
            if item.patching { moveCount += record.instructionStarts.nonzeroBitCount }
        }
        let expectedBytes = UnsafeMutablePointer<UInt8>.allocate(capacity: max(byteCount, 1))
        let newBytes = UnsafeMutablePointer<UInt8>.allocate(capacity: max(byteCount, 1))
        let moves = UnsafeMutablePointer<ffh_patch_move>.allocate(capacity: max(moveCount, 1))
        defer {
            expectedBytes.deallocate()
            newBytes.deallocate()
            moves.deallocate()
        }
        var requests: [ffh_patch_request] = []
        requests.reserveCapacity(items.count)
        var byteOffset = 0
        var moveOffset = 0
        for item in items {
            let record = item.slab.records[item.index]
            let length = Int(record.copiedLength) - Int(record.patchOffset)
            let (original, patch) =
                item.patching
                ? (expectedBytes + byteOffset, newBytes + byteOffset)
                : (newBytes + byteOffset, expectedBytes + byteOffset)
            for index in 0..<length { original[index] = record.original[index] }
            _ = writePatch(item.slab, record, into: patch)
            var request = ffh_patch_request()
            request.address = UnsafeMutableRawPointer(bitPattern: record.patchStart)
            request.expected = UnsafePointer(expectedBytes + byteOffset)
            request.bytes = UnsafePointer(newBytes + byteOffset)
            request.length = length
            request.protection = Int32(record.protection)
            if item.patching {
                // A thread at the patch's first byte is about to run the jump: only the bytes
                // after it are watched.
                request.watch_start = record.patchStart + 1
                request.watch_end = record.function + UInt(record.copiedLength)
                let count = writeMoves(item.slab, record, into: moves + moveOffset)
                request.moves = UnsafePointer(moves + moveOffset)
                request.move_count = count
                moveOffset += count
            }
            byteOffset += length
            requests.append(request)
        }
        // The writer searches the requests by halves when they are in order of their watched
        // ranges, and reads and writes neighbours in address order together (removals watch
        // nothing: address order alone).
        let order = requests.indices.sorted {
            let (left, right) = (requests[$0], requests[$1])
            if left.watch_start != right.watch_start { return left.watch_start < right.watch_start }
            return UInt(bitPattern: left.address) < UInt(bitPattern: right.address)
        }
        var sorted = order.map { requests[$0] }
        var result = ffh_patch_result()
        let status = sorted.withUnsafeMutableBufferPointer {
            ffh_patch_write_batch($0.baseAddress, $0.count, &result)
        }
        var outcomes = [ItemOutcome](repeating: ItemOutcome(failure: nil, status: FFH_PATCH_DONE), count: items.count)
        for (sortedPosition, position) in order.enumerated() {
            let request = sorted[sortedPosition]
            let item = items[position]
            outcomes[position] = ItemOutcome(failure: describe(request), status: request.status)
            guard request.status == FFH_PATCH_DONE else {
                // Taken out already, or its object is gone: there is nothing to take out.
                if !item.patching && (request.status == FFH_PATCH_CHANGED || request.status == FFH_PATCH_UNMAPPED) {
                    InlinePatching.setPatched(item.slab, item.index, false)
                }
                continue
            }
            InlinePatching.setPatched(item.slab, item.index, item.patching)
            if request.moved > 0 { item.slab.movedThreads[item.index, default: 0] += Int(request.moved) }
        }
        let stopFailure =
            status == FFH_PATCH_DONE
            ? nil : describe(status: status, thread: result.thread, pc: 0, error: result.error)
        return Outcome(failure: stopFailure, items: outcomes, stopped: Int(result.stopped))
    }

    /// Why a request was not written, in words; nil for one that was.
    static func describe(_ request: ffh_patch_request) -> String? {
        describe(status: request.status, thread: request.thread, pc: request.pc, error: request.error)
    }

    /// What the stop last saw of a thread that never stopped, from FFH_UNRESPONSIVE_* bits.
    static func unresponsive(_ seen: Int32) -> String {
        let blocksSignal = seen & Int32(FFH_UNRESPONSIVE_BLOCKS_SIGNAL) != 0
        let blocksSEGV = seen & Int32(FFH_UNRESPONSIVE_BLOCKS_SEGV) != 0
        let asked = seen & Int32(FFH_UNRESPONSIVE_ASKED_BY_SEGV) != 0
        switch (blocksSignal, blocksSEGV) {
        case (true, true): return "it blocks every signal, SIGSEGV included, and runs outside a system call"
        case (true, false):
            return asked
                ? "it blocks the stop signal and runs outside a system call; asked again through SIGSEGV, it did not answer"
                : "it blocks the stop signal and runs outside a system call"
        default: return "it takes the stop signal but did not answer it"
        }
    }

    /// " (name)" of a thread of this process, read from /proc; empty when it is gone.
    static func threadName(thread: Int32) -> String {
        guard thread > 0 else { return "" }
        let descriptor = open("/proc/self/task/\(thread)/comm", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return "" }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return "" }
        let name = String(decoding: bytes[..<count].filter { $0 != 10 }, as: UTF8.self)
        return name.isEmpty ? "" : " (\(name))"
    }

    static func describe(status: ffh_patch_status, thread threadID: Int32, pc: UInt, error: Int32) -> String? {
        // (Before any text is made: every patch of a batch that went in asks.)
        guard status != FFH_PATCH_DONE else { return nil }
        let thread = "thread \(threadID)"
        let pc = "0x" + String(pc, radix: 16)
        switch status {
        case FFH_PATCH_DONE: return nil
        case FFH_PATCH_UNSUPPORTED: return "this platform has no code writer (inline hooks work on Linux x86-64)"
        case FFH_PATCH_NO_SIGNAL:
            return "no real-time signal is free to stop the other threads while the code changes"
        case FFH_PATCH_THREAD_UNRESPONSIVE:
            return "\(thread)\(threadName(thread: threadID)) did not stop within 2 s (\(unresponsive(error)))"
        case FFH_PATCH_THREAD_INSIDE:
            return "\(thread) is at \(pc), inside the bytes to overwrite, where it cannot be moved"
        case FFH_PATCH_PROTECTION:
            return "the code's page could not be made writable (mprotect failed with errno \(error))"
        case FFH_PATCH_CHANGED:
            return
                "the function's bytes are no longer the ones planned for (its object was unloaded or its code rewritten)"
        case FFH_PATCH_NO_MEMORY: return "memory for stopping the threads could not be mapped"
        case FFH_PATCH_UNMAPPED: return "the function's code is no longer mapped"
        default: return "the code writer failed (status \(status.rawValue))"
        }
    }
}
