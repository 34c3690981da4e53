/// The scalar pieces of a value and where they lie, which is what ABI classification reads.
struct ScalarLeaf: Equatable {
    /// What kind of data the bytes hold.
    enum Class: Equatable {
        /// Integer, pointer or bit-field bits.
        case integer
        /// `float` or `double` (or the parts of a complex of them).
        case floatingPoint
        /// `long double`.
        case longDouble
    }

    /// The byte offset of the leaf in the outermost value.
    let offset: Int
    /// The number of bytes it covers.
    let size: Int
    let `class`: Class
    /// The leaf's type when it is a floating-point scalar (used for homogeneous aggregates).
    let primitive: CType.Primitive?
}

extension CType {
    /// Every scalar leaf of the value, at its offset from `base`; bit-fields count as integer
    /// bytes, zero-width bit-fields and empty aggregates as nothing.
    func scalarLeaves(at base: Int = 0, into leaves: inout [ScalarLeaf]) {
        switch kind {
        case .void, .structure(_, nil), .union(_, nil):
            return
        case .primitive(let primitive):
            let leafClass: ScalarLeaf.Class =
                primitive == .longDouble ? .longDouble : primitive.isFloatingPoint ? .floatingPoint : .integer
            leaves.append(
                ScalarLeaf(
                    offset: base, size: size, class: leafClass,
                    primitive: primitive.isFloatingPoint ? primitive : nil))
        case .complex(let part):
            let partType = CType(kind: .primitive(part), size: part.size, alignment: part.alignment)
            partType.scalarLeaves(at: base, into: &leaves)
            partType.scalarLeaves(at: base + part.size, into: &leaves)
        case .pointer, .cString, .object, .block, .objectClass, .selector, .unknown:
            leaves.append(ScalarLeaf(offset: base, size: size, class: .integer, primitive: nil))
        case .array(let count, let element):
            // Past the first eightbytes the class of each element repeats; callers only need
            // the leaves of values small enough to travel in registers.
            for index in 0..<min(count, 64) {
                element.scalarLeaves(at: base + index * element.size, into: &leaves)
            }
        case .structure(_, let fields?), .union(_, let fields?):
            for field in fields {
                if case .bitField(let bitField) = field.type.kind {
                    guard bitField.width > 0 else { continue }
                    let first = bitField.bitOffset / 8
                    let last = (bitField.bitOffset + bitField.width - 1) / 8
                    leaves.append(
                        ScalarLeaf(offset: base + first, size: last - first + 1, class: .integer, primitive: nil))
                } else {
                    field.type.scalarLeaves(at: base + field.offset, into: &leaves)
                }
            }
        case .bitField(let bitField):
            guard bitField.width > 0 else { return }
            leaves.append(ScalarLeaf(offset: base, size: size, class: .integer, primitive: nil))
        }
    }

    /// Whether the value holds a union or a bit-field anywhere, which libffi cannot describe.
    var containsUnionOrBitField: Bool {
        switch kind {
        case .union, .bitField: true
        case .array(_, let element): element.containsUnionOrBitField
        case .structure(_, let fields?): fields.contains { $0.type.containsUnionOrBitField }
        default: false
        }
    }
}
