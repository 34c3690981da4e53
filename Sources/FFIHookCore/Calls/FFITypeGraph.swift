internal import CFFI

/// The libffi types that describe a signature's values, owned by one call interface.
///
/// libffi has no unions, no bit-fields, no 128-bit integers and no zero-sized members, and
/// the platform's libffi returns some `long double` aggregates the wrong way. Each value is
/// therefore lowered to a libffi type that the ABI passes exactly like the C type:
///
/// - scalars map to libffi's scalars; `__int128` to a 16-byte, 16-aligned pair of 64-bit
///   integers; arrays inside structs are expanded (large ones as nested doubling blocks, so
///   a `[100000i]` member costs a few dozen types, not a hundred thousand);
/// - plain structs keep their members;
/// - unions and structs with bit-fields become a struct of pieces that reproduce the
///   value's size, alignment and ABI classification (x86-64 System V per eightbyte,
///   AArch64 homogeneous float aggregates);
/// - on x86-64 an aggregate classified X87/X87UP (a lone `long double`) travels as a
///   `long double`, which libffi returns in `%st0` as the compilers do.
///
/// Every type built here is freed with the graph.
final class FFITypeGraph {
    /// Where a value appears.
    enum Position: Equatable {
        case argument(Int)
        case returnValue
    }

    /// A value that no libffi type can pass as the C compiler does.
    struct Unrepresentable: Error {
        let position: Position
        let reason: String
    }

    /// A lowered value: the libffi type and the size and alignment libffi must compute for it.
    struct Lowered {
        let type: UnsafeMutablePointer<ffi_type>
        let expectedSize: Int
        let expectedAlignment: Int
    }

    private var allocations: [UnsafeMutableRawPointer] = []
    private var int128Pair: UnsafeMutablePointer<ffi_type>?

    deinit {
        for allocation in allocations { allocation.deallocate() }
    }

    // MARK: - Values

    /// The libffi type for a value at `position`.
    func lower(_ type: CType, at position: Position) throws(Unrepresentable) -> Lowered {
        func fail(_ reason: String) -> Unrepresentable { Unrepresentable(position: position, reason: reason) }
        switch type.kind {
        case .void:
            guard position == .returnValue else { throw fail("void is not a value") }
            return Lowered(type: ffh_type_void(), expectedSize: 1, expectedAlignment: 1)
        case .array:
            guard position != .returnValue else { throw fail("C functions cannot return arrays") }
            return Lowered(
                type: ffh_type_pointer(), expectedSize: Platform.pointerSize,
                expectedAlignment: Platform.pointerSize)
        case .structure(_, nil), .union(_, nil):
            throw fail("an opaque aggregate has no known size")
        case .bitField:
            throw fail("a bit-field is not a value")
        case .primitive, .pointer, .cString, .object, .block, .objectClass, .selector, .unknown:
            return Lowered(type: scalar(type), expectedSize: type.size, expectedAlignment: type.alignment)
        case .complex, .structure, .union:
            guard type.size > 0 else { throw fail("an empty aggregate has no C calling convention") }
            return try lowerAggregate(type, at: position)
        }
    }

    private func lowerAggregate(_ type: CType, at position: Position) throws(Unrepresentable) -> Lowered {
        let exact = { (ffiType: UnsafeMutablePointer<ffi_type>) in
            Lowered(type: ffiType, expectedSize: type.size, expectedAlignment: type.alignment)
        }
        #if arch(x86_64)
            if case .complex(.longDouble) = type.kind, let complex = ffh_type_complex_longdouble() {
                // Returned in %st0 and %st1, which only libffi's own complex type does.
                return exact(complex)
            }
            let classification = SysVClassification(type)
            if classification == .registers([.x87, .x87Up]) {
                return exact(ffh_type_longdouble())
            }
            if let natural = natural(type) { return exact(natural) }
            switch classification {
            case .registers(let classes):
                guard !classes.contains(.noClass) else {
                    throw Unrepresentable(position: position, reason: "an eightbyte of \(type) holds no data")
                }
                return exact(registerPieces(type, classes: classes))
            case .memory where type.size <= 16:
                // A union mixing `long double` with other data: in memory, 16-aligned.
                if position == .returnValue {
                    // Any memory-class type works for a hidden-pointer return; the caller's buffer
                    // must then hold the larger type, which the call interface arranges.
                    let pair = int128()
                    return Lowered(type: structure([pair, pair]), expectedSize: 32, expectedAlignment: 16)
                }
                return exact(structure([ffh_type_longdouble()]))
            case .memory:
                return exact(memoryPieces(type))
            }
        #elseif arch(arm64)
            if let natural = natural(type) { return exact(natural) }
            if let homogeneous = HomogeneousAggregate(type) {
                let base = scalar(
                    CType(
                        kind: .primitive(homogeneous.base), size: homogeneous.base.size,
                        alignment: homogeneous.base.alignment))
                return exact(structure(Array(repeating: base, count: homogeneous.count)))
            }
            return exact(memoryPieces(type))
        #else
            if let natural = natural(type) { return exact(natural) }
            throw Unrepresentable(
                position: position, reason: "unions and bit-fields are not supported on this architecture")
        #endif
    }

    // MARK: - Natural lowering

    /// The member-for-member libffi struct for `type`, or `nil` when libffi cannot describe
    /// it that way (a union, a bit-field, or a zero-sized member that decides the alignment).
    private func natural(_ type: CType) -> UnsafeMutablePointer<ffi_type>? {
        guard !type.containsUnionOrBitField else { return nil }
        var elements: [UnsafeMutablePointer<ffi_type>] = []
        guard appendNatural(type, to: &elements), !elements.isEmpty else { return nil }
        if elements.count == 1, case .complex = type.kind { return elements[0] }
        return structure(elements)
    }

    /// Appends the libffi elements that lay out `type` as a member; false when impossible.
    private func appendNatural(_ type: CType, to elements: inout [UnsafeMutablePointer<ffi_type>]) -> Bool {
        switch type.kind {
        case .complex(let part):
            let partType = scalar(CType(kind: .primitive(part), size: part.size, alignment: part.alignment))
            elements.append(structure([partType, partType]))
            return true
        case .array(let count, let element):
            guard count > 0, element.size > 0 else { return false }
            var block: [UnsafeMutablePointer<ffi_type>] = []
            guard appendNatural(element, to: &block), !block.isEmpty else { return false }
            // A nested array expands to several elements; one element of the outer array is their struct.
            let unit = block.count == 1 ? block[0] : structure(block)
            return appendRepeated(unit, count: count, to: &elements)
        case .structure(_, let fields?):
            var members: [UnsafeMutablePointer<ffi_type>] = []
            for field in fields where field.type.size > 0 {
                guard appendNatural(field.type, to: &members) else { return false }
            }
            let zeroSized = fields.filter { $0.type.size == 0 }
            if zeroSized.contains(where: { $0.type.alignment > 1 }) || members.isEmpty { return false }
            elements.append(structure(members))
            return true
        case .union, .bitField, .void, .structure(_, nil):
            return false
        case .primitive, .pointer, .cString, .object, .block, .objectClass, .selector, .unknown:
            elements.append(scalar(type))
            return true
        }
    }

    /// Appends `count` copies of `element`: directly when few, as doubling blocks when many.
    private func appendRepeated(
        _ element: UnsafeMutablePointer<ffi_type>, count: Int, to elements: inout [UnsafeMutablePointer<ffi_type>]
    ) -> Bool {
        if count <= 16 {
            elements.append(contentsOf: repeatElement(element, count: count))
            return true
        }
        var blocks = [element]
        while (1 << blocks.count) <= count { blocks.append(structure([blocks.last!, blocks.last!])) }
        for bit in (0..<blocks.count).reversed() where count & (1 << bit) != 0 {
            elements.append(blocks[bit])
        }
        return true
    }

    // MARK: - Lowering by classification

    #if arch(x86_64)
        /// A struct whose eightbytes hold integer or float pieces matching `classes`.
        private func registerPieces(_ type: CType, classes: [SysVClass]) -> UnsafeMutablePointer<ffi_type> {
            var pieces: [UnsafeMutablePointer<ffi_type>] = []
            let integerPiece = min(type.alignment, 8)
            for (word, eightbyteClass) in classes.enumerated() {
                let bytes = min(8, type.size - word * 8)
                if eightbyteClass == .sse {
                    if bytes == 8 && type.alignment >= 8 {
                        pieces.append(ffh_type_double())
                    } else {
                        pieces.append(contentsOf: repeatElement(ffh_type_float(), count: bytes / 4))
                    }
                } else {
                    pieces.append(contentsOf: repeatElement(unsignedInteger(integerPiece), count: bytes / integerPiece))
                }
            }
            if type.alignment > 8 {
                return structure(pieces, presetSize: type.size, presetAlignment: type.alignment)
            }
            return structure(pieces)
        }
    #endif

    /// A struct of integer pieces with `type`'s size and alignment, for values in memory (or,
    /// on AArch64, in general registers, which take any aggregate of 16 bytes or less).
    private func memoryPieces(_ type: CType) -> UnsafeMutablePointer<ffi_type> {
        let piece = type.alignment >= 16 ? int128() : unsignedInteger(type.alignment)
        let pieceSize = max(type.alignment, 1)
        var elements: [UnsafeMutablePointer<ffi_type>] = []
        _ = appendRepeated(piece, count: type.size / pieceSize, to: &elements)
        return structure(elements)
    }

    // MARK: - Building blocks

    private func scalar(_ type: CType) -> UnsafeMutablePointer<ffi_type> {
        guard case .primitive(let primitive) = type.kind else { return ffh_type_pointer() }
        switch primitive {
        case .char: return ffh_type_sint8()
        case .unsignedChar, .bool: return ffh_type_uint8()
        case .short: return ffh_type_sint16()
        case .unsignedShort: return ffh_type_uint16()
        case .int, .long: return ffh_type_sint32()
        case .unsignedInt, .unsignedLong: return ffh_type_uint32()
        case .longLong: return ffh_type_sint64()
        case .unsignedLongLong: return ffh_type_uint64()
        case .int128, .unsignedInt128: return int128()
        case .float: return ffh_type_float()
        case .double: return ffh_type_double()
        case .longDouble: return ffh_type_longdouble()
        }
    }

    private func unsignedInteger(_ size: Int) -> UnsafeMutablePointer<ffi_type> {
        switch size {
        case 1: ffh_type_uint8()
        case 2: ffh_type_uint16()
        case 4: ffh_type_uint32()
        default: ffh_type_uint64()
        }
    }

    /// `__int128`: two 64-bit integers, 16 bytes, 16-aligned. libffi has no such type and
    /// would compute an alignment of 8 for the pair, so size and alignment are set here; libffi
    /// keeps the values of a type whose size is already nonzero.
    private func int128() -> UnsafeMutablePointer<ffi_type> {
        if let int128Pair { return int128Pair }
        let pair = structure([ffh_type_uint64(), ffh_type_uint64()], presetSize: 16, presetAlignment: 16)
        int128Pair = pair
        return pair
    }

    /// A new libffi struct type over `elements`, owned by this graph.
    private func structure(
        _ elements: [UnsafeMutablePointer<ffi_type>], presetSize: Int = 0, presetAlignment: Int = 0
    ) -> UnsafeMutablePointer<ffi_type> {
        let list = UnsafeMutablePointer<UnsafeMutablePointer<ffi_type>?>.allocate(capacity: elements.count + 1)
        for (index, element) in elements.enumerated() { list[index] = element }
        list[elements.count] = nil
        let type = UnsafeMutablePointer<ffi_type>.allocate(capacity: 1)
        type.initialize(
            to: ffi_type(
                size: presetSize, alignment: UInt16(presetAlignment),
                type: ffh_type_code_struct(), elements: list))
        allocations.append(UnsafeMutableRawPointer(list))
        allocations.append(UnsafeMutableRawPointer(type))
        return type
    }
}
