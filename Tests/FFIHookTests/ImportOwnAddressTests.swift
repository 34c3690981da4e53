import FFIHook
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// An object's GOT entry (`GLOB_DAT`) for a function it defines itself holds the address its
/// code takes of that function, which it compares with the addresses its data holds: no
/// import, so no hook goes in it. OpenSSL's `CRYPTO_malloc` calls the allocator it was given
/// when that is not `CRYPTO_malloc` itself; with a hook in libcrypto's own entry it called
/// itself for ever.
@Suite(.sharedProcessHooks) struct ImportOwnAddressTests {
    typealias Allocate = @convention(c) (Int, UnsafePointer<CChar>?, Int32) -> UnsafeMutableRawPointer?
    typealias Free = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, Int32) -> Void

    @Test func libcryptosOwnAddressOfCryptoMallocIsNoImport() throws {
        let crypto = try #require(dlopen("libcrypto.so.3", RTLD_NOW), "libcrypto.so.3 (Debian's libssl3) is missing")
        defer { dlclose(crypto) }
        // libcrypto's relocations name CRYPTO_malloc in a GLOB_DAT entry of its own (readelf -r):
        // that entry is not listed as an import of it.
        let bindings = try ImportTable.bindings(of: "CRYPTO_malloc", in: .object("libcrypto.so.3"))
        #expect(bindings.isEmpty, "\(bindings)")
    }

    /// In a child, with an alarm: before, the call never returned.
    @Test func attachingToEveryEntryOfCryptoMallocLeavesItWorking() async {
        await #expect(processExitsWith: .success) {
            alarm(20)
            guard let crypto = dlopen("libcrypto.so.3", RTLD_NOW),
                let allocate = dlsym(crypto, "CRYPTO_malloc"), let free = dlsym(crypto, "CRYPTO_free")
            else { exit(2) }
            // Whatever imports it (maybe nothing: then the attach says so, and the call must
            // still work).
            let group = try? ImportTable.attach(symbols: ["CRYPTO_malloc", "CRYPTO_free"], in: .all) { _ in
                ({ _ in }, { _ in })
            }
            let pointer = unsafeBitCast(allocate, to: Allocate.self)(64, nil, 0)
            guard let pointer else { exit(3) }
            memset(pointer, 7, 64)
            unsafeBitCast(free, to: Free.self)(pointer, nil, 0)
            group?.remove()
            exit(0)
        }
    }
}
