import Testing

@testable import FFIHookCore

@Suite struct SignatureTests {
    @Test(arguments: [
        ("i^vi", "i", ["^v", "i"]),
        ("{P=dd}{P=dd}d", "{P=dd}", ["{P=dd}", "d"]),
        ("v24@0:8@16", "v", ["@", ":", "@"]),
        ("v", "v", []),
        ("r*8@0:4", "r*", ["@", ":"]),
        ("@\"NSString\"16@0:8", "@\"NSString\"", ["@", ":"]),
        ("v-8@0", "v", ["@"]),
    ])
    func readsReturnAndArguments(encoding: String, returnType: String, arguments: [String]) throws {
        let signature = try Signature(encoding)
        #expect(signature.returnType.encoding == returnType)
        #expect(signature.argumentTypes.map(\.encoding) == arguments)
    }

    /// Which signatures may hook one slot together: those the calling convention passes
    /// alike, ignoring the signedness of integers of 4 bytes or more and the kind of a
    /// pointer-sized integer or pointer; never sub-word integers, floating point, aggregates
    /// or another variadic shape.
    @Test(arguments: [
        ("qi^vQ", "qi^vq", true),
        ("iII", "III", true),
        ("^v*", "Q@", true),
        ("v:#@?", "vqqq", true),
        ("tT", "Tt", true),
        ("cc", "CC", false),
        ("ss", "SS", false),
        ("Bi", "Ci", false),
        ("fi", "ii", false),
        ("dq", "qq", false),
        ("v{P=ii}", "v{P=II}", false),
        ("ii", "iq", false),
    ])
    func slotSharing(first: String, second: String, shares: Bool) throws {
        let a = try Signature(first)
        let b = try Signature(second)
        #expect((a.slotSharingKey == b.slotSharingKey) == shares)
        #expect(
            try Signature(variadic: first, fixedArgumentCount: 1).slotSharingKey
                != a.slotSharingKey)
    }

    @Test func canonicalEncodingDropsFrameOffsets() throws {
        #expect(try Signature("v24@0:8@16").encoding == "v@:@")
        #expect(try Signature("v24@0:8@16").description == "v@:@")
    }

    @Test func voidArgumentIsRefused() {
        #expect(throws: EncodingError(encoding: "iv", offset: 1, problem: .voidValue)) {
            try Signature("iv")
        }
    }

    @Test func opaqueArgumentIsRefusedButOpaquePointerIsFine() throws {
        #expect(throws: EncodingError(encoding: "v{Opaque}", offset: 1, problem: .opaqueValue(name: "Opaque"))) {
            try Signature("v{Opaque}")
        }
        let signature = try Signature("v^{Opaque}")
        #expect(signature.argumentTypes[0].size == 8)
    }

    @Test func equalEncodingsGiveEqualSignatures() throws {
        #expect(try Signature("i8^v0i4") == Signature("i^vi"))
        #expect(try Signature("i^vi") != Signature("i^vI"))
    }
}

@Suite struct SignatureRoundTripTests {
    /// An object followed by an unknown type must not print as a block.
    @Test(arguments: ["@0?", "v@0?", "@-8?", "^@0?TT", "rA@-8?", "S@22222222222222222222?@", "?8^#@999????8?"])
    func objectFollowedByUnknownRoundTrips(encoding: String) throws {
        let signature = try Signature(encoding)
        #expect(try Signature(signature.encoding) == signature)
    }

    @Test func blockStaysABlock() throws {
        let signature = try Signature("v@?")
        #expect(signature.argumentTypes.map(\.kind) == [.block])
        #expect(signature.encoding == "v@?")
    }
}
