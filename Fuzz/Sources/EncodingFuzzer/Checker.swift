import FFIHookCore
import FuzzKit

/// Checks the results of parsing one input.
struct Checker {
    /// The string handed to the parser.
    let text: String
    /// The fuzzer's input, quoted when a check fails.
    let bytes: [UInt8]

    func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
        FuzzKit.require(condition(), message(), bytes)
    }

    // MARK: - Entry points

    /// Parses the input as a signature and checks the result; returns the signature if any.
    func checkSignature() -> Signature? {
        let signature: Signature
        do {
            signature = try Signature(text)
        } catch {
            checkError(error, of: text, "Signature")
            return nil
        }
        check(signature.returnType, "return type")
        require(!signature.returnType.isOpaque, "Signature accepted an opaque return type \(signature.returnType)")
        require(!isBitField(signature.returnType), "Signature accepted a bit-field return type")
        for (index, argument) in signature.argumentTypes.enumerated() {
            check(argument, "argument \(index)")
            require(!argument.isVoid, "Signature accepted a void argument \(index)")
            require(!argument.isOpaque, "Signature accepted an opaque argument \(index): \(argument)")
            require(!isBitField(argument), "Signature accepted a bit-field argument \(index)")
        }

        let canonical = signature.encoding
        require(signature.description == canonical, "Signature.description differs from its encoding")
        let reparsed: Signature
        do {
            reparsed = try Signature(canonical)
        } catch {
            require(false, "canonical signature \(quote(canonical)) does not parse: \(error)")
            return signature
        }
        require(
            reparsed == signature,
            "canonical signature \(quote(canonical)) reads back as \(outline(reparsed)) instead of \(outline(signature))"
        )
        require(reparsed.hashValue == signature.hashValue, "equal signatures hash differently")
        require(reparsed.encoding == canonical, "canonical signature \(quote(canonical)) is not stable")
        return signature
    }

    /// Parses the input as one type and checks the result.
    func checkSingleType(signature: Signature?) {
        let type: CType
        do {
            type = try CType(text)
        } catch {
            checkError(error, of: text, "CType")
            return
        }
        check(type, "type")

        let canonical = type.encoding
        require(type.description == canonical, "CType.description differs from its encoding")
        do {
            let reparsed = try CType(canonical)
            require(
                reparsed == type,
                "canonical type \(quote(canonical)) reads back as \(reparsed.kind) instead of \(type.kind)")
            require(reparsed.hashValue == type.hashValue, "equal types hash differently")
            require(reparsed.encoding == canonical, "canonical type \(quote(canonical)) is not stable")
        } catch {
            require(false, "canonical type \(quote(canonical)) does not parse: \(error)")
        }

        // One complete type is also a signature returning it and taking nothing; only an
        // opaque aggregate is a type but no return type.
        if !type.isOpaque {
            require(signature != nil, "CType accepts \(type) but Signature refuses it")
            if let signature {
                require(
                    signature.returnType == type && signature.argumentTypes.isEmpty,
                    "CType reads \(type) but Signature reads \(outline(signature))")
            }
        }
    }

    // MARK: - Errors

    func checkError(_ error: EncodingError, of input: String, _ entry: String) {
        let length = input.utf8.count
        require(
            error.offset >= 0 && error.offset <= length,
            "\(entry) error offset \(error.offset) outside 0...\(length): \(error)")
        require(!error.description.isEmpty, "\(entry) error has an empty description")
        require(!error.message.isEmpty, "\(entry) error has an empty message")
        require(error.encoding == input, "\(entry) error names another encoding: \(quote(error.encoding))")
    }

    // MARK: - Types

    /// Checks the size, alignment and layout of `type` and everything inside it.
    func check(_ type: CType, _ path: String) {
        let depth = checkTree(type, path)
        require(
            depth <= CType.maximumNestingDepth,
            "\(path) nests \(depth) levels, more than \(CType.maximumNestingDepth)")
    }

    /// Returns the nesting depth of `type`, counted as the parser counts it.
    private func checkTree(_ type: CType, _ path: String) -> Int {
        let size = type.size
        let alignment = type.alignment
        require(size >= 0, "\(path) \(type) has negative size \(size)")
        require(size <= CType.maximumSize, "\(path) \(type) has size \(size) above the maximum")
        require(
            alignment > 0 && alignment & (alignment - 1) == 0 && alignment <= 16,
            "\(path) \(type) has alignment \(alignment), not a power of two up to 16")
        if type.isAggregate {
            require(
                size % alignment == 0, "\(path) \(type) has size \(size) not a multiple of its alignment \(alignment)")
        }

        switch type.kind {
        case .void:
            require(size == 0 && alignment == 1, "\(path) void has size \(size), alignment \(alignment)")
            return 0
        case .primitive(let primitive):
            require(
                size == primitive.size && alignment == primitive.alignment,
                "\(path) \(type) has size \(size), alignment \(alignment)")
            return 0
        case .cString, .object, .block, .objectClass, .selector, .unknown:
            require(
                size == MemoryLayout<UnsafeRawPointer>.size && alignment == MemoryLayout<UnsafeRawPointer>.alignment,
                "\(path) \(type) is not pointer-sized: size \(size), alignment \(alignment)")
            return 0
        case .pointer(let pointee):
            require(
                size == MemoryLayout<UnsafeRawPointer>.size && alignment == MemoryLayout<UnsafeRawPointer>.alignment,
                "\(path) \(type) is not pointer-sized: size \(size), alignment \(alignment)")
            require(!isBitField(pointee), "\(path) \(type) points to a bit-field")
            return 1 + checkTree(pointee, path + ".pointee")
        case .array(let count, let element):
            require(count >= 0, "\(path) \(type) has negative count")
            let (expected, overflow) = element.size.multipliedReportingOverflow(by: count)
            require(
                !overflow && size == expected && alignment == element.alignment,
                "\(path) \(type) has size \(size), alignment \(alignment) for \(count) x \(element)")
            require(
                !element.isVoid && !element.isOpaque && !isBitField(element),
                "\(path) \(type) has an incomplete element")
            return 1 + checkTree(element, path + ".element")
        case .complex(let part):
            require(part.isInteger || part.isFloatingPoint, "\(path) \(type) has a non-arithmetic part")
            require(part != .bool, "\(path) \(type) is a complex _Bool")
            require(
                size == 2 * part.size && alignment == part.alignment,
                "\(path) \(type) has size \(size), alignment \(alignment)")
            return 1
        case .bitField(let bitField):
            require(bitField.base.isInteger, "\(path) \(type) has a non-integer base")
            require(bitField.bitOffset >= 0, "\(path) \(type) has a negative bit offset")
            require(
                bitField.width >= 0 && bitField.width <= bitField.base.size * 8,
                "\(path) \(type) is wider than its base type")
            return 0
        case .structure(_, let fields), .union(_, let fields):
            guard let fields else {
                require(size == 0 && alignment == 1, "\(path) opaque \(type) has size \(size), alignment \(alignment)")
                return 1
            }
            let isUnion = if case .union = type.kind { true } else { false }
            var deepest = 0
            var previousOffset = 0
            for (index, field) in fields.enumerated() {
                let fieldPath = "\(path).\(field.name.map { "\"\($0)\"" } ?? "#\(index)")"
                deepest = max(deepest, checkTree(field.type, fieldPath))
                checkPlacement(of: field, in: type, isUnion: isUnion, fieldPath)
                if !isUnion {
                    require(
                        field.offset >= previousOffset,
                        "\(fieldPath) at offset \(field.offset) precedes the member before it at \(previousOffset)")
                    previousOffset = field.offset
                }
            }
            return 1 + deepest
        }
    }

    /// Checks that `field` lies inside its aggregate at an offset its alignment allows.
    private func checkPlacement(of field: CType.Field, in aggregate: CType, isUnion: Bool, _ path: String) {
        let member = field.type
        require(!member.isVoid && !member.isOpaque, "\(path) \(member) is not a complete member type")
        require(field.offset >= 0, "\(path) has negative offset \(field.offset)")
        if case .bitField(let bitField) = member.kind {
            require(field.offset == bitField.bitOffset / 8, "\(path) \(member) has byte offset \(field.offset)")
            let endByte = (bitField.bitOffset + bitField.width + 7) / 8
            require(
                endByte <= aggregate.size,
                "\(path) \(member) ends at byte \(endByte), past the \(aggregate.size) bytes of \(aggregate)")
            if bitField.width > 0 {
                require(
                    aggregate.alignment >= bitField.base.alignment,
                    "\(path) \(member) is more aligned than its aggregate \(aggregate)")
            }
            return
        }
        if isUnion {
            require(field.offset == 0, "\(path) union member at offset \(field.offset)")
        }
        require(
            field.offset % member.alignment == 0,
            "\(path) \(member) at offset \(field.offset) breaks its alignment \(member.alignment)")
        require(
            field.offset + member.size <= aggregate.size,
            "\(path) \(member) at offset \(field.offset) ends past the \(aggregate.size) bytes of \(aggregate)")
        require(
            aggregate.alignment >= member.alignment,
            "\(path) \(member) is more aligned than its aggregate \(aggregate)")
    }
}

private func isBitField(_ type: CType) -> Bool {
    if case .bitField = type.kind { return true }
    return false
}

/// The signature's types one by one, so that two signatures with one encoding can be told apart.
private func outline(_ signature: Signature) -> String {
    let arguments = signature.argumentTypes.map { quote($0.encoding) }.joined(separator: ", ")
    return "return \(quote(signature.returnType.encoding)), arguments [\(arguments)]"
}

private func quote(_ text: String) -> String {
    escaped(Array(text.utf8))
}
