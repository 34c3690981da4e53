import Testing

@testable import FFIHookCore

/// Builds and drops many signatures and call interfaces. Under `swift test
/// --sanitize=address` LeakSanitizer fails the run if any libffi type, cif or cache entry
/// outlives its owner; without a sanitizer the test still checks the interning cache empties.
@Suite struct ResourceLifetimeTests {
    static let encodings = [
        "i^vi", "{P=dd}{P=dd}d", "v24@0:8@16", "(U=id[3c])(U=id[3c])", "{BF=b0i3b3I5cb16q40}q",
        "tTt", "{L=D}{L=D}", "(W=Dq)(W=D[2q])", "(M=Dq)i", "jDjfjd", "{S=c[3i]{?=s}(U=id[3c])}i",
        "vqqqqqd{?=qf}", "{Big=[100000i]}{Big=[100000i]}", "{F=c[0i]}i", "vcccccf{?=cd}",
    ]

    @Test func buildingAndDroppingHundredThousandInterfacesLeavesNothing() throws {
        for iteration in 0..<100_000 {
            let encoding = Self.encodings[iteration % Self.encodings.count]
            let signature = try Signature(encoding)
            if iteration % 2 == 0 {
                _ = try CallInterface(signature)
            } else {
                _ = try CallInterface.shared(for: signature)
            }
        }
        // None of these signatures is interned any more (other tests, running meanwhile,
        // intern and drop signatures of their own, so the total count proves nothing).
        for encoding in Self.encodings {
            let key = try Signature(encoding).abiKey
            for key in [key, key + " ffi_call"] {
                #expect(InterfaceCache.shared.lookup(key) == nil, "\(encoding) is still interned")
            }
        }
    }

    @Test func refusedInterfacesAndEncodingsLeaveNothing() throws {
        for iteration in 0..<20_000 {
            #expect(throws: EncodingError.self) { try Signature("{S=i" + String(iteration)) }
            #expect(throws: CallInterfaceError.self) { try CallInterface(Signature("v{E=}")) }
            #expect(throws: CallInterfaceError.self) {
                try CallInterface(variadic: Signature("vif"), fixedArgumentCount: 1)
            }
        }
    }
}
