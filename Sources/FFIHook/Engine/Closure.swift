internal import CFFI
internal import CFFIHookSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The libffi closures of hooked slots, cut from blocks that libffi allocates, each followed
/// by its ``ffh_slot`` (the closure's user data).
///
/// A closure is never freed: a caller may have read its address from a slot and call it at
/// any later time, so it stays a pass-through to the slot's original. Cutting closures from
/// blocks, 80 bytes each on x86-64 with the record, saves libffi's per-allocation overhead; a closure comes
/// back for reuse only when the program releases its slot (``SlotRegistry/releaseSlots(from:to:)``)
/// or the slot's memory is gone, once no call can be inside it.
///
/// Debian's libffi allocates closures in pages that are writable and executable at once;
/// where the kernel forbids that (memory-deny-write-execute) it maps a temporary file twice,
/// so code addresses differ from writable ones by a fixed amount within a block. Where
/// neither works, allocation fails and ``make(for:)`` reports it instead of crashing. A
/// libffi built with static trampolines gives each allocation its own trampoline: then
/// each block holds one closure.
///
/// On x86-64 a closure enters through the library's own entry (see ``entersDirectly``): its
/// trampoline, written over libffi's, jumps to an assembly routine that saves the argument
/// registers and lists the arguments from the signature's plan, made once, rather than
/// classifying them on every call as libffi's entry does. The closure stays a prepared libffi
/// closure otherwise (its cif and user data), and where the trampoline cannot be written
/// (static trampolines) or on other architectures, libffi's entry is used.
///
/// Used only under the registry's lock.
struct ClosurePool {
    /// One closure: its index in the pool.
    struct Cell: Hashable {
        let index: UInt32
    }

    /// Whether allocation fails, as it does where writable and executable memory is
    /// forbidden and libffi has no fallback (a pool made for tests of that path).
    let failsAllocation: Bool

    init(failsAllocation: Bool = false) {
        self.failsAllocation = failsAllocation
    }

    enum Failure: Error {
        case allocation
        case preparation(status: Int)
    }

    /// The bytes of one closure and its slot record, rounded to keep records aligned.
    private static let stride = (ffh_closure_size() + MemoryLayout<ffh_slot>.size + 7) & ~7
    /// How many closures one block holds: as many as fit in just under 256 KiB. libffi's
    /// allocator loses a share of each block to its own bookkeeping and alignment, about a
    /// fifth for 20 KiB blocks and a twentieth for these; pages of a block that no closure
    /// uses yet are never touched, so they take no memory.
    private static let cellsPerBlock: Int = libffiHasStaticTrampolines ? 1 : (256 * 1024 - 64) / stride

    /// Whether closures enter through the library's own System V entry, which reads where
    /// each argument arrives from a plan made once per signature, instead of libffi's, which
    /// classifies every argument again on every call. It needs a trampoline the library can
    /// write: libffi's own, in a writable block (not a static trampoline).
    private static let entersDirectly: Bool = {
        #if arch(x86_64)
            !libffiHasStaticTrampolines && ffh_trampoline_size() >= Int(FFH_ENTRY_TRAMPOLINE_SIZE)
        #else
            false
        #endif
    }()

    /// Whether this libffi gives each closure allocation its own static trampoline.
    private static let libffiHasStaticTrampolines: Bool = dlsym(nil, "ffi_tramp_is_present") != nil

    /// The blocks: where each is written and where its code is called.
    private var blocks: [(writable: UnsafeMutableRawPointer, code: UnsafeRawPointer)] = []
    /// How many cells of the last block are handed out.
    private var usedInLastBlock = 0
    /// Cells released for reuse.
    private var free: [Cell] = []

    /// How many cells exist.
    var count: Int { blocks.isEmpty ? 0 : (blocks.count - 1) * Self.cellsPerBlock + usedInLastBlock }
    /// How many cells wait for reuse.
    var freeCount: Int { free.count }

    /// The writable address of a cell's closure.
    private func closure(_ cell: Cell) -> UnsafeMutableRawPointer {
        let index = Int(cell.index)
        return blocks[index / Self.cellsPerBlock].writable + (index % Self.cellsPerBlock) * Self.stride
    }

    /// The address callers jump to for a cell.
    func code(_ cell: Cell) -> UInt {
        let index = Int(cell.index)
        return UInt(bitPattern: blocks[index / Self.cellsPerBlock].code + (index % Self.cellsPerBlock) * Self.stride)
    }

    /// Whether `address` is in the code of a cell, made or still to be handed out.
    func contains(code address: UInt) -> Bool {
        blocks.contains { block in
            let start = UInt(bitPattern: block.code)
            return Self.libffiHasStaticTrampolines
                ? address == start : address >= start && address - start < UInt(Self.stride * Self.cellsPerBlock)
        }
    }

    /// A cell's slot record.
    func slot(_ cell: Cell) -> UnsafeMutablePointer<ffh_slot> {
        (closure(cell) + ffh_closure_size()).assumingMemoryBound(to: ffh_slot.self)
    }

    /// Whether a cell's closure enters through the preserving entry (see ``make(for:preserving:)``).
    func preserves(_ cell: Cell) -> Bool {
        #if arch(x86_64)
            Self.entersDirectly && ffh_entry_is_preserving(closure(cell)) != 0
        #else
            false
        #endif
    }

    /// The cif a cell's closure was prepared with.
    func cif(_ cell: Cell) -> UnsafeMutablePointer<ffi_cif>? {
        closure(cell).assumingMemoryBound(to: ffi_closure.self).pointee.cif
    }

    /// A closure for `interface`'s cif that calls the C handler with its slot record (zeroed
    /// but for the interface, which the caller keeps alive for the life of the process),
    /// taken from the released ones or cut from a block. A `preserving` closure is for the
    /// slot of a function patched inline: its callers may count on registers the function
    /// does not write (GCC's `-fipa-ra`), and its entry returns every register but the
    /// result's as the caller left them (``ffh_install_entry_preserving``; libffi's own entry,
    /// where the library's cannot be used, keeps only what the C convention keeps).
    mutating func make(for interface: CallInterface, preserving: Bool = false) throws(Failure) -> Cell {
        let cif = interface.cif.cif
        if failsAllocation { throw .allocation }
        let cell: Cell
        if let reused = free.popLast() {
            cell = reused
        } else {
            if blocks.isEmpty || usedInLastBlock == Self.cellsPerBlock {
                var code: UnsafeMutableRawPointer?
                guard let writable = ffi_closure_alloc(Self.stride * Self.cellsPerBlock, &code), let code else {
                    throw .allocation
                }
                blocks.append((writable, UnsafeRawPointer(code)))
                usedInLastBlock = 0
            }
            cell = Cell(index: UInt32((blocks.count - 1) * Self.cellsPerBlock + usedInLastBlock))
            usedInLastBlock += 1
        }
        let record = slot(cell)
        let plan = Self.entersDirectly ? interface.closurePlan : nil
        record.initialize(
            to: ffh_slot(
                state: 0, address: 0, interface: Unmanaged.passUnretained(interface).toOpaque(), original: 0,
                plan: plan, fast: nil, resolver: nil))
        let status = ffi_prep_closure_loc(
            closure(cell).assumingMemoryBound(to: ffi_closure.self), cif, slotEntryHandler, record,
            UnsafeMutableRawPointer(bitPattern: code(cell)))
        guard status == FFI_OK else {
            free.append(cell)
            throw .preparation(status: Int(status.rawValue))
        }
        if plan != nil {
            // The closure stays a prepared libffi closure (its cif and user data as libffi set
            // them); only its trampoline enters elsewhere.
            if preserving {
                ffh_install_entry_preserving(closure(cell), record)
            } else {
                ffh_install_entry(closure(cell), record)
            }
        }
        return cell
    }

    /// Makes a cell available for reuse; no call may be inside it any more.
    mutating func release(_ cell: Cell) {
        slot(cell).initialize(to: ffh_slot())
        free.append(cell)
    }
}

/// The libffi handler of every slot closure: the C handler, which marks the calling thread
/// inside a call around ``slotEntryDispatch``.
let slotEntryHandler = unsafeBitCast(
    ffh_handler
        as @convention(c) (
            UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
            UnsafeMutableRawPointer?
        ) -> Void,
    to: (@convention(c) (
        UnsafeMutablePointer<ffi_cif>?, UnsafeMutableRawPointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
        UnsafeMutableRawPointer?
    ) -> Void).self)
