internal import CFFIHookSupport
internal import FFIHook
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Plans inline patches and keeps one per function address for the life of the process.
enum InlinePlanner {
    /// The patches made so far, by function address.
    private static let patches = Mutex<[UInt: InlinePatch]>([:])

    /// The patch of the function at `address` (`name` for errors), planned now or found from
    /// an earlier plan whose bytes are still in place.
    static func patch(for address: UInt, name: String?) throws(HookError) -> InlinePatch {
        #if arch(x86_64) && os(Linux)
            let result: Result<InlinePatch, HookError> = patches.withLock { patches in
                if let existing = patches[address], existing.isCurrent { return .success(existing) }
                do throws(HookError) {
                    let patch = try plan(address, name: name)
                    patches[address] = patch
                    SlotRegistry.shared.observe(slot: patch.region.cell, with: patch)
                    return .success(patch)
                } catch {
                    return .failure(error)
                }
            }
            return try result.get()
        #else
            throw HookError(
                code: .unsupportedPlatform, message: "inline hooks work on Linux x86-64",
                symbol: name ?? hex(address))
        #endif
    }

    static func hex(_ address: UInt) -> String { "0x" + String(address, radix: 16) }

    /// Plans a patch: checks the code, finds the function's extent, relocates its first
    /// instructions into a trampoline near it, and writes the stub and the trampoline.
    /// Nothing in the function changes yet.
    static func plan(_ address: UInt, name given: String?) throws(HookError) -> InlinePatch {
        var name = given ?? hex(address)
        func refuse(_ message: String) -> HookError {
            HookError(code: .unhookableFunction, message: message, symbol: name)
        }
        guard address != 0 else { throw refuse("the function's address is NULL") }
        let mappings = MemoryMapping.all()
        guard let mapping = MemoryMapping.containing(address, in: mappings), mapping.executable, mapping.readable
        else {
            throw refuse("\(hex(address)) is not in readable, executable memory: it is not the address of a function")
        }
        // The symbol tables' view: the function's size, and the IFUNC resolver trap.
        let extent = SymbolResolver.extent(of: address)
        if given == nil, let extent, extent.start == address, let symbol = extent.symbol { name = symbol }
        if let extent, extent.start == address, extent.isIndirect {
            throw refuse(
                "the symbol's address is an IFUNC resolver, which picks the code that runs; hook the implementation (InlineFunction(symbol:) resolves it)"
            )
        }
        var size: Int? = nil
        if let extent, extent.start == address, let known = extent.size { size = known }
        if let extent, extent.start < address, let known = extent.size, address < extent.start + UInt(known) {
            // Inside a function: no function's entry (a hook there would run mid-function, and
            // the address may not even start an instruction).
            let owner = extent.symbol.map { "`\($0)`" } ?? "a function"
            throw refuse(
                "\(hex(address)) is inside \(owner) at offset \(address - extent.start), not at a function's start")
        }
        let mappedAfter = MemoryMapping.executableRun(from: address, in: mappings)
        if let known = size { size = min(known, mappedAfter) }

        guard let region = CodeRegion.allocate(near: address, mappings: mappings) else {
            throw HookError(
                code: .patchFailed, message: "no memory could be mapped for the function's trampoline", symbol: name)
        }
        do throws(HookError) {
            let patch = try plan(
                address, name: name, size: size, mappedAfter: mappedAfter, region: region,
                protection: mapping.protection, refuse: refuse)
            return patch
        } catch {
            region.free()
            throw error
        }
    }

    private static func plan(
        _ address: UInt, name: String, size: Int?, mappedAfter: Int, region: CodeRegion, protection: Int32,
        refuse: (String) -> HookError
    ) throws(HookError) -> InlinePatch {
        let code = UnsafeRawPointer(bitPattern: address)!
        let patchLength = region.isNear ? 5 : 14
        // A function shorter than the patch may still take it over the alignment padding
        // that follows it.
        var available = size
        if let known = size {
            let needed = known + Relocator.paddingLength(after: code, size: known)
            available = min(needed, mappedAfter)
        } else if mappedAfter < 32 {
            available = mappedAfter
        }
        let relocation: Relocation
        do {
            relocation = try Relocator.relocate(
                code: code, patchLength: patchLength, trampoline: region.trampoline, functionSize: available,
                mappedSize: mappedAfter)
        } catch {
            throw refuse(error.description)
        }
        if let call = relocation.innerCalls.first {
            throw refuse(
                "`\(call.instruction)` at offset \(call.offset) would be overwritten with the instruction it returns to (offset \(call.target)): a thread inside the called function would return into the patch"
            )
        }
        // Branches from the rest of the function into the bytes the jump overwrites.
        if let known = size, known > relocation.copiedLength {
            let branches: [IncomingBranch]
            do {
                branches = try Relocator.branches(
                    into: relocation.patchOffset..<relocation.copiedLength, function: code, size: known,
                    mappedSize: mappedAfter)
            } catch {
                throw refuse(error.description)
            }
            if let branch = branches.first {
                throw refuse(
                    "`\(branch.instruction)` at offset \(branch.offset) branches to offset \(branch.target), inside the bytes the patch overwrites"
                )
            }
        }
        let patchStart = address + UInt(relocation.patchOffset)
        let overwritten = relocation.copiedLength - relocation.patchOffset
        let originalBytes = Array(
            UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: patchStart), count: overwritten))
        var patchBytes: [UInt8]
        if region.isNear {
            let rel = Int32(Int(region.stub) - Int(patchStart + 5))
            patchBytes = [0xE9]
            withUnsafeBytes(of: rel.littleEndian) { patchBytes += $0 }
        } else {
            patchBytes = [0xFF, 0x25, 0, 0, 0, 0]
            withUnsafeBytes(of: UInt64(region.stub).littleEndian) { patchBytes += $0 }
        }
        patchBytes += [UInt8](repeating: 0xCC, count: overwritten - patchBytes.count)
        let moves = relocation.instructionOffsets.filter { $0.original > relocation.patchOffset }.map {
            (from: address + UInt($0.original), to: region.trampoline + UInt($0.trampoline))
        }
        guard region.fill(trampoline: relocation.bytes) else {
            throw HookError(
                code: .patchFailed, message: "the trampoline's page could not be made executable (mprotect failed)",
                symbol: name)
        }
        return InlinePatch(
            function: address, name: name, region: region, patchStart: patchStart, originalBytes: originalBytes,
            patchBytes: patchBytes, moves: moves, protection: protection, copiedLength: relocation.copiedLength)
    }
}

extension InlinePatch {
    /// Whether the function's bytes are still the ones this patch was planned for (or its
    /// jump): false once its object was unloaded and something else mapped there.
    var isCurrent: Bool {
        let count = originalBytes.count
        guard ffh_is_mapped(UnsafeRawPointer(bitPattern: patchStart)) != 0,
            ffh_is_mapped(UnsafeRawPointer(bitPattern: patchStart + UInt(count) - 1)) != 0
        else { return false }
        let now = Array(UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: patchStart), count: count))
        return now == (isPatched.load(ordering: .acquiring) ? patchBytes : originalBytes)
    }
}
