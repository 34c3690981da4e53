internal import CFFI
internal import CFFIHookSupport

/// A prepared way to call C functions of one signature.
///
/// A call interface is built once per signature and then calls any number of function
/// pointers of that signature from any thread. ``shared(for:)`` interns interfaces by their
/// ABI shape, so all users of one signature share one; the interned entry goes away with
/// the last reference.
///
/// ```swift
/// let interface = try CallInterface.shared(for: Signature("iii"))
/// let sum: Int32 = try interface.call(addPointer, returning: Int32.self, Int32(2), Int32(3))
/// ```
///
/// Values the platform's libffi would pass wrongly are lowered or routed so that the callee
/// receives exactly what a compiled C caller would pass: unions, bit-fields and 128-bit
/// integers become libffi types the calling convention passes the same way. Those that
/// cannot be passed correctly are refused with a ``CallInterfaceError``.
public final class CallInterface: @unchecked Sendable {
    // Sendable: every stored property is set in init and never changed; libffi only reads a
    // prepared cif while calling.

    /// The signature this interface calls.
    public let signature: Signature
    /// For a variadic interface, how many leading arguments are fixed; `nil` otherwise.
    public let fixedArgumentCount: Int?
    /// The bytes a return-value buffer must have: at least the return type's size, and at
    /// least a machine word, since libffi widens small integer results to one.
    public let returnBufferSize: Int
    /// How many bytes of a closure's return buffer hold a result of this signature as a libffi
    /// closure returns it (0 for void): a small result fills at least a word; one returned
    /// in memory has its own size. A hook zeroes this much for a call that sets no result.
    package let closureResultSize: Int

    private let graph: FFITypeGraph
    /// The interface as the C ABI sees the signature; closures are built on it.
    package let cif: PreparedCIF
    /// The interface `ffi_call` uses: `cif` itself, or one whose arguments are split into
    /// pieces where the platform's libffi would mispass an aggregate.
    private let callCIF: PreparedCIF
    /// For a split `callCIF`: each of its arguments as (original argument, byte offset).
    private let callPieces: [(argument: Int, offset: Int)]?
    /// How many entries of the argument list `ffi_call` gets as a copy rather than the
    /// caller's own list (0: none). libffi replaces the entry of a struct argument larger
    /// than two registers with a pointer to a copy in its own stack frame, which dangles once
    /// the call returns; a hook passes the closure's argument list on to the original, and
    /// its after blocks read it. A plain count, so the call path touches no shared object.
    private let copiedArgumentCount: Int
    /// The register-only way to call, for signatures whose values all travel in registers.
    private let registerPlan: RegisterCallPlan?
    #if arch(x86_64)
        /// The way to call every other x86-64 shape without `ffi_call`.
        private let sysvPlan: SysVCallPlan?
    #endif
    /// Where the arguments of a call of this signature arrive at a closure on x86-64 (an
    /// `ffh_sysv_plan`, living as long as the interface), for closures that enter through the
    /// library's own entry instead of libffi's; `nil` where there is none.
    package var closurePlan: UnsafeRawPointer? {
        #if arch(x86_64)
            sysvPlan.map { UnsafeRawPointer($0.plan) }
        #else
            nil
        #endif
    }
    /// The routine and plan that call without `ffi_call`, when the signature has a plan: the
    /// call path makes one indirect call (see ``RegisterCallPlan`` and ``SysVCallPlan``).
    private let planCaller: ffh_plan_caller?
    private let planPointer: UnsafeRawPointer?
    /// Whether calls take the scalar register path (see ``RegisterCallPlan``).
    package var usesRegisterPath: Bool { registerPlan != nil }
    /// Whether calls skip `ffi_call` for this signature: through the scalar register path or
    /// an x86-64 call plan (see ``SysVCallPlan``).
    package var callsWithoutLibFFI: Bool {
        #if arch(x86_64)
            registerPlan != nil || sysvPlan != nil
        #else
            registerPlan != nil
        #endif
    }
    /// The key under which ``shared(for:)`` holds this interface, if it does.
    let cacheKey = Locked<String?>(nil)

    /// Whether an interface for `signature` would call without `ffi_call` while plans are on
    /// (tests ask this rather than an interface, since other tests switch plans off for a while).
    package static func hasCallPlan(for signature: Signature) -> Bool {
        if signature.fixedArgumentCount == nil, let plan = RegisterCallPlan(signature) {
            plan.deallocate()
            return true
        }
        #if arch(x86_64)
            if let plan = SysVCallPlan(signature) {
                plan.deallocate()
                return true
            }
        #endif
        return false
    }

    /// Prepares an interface for `signature`: for one call shape of a variadic function when
    /// the signature has a ``Signature/fixedArgumentCount``.
    ///
    /// - Throws: ``CallInterfaceError`` naming the argument or return value that the
    ///   platform's C calling convention cannot pass through libffi, and why; for a variadic
    ///   call shape also a fixed count outside the arguments or a promotable variadic
    ///   argument (see ``init(variadic:fixedArgumentCount:)``).
    public convenience init(_ signature: Signature) throws(CallInterfaceError) {
        if let fixedArgumentCount = signature.fixedArgumentCount {
            try Self.checkVariadicShape(signature, fixedArgumentCount: fixedArgumentCount)
        }
        try self.init(signature: signature, fixedArgumentCount: signature.fixedArgumentCount)
    }

    /// Prepares an interface for one call shape of a variadic function.
    ///
    /// `signature` lists the fixed arguments and then the concrete variadic ones for this
    /// call shape. Variadic arguments must already have C's default promotions applied:
    /// `float` is refused (write `d`), and so are `char`, `short` and `_Bool` (write `i`).
    /// The interface's ``signature`` is `signature` with `fixedArgumentCount` (see
    /// ``Signature/variadic(fixedArgumentCount:)``), and so is the signature errors carry.
    ///
    /// - Throws: ``CallInterfaceError`` for a fixed count outside the arguments, a
    ///   promotable variadic argument, or a value that cannot be passed.
    public convenience init(variadic signature: Signature, fixedArgumentCount: Int) throws(CallInterfaceError) {
        try self.init(signature.variadic(fixedArgumentCount: fixedArgumentCount))
    }

    /// Refuses a fixed count outside the arguments and variadic arguments C would promote.
    private static func checkVariadicShape(_ signature: Signature, fixedArgumentCount: Int) throws(CallInterfaceError) {
        guard (0...signature.argumentTypes.count).contains(fixedArgumentCount) else {
            throw CallInterfaceError(
                signature: signature, position: nil,
                problem: .invalidFixedArgumentCount(fixedArgumentCount))
        }
        for (index, type) in signature.argumentTypes.enumerated().dropFirst(fixedArgumentCount) {
            if let promoted = type.variadicPromotion {
                throw CallInterfaceError(
                    signature: signature, position: .argument(index),
                    problem: .variadicPromotion(promotedEncoding: promoted))
            }
        }
    }

    private init(signature: Signature, fixedArgumentCount: Int?) throws(CallInterfaceError) {
        self.signature = signature
        self.fixedArgumentCount = fixedArgumentCount
        let graph = FFITypeGraph()
        let lowered: (returnValue: FFITypeGraph.Lowered, arguments: [FFITypeGraph.Lowered])
        do {
            lowered = (
                try graph.lower(signature.returnType, at: .returnValue),
                try signature.argumentTypes.enumerated().map { index, type throws(FFITypeGraph.Unrepresentable) in
                    try graph.lower(type, at: .argument(index))
                }
            )
        } catch {
            throw CallInterfaceError(
                signature: signature, position: error.position.public,
                problem: .unsupportedValue(reason: error.reason))
        }
        let cif = try Self.prepare(
            signature, lowered.returnValue.type, lowered.arguments.map(\.type), fixedArgumentCount)
        try Self.verify(signature, lowered)
        self.graph = graph
        self.cif = cif
        self.returnBufferSize = max(signature.returnType.size, lowered.returnValue.expectedSize, ffh_arg_size())
        self.closureResultSize = Self.closureResultSize(of: signature.returnType)
        // Read once, here: the call path reads no switch.
        let planned = RegisterCallPlan.isEnabled
        self.registerPlan = planned && fixedArgumentCount == nil ? RegisterCallPlan(signature) : nil
        #if arch(x86_64)
            // Also where the register path calls: closures read where arguments arrive from it.
            // Variadic shapes too: the plan sets `%al` as a variadic callee expects.
            self.sysvPlan = planned ? SysVCallPlan(signature) : nil
        #endif
        if let registerPlan {
            (planCaller, planPointer) = (ffh_call_plan, UnsafeRawPointer(registerPlan.plan))
        } else {
            #if arch(x86_64)
                (planCaller, planPointer) = (
                    sysvPlan.map { _ in ffh_call_sysv }, sysvPlan.map { UnsafeRawPointer($0.plan) }
                )
            #else
                (planCaller, planPointer) = (nil, nil)
            #endif
        }
        let rewritten = lowered.arguments.contains { argument in
            argument.type.pointee.type == ffh_type_code_struct() && argument.type.pointee.size > 16
        }
        self.copiedArgumentCount = rewritten ? signature.argumentTypes.count : 0

        #if arch(x86_64)
            let plan = SysVArgumentPlan(signature)
            if plan.needsSplitting {
                let pieces = plan.pieces
                let types = pieces.map { piece -> UnsafeMutablePointer<ffi_type> in
                    switch piece.kind {
                    case .whole: lowered.arguments[piece.argument].type
                    case .integerWord: ffh_type_uint64()
                    // A structure's last four bytes in a vector register: never promoted, also
                    // among variadic arguments (see ffh_type_float_piece).
                    case .float: ffh_type_float_piece()
                    case .double: ffh_type_double()
                    }
                }
                let fixed = fixedArgumentCount.map { count in pieces.filter { $0.argument < count }.count }
                self.callCIF = try Self.prepare(signature, lowered.returnValue.type, types, fixed)
                self.callPieces = pieces.map { ($0.argument, $0.offset) }
                return
            }
        #endif
        self.callCIF = cif
        self.callPieces = nil
    }

    deinit {
        registerPlan?.deallocate()
        #if arch(x86_64)
            sysvPlan?.deallocate()
        #endif
        if let key = cacheKey.withLock({ $0 }) {
            InterfaceCache.shared.remove(key, identity: ObjectIdentifier(self))
        }
    }

    private static func prepare(
        _ signature: Signature, _ returnType: UnsafeMutablePointer<ffi_type>,
        _ argumentTypes: [UnsafeMutablePointer<ffi_type>], _ fixedArgumentCount: Int?
    ) throws(CallInterfaceError) -> PreparedCIF {
        do {
            return try PreparedCIF.prepare(
                returnType: returnType, argumentTypes: argumentTypes,
                fixedArgumentCount: fixedArgumentCount)
        } catch {
            throw CallInterfaceError(
                signature: signature, position: nil, problem: .libffiRejected(status: error.status))
        }
    }

    /// Checks that libffi laid out every value as the C compiler does.
    private static func verify(
        _ signature: Signature, _ lowered: (returnValue: FFITypeGraph.Lowered, arguments: [FFITypeGraph.Lowered])
    ) throws(CallInterfaceError) {
        let values =
            [(CallInterfaceError.Position.returnValue, lowered.returnValue)]
            + lowered.arguments.enumerated().map { (CallInterfaceError.Position.argument($0.offset), $0.element) }
        for (position, value) in values where position != .returnValue || !signature.returnType.isVoid {
            let size = value.type.pointee.size
            let alignment = Int(value.type.pointee.alignment)
            if size != value.expectedSize || alignment != value.expectedAlignment {
                throw CallInterfaceError(
                    signature: signature, position: position,
                    problem: .layoutMismatch(libffiSize: size, libffiAlignment: alignment))
            }
        }
    }

    /// How many bytes of a closure's return buffer hold a result of `type` (see
    /// ``closureResultSize``).
    private static func closureResultSize(of type: CType) -> Int {
        #if arch(x86_64)
            let inMemory = SysVArgumentPlan.returnsInMemory(type)
        #else
            let inMemory = type.size > 16
        #endif
        return type.isVoid ? 0 : inMemory ? type.size : max(type.size, 8)
    }

    // MARK: - Calling

    /// Calls `function` with argument values read through `arguments` and stores its result.
    ///
    /// Safe to call from any thread, concurrently with other calls through the interface.
    /// Nothing checks that `function` has the interface's signature: a function of another
    /// signature receives wrong values, as it would from a mistyped C call.
    ///
    /// - Parameters:
    ///   - function: a C function of this interface's signature.
    ///   - returnValue: at least ``returnBufferSize`` bytes, aligned for the return type;
    ///     may be `nil` when the return type is `void`.
    ///   - arguments: one pointer per argument to a buffer holding that argument's value
    ///     (for an array argument, a buffer holding the pointer to pass).
    /// - Precondition: `arguments.count` equals the signature's argument count, and a
    ///   non-void return type has a `returnValue` buffer.
    public func call(
        _ function: UnsafeRawPointer, returnValue: UnsafeMutableRawPointer?, arguments: [UnsafeMutableRawPointer]
    ) {
        precondition(
            arguments.count == signature.argumentTypes.count,
            "\(arguments.count) argument buffers for signature \"\(signature)\" with \(signature.argumentTypes.count) arguments"
        )
        precondition(
            returnValue != nil || signature.returnType.isVoid,
            "signature \"\(signature)\" returns a value and needs a return buffer")
        withUnsafeTemporaryAllocation(of: UnsafeMutableRawPointer?.self, capacity: max(arguments.count, 1)) { list in
            for (index, argument) in arguments.enumerated() { list[index] = argument }
            call(function, returnValue: returnValue, argumentList: list.baseAddress!)
        }
    }

    /// Calls `function` with libffi's own form of the arguments (`void **`): one pointer per
    /// argument, to a buffer holding its value (for an array argument, a buffer holding the
    /// pointer to pass).
    ///
    /// Allocates nothing and takes no lock, so it may run where the caller cannot allocate
    /// (inside a hooked allocator, in a signal handler as far as the callee allows). The
    /// list is left as it was, also where libffi would rewrite entries of it for a struct
    /// argument larger than 16 bytes (it gets a copy on the stack then). Calls skip
    /// `ffi_call` where a plan made with the interface applies: on x86-64 for every
    /// signature (values in registers, on the stack, through a hidden result pointer or the
    /// x87 stack, variadic shapes included), on arm64 for signatures whose values all travel
    /// in registers. Safe to call from any thread, concurrently with other calls through the
    /// interface; nothing checks that `function` has the interface's signature.
    ///
    /// - Parameters:
    ///   - function: a C function of this interface's signature.
    ///   - returnValue: at least ``returnBufferSize`` bytes, aligned for the return type;
    ///     may be `nil` when the return type is `void`.
    ///   - argumentList: as many pointers as the signature has arguments (not checked: a
    ///     short list is read past its end, as in C).
    public func call(
        _ function: UnsafeRawPointer, returnValue: UnsafeMutableRawPointer?,
        argumentList: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) {
        if let planCaller {
            planCaller(planPointer, function, argumentList, returnValue)
            return
        }
        callThroughLibFFI(function, returnValue: returnValue, argumentList: argumentList)
    }

    /// ``call(_:returnValue:argumentList:)`` through `ffi_call` even where a plan applies (for
    /// tests of both paths, and of the workarounds for the platform libffi's own errors).
    package func callThroughLibFFI(
        _ function: UnsafeRawPointer, returnValue: UnsafeMutableRawPointer?,
        argumentList: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) {
        guard let callPieces else {
            let count = copiedArgumentCount
            guard count > 0 else {
                LibFFI.call(callCIF.cif, function, returnValue, argumentList)
                return
            }
            withUnsafeTemporaryAllocation(of: UnsafeMutableRawPointer?.self, capacity: count) { copy in
                copy.baseAddress!.initialize(from: argumentList, count: count)
                LibFFI.call(callCIF.cif, function, returnValue, copy.baseAddress!)
            }
            return
        }
        withUnsafeTemporaryAllocation(of: UnsafeMutableRawPointer?.self, capacity: callPieces.count) { pieces in
            for (index, piece) in callPieces.enumerated() {
                pieces[index] = argumentList[piece.argument].map { $0 + piece.offset }
            }
            LibFFI.call(callCIF.cif, function, returnValue, pieces.baseAddress!)
        }
    }
}

extension FFITypeGraph.Position {
    var `public`: CallInterfaceError.Position {
        switch self {
        case .argument(let index): .argument(index)
        case .returnValue: .returnValue
        }
    }
}

extension CType {
    /// The encoding C's default argument promotions turn this type into, if they change it.
    var variadicPromotion: String? {
        guard case .primitive(let primitive) = kind else { return nil }
        switch primitive {
        case .float: return "d"
        case .char, .unsignedChar, .short, .unsignedShort, .bool: return "i"
        default: return nil
        }
    }
}
