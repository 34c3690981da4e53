extension Signature {
    /// Checks Swift types against the signature, for typed calls and typed hook blocks: the
    /// number of arguments, each one's size and alignment, and the kind of standard-library
    /// scalars; `Result` must have the return type's size (`Void` for `v`).
    package func checkSwiftTypes<each Argument, Result>(
        _ arguments: repeat (each Argument).Type, returning: Result.Type
    ) throws(CallInterfaceError) {
        var index = 0
        var mismatch: (Int, String)?
        for argument in repeat each arguments {
            if index < argumentTypes.count, mismatch == nil, !SwiftScalarClass.matches(argument, argumentTypes[index]) {
                mismatch = (index, String(describing: argument))
            }
            index += 1
        }
        guard index == argumentTypes.count else {
            throw CallInterfaceError(
                signature: self, position: nil,
                problem: .argumentCountMismatch(expected: argumentTypes.count, actual: index))
        }
        if let (position, swiftType) = mismatch {
            throw CallInterfaceError(
                signature: self, position: .argument(position), problem: .typeMismatch(swiftType: swiftType))
        }
        let returnMatches =
            returnType.isVoid ? MemoryLayout<Result>.size == 0 : SwiftScalarClass.matches(Result.self, returnType)
        guard returnMatches else {
            throw CallInterfaceError(
                signature: self, position: .returnValue,
                problem: .typeMismatch(swiftType: String(describing: Result.self)))
        }
    }
}

/// Swift types whose C counterpart a typed call can check beyond size and alignment.
package enum SwiftScalarClass {
    /// The leaf class of `type` when it is a known Swift scalar, `nil` for other types.
    static func of<T>(_ type: T.Type) -> ScalarLeaf.Class? {
        switch type {
        case is Float.Type, is Double.Type: return .floatingPoint
        case is Int8.Type, is UInt8.Type, is Int16.Type, is UInt16.Type, is Int32.Type, is UInt32.Type,
            is Int64.Type, is UInt64.Type, is Int.Type, is UInt.Type, is Bool.Type,
            is OpaquePointer.Type, is UnsafeRawPointer.Type, is UnsafeMutableRawPointer.Type,
            is OpaquePointer?.Type, is UnsafeRawPointer?.Type, is UnsafeMutableRawPointer?.Type:
            return .integer
        default:
            #if arch(x86_64)
                if type == Float80.self { return .longDouble }
            #endif
            return nil
        }
    }

    /// Whether a Swift value of type `T` can stand for a C value of type `c`.
    package static func matches<T>(_ swiftType: T.Type, _ c: CType) -> Bool {
        // Read without `c.kind`, which allocates: typed calls check on every call.
        let expected: (size: Int, alignment: Int) =
            c.isArray ? (Platform.pointerSize, Platform.pointerSize) : (c.size, c.alignment)
        #if arch(x86_64)
            if swiftType == Float80.self {
                return c.primitiveKind == .longDouble
            }
        #endif
        guard MemoryLayout<T>.size == expected.size, MemoryLayout<T>.alignment <= max(expected.alignment, 1) else {
            return false
        }
        guard let swiftClass = of(swiftType) else { return true }
        if let primitive = c.primitiveKind {
            switch swiftClass {
            case .floatingPoint: return primitive == .float || primitive == .double
            case .longDouble: return primitive == .longDouble
            case .integer: return primitive.isInteger
            }
        }
        // Addresses travel as integers: a floating-point value cannot stand for one.
        return c.isAddress ? swiftClass == .integer : true
    }
}

extension CallInterface {
    /// Calls `function` with Swift values, checking them against the signature first.
    ///
    /// Each argument's Swift type must have the C type's size and no stricter alignment;
    /// standard-library scalars must also agree in kind (`Float` and `Double` for `f` and `d`,
    /// integers, `Bool` and pointers for integer and pointer codes). For an array argument
    /// pass the pointer to its first element. `Result` must have the return type's size
    /// (`Void` for `v`).
    ///
    /// - Throws: ``CallInterfaceError`` with code ``CallInterfaceError/Code-swift.struct/argumentCountMismatch``
    ///   or ``CallInterfaceError/Code-swift.struct/typeMismatch``; nothing is called then.
    public func call<Result: BitwiseCopyable, each Argument: BitwiseCopyable>(
        _ function: UnsafeRawPointer, returning: Result.Type = Result.self, _ arguments: repeat each Argument
    ) throws(CallInterfaceError) -> Result {
        try signature.checkSwiftTypes(repeat (each Argument).self, returning: Result.self)
        var count = 0
        var scratchSize = 0
        for argument in repeat each arguments {
            scratchSize = scratchSize.roundedUp(to: 16) + MemoryLayout.size(ofValue: argument)
            count += 1
        }
        return withUnsafeTemporaryAllocation(byteCount: max(scratchSize, 1), alignment: 16) { scratch in
            withUnsafeTemporaryAllocation(of: UnsafeMutableRawPointer?.self, capacity: max(count, 1)) { list in
                var offset = 0
                var index = 0
                for argument in repeat each arguments {
                    offset = offset.roundedUp(to: 16)
                    let slot = scratch.baseAddress! + offset
                    withUnsafeBytes(of: argument) { slot.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                    list[index] = slot
                    offset += MemoryLayout.size(ofValue: argument)
                    index += 1
                }
                return withUnsafeTemporaryAllocation(
                    byteCount: max(returnBufferSize, MemoryLayout<Result>.size), alignment: 16
                ) { result in
                    call(function, returnValue: result.baseAddress, argumentList: list.baseAddress!)
                    return loadValue(Result.self, from: result.baseAddress!)
                }
            }
        }
    }
}

/// A `T` read from `address`, a `Bool` as C reads a truth value: any nonzero byte is `true`
/// (an Objective-C `BOOL` of 2, a flag an `unsigned char` holds), where the byte read as a
/// `Bool` keeps its lowest bit alone (2 read as `false`).
@inlinable
@inline(__always)
package func loadValue<T: BitwiseCopyable>(_ type: T.Type, from address: UnsafeRawPointer) -> T {
    if T.self == Bool.self { return unsafeBitCast(address.load(as: UInt8.self) != 0, to: T.self) }
    return address.loadUnaligned(as: T.self)
}
