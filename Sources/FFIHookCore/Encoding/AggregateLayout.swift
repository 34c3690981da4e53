/// Places the members of a struct or union by the platform's C layout rules.
///
/// Ordinary members go at the next offset aligned to their alignment. A bit-field sits at
/// the bit offset its encoding gives, which must not precede the end of the member before
/// it; a bit-field of nonzero width counts its declared type's alignment, a zero-width one
/// does not. Union members all start at offset 0.
struct AggregateLayout {
    /// What can go wrong while placing a member.
    enum Problem: Error, Equatable {
        case sizeOverflow
        case bitFieldOverlap(bitOffset: Int, end: Int)
        case voidMember

        var problem: EncodingError.Problem {
            switch self {
            case .sizeOverflow: .sizeOverflow
            case .bitFieldOverlap(let bitOffset, let end):
                .invalidBitFieldPlacement("starts at bit \(bitOffset), before the previous member ends at bit \(end)")
            case .voidMember: .voidValue
            }
        }
    }

    let isUnion: Bool
    private(set) var fields: [CType.Field] = []
    /// The first bit after the members placed so far (struct) or the largest member end (union).
    private var endBit = 0
    private var alignment = 1

    init(isUnion: Bool) {
        self.isUnion = isUnion
    }

    mutating func append(name: String?, type: CType) throws(Problem) {
        let offset: Int
        let end: Int
        if case .bitField(let bitField) = type.kind {
            if !isUnion && bitField.bitOffset < endBit {
                throw .bitFieldOverlap(bitOffset: bitField.bitOffset, end: endBit)
            }
            offset = bitField.bitOffset / 8
            end = bitField.bitOffset + bitField.width
            if bitField.width > 0 { alignment = max(alignment, bitField.base.alignment) }
        } else {
            let start = isUnion ? 0 : (endBit + 7) / 8
            offset = start.roundedUp(to: type.alignment)
            let (byteEnd, overflow) = offset.addingReportingOverflow(type.size)
            guard !overflow, byteEnd <= CType.maximumSize else { throw .sizeOverflow }
            end = byteEnd * 8
            alignment = max(alignment, type.alignment)
        }
        endBit = isUnion ? max(endBit, end) : end
        guard (endBit + 7) / 8 <= CType.maximumSize else { throw .sizeOverflow }
        fields.append(CType.Field(name: name, type: type, offset: offset))
    }

    /// The aggregate's size (its members' extent rounded up to its alignment) and alignment.
    func finish() -> (size: Int, alignment: Int) {
        (((endBit + 7) / 8).roundedUp(to: alignment), alignment)
    }
}

extension Int {
    /// `self` rounded up to a multiple of `alignment` (a power of two).
    func roundedUp(to alignment: Int) -> Int {
        (self + alignment - 1) & ~(alignment - 1)
    }
}
