import FFIHookCore
import FuzzKit

/// Checks the call interfaces of one signature.
struct InterfaceChecker {
    /// The signature under test.
    let signature: Signature
    /// The fuzzer's input, quoted when a check fails.
    let bytes: [UInt8]

    func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
        FuzzKit.require(condition(), "\(message()) (signature \"\(signature)\")", bytes)
    }

    // MARK: - Fixed arguments

    /// Prepares an interface directly and through the shared cache, and checks that both
    /// agree, that the cache interns, and that a passing signature can be called.
    func checkFixed() {
        let direct: CallInterface?
        var directError: CallInterfaceError?
        do {
            let interface = try CallInterface(signature)
            checkPrepared(interface, fixedArgumentCount: nil)
            direct = interface
        } catch {
            checkError(error, fixedArgumentCount: nil)
            direct = nil
            directError = error
        }

        do {
            let first = try CallInterface.shared(for: signature)
            require(direct != nil, "shared(for:) prepares what init refuses with: \(directError.map { "\($0)" } ?? "")")
            let second = try CallInterface.shared(for: signature)
            require(first === second, "shared(for:) returned two interfaces for one signature while both are alive")
            let reread = try CallInterface.shared(for: Signature(signature.encoding))
            require(first === reread, "shared(for:) returned another interface for the canonical encoding")
            if let direct {
                require(
                    first.returnBufferSize == direct.returnBufferSize,
                    "shared interface has returnBufferSize \(first.returnBufferSize), a fresh one \(direct.returnBufferSize)"
                )
            }
            checkPrepared(first, fixedArgumentCount: nil, shared: true)
            RegisterProbe(checker: self, interface: first)?.check()
        } catch let error as CallInterfaceError {
            require(directError != nil, "shared(for:) refuses what init prepares: \(error)")
            if let directError {
                require(
                    error.code == directError.code && error.position == directError.position,
                    "shared(for:) refuses with \(error), init with \(directError)")
            }
            checkError(error, fixedArgumentCount: nil)
        } catch {
            require(false, "the canonical encoding \"\(signature.encoding)\" does not parse: \(error)")
        }
        if let direct { RegisterProbe(checker: self, interface: direct)?.check() }
    }

    // MARK: - Variadic

    /// Prepares a variadic interface with `fixedArgumentCount` fixed arguments and checks the
    /// refusals the variadic entry adds (a count outside the arguments, a promotable
    /// variadic argument), then that it otherwise agrees with the fixed interface.
    func checkVariadic(fixedArgumentCount count: Int) {
        let arguments = signature.argumentTypes
        let countIsValid = count >= 0 && count <= arguments.count
        let promotable = countIsValid ? arguments.indices.dropFirst(count).first { isPromotable(arguments[$0]) } : nil
        let fixedPasses = (try? CallInterface(signature)) != nil
        do {
            let interface = try CallInterface(variadic: signature, fixedArgumentCount: count)
            require(countIsValid, "a variadic interface was prepared with fixed-argument count \(count)")
            require(promotable == nil, "variadic argument \(promotable ?? -1) of a promotable type was accepted")
            require(fixedPasses, "a variadic shape passes where the fixed-argument signature is refused")
            checkPrepared(interface, fixedArgumentCount: count)
            RegisterProbe(checker: self, interface: interface)?.check()
        } catch {
            checkError(error, fixedArgumentCount: count)
            if !countIsValid {
                require(
                    error.code == .invalidFixedArgumentCount && error.position == nil,
                    "fixed-argument count \(count) refused with \(error)")
            } else if let promotable {
                guard error.code == .variadicPromotion else {
                    require(false, "variadic argument \(promotable) is promotable, but the error is \(error)")
                    return
                }
                require(
                    error.position == .argument(promotable),
                    "the first promotable variadic argument is \(promotable), the error names \(error)")
            } else {
                require(!fixedPasses, "a variadic shape is refused where the fixed-argument signature passes: \(error)")
            }
        }
    }

    // MARK: - Checks

    /// Checks what a prepared interface promises about itself.
    private func checkPrepared(_ interface: CallInterface, fixedArgumentCount: Int?, shared: Bool = false) {
        // A variadic interface holds the signature with its fixed-argument count.
        let expected = fixedArgumentCount.map { signature.variadic(fixedArgumentCount: $0) } ?? signature
        if !shared {
            require(interface.signature == expected, "interface holds signature \"\(interface.signature)\"")
        }
        require(
            interface.signature.fixedArgumentCount == interface.fixedArgumentCount,
            "the interface's signature says \(String(describing: interface.signature.fixedArgumentCount)) fixed arguments, the interface \(String(describing: interface.fixedArgumentCount))"
        )
        require(
            interface.fixedArgumentCount == fixedArgumentCount,
            "fixedArgumentCount is \(String(describing: interface.fixedArgumentCount)), not \(String(describing: fixedArgumentCount))"
        )
        let returnType = signature.returnType
        require(
            interface.returnBufferSize >= returnType.size,
            "returnBufferSize \(interface.returnBufferSize) is less than the return type's size \(returnType.size)")
        if !returnType.isVoid {
            require(
                interface.returnBufferSize >= 8,
                "returnBufferSize \(interface.returnBufferSize) is less than a machine word for \(returnType)")
        }
    }

    /// Checks that a refusal names a value inside the signature and a code this entry can give.
    private func checkError(_ error: CallInterfaceError, fixedArgumentCount: Int?) {
        // A variadic interface's error names the signature with its fixed-argument count.
        let expected = fixedArgumentCount.map { signature.variadic(fixedArgumentCount: $0) } ?? signature
        require(error.signature == expected, "error names signature \"\(error.signature)\"")
        require(error.description.contains("in signature"), "error description does not quote the signature")
        switch error.position {
        case .argument(let index)?:
            require(
                signature.argumentTypes.indices.contains(index),
                "error names argument \(index) of \(signature.argumentTypes.count): \(error)")
            if signature.argumentTypes.indices.contains(index) {
                require(error.type == signature.argumentTypes[index], "error's type is not argument \(index)'s")
            }
        case .returnValue?:
            require(error.type == signature.returnType, "error's type is not the return type")
        case nil:
            require(error.type == nil, "error without a position has a type")
        }
        require(!error.message.isEmpty, "error without a message: \(error)")
        switch error.code {
        case .unsupportedValue:
            require(error.position != nil, "unsupported value without a position: \(error)")
            require(error.message.contains("cannot be passed: "), "unsupported value without a reason: \(error)")
        case .layoutMismatch:
            require(error.position != nil, "layout mismatch without a position: \(error)")
        case .libffiRejected:
            break
        case .invalidFixedArgumentCount:
            require(fixedArgumentCount != nil, "invalid fixed-argument count from a fixed-argument interface: \(error)")
            require(
                error.message.contains("fixed-argument count \(fixedArgumentCount ?? -1) "),
                "invalid fixed-argument count from another entry: \(error)")
            require(error.position == nil, "invalid fixed-argument count with a position: \(error)")
        case .variadicPromotion:
            require(fixedArgumentCount != nil, "variadic promotion from a fixed-argument interface: \(error)")
            require(
                error.message.hasSuffix("write 'd'") || error.message.hasSuffix("write 'i'"),
                "variadic promotion to another type: \(error)")
            if case .argument(let index)? = error.position {
                require(index >= fixedArgumentCount ?? 0, "variadic promotion of fixed argument \(index): \(error)")
            } else {
                require(false, "variadic promotion without an argument: \(error)")
            }
        case .argumentCountMismatch, .typeMismatch:
            require(false, "preparing an interface gave a typed call's error: \(error)")
        default:
            require(false, "an error of a code preparing never gives: \(error)")
        }
    }

    private func isPromotable(_ type: CType) -> Bool {
        guard case .primitive(let primitive) = type.kind else { return false }
        switch primitive {
        case .float, .char, .unsignedChar, .short, .unsignedShort, .bool: return true
        default: return false
        }
    }
}
