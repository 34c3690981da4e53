#if canImport(Glibc)
    import Glibc
#endif

/// A handle that takes out what it installed: the tokens of hooks and replacements, which
/// ``Hook/scoped(_:during:)`` removes when its body ends.
public protocol RemovableHook: AnyObject, Sendable {
    /// Takes the hook or replacement out; true the first time, false when it was already out.
    @discardableResult
    func remove() -> Bool
}

extension HookToken: RemovableHook {}
extension HookGroupToken: RemovableHook {}
extension ReplacementToken: RemovableHook {}
extension ReplacementGroupToken: RemovableHook {}

extension Hook {
    /// Installs a hook with `install`, runs `body`, and removes the hook when `body` returns
    /// or throws.
    ///
    /// ```swift
    /// let openShape = try Signature(variadic: "i*ii", fixedArgumentCount: 2)
    /// let descriptor = try Hook.scoped {
    ///     try ImportTable.instead(
    ///         symbol: "open", in: .all, signature: openShape, options: .inCurrentTaskOnly
    ///     ) { call in
    ///         errno = EACCES
    ///         call.setReturnValue(Int32(-1))
    ///     }
    /// } during: {
    ///     open("/etc/hostname", O_RDONLY)
    /// }
    /// ```
    ///
    /// `install` is any verb of the library that returns a token: ``Hook``, ``ImportTable``,
    /// typed, table and Objective-C hooks, replacements. The scope is also what
    /// ``HookOptions/inCurrentTaskOnly`` limits a hook to: the calls made by `body`, by the
    /// child tasks it creates, and by code it runs synchronously on its own thread. Scopes
    /// nest: a hook of an outer scope takes part in the calls of an inner one. For several
    /// hooks, nest scopes, one per hook; a hook that `install` or `body` installs otherwise
    /// stays until its own token removes it.
    ///
    /// The hook is removed before this returns; a call into its block that another thread
    /// has already begun may still finish afterwards (see ``HookToken/remove()``). The
    /// removal leaves `errno` as it finds it: after a synchronous body, what the body left.
    ///
    /// - Parameters:
    ///   - install: installs the hook and returns its token; runs inside the scope.
    ///   - body: the code the hook is for.
    /// - Returns: what `body` returns.
    /// - Throws: what `install` throws (then `body` does not run), or what `body` throws.
    @discardableResult
    public static func scoped<Token: RemovableHook, Result>(
        _ install: () throws -> Token, during body: () throws -> Result
    ) throws -> Result {
        try HookScope.$current.withValue(HookScope(parent: HookScope.current)) {
            let token = try install()
            defer { remove(token) }
            return try body()
        }
    }

    /// Installs a hook with `install`, runs the asynchronous `body`, and removes the hook
    /// when `body` returns or throws (see ``scoped(_:during:)``).
    ///
    /// A hook installed with ``HookOptions/inCurrentTaskOnly`` takes part in the calls made
    /// by `body`'s task and by the child tasks it creates (`async let`, task groups, and
    /// `Task { }`, which inherits task-local values; not `Task.detached`), and in no other
    /// task's: tests that run in parallel can each inject their own fault into the same
    /// function.
    ///
    /// - Parameters:
    ///   - isolation: the actor `body` runs on; the caller's, by default.
    ///   - install: installs the hook and returns its token; runs inside the scope.
    ///   - body: the code the hook is for.
    /// - Returns: what `body` returns.
    /// - Throws: what `install` throws (then `body` does not run), or what `body` throws.
    @discardableResult
    public static func scoped<Token: RemovableHook, Result>(
        isolation: isolated (any Actor)? = #isolation,
        _ install: () throws -> Token, during body: () async throws -> Result
    ) async throws -> Result {
        try await HookScope.$current.withValue(HookScope(parent: HookScope.current)) {
            let token = try install()
            defer { remove(token) }
            return try await body()
        }
    }

    /// Removes a scope's hook, leaving `errno` as the scope's body left it.
    private static func remove(_ token: some RemovableHook) {
        let saved = errno
        token.remove()
        errno = saved
    }
}
