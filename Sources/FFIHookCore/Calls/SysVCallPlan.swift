internal import CFFIHookSupport

#if arch(x86_64)
    /// A way to call a function of any x86-64 System V shape without `ffi_call`: the moves
    /// that fill the argument registers and the stack, worked out once per signature, and a
    /// small assembly routine that performs the call (see `ffh_call.h`).
    ///
    /// It covers what ``RegisterCallPlan`` leaves out: aggregates in general and SSE
    /// registers (mixed ones too) and their results in `rax`/`rdx`/`xmm0`/`xmm1`, aggregates
    /// of the MEMORY class copied to the stack, results through a hidden pointer, arguments
    /// beyond the registers, `long double` and `_Complex long double` (on the stack, results
    /// from the x87 stack), `__int128`, and variadic call shapes (`%al` carries the number of
    /// SSE registers used). Unions and bit-fields travel as ``SysVClassification`` classifies
    /// them, eightbyte by eightbyte, so no libffi type has to describe them.
    package struct SysVCallPlan {
        /// The plan as the C side reads it, in memory the owning interface frees with
        /// ``deallocate()``: closures that enter through the library's own entry keep its
        /// address.
        let plan: UnsafeMutablePointer<ffh_sysv_plan>

        /// The plan for `signature`, or `nil` for a value it cannot place (a `void` argument, an
        /// opaque or empty aggregate: call interfaces refuse those before asking) or more
        /// arguments than a move can number.
        init?(_ signature: Signature) {
            guard signature.argumentTypes.count <= Int(UInt16.max) else { return nil }
            var builder = Builder()
            let returnsInMemory = SysVArgumentPlan.returnsInMemory(signature.returnType)
            if returnsInMemory { builder.general = 1 }
            for (index, type) in signature.argumentTypes.enumerated() {
                guard builder.place(type, argument: index) else { return nil }
            }
            guard let result = Self.result(signature.returnType) else { return nil }
            let arrivals = Self.arrivals(of: builder.moves, count: signature.argumentTypes.count)
            // The closure entry's scratch space: six aggregates of a general and an SSE
            // register each, the most the registers can carry.
            guard arrivals.scratchBytes <= Int(FFH_ENTRY_SCRATCH_BYTES) else { return nil }
            let stackWords = (builder.stackWords + 1) / 2 * 2
            let pieces =
                result.pieces
                + Array(
                    repeating: ffh_sysv_result_piece(source: 0, kind: 0, size: 0, offset: 0),
                    count: 2 - result.pieces.count)
            plan = .allocate(capacity: 1)
            plan.initialize(
                to: ffh_sysv_plan(
                    moves: Self.copy(builder.moves), moveCount: UInt32(builder.moves.count),
                    stackWords: UInt32(stackWords), sseCount: UInt8(builder.sse),
                    returnsInMemory: returnsInMemory ? 1 : 0, x87Count: UInt8(result.x87Count),
                    resultCount: UInt8(result.pieces.count), result: (pieces[0], pieces[1]),
                    locations: Self.copy(arrivals.locations), gathers: Self.copy(arrivals.gathers),
                    argumentCount: UInt32(signature.argumentTypes.count), gatherCount: UInt32(arrivals.gathers.count),
                    fixups: Self.copy(arrivals.fixups),
                    fixupCount: UInt32(arrivals.fixups.count),
                    registerResult: Self.registerResult(
                        of: signature, returnsInMemory: returnsInMemory, stackWords: stackWords, result: result),
                    integerCall: 0))
            let kind = plan.pointee.registerResult
            plan.pointee.integerCall =
                kind <= ffh_value_kind(FFH_VALUE_64) && arrivals.fixups.isEmpty && builder.sse == 0 ? 1 : 0
        }

        /// Frees the plan; the owner calls it once, when it is done with the plan.
        func deallocate() {
            UnsafeMutablePointer(mutating: plan.pointee.moves)?.deallocate()
            UnsafeMutablePointer(mutating: plan.pointee.locations)?.deallocate()
            UnsafeMutablePointer(mutating: plan.pointee.gathers)?.deallocate()
            UnsafeMutablePointer(mutating: plan.pointee.fixups)?.deallocate()
            plan.deallocate()
        }

        /// `elements` in memory of their own (never empty, so the C side has an address).
        private static func copy<Element>(_ elements: [Element]) -> UnsafePointer<Element> {
            let buffer = UnsafeMutableBufferPointer<Element>.allocate(capacity: max(elements.count, 1))
            _ = buffer.initialize(from: elements)
            return UnsafePointer(buffer.baseAddress!)
        }

        /// Where each argument of a call arrives at a closure, from the moves a call makes: a
        /// value in one register, or in registers next to each other in the frame, or on the
        /// stack, is read where it is; an aggregate whose eightbytes went to a general and an
        /// SSE register is assembled in scratch space. Also what a call forwarded with the
        /// registers as they arrived must redo (see `ffh_sysv_plan.fixups`).
        private static func arrivals(of moves: [ffh_sysv_move], count: Int) -> (
            locations: [UInt32], gathers: [ffh_sysv_move], scratchBytes: Int, fixups: [ffh_sysv_move]
        ) {
            let narrowKinds = [FFH_VALUE_SIGNED_8, FFH_VALUE_SIGNED_16, FFH_VALUE_UNSIGNED_8, FFH_VALUE_UNSIGNED_16]
                .map { ffh_value_kind($0) }
            let firstStackWord = Int(FFH_SYSV_FIRST_STACK_WORD)
            var locations = [UInt32](repeating: 0, count: count)
            var gathers: [ffh_sysv_move] = []
            var fixups: [ffh_sysv_move] = []
            var scratchBytes = 0
            let byArgument = Dictionary(grouping: moves, by: { Int($0.argument) })
            for (argument, parts) in byArgument {
                let first = Int(parts[0].word)
                if first >= firstStackWord {
                    locations[argument] = UInt32(Int(FFH_ENTRY_STACK_OFFSET) + (first - firstStackWord) * 8)
                } else if parts.count == 1 || (parts.count == 2 && Int(parts[1].word) == first + 1) {
                    locations[argument] = UInt32(first * 8)
                } else {
                    scratchBytes = (scratchBytes + 15) / 16 * 16
                    let offset = Int(FFH_ENTRY_SCRATCH_OFFSET) + scratchBytes
                    locations[argument] = UInt32(offset)
                    for part in parts {
                        let gather = ffh_sysv_move(
                            size: 8, offset: UInt32(offset) + part.offset, word: part.word,
                            argument: part.argument, kind: ffh_value_kind(FFH_VALUE_BYTES), reserved: 0)
                        gathers.append(gather)
                        fixups.append(gather)
                    }
                    scratchBytes += 16
                    continue
                }
                fixups += parts.filter { narrowKinds.contains($0.kind) }
            }
            return (locations, gathers, scratchBytes, fixups)
        }

        // MARK: - Arguments

        /// Places arguments in order, as the psABI's algorithm does.
        private struct Builder {
            var moves: [ffh_sysv_move] = []
            var general = 0
            var sse = 0
            var stackWords = 0

            static let generalCount = 6
            static let sseCount = 8

            mutating func place(_ type: CType, argument: Int) -> Bool {
                switch type.kind {
                case .void, .bitField, .structure(_, nil), .union(_, nil):
                    return false
                case .primitive(.longDouble), .complex(.longDouble):
                    toStack(type, argument: argument)
                case .primitive(.int128), .primitive(.unsignedInt128):
                    if general + 2 <= Self.generalCount {
                        for half in 0..<2 {
                            append(argument: argument, offset: half * 8, word: general, kind: FFH_VALUE_64)
                            general += 1
                        }
                    } else {
                        toStack(type, argument: argument)
                    }
                case .primitive, .pointer, .cString, .object, .block, .objectClass, .selector, .unknown, .array:
                    guard let kind = RegisterCallPlan.kind(of: type) else { return false }
                    let isSSE = kind == ffh_value_kind(FFH_VALUE_FLOAT) || kind == ffh_value_kind(FFH_VALUE_DOUBLE)
                    if isSSE, sse < Self.sseCount {
                        append(argument: argument, offset: 0, word: Int(FFH_SYSV_FIRST_SSE_WORD) + sse, kind: kind)
                        sse += 1
                    } else if !isSSE, general < Self.generalCount {
                        append(argument: argument, offset: 0, word: general, kind: kind)
                        general += 1
                    } else {
                        append(argument: argument, offset: 0, word: stackWord(stackWords), kind: kind)
                        stackWords += 1
                    }
                case .complex, .structure, .union:
                    guard type.size > 0 else { return false }
                    let classification = SysVClassification(type)
                    guard case .registers(let classes) = classification, let need = classification.registerCounts,
                        !classes.contains(.noClass)
                    else {
                        // MEMORY, or X87 (a `long double` inside): on the stack.
                        toStack(type, argument: argument)
                        return true
                    }
                    guard general + need.general <= Self.generalCount, sse + need.sse <= Self.sseCount else {
                        // No register for some eightbyte: the whole value goes on the stack, and
                        // later arguments may still take the registers left.
                        toStack(type, argument: argument)
                        return true
                    }
                    for (index, eightbyteClass) in classes.enumerated() {
                        let word: Int
                        if eightbyteClass == .integer {
                            word = general
                            general += 1
                        } else {
                            word = Int(FFH_SYSV_FIRST_SSE_WORD) + sse
                            sse += 1
                        }
                        append(
                            argument: argument, offset: index * 8, word: word, kind: FFH_VALUE_BYTES,
                            size: min(8, type.size - index * 8))
                    }
                }
                return true
            }

            /// A value in the stack area: at the next word, or the next even word when the
            /// type is aligned to 16 bytes, taking its size rounded up to words.
            private mutating func toStack(_ type: CType, argument: Int) {
                if type.alignment > 8 { stackWords = (stackWords + 1) / 2 * 2 }
                append(
                    argument: argument, offset: 0, word: stackWord(stackWords), kind: FFH_VALUE_BYTES,
                    size: type.size)
                stackWords += (type.size + 7) / 8
            }

            private func stackWord(_ index: Int) -> Int { Int(FFH_SYSV_FIRST_STACK_WORD) + index }

            private mutating func append(
                argument: Int, offset: Int, word: Int, kind: ffh_value_kind, size: Int = 8
            ) {
                moves.append(
                    ffh_sysv_move(
                        size: UInt32(size), offset: UInt32(offset), word: UInt32(word), argument: UInt16(argument),
                        kind: kind, reserved: 0))
            }

            private mutating func append(argument: Int, offset: Int, word: Int, kind: Int, size: Int = 8) {
                append(argument: argument, offset: offset, word: word, kind: ffh_value_kind(kind), size: size)
            }
        }

        // MARK: - Results

        /// The kind of the result when a call of `signature` can be a plain C call with the
        /// argument registers (see `ffh_sysv_plan.registerResult`), `FFH_VALUE_BYTES` when not.
        private static func registerResult(
            of signature: Signature, returnsInMemory: Bool, stackWords: Int,
            result: (pieces: [ffh_sysv_result_piece], x87Count: Int)
        ) -> ffh_value_kind {
            let bytes = ffh_value_kind(FFH_VALUE_BYTES)
            guard signature.fixedArgumentCount == nil, !returnsInMemory, stackWords == 0, result.x87Count == 0 else {
                return bytes
            }
            if signature.returnType.isVoid { return ffh_value_kind(FFH_VALUE_VOID) }
            guard result.pieces.count == 1, result.pieces[0].kind != bytes else { return bytes }
            return result.pieces[0].kind
        }

        /// Where a result of `type` comes back: the pieces to store and the x87 values to pop.
        private static func result(_ type: CType) -> (pieces: [ffh_sysv_result_piece], x87Count: Int)? {
            func piece(_ source: Int, _ kind: ffh_value_kind, size: Int = 8, offset: Int = 0) -> ffh_sysv_result_piece {
                ffh_sysv_result_piece(
                    source: ffh_sysv_source(source), kind: kind, size: UInt8(size), offset: UInt8(offset))
            }
            let bytes = ffh_value_kind(FFH_VALUE_BYTES)
            switch type.kind {
            case .void:
                return ([], 0)
            case .primitive(.longDouble):
                return ([piece(FFH_SYSV_ST0, bytes, size: 10)], 1)
            case .complex(.longDouble):
                return ([piece(FFH_SYSV_ST0, bytes, size: 10), piece(FFH_SYSV_ST1, bytes, size: 10, offset: 16)], 2)
            case .primitive(.int128), .primitive(.unsignedInt128):
                return ([piece(FFH_SYSV_RAX, bytes), piece(FFH_SYSV_RDX, bytes, offset: 8)], 0)
            case .primitive, .pointer, .cString, .object, .block, .objectClass, .selector, .unknown:
                guard let kind = RegisterCallPlan.kind(of: type) else { return nil }
                let isSSE = kind == ffh_value_kind(FFH_VALUE_FLOAT) || kind == ffh_value_kind(FFH_VALUE_DOUBLE)
                return ([piece(isSSE ? FFH_SYSV_XMM0 : FFH_SYSV_RAX, kind)], 0)
            case .complex, .structure, .union:
                guard type.size > 0 else { return nil }
                switch SysVClassification(type) {
                case .memory:
                    return ([], 0)
                case .registers(let classes) where classes == [.x87, .x87Up]:
                    return ([piece(FFH_SYSV_ST0, bytes, size: 10)], 1)
                case .registers(let classes):
                    var general = [FFH_SYSV_RAX, FFH_SYSV_RDX].makeIterator()
                    var sse = [FFH_SYSV_XMM0, FFH_SYSV_XMM1].makeIterator()
                    var pieces: [ffh_sysv_result_piece] = []
                    for (index, eightbyteClass) in classes.enumerated() {
                        let source: Int?
                        switch eightbyteClass {
                        case .integer: source = general.next()
                        case .sse: source = sse.next()
                        default: source = nil
                        }
                        guard let source else { return nil }
                        pieces.append(piece(source, bytes, size: min(8, type.size - index * 8), offset: index * 8))
                    }
                    return (pieces, 0)
                }
            case .array, .bitField:
                return nil
            }
        }
    }
#endif
