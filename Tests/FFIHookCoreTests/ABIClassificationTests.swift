import Testing

@testable import FFIHookCore

/// The classifiers behind the lowering of unions and bit-fields. The x86-64 results are
/// also exercised end to end by the compiler-built call table; the AArch64 homogeneous
/// aggregate rules can only be checked here on an x86-64 machine.
@Suite struct ABIClassificationTests {
    @Test(arguments: [
        ("{?=qf}", SysVClassification.registers([.integer, .sse])),
        ("{?=cd}", .registers([.integer, .sse])),
        ("{?=ff}", .registers([.sse])),
        ("{?=fff}", .registers([.sse, .sse])),
        ("{?=if}", .registers([.integer])),
        ("(?=fi)", .registers([.integer])),
        ("(?=ff)", .registers([.sse])),
        ("{?=D}", .registers([.x87, .x87Up])),
        ("(?=DD)", .registers([.x87, .x87Up])),
        ("(?=Dq)", .memory),
        ("(?=Dd)", .memory),
        ("(?=D[2q])", .registers([.integer, .integer])),
        ("(?=Dt)", .registers([.integer, .integer])),
        ("{?=b0i3f}", .registers([.integer])),
        ("{?=b0q50b50I10b64q33b97c5b112S16}", .registers([.integer, .integer])),
        ("{?=[3q]}", .memory),
        ("{?=ddd}", .memory),
        ("jf", .registers([.sse])),
        ("jd", .registers([.sse, .sse])),
        ("ji", .registers([.integer])),
        ("{?=t}", .registers([.integer, .integer])),
    ])
    func sysVClasses(encoding: String, expected: SysVClassification) throws {
        #expect(SysVClassification(try CType(encoding)) == expected)
    }

    @Test(arguments: [
        ("{?=ffff}", CType.Primitive.float, 4),
        ("{?=dd}", .double, 2),
        ("{?=[3f]}", .float, 3),
        ("{?={?=ff}{?=f}}", .float, 3),
        ("(?=[4f]{?=ffff})", .float, 4),
        ("jf", .float, 2),
        ("{?=jdjd}", .double, 4),
        ("{?=D}", .longDouble, 1),
        ("(?=f[2f])", .float, 2),
    ])
    func homogeneousAggregates(encoding: String, base: CType.Primitive, count: Int) throws {
        let aggregate = try #require(HomogeneousAggregate(try CType(encoding)))
        #expect(aggregate.base == base)
        #expect(aggregate.count == count)
    }

    @Test(arguments: ["{?=fffff}", "{?=fd}", "{?=fi}", "(?=fd)", "{?=[5f]}", "{?=b0i3}", "d", "{?=jdjdd}"])
    func notHomogeneous(encoding: String) throws {
        #expect(HomogeneousAggregate(try CType(encoding)) == nil)
    }

    @Test(arguments: [
        // (signature, index of the split argument or nil)
        ("iqqqqqd{?=qf}", 6 as Int?),
        ("icccccf{?=cd}", 6),
        ("iqqqqd{?=qf}", nil),
        ("iqqqqqqd{?=qf}", nil),
        ("{?=qqq}qqqqd{?=qf}", 5),
        ("vqqqqq{?=dq}", nil),
        ("vqqqqq{?=qq}", nil),
    ])
    func argumentsSplitOnlyWhereLibffiWouldCorruptXmm0(encoding: String, split: Int?) throws {
        let plan = SysVArgumentPlan(try Signature(encoding))
        #expect(plan.needsSplitting == (split != nil))
        let splitArguments = Set(plan.pieces.filter { $0.kind != .whole }.map(\.argument))
        #expect(splitArguments == (split.map { [$0] } ?? []))
    }
}
