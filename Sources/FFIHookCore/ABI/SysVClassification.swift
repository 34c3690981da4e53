/// The x86-64 System V classification of a value, one class per eightbyte.
///
/// This follows the psABI's algorithm as gcc and clang implement it: each eightbyte takes
/// the merged class of the scalars that overlap it (INTEGER wins over SSE; `long double`
/// is X87 and X87UP; X87 merged with anything but INTEGER is MEMORY), then a value larger
/// than two eightbytes, or whose X87UP half does not follow an X87 half, is MEMORY.
enum SysVClass: Equatable {
    case noClass
    case integer
    case sse
    case x87
    case x87Up
    case memory

    /// The class of an eightbyte that holds both `self` and `other`.
    func merged(with other: SysVClass) -> SysVClass {
        if self == other { return self }
        if self == .noClass { return other }
        if other == .noClass { return self }
        if self == .memory || other == .memory { return .memory }
        if self == .integer || other == .integer { return .integer }
        if [.x87, .x87Up].contains(self) || [.x87, .x87Up].contains(other) { return .memory }
        return .sse
    }
}

/// How an aggregate travels under the x86-64 System V ABI.
enum SysVClassification: Equatable {
    /// In registers: one class per eightbyte (`.integer`, `.sse`, or `.x87`+`.x87Up`).
    case registers([SysVClass])
    /// In memory: on the stack as an argument, through a hidden pointer as a return value.
    case memory

    init(_ type: CType) {
        guard type.size <= 16, type.size > 0 else {
            self = .memory
            return
        }
        var leaves: [ScalarLeaf] = []
        type.scalarLeaves(into: &leaves)
        var classes = [SysVClass](repeating: .noClass, count: (type.size + 7) / 8)
        for leaf in leaves {
            switch leaf.class {
            case .longDouble:
                let word = leaf.offset / 8
                classes[word] = classes[word].merged(with: .x87)
                if word + 1 < classes.count { classes[word + 1] = classes[word + 1].merged(with: .x87Up) }
            case .integer, .floatingPoint:
                let leafClass: SysVClass = leaf.class == .integer ? .integer : .sse
                for word in (leaf.offset / 8)...((leaf.offset + leaf.size - 1) / 8) where word < classes.count {
                    classes[word] = classes[word].merged(with: leafClass)
                }
            }
        }
        for (index, eightbyte) in classes.enumerated() {
            if eightbyte == .memory {
                self = .memory
                return
            }
            if eightbyte == .x87Up && (index == 0 || classes[index - 1] != .x87) {
                self = .memory
                return
            }
        }
        self = .registers(classes)
    }

    /// How many general-purpose and SSE registers the value needs.
    var registerCounts: (general: Int, sse: Int)? {
        guard case .registers(let classes) = self else { return nil }
        if classes.contains(.x87) { return nil }
        return (classes.filter { $0 == .integer }.count, classes.filter { $0 == .sse }.count)
    }
}
