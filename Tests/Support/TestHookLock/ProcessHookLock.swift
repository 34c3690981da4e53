import CTestSupport
public import Testing

/// A trait for tests that must not run while another test target's tests install hooks (they
/// compare the process's hook figures exactly), or that install hooks themselves while such a
/// test may run (``CTestHookLock.h``'s lock, shared by the test targets of one process). Both
/// test targets that install hooks use this one definition.
public struct ProcessHookLock: SuiteTrait, TestTrait, TestScoping {
    /// Whether the test holds the lock alone.
    public let isExclusive: Bool

    /// It applies to every test of a suite it marks.
    public var isRecursive: Bool { true }

    /// Runs a test case holding the lock, shared or alone.
    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // Each test case holds it, not a suite as a whole.
        guard testCase != nil else { return try await function() }
        while (isExclusive ? ct_hook_lock_try_exclusive() : ct_hook_lock_try_shared()) == 0 {
            try await Task.sleep(for: .milliseconds(2))
        }
        defer { isExclusive ? ct_hook_lock_release_exclusive() : ct_hook_lock_release_shared() }
        try await function()
    }
}

extension Trait where Self == ProcessHookLock {
    /// The test compares the process's hook figures: no test of another target that installs
    /// hooks runs meanwhile.
    public static var exclusiveProcessHooks: Self { ProcessHookLock(isExclusive: true) }
    /// The test installs hooks: no test that compares the process's hook figures runs meanwhile.
    public static var sharedProcessHooks: Self { ProcessHookLock(isExclusive: false) }
}
