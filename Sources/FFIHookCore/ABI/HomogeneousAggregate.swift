/// AAPCS64's homogeneous floating-point aggregate: one to four members of one float type.
struct HomogeneousAggregate: Equatable {
    /// The member type (`float`, `double` or `long double`, which is 128-bit on AArch64).
    let base: CType.Primitive
    /// How many members of `base` fill the value (1 to 4).
    let count: Int

    /// The homogeneous aggregate `type` is, or `nil` when it is not one.
    init?(_ type: CType) {
        guard type.isAggregate, type.size > 0, type.size <= 64 else { return nil }
        var leaves: [ScalarLeaf] = []
        type.scalarLeaves(into: &leaves)
        guard let first = leaves.first?.primitive,
            leaves.allSatisfy({ $0.primitive == first })
        else { return nil }
        // Union members overlay each other: count distinct positions, which must tile the value.
        let offsets = Set(leaves.map(\.offset)).sorted()
        guard offsets.count <= 4, offsets.count * first.size == type.size,
            offsets.enumerated().allSatisfy({ $0.element == $0.offset * first.size })
        else { return nil }
        self.base = first
        self.count = offsets.count
    }
}
