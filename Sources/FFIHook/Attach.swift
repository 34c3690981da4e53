internal import CFFIHookSupport

/// A block that runs as an attached function is entered, with its argument registers.
public typealias EnterBlock = @Sendable (borrowing EnterContext) -> Void
/// A block that runs as an attached function returns, with its result registers.
public typealias LeaveBlock = @Sendable (borrowing LeaveContext) -> Void

/// An attached call as it enters the function: its argument registers, which the block may
/// change (the function gets them as the block leaves them), and the call's place.
///
/// Valid only during the block. Registers follow the System V x86-64 convention: the first
/// six integer or pointer arguments in ``integerArgument(_:)`` 0 to 5, the first eight
/// floating-point or vector arguments in ``floatingArgument(_:)`` or
/// ``vectorArgument(_:)`` 0 to 7, the rest on the stack (``stackArgument(_:)``). Which
/// registers hold arguments depends on the function's signature, which attach does not know:
/// the block reads what the function's prototype says is there.
public struct EnterContext: ~Copyable {
    let frame: UnsafeMutableRawPointer

    init(frame: UnsafeMutableRawPointer) {
        self.frame = frame
    }

    /// The context of the call whose enter frame an ``AttachFunctions`` enter function was
    /// given: for a function written in Swift with `@convention(c)`, which reads and writes the
    /// call's registers through it. Valid only while that function runs.
    public init(unsafeFrame frame: UnsafeMutableRawPointer) {
        self.frame = frame
    }

    private var registers: UnsafeMutablePointer<ffh_attach_enter_frame> {
        frame.assumingMemoryBound(to: ffh_attach_enter_frame.self)
    }

    /// The integer argument register `index` (0 to 5: `rdi`, `rsi`, `rdx`, `rcx`, `r8`, `r9`),
    /// all 64 bits (a narrower argument's upper bits are whatever the caller left). Any other
    /// index stops the program with a precondition failure, as do the other register
    /// accessors out of their range.
    ///
    /// A function that returns a structure larger than 16 bytes gets the address of the
    /// caller's buffer for it in `rdi`: its declared arguments then start at index 1.
    public func integerArgument(_ index: Int) -> UInt64 {
        precondition((0..<6).contains(index), "integer argument registers are 0 to 5, not \(index)")
        return withUnsafeBytes(of: registers.pointee.general) { $0.load(fromByteOffset: index * 8, as: UInt64.self) }
    }

    /// Sets the integer argument register `index` (0 to 5) that the function gets.
    public func setIntegerArgument(_ index: Int, to value: UInt64) {
        precondition((0..<6).contains(index), "integer argument registers are 0 to 5, not \(index)")
        withUnsafeMutableBytes(of: &registers.pointee.general) {
            $0.storeBytes(of: value, toByteOffset: index * 8, as: UInt64.self)
        }
    }

    /// The low 8 bytes of vector argument register `index` (0 to 7: `xmm0` to `xmm7`) as a
    /// `Double` (a `float` argument is in the low 4 bytes: read ``vectorArgument(_:)``).
    public func floatingArgument(_ index: Int) -> Double {
        Double(bitPattern: vectorArgument(index)[0])
    }

    /// Sets the low 8 bytes of vector argument register `index` (0 to 7) to `value`.
    public func setFloatingArgument(_ index: Int, to value: Double) {
        var vector = vectorArgument(index)
        vector[0] = value.bitPattern
        setVectorArgument(index, to: vector)
    }

    /// The whole vector argument register `index` (0 to 7), low 8 bytes first.
    public func vectorArgument(_ index: Int) -> SIMD2<UInt64> {
        precondition((0..<8).contains(index), "vector argument registers are 0 to 7, not \(index)")
        return withUnsafeBytes(of: registers.pointee.vector) {
            SIMD2(
                $0.load(fromByteOffset: index * 16, as: UInt64.self),
                $0.load(fromByteOffset: index * 16 + 8, as: UInt64.self))
        }
    }

    /// Sets the whole vector argument register `index` (0 to 7).
    public func setVectorArgument(_ index: Int, to value: SIMD2<UInt64>) {
        precondition((0..<8).contains(index), "vector argument registers are 0 to 7, not \(index)")
        withUnsafeMutableBytes(of: &registers.pointee.vector) {
            $0.storeBytes(of: value[0], toByteOffset: index * 16, as: UInt64.self)
            $0.storeBytes(of: value[1], toByteOffset: index * 16 + 8, as: UInt64.self)
        }
    }

    /// `%al` as the call arrived: in a call of a variadic function, an upper bound on the
    /// number of vector registers that carry arguments; otherwise whatever the caller left.
    public var vectorArgumentCount: UInt8 { UInt8(truncatingIfNeeded: registers.pointee.rax) }

    /// The stack argument word `index` (0 is the first word above the return address), read
    /// from the caller's stack; only as many exist as the function's prototype says. Nothing
    /// checks the upper end: a word past the caller's stack may fault. (To change a stack
    /// argument, write the word at `stackPointer + 8 * (index + 1)`.)
    public func stackArgument(_ index: Int) -> UInt64 {
        precondition(index >= 0, "stack argument words start at 0, not \(index)")
        return UnsafeRawPointer(bitPattern: UInt(registers.pointee.sp) + 8 + UInt(index) * 8)!.load(as: UInt64.self)
    }

    /// The stack pointer as the function was entered: the address of the return address.
    public var stackPointer: UInt { UInt(registers.pointee.sp) }

    /// Where the call returns to (the caller's code).
    public var returnAddress: UInt { UnsafeRawPointer(bitPattern: stackPointer)!.load(as: UInt.self) }

    /// The function the call goes on to: the attached function (or a replacement or hook
    /// closure that stood in the slot before the attach).
    public var function: UInt { UInt(registers.pointee.function) }

    /// A value of the block's choosing that the call's leave block reads as
    /// ``LeaveContext/scratch`` (a clock reading, to time the call); 0 until set.
    public var scratch: UInt64 {
        get { registers.pointee.scratch }
        nonmutating set { registers.pointee.scratch = newValue }
    }

    /// The calling thread's kernel id.
    public var threadID: Int32 { Int32(truncatingIfNeeded: registers.pointee.thread) }
}

/// An attached call as it returns: its result registers, which the block may change (the
/// caller gets them as the block leaves them), and what its enter block left.
///
/// Valid only during the block. Which registers hold the result depends on the function's
/// return type (System V x86-64): integers and pointers in ``returnValue``, a second word
/// in ``secondReturnValue``, a `double` in ``floatingReturnValue``, a `float` in the low 4
/// bytes of ``vectorReturnValue(_:)`` 0
/// (`Float(bitPattern: UInt32(truncatingIfNeeded: call.vectorReturnValue(0)[0]))`), small
/// structures across them. A structure larger than 16 bytes is returned in memory: the
/// function returns the caller's buffer's address in ``returnValue``, where the block can
/// read or change it. A `long double` result is on the x87 stack, which the library leaves
/// alone (a block must not use `Float80` either).
public struct LeaveContext: ~Copyable {
    let frame: UnsafeMutableRawPointer

    init(frame: UnsafeMutableRawPointer) {
        self.frame = frame
    }

    /// The context of the call whose leave frame an ``AttachFunctions`` leave function was
    /// given (see ``EnterContext/init(unsafeFrame:)``). Valid only while that function runs.
    public init(unsafeFrame frame: UnsafeMutableRawPointer) {
        self.frame = frame
    }

    private var registers: UnsafeMutablePointer<ffh_attach_leave_frame> {
        frame.assumingMemoryBound(to: ffh_attach_leave_frame.self)
    }

    /// `rax`: an integer or pointer result.
    public var returnValue: UInt64 {
        get { registers.pointee.rax }
        nonmutating set { registers.pointee.rax = newValue }
    }

    /// `rdx`: the second word of a 16-byte integer result.
    public var secondReturnValue: UInt64 {
        get { registers.pointee.rdx }
        nonmutating set { registers.pointee.rdx = newValue }
    }

    /// The low 8 bytes of `xmm0` as a `Double`: a `double` result.
    public var floatingReturnValue: Double {
        get { Double(bitPattern: vectorReturnValue(0)[0]) }
        nonmutating set {
            var vector = vectorReturnValue(0)
            vector[0] = newValue.bitPattern
            setVectorReturnValue(0, to: vector)
        }
    }

    /// The whole vector result register `index` (0: `xmm0`, 1: `xmm1`), low 8 bytes first.
    public func vectorReturnValue(_ index: Int) -> SIMD2<UInt64> {
        precondition((0..<2).contains(index), "vector result registers are 0 and 1, not \(index)")
        let words = index == 0 ? registers.pointee.xmm0 : registers.pointee.xmm1
        return SIMD2(words.0, words.1)
    }

    /// Sets the whole vector result register `index` (0 or 1).
    public func setVectorReturnValue(_ index: Int, to value: SIMD2<UInt64>) {
        precondition((0..<2).contains(index), "vector result registers are 0 and 1, not \(index)")
        if index == 0 {
            registers.pointee.xmm0 = (value[0], value[1])
        } else {
            registers.pointee.xmm1 = (value[0], value[1])
        }
    }

    /// What the call's enter block stored in ``EnterContext/scratch`` (0 if it stored
    /// nothing, or there is no enter block).
    public var scratch: UInt64 { registers.pointee.scratch }

    /// The stack pointer as the function was entered (``EnterContext/stackPointer``).
    public var stackPointer: UInt { UInt(registers.pointee.sp) }

    /// Where the call returns to: the caller's code.
    public var returnAddress: UInt { UInt(registers.pointee.returnAddress) }

    /// The function the call went on to (``EnterContext/function``).
    public var function: UInt { UInt(registers.pointee.function) }

    /// The calling thread's kernel id.
    public var threadID: Int32 { Int32(truncatingIfNeeded: registers.pointee.thread) }
}

/// Makes what the contexts' accessors need from the Swift runtime before the first attach: an
/// unoptimised build makes the metadata of the types they use (tuples, `SIMD2<UInt64>`, the C
/// frames) the first time each accessor runs, under a lock of the runtime's and with memory
/// from the allocator. A signal handler whose call of an attached function interrupted that
/// first run on its own thread ran a block that waited for the same lock for ever (a `--log`
/// of the tracer's debug build, whose blocks read the arguments, under a timer signal). Run
/// once here, on frames of this function's own, every accessor has what it needs.
enum AttachContextWarmUp {
    static func run() {
        let stack = UnsafeMutablePointer<UInt64>.allocate(capacity: 4)
        stack.initialize(repeating: 0, count: 4)
        defer { stack.deallocate() }
        let enterFrame = UnsafeMutablePointer<ffh_attach_enter_frame>.allocate(capacity: 1)
        enterFrame.initialize(to: ffh_attach_enter_frame())
        defer { enterFrame.deallocate() }
        // (The stack pointer at entry is the address of a return address, with stack words above.)
        enterFrame.pointee.sp = UInt64(UInt(bitPattern: stack))
        let enter = EnterContext(frame: UnsafeMutableRawPointer(enterFrame))
        enter.setIntegerArgument(0, to: enter.integerArgument(0))
        enter.setFloatingArgument(0, to: enter.floatingArgument(0))
        enter.setVectorArgument(0, to: enter.vectorArgument(0))
        enter.scratch = enter.scratch &+ UInt64(enter.vectorArgumentCount) &+ enter.stackArgument(0)
        _ = (enter.stackPointer, enter.returnAddress, enter.function, enter.threadID)
        let leaveFrame = UnsafeMutablePointer<ffh_attach_leave_frame>.allocate(capacity: 1)
        leaveFrame.initialize(to: ffh_attach_leave_frame())
        defer { leaveFrame.deallocate() }
        let leave = LeaveContext(frame: UnsafeMutableRawPointer(leaveFrame))
        leave.returnValue = leave.returnValue &+ leave.secondReturnValue
        leave.secondReturnValue = leave.returnValue
        leave.floatingReturnValue = leave.floatingReturnValue
        leave.setVectorReturnValue(0, to: leave.vectorReturnValue(0))
        leave.setVectorReturnValue(1, to: leave.vectorReturnValue(1))
        _ = (leave.scratch, leave.stackPointer, leave.returnAddress, leave.function, leave.threadID)
    }
}

/// An attach's blocks written as C functions (or Swift functions with `@convention(c)`), with a
/// context pointer for both: the attach path calls them itself, with no Swift closure or
/// dispatch between the entry and the block. The cheapest blocks an attach can have: what a
/// tracer's counting blocks are (see ``Hook/attach(on:options:functions:)``).
///
/// Each function gets `context` and the call's frame: the saved registers that
/// ``EnterContext`` and ``LeaveContext`` read and write (``EnterContext/init(unsafeFrame:)``
/// makes one from it). A function written in C reads the frame by its layout, 64-bit words at
/// these byte offsets:
///
/// | frame | offset | what |
/// |---|---:|---|
/// | enter | 0 to 40 | `rdi`, `rsi`, `rdx`, `rcx`, `r8`, `r9` (``EnterContext/integerArgument(_:)``) |
/// | enter | 48 | `rax` (``EnterContext/vectorArgumentCount`` in its low byte) |
/// | enter | 56 | the stack pointer at entry (``EnterContext/stackPointer``) |
/// | enter | 64 to 176 | `xmm0` to `xmm7`, 16 bytes each |
/// | enter | 192, 200, 208 | ``EnterContext/scratch``, ``EnterContext/function``, ``EnterContext/threadID`` |
/// | leave | 0, 8 | `rax`, `rdx` (``LeaveContext/returnValue``, ``LeaveContext/secondReturnValue``) |
/// | leave | 16, 32 | `xmm0`, `xmm1`, 16 bytes each |
/// | leave | 56 | the real return address (``LeaveContext/returnAddress``) |
/// | leave | 64, 72, 80, 88 | the stack pointer at entry, ``LeaveContext/scratch``, ``LeaveContext/function``, ``LeaveContext/threadID`` |
///
/// ```c
/// // Counts the calls of the function, into the context.
/// struct counts { _Atomic unsigned long calls; };
/// void count_enter(void *context, void *frame) {
///     atomic_fetch_add_explicit(&((struct counts *)context)->calls, 1, memory_order_relaxed);
/// }
/// ```
///
/// ```swift
/// let token = try Hook.attach(
///     on: slot, functions: AttachFunctions(onEnter: count_enter, onLeave: nil, context: counts))
/// ```
///
/// The functions run as closure blocks do (the same rules for calls they make, signals,
/// re-entry and removal), on the calling thread; `context` must stay valid while the attach is
/// installed and a call may be in a block (until the token's removal has returned and the
/// calls in flight have left). A function must not throw a Swift error or a C++ exception.
public struct AttachFunctions: @unchecked Sendable {
    /// A block as a C function: the context pointer, then the call's frame (never nil; optional
    /// as C's `void *` is, so that `void f(void *context, void *frame)` written in C fits).
    public typealias Function =
        @convention(c) (_ context: UnsafeMutableRawPointer?, _ frame: UnsafeMutableRawPointer?)
        -> Void

    /// Runs as the function is entered (nil: none).
    public var onEnter: Function?
    /// Runs as it returns (nil: none, and the call's return address is left alone).
    public var onLeave: Function?
    /// What both functions get as their first argument.
    public var context: UnsafeMutableRawPointer?

    /// Blocks `onEnter` and `onLeave` with `context`.
    public init(onEnter: Function?, onLeave: Function?, context: UnsafeMutableRawPointer?) {
        self.onEnter = onEnter
        self.onLeave = onLeave
        self.context = context
    }
}

extension Hook {
    /// Runs `onEnter` as the function `slot` leads to is entered and `onLeave` as it returns,
    /// without knowing its signature: the blocks read and write registers, the function gets
    /// the caller's registers and stack exactly as they came (any shape, variadic functions
    /// included), and nothing is copied or allocated per call.
    ///
    /// ```swift
    /// // Count and time every call through the slot.
    /// let token = try Hook.attach(on: slot) { call in
    ///     call.scratch = UInt64(DispatchTime.now().uptimeNanoseconds)
    /// } onLeave: { call in
    ///     record(UInt64(DispatchTime.now().uptimeNanoseconds) - call.scratch)
    /// }
    /// token.remove()
    /// ```
    ///
    /// How it works: the slot gets a small stub of the library's (written as
    /// ``replace(on:with:options:)`` writes a function, so an attach composes with hooks and
    /// replacements of the slot as replacements do). The stub saves the argument registers,
    /// runs `onEnter`, and jumps to the function. For `onLeave`, the call's return address is
    /// kept on the thread's side stack (512 calls deep) and the function is called from a
    /// return thunk of the thread's own, whose return address takes the caller's place on the
    /// stack (the stack arguments stay where they are); the function returns into the thunk,
    /// which runs `onLeave` and returns to the caller.
    ///
    /// - A call deeper than the side stack still runs, with its `onEnter`; its `onLeave` is
    ///   skipped and counted (``HookStatistics/skippedLeaveCount``).
    /// - A call that `longjmp`, an exception, or a thread's exit takes past its caller never
    ///   runs its `onLeave`; its frame is dropped from the side stack when a later attached
    ///   call or return finds it abandoned (``HookStatistics/abandonedFrameCount``).
    /// - Unwinders find the real caller through the thunk: exceptions, `backtrace()` and
    ///   `_Unwind_Backtrace` through the unwind information registered with the unwinder, gdb
    ///   through the same information in a small object file that each thread's side stack
    ///   hands to gdb's JIT interface. gdb's backtrace lists the thunk as a frame named
    ///   `swift_ffi_hook_return_thunk`, then the caller. gdb finds that interface in the symbol
    ///   table of the binary that links the library: with the binary stripped and no debug
    ///   file, or in a debugger that does not read the interface, the thunk is an unnamed
    ///   address outside any object and the backtrace ends there.
    /// - A function that returns twice (`setjmp`, `_setjmp`, `__sigsetjmp`, `getcontext`,
    ///   `swapcontext`, `vfork` and their aliases in the C library) runs `onEnter` only: its
    ///   second return, by `longjmp`, `setcontext` or a `vfork` child's end, comes back to the
    ///   return address saved with its context, where `onLeave` would have put the thunk.
    /// - Calls the blocks make themselves are not attached to (they go straight to their
    ///   functions), and neither are calls the library makes; both are counted
    ///   (``HookStatistics/passedThroughCallCount``). A signal handler's calls are attached
    ///   to unless the handler interrupted a block, whose calls they then count as; with
    ///   ``HookOptions/allowsReentry`` both run this attach's blocks.
    /// - Removing the attach stops new calls from running its blocks; a call that is inside
    ///   the function at that moment returns normally and does not run `onLeave`.
    ///
    /// - Parameters:
    ///   - slot: an aligned, pointer-sized slot holding a function pointer.
    ///   - options: ``HookOptions/liftsPageProtection`` for a slot in read-only memory;
    ///     ``HookOptions/allowsReentry`` to run the blocks also for calls made while a block
    ///     runs on the thread: those of a signal handler that interrupts a block, and the
    ///     blocks' own (which then recurse if a block calls a function it is attached to: use
    ///     it for blocks that call none, such as a tracer's). ``HookOptions/once`` does not
    ///     apply to an attach and is accepted and ignored (the token stays active, every call
    ///     runs the blocks); caller limits are refused.
    ///   - onEnter: runs as the function is entered, on the calling thread.
    ///   - onLeave: runs as it returns, on the calling thread.
    /// - Returns: the token that removes the attach.
    /// - Throws: ``HookError`` for a null, misaligned, unmapped or read-only slot, a slot in
    ///   executable memory, a slot that holds NULL or an address where no memory can be read,
    ///   ``HookError/Code-swift.struct/unsupportedCallerLimit`` for
    ///   ``HookOptions/onInstallingThreadOnly`` or ``HookOptions/inCurrentTaskOnly``, or
    ///   ``HookError/Code-swift.struct/unsupportedPlatform`` off Linux x86-64.
    public static func attach(
        on slot: FunctionSlot, options: HookOptions = [], onEnter: EnterBlock?, onLeave: LeaveBlock?
    ) throws(HookError) -> HookToken {
        try attach(
            on: slot, options: options,
            attachment: Attachment(onEnter: onEnter, onLeave: onLeave, reenters: options.contains(.allowsReentry)))
    }

    /// ``attach(on:options:onEnter:onLeave:)`` with blocks written as C functions
    /// (``AttachFunctions``), which the attach path calls without a Swift closure between.
    ///
    /// - Parameters:
    ///   - slot: an aligned, pointer-sized slot holding a function pointer.
    ///   - options: as for ``attach(on:options:onEnter:onLeave:)``.
    ///   - functions: the enter and leave functions and their context.
    /// - Returns: the token that removes the attach.
    /// - Throws: as ``attach(on:options:onEnter:onLeave:)``.
    public static func attach(
        on slot: FunctionSlot, options: HookOptions = [], functions: AttachFunctions
    ) throws(HookError) -> HookToken {
        try attach(
            on: slot, options: options,
            attachment: Attachment(functions: functions, reenters: options.contains(.allowsReentry)))
    }

    /// Attaches `attachment`'s blocks to the function `slot` leads to.
    static func attach(
        on slot: FunctionSlot, options: HookOptions, attachment: Attachment
    ) throws(HookError) -> HookToken {
        if let problem = slot.problem {
            throw HookError(slot: slot.address, signature: nil, problem: .invalidSlot(problem))
        }
        guard options.isDisjoint(with: HookOptions.callerLimits) else {
            throw HookError(
                slot: slot.address, signature: nil,
                problem: .unsupportedCallerLimit(HookError.Problem.limitedAttachReason))
        }
        let handle = try AttachEngine.attach(
            slot: slot.pointer, attachment: attachment, liftsProtection: options.contains(.liftsPageProtection),
            owner: slot.owner, function: slot.function)
        return HookToken(handle: handle)
    }

    /// Attaches to every slot of `requests` as ``attach(on:options:onEnter:onLeave:)`` and
    /// ``attach(on:options:functions:)`` do one by one, all or nothing, taking the stubs' lock
    /// and the registry's once for the group (``AttachEngine/attach(_:liftsProtection:)``), not
    /// once or twice a slot: an inline batch's thousand functions. The tokens are in the order
    /// of `requests`. A failure names its request's `name`, when it has one.
    package static func attach(together requests: [AttachRequest], options: HookOptions) throws(HookError)
        -> [HookToken]
    {
        guard options.isDisjoint(with: HookOptions.callerLimits) else {
            throw HookError(
                slot: requests.first?.slot.address ?? 0, signature: nil,
                problem: .unsupportedCallerLimit(HookError.Problem.limitedAttachReason))
        }
        var items: [AttachEngine.Item] = []
        items.reserveCapacity(requests.count)
        // Read in place: a copy of a request (its blocks, name and owner retained and released)
        // costs more than the work on it.
        try requests.withUnsafeBufferPointer { (requests) throws(HookError) in
            // The requests' C functions, in one allocation for the group.
            var withFunctions = 0
            for place in requests.indices where requests[place].functions != nil { withFunctions += 1 }
            let table = withFunctions > 0 ? AttachFunctionTable(capacity: withFunctions) : nil
            let reenters = options.contains(.allowsReentry)
            for place in requests.indices {
                if let problem = requests[place].slot.problem {
                    var error = HookError(
                        slot: requests[place].slot.address, signature: nil, problem: .invalidSlot(problem))
                    error.symbol = requests[place].name
                    throw error
                }
                // The request's fields one by one: a method of the request would take a copy.
                let attachment =
                    if let functions = requests[place].functions {
                        Attachment(functions: functions, reenters: reenters, in: table)
                    } else {
                        Attachment(
                            onEnter: requests[place].blocks?.onEnter, onLeave: requests[place].blocks?.onLeave,
                            reenters: reenters)
                    }
                items.append(
                    AttachEngine.Item(
                        slot: requests[place].slot.address, attachment: attachment, symbol: requests[place].name,
                        symbolIsBound: false, function: requests[place].slot.function,
                        owner: requests[place].slot.owner))
            }
        }
        return try AttachEngine.attach(items, liftsProtection: options.contains(.liftsPageProtection)).map(
            HookToken.init(handle:))
    }
}

/// One slot of ``Hook/attach(together:options:)`` and its blocks, as one of the single attach
/// forms takes them.
package struct AttachRequest {
    let slot: FunctionSlot
    /// The name errors give the slot's function; nil for none (where the caller names the
    /// function of an error itself, and making each name would cost more than the attach).
    let name: String?
    fileprivate let blocks: (onEnter: EnterBlock?, onLeave: LeaveBlock?)?
    fileprivate let functions: AttachFunctions?

    /// The blocks of ``Hook/attach(on:options:onEnter:onLeave:)``.
    package init(slot: FunctionSlot, name: String?, onEnter: EnterBlock?, onLeave: LeaveBlock?) {
        self.slot = slot
        self.name = name
        blocks = (onEnter, onLeave)
        functions = nil
    }

    /// The C functions of ``Hook/attach(on:options:functions:)``.
    package init(slot: FunctionSlot, name: String?, functions: AttachFunctions) {
        self.slot = slot
        self.name = name
        blocks = nil
        self.functions = functions
    }
}

extension Hook {

    /// Runs `onEnter` as the function `slot` leads to is entered, without knowing its
    /// signature: ``attach(on:options:onEnter:onLeave:)`` without a leave block, so the call's
    /// return address is left alone (the cheapest attach).
    ///
    /// ```swift
    /// // Count the calls through the slot.
    /// let calls = Atomic<Int>(0)
    /// let token = try Hook.attach(on: slot) { _ in
    ///     calls.add(1, ordering: .relaxed)
    /// }
    /// ```
    ///
    /// A lone trailing closure is this `onEnter`, in every language mode. For a leave block
    /// alone, name both: `attach(on: slot, onEnter: nil) { call in … }`.
    ///
    /// - Parameters:
    ///   - slot: an aligned, pointer-sized slot holding a function pointer.
    ///   - options: as for ``attach(on:options:onEnter:onLeave:)``.
    ///   - onEnter: runs as the function is entered, on the calling thread.
    /// - Returns: the token that removes the attach.
    /// - Throws: as ``attach(on:options:onEnter:onLeave:)``.
    public static func attach(
        on slot: FunctionSlot, options: HookOptions = [], onEnter: @escaping EnterBlock
    ) throws(HookError) -> HookToken {
        try attach(on: slot, options: options, onEnter: onEnter, onLeave: nil)
    }
}
