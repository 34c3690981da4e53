import Testing

@testable import FFIHookCore

/// The members of a struct or union, `nil` for any other type or an opaque aggregate.
private func fields(of type: CType) -> [CType.Field]? {
    switch type.kind {
    case .structure(_, let fields), .union(_, let fields): fields
    default: nil
    }
}

/// The name of a struct or union.
private func aggregateName(of type: CType) -> String?? {
    switch type.kind {
    case .structure(let name, _), .union(let name, _): .some(name)
    default: .none
    }
}

/// Reads `encoding`, then checks that its canonical encoding reads back to an equal type.
private func roundTripped(_ encoding: String) throws -> CType {
    let type = try CType(encoding)
    let again = try CType(type.encoding)
    #expect(again == type, "\(encoding) -> \(type.encoding)")
    #expect(again.encoding == type.encoding)
    #expect(type.description == type.encoding)
    return type
}

extension CTypeTests {
    /// A struct or union with its expected layout.
    struct LayoutCase: Sendable, CustomTestStringConvertible {
        let encoding: String
        let size: Int
        let alignment: Int
        let offsets: [Int]
        /// The member names, when the case checks them.
        let names: [String?]?

        init(_ encoding: String, size: Int, alignment: Int, offsets: [Int], names: [String?]? = nil) {
            self.encoding = encoding
            self.size = size
            self.alignment = alignment
            self.offsets = offsets
            self.names = names
        }

        var testDescription: String { encoding }
    }
}

@Suite struct CTypeTests {
    // MARK: - Scalars

    // Computed, not stored: a `CType.Kind` case keeps its payload in a box whose pointer
    // carries the case tag in its high bits, which leak checkers do not recognise, so a
    // global array of them reads as leaked at exit.
    static var scalars: [(String, Int, Int, CType.Kind)] {
        [
            ("c", 1, 1, .primitive(.char)),
            ("C", 1, 1, .primitive(.unsignedChar)),
            ("s", 2, 2, .primitive(.short)),
            ("S", 2, 2, .primitive(.unsignedShort)),
            ("i", 4, 4, .primitive(.int)),
            ("I", 4, 4, .primitive(.unsignedInt)),
            ("l", 4, 4, .primitive(.long)),
            ("L", 4, 4, .primitive(.unsignedLong)),
            ("q", 8, 8, .primitive(.longLong)),
            ("Q", 8, 8, .primitive(.unsignedLongLong)),
            ("t", 16, 16, .primitive(.int128)),
            ("T", 16, 16, .primitive(.unsignedInt128)),
            ("f", 4, 4, .primitive(.float)),
            ("d", 8, 8, .primitive(.double)),
            ("D", 16, 16, .primitive(.longDouble)),
            ("B", 1, 1, .primitive(.bool)),
            ("v", 0, 1, .void),
            ("*", 8, 8, .cString),
            ("@", 8, 8, .object(className: nil)),
            ("#", 8, 8, .objectClass),
            (":", 8, 8, .selector),
            ("?", 8, 8, .unknown),
            ("@?", 8, 8, .block),
        ]
    }

    @Test(arguments: scalars)
    func scalarHasPlatformSizeAndAlignment(encoding: String, size: Int, alignment: Int, kind: CType.Kind) throws {
        let type = try roundTripped(encoding)
        #expect(type.kind == kind)
        #expect(type.size == size)
        #expect(type.alignment == alignment)
        #expect(type.qualifiers.isEmpty)
        #expect(type.encoding == encoding)
        #expect(!type.isAggregate)
    }

    @Test(arguments: CType.Primitive.allCases)
    func everyPrimitiveCodeReadsBack(primitive: CType.Primitive) throws {
        let type = try roundTripped(String(primitive.code))
        #expect(type.kind == .primitive(primitive))
        #expect(type.size == primitive.size)
        #expect(type.alignment == primitive.alignment)
    }

    @Test func primitiveSizesMatchSwiftsCTypes() {
        #expect(CType.Primitive.char.size == MemoryLayout<CChar>.size)
        #expect(CType.Primitive.short.size == MemoryLayout<CShort>.size)
        #expect(CType.Primitive.int.size == MemoryLayout<CInt>.size)
        #expect(CType.Primitive.long.size == MemoryLayout<Int32>.size)
        #expect(CType.Primitive.longLong.size == MemoryLayout<CLongLong>.size)
        #expect(CType.Primitive.float.size == MemoryLayout<CFloat>.size)
        #expect(CType.Primitive.double.size == MemoryLayout<CDouble>.size)
        #expect(CType.Primitive.double.alignment == MemoryLayout<CDouble>.alignment)
        #expect(CType.Primitive.bool.size == MemoryLayout<Bool>.size)
    }

    // MARK: - Pointers

    static let pointers: [(String, String)] = [
        ("^i", "i"),
        ("^?", "?"),
        ("^v", "v"),
        ("^^v", "^v"),
        ("^{Opaque}", "{Opaque}"),
        ("^{Opaque=}", "{Opaque=}"),
        ("^(U)", "(U)"),
        ("^{?}", "{?}"),
        ("^[4i]", "[4i]"),
        ("^{S=ii}", "{S=ii}"),
        ("^jd", "jd"),
        ("^ri", "ri"),
        ("^@\"NSString\"", "@\"NSString\""),
        ("^*", "*"),
        ("^D", "D"),
    ]

    @Test(arguments: pointers)
    func pointerIsPointerSized(encoding: String, pointee: String) throws {
        let type = try roundTripped(encoding)
        #expect(type.size == 8)
        #expect(type.alignment == 8)
        guard case .pointer(let target) = type.kind else {
            Issue.record("\(encoding) is not a pointer: \(type.kind)")
            return
        }
        #expect(target.encoding == pointee)
        #expect(try target == CType(pointee))
    }

    @Test func opaqueAndEmptyPointeesDiffer() throws {
        guard case .pointer(let opaque) = try CType("^{Opaque}").kind,
            case .pointer(let empty) = try CType("^{Opaque=}").kind
        else {
            Issue.record("not pointers")
            return
        }
        #expect(opaque.isOpaque)
        #expect(opaque.kind == .structure(name: "Opaque", fields: nil))
        #expect(opaque.size == 0 && opaque.alignment == 1)
        #expect(!empty.isOpaque)
        #expect(empty.kind == .structure(name: "Opaque", fields: []))
        #expect(empty.size == 0 && empty.alignment == 1)
        #expect(opaque != empty)
    }

    @Test func doublePointerNestsPointees() throws {
        let type = try CType("^^v")
        guard case .pointer(let inner) = type.kind, case .pointer(let innermost) = inner.kind else {
            Issue.record("not a pointer to a pointer")
            return
        }
        #expect(inner.size == 8)
        #expect(innermost.isVoid)
    }

    // MARK: - Arrays

    static let arrays: [(String, Int, Int, Int)] = [
        ("[4i]", 16, 4, 4),
        ("[0i]", 0, 4, 0),
        ("[1c]", 1, 1, 1),
        ("[3c]", 3, 1, 3),
        ("[1D]", 16, 16, 1),
        ("[2^v]", 16, 8, 2),
        ("[2jD]", 64, 16, 2),
        ("[5{P=dd}]", 80, 8, 5),
        ("[3{S=ci}]", 24, 4, 3),
        ("[2(U=cs)]", 4, 2, 2),
        ("[2[3s]]", 12, 2, 2),
        ("[2[3[4d]]]", 192, 8, 2),
        ("[10*]", 80, 8, 10),
        ("[4@\"NSString\"]", 32, 8, 4),
        ("[3ri]", 12, 4, 3),
        ("[0{E=}]", 0, 1, 0),
    ]

    @Test(arguments: arrays)
    func arrayMultipliesItsElement(encoding: String, size: Int, alignment: Int, count: Int) throws {
        let type = try roundTripped(encoding)
        #expect(type.size == size)
        #expect(type.alignment == alignment)
        #expect(type.isAggregate)
        guard case .array(let actualCount, let element) = type.kind else {
            Issue.record("\(encoding) is not an array: \(type.kind)")
            return
        }
        #expect(actualCount == count)
        #expect(element.size * count == size)
        #expect(element.alignment == alignment)
    }

    @Test func multiDimensionalArrayIsAnArrayOfArrays() throws {
        let type = try CType("[2[3[4d]]]")
        guard case .array(2, let rows) = type.kind,
            case .array(3, let columns) = rows.kind,
            case .array(4, let cell) = columns.kind
        else {
            Issue.record("unexpected shape \(type.kind)")
            return
        }
        #expect(rows.size == 96)
        #expect(columns.size == 32)
        #expect(cell.kind == .primitive(.double))
    }

    // MARK: - Structs and unions

    static let structs: [LayoutCase] = [
        LayoutCase("{P=dd}", size: 16, alignment: 8, offsets: [0, 8]),
        LayoutCase("{S=ci}", size: 8, alignment: 4, offsets: [0, 4]),
        LayoutCase("{S=cid}", size: 16, alignment: 8, offsets: [0, 4, 8]),
        LayoutCase("{S=dc}", size: 16, alignment: 8, offsets: [0, 8]),
        LayoutCase("{S=csc}", size: 6, alignment: 2, offsets: [0, 2, 4]),
        LayoutCase("{S=ccci}", size: 8, alignment: 4, offsets: [0, 1, 2, 4]),
        LayoutCase("{S=c^v}", size: 16, alignment: 8, offsets: [0, 8]),
        LayoutCase("{S=cD}", size: 32, alignment: 16, offsets: [0, 16]),
        LayoutCase("{S=ct}", size: 32, alignment: 16, offsets: [0, 16]),
        LayoutCase("{S=cjf}", size: 12, alignment: 4, offsets: [0, 4]),
        LayoutCase("{S=Bq}", size: 16, alignment: 8, offsets: [0, 8]),
        LayoutCase("{S=[3c]i}", size: 8, alignment: 4, offsets: [0, 4]),
        LayoutCase("{S=i[3c]}", size: 8, alignment: 4, offsets: [0, 4]),
        LayoutCase("{S=@:#*}", size: 32, alignment: 8, offsets: [0, 8, 16, 24]),
        LayoutCase("{S=rii}", size: 8, alignment: 4, offsets: [0, 4]),
        LayoutCase("{S=}", size: 0, alignment: 1, offsets: []),
        LayoutCase("{S=c{E=}c}", size: 2, alignment: 1, offsets: [0, 1, 1]),
        LayoutCase("{S={T=cd}c}", size: 24, alignment: 8, offsets: [0, 16]),
        LayoutCase("{S=c(U=id)}", size: 16, alignment: 8, offsets: [0, 8]),
        LayoutCase(
            "{CGRect={CGPoint=dd}{CGSize=dd}}", size: 32, alignment: 8, offsets: [0, 16]),
        LayoutCase("{vector<int>=^i^i^i}", size: 24, alignment: 8, offsets: [0, 8, 16]),
        LayoutCase("{?=ii}", size: 8, alignment: 4, offsets: [0, 4], names: [nil, nil]),
        LayoutCase("{=ii}", size: 8, alignment: 4, offsets: [0, 4]),
        LayoutCase(#"{S="a"i"b"d}"#, size: 16, alignment: 8, offsets: [0, 8], names: ["a", "b"]),
        LayoutCase(#"{S="x"c"y"c"z"s}"#, size: 4, alignment: 2, offsets: [0, 1, 2], names: ["x", "y", "z"]),
        LayoutCase(#"{S=""i}"#, size: 4, alignment: 4, offsets: [0], names: [""]),
        LayoutCase(
            #"{Node="value"i"next"^{Node}}"#, size: 16, alignment: 8, offsets: [0, 8], names: ["value", "next"]),
        LayoutCase("{Größe=ic}", size: 8, alignment: 4, offsets: [0, 4]),
    ]

    static let unions: [LayoutCase] = [
        LayoutCase("(U=id)", size: 8, alignment: 8, offsets: [0, 0]),
        LayoutCase("(U=ci)", size: 4, alignment: 4, offsets: [0, 0]),
        LayoutCase("(U=c[5c])", size: 5, alignment: 1, offsets: [0, 0]),
        LayoutCase("(U=s[3c])", size: 4, alignment: 2, offsets: [0, 0]),
        LayoutCase("(U=D)", size: 16, alignment: 16, offsets: [0]),
        LayoutCase("(U=c{S=ci})", size: 8, alignment: 4, offsets: [0, 0]),
        LayoutCase("(U=)", size: 0, alignment: 1, offsets: []),
        LayoutCase("(?=sd)", size: 8, alignment: 8, offsets: [0, 0], names: [nil, nil]),
        LayoutCase(#"(U="a"i"b"f)"#, size: 4, alignment: 4, offsets: [0, 0], names: ["a", "b"]),
        LayoutCase("(U=b0i3b0c5)", size: 4, alignment: 4, offsets: [0, 0]),
        LayoutCase("{S=c(U=cs)c}", size: 6, alignment: 2, offsets: [0, 2, 4]),
    ]

    static let bitFields: [LayoutCase] = [
        LayoutCase("{BF=b0i3b3I5cb16q40}", size: 8, alignment: 8, offsets: [0, 0, 1, 2]),
        LayoutCase("{A=cb32i0c}", size: 5, alignment: 1, offsets: [0, 4, 4]),
        LayoutCase("{S=b0B1}", size: 1, alignment: 1, offsets: [0]),
        LayoutCase("{S=b0i1}", size: 4, alignment: 4, offsets: [0]),
        LayoutCase("{S=b0c8b8c8}", size: 2, alignment: 1, offsets: [0, 1]),
        LayoutCase("{S=b0q64}", size: 8, alignment: 8, offsets: [0]),
        LayoutCase("{S=b0t128}", size: 16, alignment: 16, offsets: [0]),
        LayoutCase("{S=cb8i24}", size: 4, alignment: 4, offsets: [0, 1]),
        LayoutCase("{S=b0i3i}", size: 8, alignment: 4, offsets: [0, 4]),
        LayoutCase("{S=b0i0}", size: 0, alignment: 1, offsets: [0]),
        LayoutCase("{S=b0s3b3s3b6s3}", size: 2, alignment: 2, offsets: [0, 0, 0]),
        LayoutCase(
            #"{S="flag"b0B1"value"b1i7}"#, size: 4, alignment: 4, offsets: [0, 0], names: ["flag", "value"]),
    ]

    private func checkLayout(_ layout: LayoutCase) throws {
        let type = try roundTripped(layout.encoding)
        #expect(type.size == layout.size)
        #expect(type.alignment == layout.alignment)
        #expect(type.isAggregate)
        #expect(!type.isOpaque)
        let members = try #require(fields(of: type))
        #expect(members.map(\.offset) == layout.offsets)
        if let names = layout.names {
            #expect(members.map(\.name) == names)
        }
        for member in members {
            #expect(member.offset + member.type.size <= type.size || member.type.isBitField)
        }
    }

    @Test(arguments: structs)
    func structLayout(_ layout: LayoutCase) throws {
        try checkLayout(layout)
    }

    @Test(arguments: unions)
    func unionLayout(_ layout: LayoutCase) throws {
        try checkLayout(layout)
    }

    @Test(arguments: bitFields)
    func bitFieldLayout(_ layout: LayoutCase) throws {
        try checkLayout(layout)
    }

    @Test(arguments: [
        ("{P=dd}", "P" as String?),
        ("{?=ii}", nil),
        ("{=ii}", nil),
        ("(U=ci)", "U"),
        ("(?=sd)", nil),
        ("{Opaque}", "Opaque"),
        ("{?}", nil),
        ("{vector<int>=^i^i^i}", "vector<int>"),
        ("{Größe=ic}", "Größe"),
    ])
    func aggregateKeepsItsName(encoding: String, name: String?) throws {
        let type = try roundTripped(encoding)
        #expect(aggregateName(of: type) == .some(name))
    }

    @Test func anonymousAggregatesAreWrittenWithQuestionMark() throws {
        #expect(try CType("{=ii}").encoding == "{?=ii}")
        #expect(try CType("{=ii}") == CType("{?=ii}"))
        #expect(try CType("{}").encoding == "{?}")
        #expect(try CType("(=c)").encoding == "(?=c)")
    }

    @Test func structAndUnionWithTheSameMembersDiffer() throws {
        let structure = try CType("{S=ci}")
        let union = try CType("(S=ci)")
        #expect(structure != union)
        #expect(structure.kind == .structure(name: "S", fields: fields(of: structure)))
        #expect(union.kind == .union(name: "S", fields: fields(of: union)))
    }

    @Test func nestedStructMembersKeepTheirOwnOffsets() throws {
        let rect = try CType("{CGRect={CGPoint=dd}{CGSize=dd}}")
        let members = try #require(fields(of: rect))
        #expect(members.count == 2)
        let sizeMembers = try #require(fields(of: members[1].type))
        #expect(sizeMembers.map(\.offset) == [0, 8])
        #expect(aggregateName(of: members[1].type) == .some("CGSize"))
    }

    // MARK: - Bit-fields

    @Test func gnuBitFieldsKeepOffsetTypeAndWidth() throws {
        let type = try CType("{BF=b0i3b3I5cb16q40}")
        let members = try #require(fields(of: type))
        let bitFields: [(Int, CType.Primitive, Int)] = members.compactMap {
            guard case .bitField(let field) = $0.type.kind else { return nil }
            return (field.bitOffset, field.base, field.width)
        }
        #expect(bitFields.count == 3)
        #expect(bitFields.map(\.0) == [0, 3, 16])
        #expect(bitFields.map(\.1) == [.int, .unsignedInt, .longLong])
        #expect(bitFields.map(\.2) == [3, 5, 40])
        #expect(members[2].type.kind == .primitive(.char))
        #expect(members.allSatisfy { $0.type.isBitField || $0.type.kind == .primitive(.char) })
    }

    @Test func zeroWidthBitFieldDoesNotAlign() throws {
        let type = try CType("{A=cb32i0c}")
        let members = try #require(fields(of: type))
        guard case .bitField(let separator) = members[1].type.kind else {
            Issue.record("member 1 is not a bit-field")
            return
        }
        #expect(separator.width == 0)
        #expect(separator.bitOffset == 32)
        #expect(members[1].type.alignment == 1)
        #expect(type.alignment == 1)
    }

    @Test func bitFieldEncodingIsCanonical() throws {
        #expect(try CType("{S=b00i003}").encoding == "{S=b0i3}")
        #expect(try CType("{S=b00i003}") == CType("{S=b0i3}"))
    }

    // MARK: - Complex numbers

    static let complexes: [(String, CType.Primitive, Int, Int)] = [
        ("jf", .float, 8, 4),
        ("jd", .double, 16, 8),
        ("jD", .longDouble, 32, 16),
        ("ji", .int, 8, 4),
        ("jc", .char, 2, 1),
        ("jC", .unsignedChar, 2, 1),
        ("js", .short, 4, 2),
        ("jq", .longLong, 16, 8),
        ("jQ", .unsignedLongLong, 16, 8),
    ]

    @Test(arguments: complexes)
    func complexIsTwoParts(encoding: String, part: CType.Primitive, size: Int, alignment: Int) throws {
        let type = try roundTripped(encoding)
        #expect(type.kind == .complex(part: part))
        #expect(type.size == size)
        #expect(type.alignment == alignment)
        #expect(type.isAggregate)
    }

    // MARK: - Objects and blocks

    static let objects: [(String, String?)] = [
        ("@", nil),
        (#"@"NSString""#, "NSString"),
        (#"@"NSArray<NSString *>""#, "NSArray<NSString *>"),
        (#"@"<NSCopying>""#, "<NSCopying>"),
        (#"@"""#, ""),
    ]

    @Test(arguments: objects)
    func objectKeepsItsClassName(encoding: String, className: String?) throws {
        let type = try roundTripped(encoding)
        #expect(type.kind == .object(className: className))
        #expect(type.size == 8)
        #expect(type.alignment == 8)
        #expect(type.encoding == encoding)
    }

    @Test func blockIsNotAnObject() throws {
        let block = try roundTripped("@?")
        #expect(block.kind == .block)
        #expect(block != (try CType("@")))
    }

    @Test func classNameIsKeptBeforeTheNextMemberName() throws {
        let type = try roundTripped(#"{S="obj"@"NSString""next"^v}"#)
        let members = try #require(fields(of: type))
        #expect(members.count == 2)
        #expect(members[0].name == "obj")
        #expect(members[0].type.kind == .object(className: "NSString"))
        #expect(members[1].name == "next")
        #expect(members[1].type.encoding == "^v")
        #expect(members.map(\.offset) == [0, 8])
    }

    @Test func quotedNameFollowedByATypeIsTheNextMember() throws {
        let type = try roundTripped(#"{S="obj"@"next"^v}"#)
        let members = try #require(fields(of: type))
        #expect(members.count == 2)
        #expect(members[0].name == "obj")
        #expect(members[0].type.kind == .object(className: nil))
        #expect(members[1].name == "next")
        #expect(members[1].type.encoding == "^v")
        #expect(type.size == 16)
    }

    static let objectMembers: [(String, [String?], [String?])] = [
        // Last member: the quoted text is a class name.
        (#"{S="a"@"NSString"}"#, ["a"], ["NSString"]),
        (#"(U="a"@"NSView""b"i)"#, ["a", "b"], ["NSView", nil]),
        (#"(U="a"@"NSView")"#, ["a"], ["NSView"]),
        // Members without names: the quoted text is always a class name.
        (#"{S=@"NSString"i}"#, [nil, nil], ["NSString", nil]),
        (#"{S=@"A"@"B"}"#, [nil, nil], ["A", "B"]),
        (#"{S="block"@?"count"Q}"#, ["block", "count"], [nil, nil]),
        (#"{S="a"@"b"@"C"}"#, ["a", "b"], [nil, "C"]),
        (#"{S="a"@"b"@"c"i}"#, ["a", "b", "c"], [nil, nil, nil]),
    ]

    @Test(arguments: objectMembers)
    func namedMemberHeuristic(encoding: String, names: [String?], classNames: [String?]) throws {
        let type = try roundTripped(encoding)
        let members = try #require(fields(of: type))
        #expect(members.map(\.name) == names)
        let actualClassNames: [String?] = members.map {
            if case .object(let className) = $0.type.kind { return className }
            return nil
        }
        #expect(actualClassNames == classNames)
    }

    @Test func pointerToObjectKeepsItsClassName() throws {
        let type = try roundTripped(#"^@"NSString""#)
        guard case .pointer(let pointee) = type.kind else {
            Issue.record("not a pointer")
            return
        }
        #expect(pointee.kind == .object(className: "NSString"))
    }

    // MARK: - Qualifiers

    static let qualified: [(String, CType.Qualifiers, String)] = [
        ("ri", [.const], "ri"),
        ("ni", [.in], "ni"),
        ("Ni", [.inout], "Ni"),
        ("o^@", [.out], "o^@"),
        ("O@", [.bycopy], "O@"),
        ("R@", [.byref], "R@"),
        ("Vv", [.oneway], "Vv"),
        ("Ai", [.atomic], "Ai"),
        ("nri", [.const, .in], "rni"),
        ("AVRONonr^v", [.const, .in, .inout, .out, .bycopy, .byref, .oneway, .atomic], "rnNoORVA^v"),
        ("rnNoORVA*", [.const, .in, .inout, .out, .bycopy, .byref, .oneway, .atomic], "rnNoORVA*"),
        ("rri", [.const], "ri"),
        ("nnnn*", [.in], "n*"),
        ("rnrn{S=i}", [.const, .in], "rn{S=i}"),
        ("Or[2i]", [.const, .bycopy], "rO[2i]"),
        ("r{Opaque}", [.const], "r{Opaque}"),
    ]

    @Test(arguments: qualified)
    func qualifiersAreCollectedInCanonicalOrder(
        encoding: String, qualifiers: CType.Qualifiers, canonical: String
    ) throws {
        let type = try roundTripped(encoding)
        #expect(type.qualifiers == qualifiers)
        #expect(type.encoding == canonical)
        let unqualified = type.unqualified
        #expect(unqualified.qualifiers.isEmpty)
        #expect(unqualified.size == type.size)
        #expect(unqualified.alignment == type.alignment)
        #expect(unqualified.kind == type.kind)
        #expect(type != unqualified)
    }

    @Test func qualifiersBelongToTheTypeTheyPrecede() throws {
        let pointerToConst = try roundTripped("^ri")
        #expect(pointerToConst.qualifiers.isEmpty)
        guard case .pointer(let pointee) = pointerToConst.kind else {
            Issue.record("not a pointer")
            return
        }
        #expect(pointee.qualifiers == .const)
        let constPointer = try roundTripped("r^i")
        #expect(constPointer.qualifiers == .const)
        #expect(constPointer != pointerToConst)

        let structure = try roundTripped("{S=rii}")
        let members = try #require(fields(of: structure))
        #expect(members.map(\.type.qualifiers) == [.const, []])
    }

    // MARK: - Method encodings

    static let methods: [(String, String, [String])] = [
        ("v24@0:8@16", "v", ["@", ":", "@"]),
        (#"@"NSString"16@0:8"#, #"@"NSString""#, ["@", ":"]),
        ("c24@0:8@16", "c", ["@", ":", "@"]),
        ("B20@0:8i16", "B", ["@", ":", "i"]),
        ("d24@0:8d16", "d", ["@", ":", "d"]),
        ("q16@0:8", "q", ["@", ":"]),
        ("{CGRect={CGPoint=dd}{CGSize=dd}}16@0:8", "{CGRect={CGPoint=dd}{CGSize=dd}}", ["@", ":"]),
        ("v40@0:8{CGPoint=dd}16^v32", "v", ["@", ":", "{CGPoint=dd}", "^v"]),
        ("Vv16@0:8", "Vv", ["@", ":"]),
        ("v32@0:8@?16r^{S=i}24", "v", ["@", ":", "@?", "r^{S=i}"]),
        ("r*8@0:4", "r*", ["@", ":"]),
        ("v-8@0", "v", ["@"]),
        ("@24@0:8o^@16", "@", ["@", ":", "o^@"]),
        ("v28@0:8i16i20i24", "v", ["@", ":", "i", "i", "i"]),
        ("v40@0:8jd16D24", "v", ["@", ":", "jd", "D"]),
        ("v24@0:8^{Opaque}16", "v", ["@", ":", "^{Opaque}"]),
        ("v24@0:8[4i]16", "v", ["@", ":", "[4i]"]),
        ("v24@0:8(U=if)16", "v", ["@", ":", "(U=if)"]),
        ("i", "i", []),
        ("v", "v", []),
        ("i^vi", "i", ["^v", "i"]),
        ("v@:", "v", ["@", ":"]),
    ]

    @Test(arguments: methods)
    func methodEncodingDropsFrameOffsets(encoding: String, returnType: String, arguments: [String]) throws {
        let signature = try Signature(encoding)
        #expect(signature.returnType.encoding == returnType)
        #expect(signature.argumentTypes.map(\.encoding) == arguments)
        #expect(signature.encoding == returnType + arguments.joined())
        let again = try Signature(signature.encoding)
        #expect(again == signature)
        #expect(try signature.returnType == CType(returnType))
        for (argument, text) in zip(signature.argumentTypes, arguments) {
            #expect(try argument == CType(text))
        }
    }

    @Test func methodReturnTypeHasItsLayout() throws {
        let signature = try Signature("{CGRect={CGPoint=dd}{CGSize=dd}}16@0:8")
        #expect(signature.returnType.size == 32)
        #expect(signature.returnType.alignment == 8)
        #expect(signature.argumentTypes.map(\.size) == [8, 8])
    }

    // MARK: - Canonical encodings

    static let canonical: [(String, String)] = [
        ("{=i}", "{?=i}"),
        ("(=i)", "(?=i)"),
        ("[003i]", "[3i]"),
        ("[0000000000000000000003i]", "[3i]"),
        ("nri", "rni"),
        ("{S=b00i003}", "{S=b0i3}"),
        ("^{=i}", "^{?=i}"),
        ("{}", "{?}"),
        (#"{S="a"@"C"}"#, #"{S="a"@"C"}"#),
        (#"{S="a"@"b"i}"#, #"{S="a"@"b"i}"#),
    ]

    @Test(arguments: canonical)
    func canonicalEncoding(encoding: String, canonical: String) throws {
        let type = try roundTripped(encoding)
        #expect(type.encoding == canonical)
        #expect(try CType(canonical) == type)
    }

    // MARK: - Every valid case reads back

    static var allValidEncodings: [String] {
        scalars.map(\.0) + pointers.map(\.0) + arrays.map(\.0) + structs.map(\.encoding)
            + unions.map(\.encoding) + bitFields.map(\.encoding) + complexes.map(\.0) + objects.map(\.0)
            + objectMembers.map(\.0) + qualified.map(\.0) + canonical.map(\.0)
    }

    @Test func everyValidEncodingRoundTrips() throws {
        #expect(Self.allValidEncodings.count > 150)
        for encoding in Self.allValidEncodings {
            let type = try CType(encoding)
            let reread = try CType(type.encoding)
            #expect(reread == type, "\(encoding) -> \(type.encoding)")
            #expect(reread.encoding == type.encoding)
            #expect(reread.hashValue == type.hashValue)
        }
    }

    @Test func everyValidEncodingIsAlsoAValidArgumentWhenItIsAValue() throws {
        for encoding in Self.allValidEncodings {
            let type = try CType(encoding)
            guard !type.isVoid, !type.isOpaque else { continue }
            let signature = try Signature("v" + type.encoding)
            #expect(signature.argumentTypes == [type], "\(encoding)")
        }
    }
}
