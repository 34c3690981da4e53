extension FunctionSlot {
    /// The same slot, with `function` as the original of calls made while the slot holds
    /// NULL: a callback that a C library fills in later, or where NULL means "use the
    /// library's default".
    ///
    /// A before or after hook needs an original to run around, so a slot that holds NULL is
    /// refused with ``HookError/Code-swift.struct/emptySlot``, unless it has a fallback:
    ///
    /// ```swift
    /// // zlib fills in zalloc and zfree during deflateInit, only where they are NULL.
    /// let zalloc = FunctionSlot.field(\z_stream.zalloc, of: stream)
    ///     .withFallback(countingCalloc as @convention(c) (UnsafeMutableRawPointer?, UInt32, UInt32) -> UnsafeMutableRawPointer?)
    /// let token = try Hook.before(on: zalloc, signature: Signature("^v^vII")) { _ in allocations.increment() }
    /// ```
    ///
    /// What the fallback changes:
    ///
    /// - When a hook is installed on a slot that holds NULL, the hooks wrap `function`:
    ///   blocks run around it and ``Invocation/callOriginal()`` calls it. The slot then holds
    ///   the hooks' closure, so a library that fills in only empty slots (zlib in
    ///   `deflateInit`) leaves it as it is: `function` stands in for the library's default
    ///   and must be able to take its place (zlib frees with `zfree` what `zalloc` gave:
    ///   hook both, with fallbacks that go together).
    /// - When the slot's last hook is removed, the slot gets NULL back, as it was; a library
    ///   that saw it filled may still call through it, so remove such hooks only once the
    ///   library is done with the slot (after `deflateEnd`). Whoever still holds the closure
    ///   (read from the slot before) reaches `function` through it.
    /// - A slot that holds a function at install keeps it as the original; the fallback is
    ///   not used.
    /// - On a slot that already has hooks, the fallback fills an original that is still NULL
    ///   (hooks that an instead hook installed on the empty slot, whose
    ///   ``Invocation/callOriginal()`` returned zero until then); the first fallback
    ///   stands while the slot has hooks.
    /// - If the program writes its own function into the slot while it is hooked, calls
    ///   reach that function directly, without the hooks, as for any hooked slot written by
    ///   someone else (see <doc:ThreadsAndRemoval>).
    ///
    /// Without a fallback, an instead hook may still be installed on a NULL slot: it provides
    /// the function, and ``Invocation/callOriginal()`` there returns zero (every byte of an
    /// aggregate result zero) and calls nothing.
    ///
    /// - Parameter function: a `@convention(c)` function of the slot's signature (nothing
    ///   checks the signature). Pass a C function by name with its type spelled out
    ///   (`calloc_counter as @convention(c) (…) -> …`): otherwise Swift turns the name into
    ///   a Swift closure, which is refused.
    /// - Returns: the slot with the fallback. Installing on it throws
    ///   ``HookError/Code-swift.struct/invalidSlot``, naming the fallback, when `function` is
    ///   not a single C function pointer, is NULL, or does not point into executable memory.
    public func withFallback<Function>(_ function: Function) -> FunctionSlot {
        var slot = self
        guard MemoryLayout<Function>.size == MemoryLayout<UnsafeRawPointer>.size else {
            slot.fallbackAddress = 0
            slot.problem = slot.problem ?? "the fallback \(Function.self) is not a @convention(c) function pointer"
            return slot
        }
        let address = unsafeBitCast(function, to: UInt.self)
        slot.fallbackAddress = address
        if address == 0 { slot.problem = slot.problem ?? "the fallback function is NULL" }
        return slot
    }

    /// The function calls get while the slot holds NULL, given by ``withFallback(_:)``;
    /// `nil` when there is none.
    public var fallback: UnsafeRawPointer? { UnsafeRawPointer(bitPattern: fallbackAddress) }
}
