import ArgumentParser
import CHookBench
import CObjCForward
import FFIHook
import FFIHookInline
import HookFixtures

/// A way of calling a function: directly, through a raw libffi closure, through this
/// library's hooks and its signature-free attach (on the slot, or inline on a function
/// called directly), as an Objective-C message (plain, hooked by this library, or hooked
/// through message forwarding), or through frida-gum's Interceptor (only with `--peers`).
enum Mechanism: String, CaseIterable, Codable, Sendable, ExpressibleByArgument {
    /// The original called through the slot: the first floor.
    case direct
    /// A raw libffi closure whose handler calls the original through a typed C function
    /// pointer: the closure limit, the least any libffi-closure hook can cost.
    case closureLimit
    /// A raw libffi closure whose handler forwards with `ffi_call`: the libffi floor.
    case libffi
    case before
    case after
    case beforeAfter
    case instead
    case eightBefore
    case typedBeforeAfter
    /// `Hook.attach` on the slot with an empty enter block and an empty leave block: no
    /// signature, the registers as they came; the leave runs through a swapped return address.
    case attachEnterLeave
    /// `Hook.attach` on the slot with an empty enter block only: no return address is swapped.
    case attachEnter
    /// `Hook.attach` on the slot with empty enter and leave functions written in C
    /// (`AttachFunctions`): ``attachEnterLeave`` without the Swift closures.
    case attachFunctions
    /// `hb_add_padded` called directly, a `call rel32` from a C loop, with nothing patched:
    /// the floor of the inline rows and of frida's (see ``InlineTarget``).
    case inlineDirect
    /// The same direct calls with the inline patch kept by ``FFIHookInline/InlineFunction/patch()``
    /// and no hook: the entry jumps to the stub, through the jump cell to the trampoline,
    /// which runs the moved first instructions and jumps back into the function.
    case inlinePassThrough
    /// The same direct calls, no-op `Invocation` before and after blocks on the function's
    /// jump cell: an inline hook, the same blocks as ``beforeAfter``.
    case inlineBeforeAfter
    /// The same direct calls, `Hook.attach` on the function's jump cell with an empty enter
    /// block and an empty leave block: the same attach as ``attachEnterLeave``, inline.
    case inlineAttachEnterLeave
    /// The same direct calls, `Hook.attach` on the function's jump cell with empty enter and leave
    /// functions written in C: ``inlineAttachEnterLeave`` without the Swift closures, what
    /// frida's attach row has (empty C listeners).
    case inlineAttachFunctions
    /// An instead block on the jump cell that calls the original (the trampoline).
    case inlineInstead
    /// A compiled C replacement (`hb_add_replacement`) in the jump cell through
    /// `Hook.replace`, which calls the original through the trampoline the replacement's
    /// token gives: what frida's `replaceFast` row does.
    case inlineReplace
    /// A message sent to the signature's method of an Objective-C class, compiled as a send.
    case objcMessage
    /// The same message, the class's method hooked class-wide with this library's no-op
    /// before and after blocks (FFIHookObjC).
    case objcHookBeforeAfter
    /// The same message, hooked for the receiver alone with the same no-op blocks
    /// (FFIHookObjC's per-instance hooks: the object moves to a subclass made at run time).
    case objcInstanceHookBeforeAfter
    /// The same message to a method whose hooks are all removed: the library's closure stays
    /// its implementation after its first hook and passes messages through (FFIHookObjC).
    case objcPassThrough
    /// The same message, the class's method hooked as Aspects does: through message
    /// forwarding to `forwardInvocation:`, which runs no-op before and after blocks around
    /// the original invoked through the `NSInvocation`.
    case objcForwardingHook
    /// frida-gum's `Interceptor.attach` with empty `onEnter` and `onLeave` written in C.
    case fridaAttach
    /// frida-gum's `Interceptor.replace` with a C replacement that calls the original.
    case fridaReplace
    /// frida-gum's `Interceptor.replaceFast`: the function's entry jumps straight to a C
    /// replacement, which calls the original through the trampoline frida returns.
    case fridaReplaceFast

    /// The mechanisms of the main run: every one this process installs by itself.
    static let standard = allCases.filter { !$0.isPeer }

    /// The rows of the thread-scaling section, each measured from one thread and from two:
    /// the four kinds of hook whose scaling is a target (``scalingTargets``), each after the
    /// plain call its loop makes without a hook.
    static let threadScaled: [Mechanism] = [
        .direct, .beforeAfter, .attachEnterLeave, .inlineDirect, .inlineBeforeAfter, .objcMessage,
        .objcHookBeforeAfter,
    ]

    /// The kinds of hook that two threads must call at least ``Report/ThreadScaling/target`` times
    /// as often as one: before and after blocks on a slot, a signature-free attach on a slot,
    /// before and after blocks inline, and a class-wide hook of an Objective-C method.
    static let scalingTargets: [Mechanism] = [
        .beforeAfter, .attachEnterLeave, .inlineBeforeAfter, .objcHookBeforeAfter,
    ]

    /// The values `--mechanism` lists in its help: those of the main run.
    static var allValueStrings: [String] { standard.map(\.rawValue) }

    /// The label in tables and charts.
    var title: String {
        switch self {
        case .direct: "direct call"
        case .closureLimit: "closure limit (typed call)"
        case .libffi: "raw libffi closure"
        case .before: "before"
        case .after: "after"
        case .beforeAfter: "before + after"
        case .instead: "instead → original"
        case .eightBefore: "8 × before"
        case .typedBeforeAfter: "typed before + after"
        case .attachEnterLeave: "attach: enter + leave"
        case .attachEnter: "attach: enter"
        case .attachFunctions: "attach: C functions"
        case .inlineDirect: "direct call rel32 (no patch)"
        case .inlinePassThrough: "inline: patched, no hook"
        case .inlineBeforeAfter: "inline: before + after"
        case .inlineAttachEnterLeave: "inline: attach enter + leave"
        case .inlineAttachFunctions: "inline: attach C functions"
        case .inlineInstead: "inline: instead → original"
        case .inlineReplace: "inline: C replace → original"
        case .objcMessage: "ObjC message send"
        case .objcHookBeforeAfter: "ObjC method: before + after"
        case .objcInstanceHookBeforeAfter: "ObjC one object: before + after"
        case .objcPassThrough: "ObjC method: hooks all removed"
        case .objcForwardingHook: "ObjC forwarding: before + after"
        case .fridaAttach: "frida attach (empty C listeners)"
        case .fridaReplace: "frida replace → original"
        case .fridaReplaceFast: "frida replaceFast → original"
        }
    }

    /// Whether the row measures this library's hooks.
    var isHook: Bool {
        switch self {
        case .before, .after, .beforeAfter, .instead, .eightBefore, .typedBeforeAfter, .attachEnterLeave,
            .attachEnter, .attachFunctions, .inlinePassThrough, .inlineBeforeAfter, .inlineAttachEnterLeave,
            .inlineAttachFunctions, .inlineInstead, .inlineReplace, .objcHookBeforeAfter, .objcInstanceHookBeforeAfter,
            .objcPassThrough:
            true
        case .direct, .closureLimit, .libffi, .inlineDirect, .objcMessage, .objcForwardingHook, .fridaAttach,
            .fridaReplace, .fridaReplaceFast:
            false
        }
    }

    /// Whether the row patches (or calls unpatched) ``InlineTarget``'s function in its own code.
    var isInline: Bool {
        self == .inlineDirect || self == .inlinePassThrough || self == .inlineBeforeAfter
            || self == .inlineAttachEnterLeave || self == .inlineAttachFunctions || self == .inlineInstead
            || self == .inlineReplace
    }

    /// Whether the row's loop calls the function directly, not through the slot: the inline
    /// rows and frida's, which patch the function itself. Their "× direct" is over
    /// ``inlineDirect``.
    var callsDirectly: Bool { isInline || isPeer }

    /// Whether the row exists for `signature`: the inline rows (and frida's) have one
    /// function, of `int (int, int)`.
    func applies(to signature: BenchSignature) -> Bool {
        !callsDirectly || signature == InlineTarget.benchSignature
    }

    /// Whether frida installs the row, from another process (`hookbench --peers`).
    var isPeer: Bool { self == .fridaAttach || self == .fridaReplace || self == .fridaReplaceFast }

    /// Whether the row goes through Objective-C.
    var isObjectiveC: Bool {
        self == .objcMessage || self == .objcHookBeforeAfter || self == .objcInstanceHookBeforeAfter
            || self == .objcPassThrough || self == .objcForwardingHook
    }

    /// Makes calls of `signature` go through this mechanism; returns the hooks to remove.
    func install(on signature: BenchSignature) throws -> [any RemovableHook] {
        let slot = signature.slot
        let types = signature.signature
        switch self {
        case .direct, .objcMessage:
            return []
        case .objcForwardingHook:
            guard objcfwd_install(signature.c) == 0 else {
                throw BenchError("\(title): the method of \(signature.title) is hooked already")
            }
            return []
        case .objcHookBeforeAfter:
            return try ObjCHooks.installBeforeAfter(on: signature)
        case .objcInstanceHookBeforeAfter:
            return try ObjCHooks.installInstanceBeforeAfter(on: signature)
        case .objcPassThrough:
            try ObjCHooks.leavePassThrough(on: signature)
            return []
        case .fridaAttach, .fridaReplace, .fridaReplaceFast:
            throw BenchError("\(title) is installed by frida, through FridaPeer")
        case .libffi:
            guard hb_raw_closure_install(signature.c) == 0 else { throw BenchError("libffi cannot make a closure") }
            return []
        case .closureLimit:
            guard hb_closure_limit_install(signature.c) == 0 else { throw BenchError("libffi cannot make a closure") }
            return []
        case .before:
            return [try Hook.before(on: slot, signature: types) { _ in }]
        case .after:
            return [try Hook.after(on: slot, signature: types) { _ in }]
        case .beforeAfter:
            return [
                try Hook.before(on: slot, signature: types) { _ in },
                try Hook.after(on: slot, signature: types) { _ in },
            ]
        case .instead:
            return [try Hook.instead(on: slot, signature: types) { call in call.callOriginal() }]
        case .eightBefore:
            return try (0..<8).map { _ in try Hook.before(on: slot, signature: types) { _ in } }
        case .typedBeforeAfter:
            return try TypedHooks.installBeforeAfter(on: signature)
        case .attachEnterLeave:
            return [try Hook.attach(on: slot, onEnter: { _ in }, onLeave: { _ in })]
        case .attachEnter:
            return [try Hook.attach(on: slot, onEnter: { _ in })]
        case .attachFunctions:
            return [try Hook.attach(on: slot, functions: Self.emptyFunctions)]
        case .inlineDirect:
            return []
        case .inlinePassThrough:
            try InlineTarget.function().patch()
            return []
        case .inlineBeforeAfter:
            let cell = try InlineTarget.function().slot
            return [
                try Hook.before(on: cell, signature: types) { _ in },
                try Hook.after(on: cell, signature: types) { _ in },
            ]
        case .inlineAttachEnterLeave:
            let cell = try InlineTarget.function().slot
            return [try Hook.attach(on: cell, onEnter: { _ in }, onLeave: { _ in })]
        case .inlineAttachFunctions:
            return [try Hook.attach(on: try InlineTarget.function().slot, functions: Self.emptyFunctions)]
        case .inlineInstead:
            let cell = try InlineTarget.function().slot
            return [try Hook.instead(on: cell, signature: types) { call in call.callOriginal() }]
        case .inlineReplace:
            return [try InlineTarget.replace()]
        }
    }

    /// Empty enter and leave functions compiled from C.
    private static let emptyFunctions = AttachFunctions(
        onEnter: hb_empty_attach_function, onLeave: hb_empty_attach_function, context: nil)

    /// Undoes ``install(on:)``.
    func remove(_ tokens: [any RemovableHook], from signature: BenchSignature) throws {
        for token in tokens { token.remove() }
        if self == .inlinePassThrough { try InlineTarget.function().unpatch() }
        if self == .libffi || self == .closureLimit { hb_slot_restore(signature.c) }
        if self == .objcForwardingHook { objcfwd_remove(signature.c) }
        // The library's closure stays in a method after its hooks go: the methods get their
        // compiled implementations back, which the message and forwarding rows expect.
        if self == .objcHookBeforeAfter || self == .objcInstanceHookBeforeAfter || self == .objcPassThrough {
            try ObjCHooks.restoreImplementations()
        }
        try Hook.waitForReclamation()
    }

    /// Installs the mechanism on `signature`, checks a call, samples nanoseconds per call and
    /// heap allocations per call, and removes it again.
    func measure(_ signature: BenchSignature, plan: SamplingPlan) throws -> Report.Row {
        let tokens = try install(on: signature)
        defer { try? remove(tokens, from: signature) }
        return try Sampler(plan: plan).row(self, signature)
    }

    /// Makes `iterations` calls of `signature`; returns the elapsed nanoseconds.
    func time(_ signature: BenchSignature, iterations: Int) -> UInt64 {
        switch self {
        case .objcMessage, .objcHookBeforeAfter, .objcInstanceHookBeforeAfter, .objcPassThrough, .objcForwardingHook:
            objcfwd_time_calls(signature.c, Int64(iterations))
        case _ where callsDirectly: hb_time_direct_calls(Int64(iterations))
        default: hb_time_slot_calls(signature.c, Int64(iterations))
        }
    }

    /// The C loop that makes this mechanism's calls, untimed, for the thread-scaling rows: as
    /// messages, as direct calls of the inline rows' function, or through the slot.
    var callLoop: hb_call_loop {
        if isObjectiveC { return objcfwd_thread_loop }
        if callsDirectly { return hb_direct_loop }
        return hb_slot_loop
    }

    /// Whether one call gives the original's result, through the mechanism: a message goes to
    /// the compiled method, to this library's hook or through forwarding, which runs both its
    /// blocks; an inline row's function is patched exactly when the row hooks it.
    func check(_ signature: BenchSignature) -> Bool {
        switch self {
        case _ where isInline:
            guard let function = try? InlineTarget.function() else { return false }
            return function.isPatched == (self != .inlineDirect) && hb_check_direct() != 0
        case _ where isPeer:
            return hb_check_direct() != 0
        case .objcMessage:
            return objcfwd_method_state(signature.c) == OBJCFWD_ORIGINAL && objcfwd_send_once(signature.c) != 0
        case .objcHookBeforeAfter:
            return ObjCHooks.isHookedByLibrary(signature) && objcfwd_send_once(signature.c) != 0
        case .objcInstanceHookBeforeAfter:
            return ObjCHooks.receiverHasHooksOfItsOwn && objcfwd_send_once(signature.c) != 0
        case .objcPassThrough:
            return ObjCHooks.isHookedByLibrary(signature) && objcfwd_send_once(signature.c) != 0
        case .objcForwardingHook:
            let runs = objcfwd_block_runs()
            return objcfwd_method_state(signature.c) == OBJCFWD_FORWARDING && objcfwd_send_once(signature.c) != 0
                && objcfwd_block_runs() == runs + 2
        default:
            return hb_check_slot(signature.c) != 0
        }
    }
}

/// A failure that ends the run, with what went wrong.
struct BenchError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
