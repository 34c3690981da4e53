internal import CFFIHookSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What the process's memory map says about the page that holds a slot, and writing a
/// slot whose page is read-only.
///
/// Writing to an unmapped or read-only address would crash the process, so the registry
/// asks here first (once per slot) and refuses, or lifts the protection when the caller
/// asked for that (`HookOptions.liftsPageProtection`), for example for a `const` table the
/// loader made read-only, or an import table under full RELRO.
enum SlotMemory {
    /// A mapping's protection.
    struct Protection: Equatable {
        var readable: Bool
        var writable: Bool
        var executable: Bool

        var flags: Int32 {
            (readable ? PROT_READ : 0) | (writable ? PROT_WRITE : 0) | (executable ? PROT_EXEC : 0)
        }
    }

    /// The protection of the mapping that contains `address`, or `nil` when none does.
    static func protection(of address: UInt) -> Protection? {
        guard let file = fopen("/proc/self/maps", "r") else { return nil }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            // "start-end perms offset device inode path"
            let text = String(cString: line)
            let fields = text.split(separator: " ", maxSplits: 2)
            guard fields.count >= 2 else { continue }
            let range = fields[0].split(separator: "-")
            guard range.count == 2, let start = UInt(range[0], radix: 16), let end = UInt(range[1], radix: 16)
            else { continue }
            guard address >= start && address < end else { continue }
            let permissions = Array(fields[1].utf8)
            guard permissions.count >= 3 else { return nil }
            return Protection(
                readable: permissions[0] == UInt8(ascii: "r"), writable: permissions[1] == UInt8(ascii: "w"),
                executable: permissions[2] == UInt8(ascii: "x"))
        }
        return nil
    }

    /// Whether the word at `address` can be read: a read that cannot fault (see ``load(_:)``).
    static func isReadable(_ address: UInt) -> Bool {
        load(address) != nil
    }

    /// The word at `address`, or `nil` when it cannot be read (unmapped): read under the
    /// fault guard, so that an owner unmapping the memory at that moment makes it `nil`
    /// rather than a crash.
    static func load(_ address: UInt) -> UInt? {
        var value: UInt = 0
        return ffh_read_word(UnsafeRawPointer(bitPattern: address), &value) == 0 ? value : nil
    }

    /// What a compare-and-swap on a slot did.
    enum Exchange: Equatable {
        /// The slot held the expected word and now holds the new one.
        case replaced
        /// The slot held another word, left as it was.
        case heldOther
        /// The slot cannot be written: unmapped or read-only (at the moment of the write).
        case unwritable
    }

    /// Replaces the word at `address` with `desired` if it holds `expected`, under the fault
    /// guard: memory unmapped or protected by its owner, even at that very moment, gives
    /// ``Exchange/unwritable`` instead of a crash.
    static func exchange(_ address: UInt, expected: UInt, desired: UInt) -> Exchange {
        switch ffh_exchange_if_writable(UnsafeMutableRawPointer(bitPattern: address), expected, desired) {
        case 1: .replaced
        case 0: .heldOther
        default: .unwritable
        }
    }

    /// Whether the fault guard is the process's SIGSEGV and SIGBUS handler now (after the
    /// first guarded access installed it); false where the platform has no guard.
    static var faultGuardIsInstalled: Bool { ffh_guard_is_installed() != 0 }

    /// Whether the word at `address` can be written, asked of the kernel without writing it:
    /// false for memory that is unmapped or not writable.
    static func isWritable(_ address: UInt) -> Bool {
        guard let pointer = UnsafeMutableRawPointer(bitPattern: address) else { return false }
        return ffh_is_writable(pointer) != 0
    }

    /// Runs `body` with the page of `address` made writable, then restores `protection`.
    /// Returns `nil` without running `body` when the protection cannot be changed.
    static func withWritablePage<Result>(
        _ address: UInt, restoring protection: Protection, _ body: () -> Result
    ) -> Result? {
        let pageSize = UInt(sysconf(Int32(_SC_PAGESIZE)))
        let page = UnsafeMutableRawPointer(bitPattern: address & ~(pageSize - 1))
        var writable = protection
        writable.writable = true
        writable.readable = true
        guard mprotect(page, Int(pageSize), writable.flags) == 0 else { return nil }
        let result = body()
        mprotect(page, Int(pageSize), protection.flags)
        return result
    }
}
