import CTestSupport
import Synchronization
import Testing

@testable import FFIHook

/// `Hook.scoped(_:during:)` and the options that limit a hook to the installing thread or
/// the current task. Each test hooks a slot of its own, so the suite runs in parallel with
/// the others.
@Suite struct ScopedHookTests {
    let add = FixtureSignature.add

    /// A fresh slot holding `ct_fix_add`, deallocated after `body`.
    func withAddSlot<Result>(_ body: (UnsafeMutablePointer<AddFunction?>) throws -> Result) rethrows -> Result {
        let slot = makeAddSlot()
        defer { slot.deallocate() }
        return try body(slot)
    }

    /// The same for an asynchronous body.
    func withAsyncAddSlot<Result>(_ body: (UnsafeMutablePointer<AddFunction?>) async throws -> Result) async rethrows
        -> Result
    {
        let slot = makeAddSlot()
        defer { slot.deallocate() }
        return try await body(slot)
    }

    /// An instead hook that makes `add` return `value`.
    func returning(
        _ value: Int32, on slot: UnsafeMutablePointer<AddFunction?>, options: HookOptions = []
    ) throws -> HookToken {
        try Hook.instead(on: FunctionSlot(slot), signature: add, options: options) { call in
            call.setReturnValue(value)
        }
    }

    /// What a call through `slot` returns.
    func call(_ slot: UnsafeMutablePointer<AddFunction?>, _ a: Int32 = 2, _ b: Int32 = 3) -> Int32 {
        slot.pointee!(a, b)
    }

    /// The sum C threads get calling through `slot` (see ``ct_threads_call_add``) and the sum
    /// they get from the original.
    func threadSums(_ slot: UnsafeMutablePointer<AddFunction?>, threads: Int32 = 4, calls: Int64 = 1000)
        -> (got: Int64, original: Int64)
    {
        let got = slot.withMemoryRebound(to: Optional<@convention(c) (Int32, Int32) -> Int32>.self, capacity: 1) {
            ct_threads_call_add($0, threads, calls)
        }
        return (got, Int64(threads) * (calls * (calls - 1) / 2 + calls))
    }

    /// What a call through the slot at `address` with (2, 3) returns.
    @Sendable static func call(at address: UInt) -> Int32 {
        UnsafeMutablePointer<AddFunction?>(bitPattern: address)!.pointee!(2, 3)
    }

    /// A count tasks share.
    final class Tally: Sendable {
        private let count = Atomic<Int>(0)
        func add(_ amount: Int) { count.add(amount, ordering: .acquiringAndReleasing) }
        var value: Int { count.load(ordering: .acquiring) }
    }

    // MARK: - Scopes

    @Test func theHookIsRemovedWhenTheBodyReturnsAndItsResultComesBack() throws {
        try withAddSlot { slot in
            let seen = Mutex<HookToken?>(nil)
            let result = try Hook.scoped {
                let token = try returning(-1, on: slot)
                seen.withLock { $0 = token }
                return token
            } during: {
                call(slot) * 10
            }
            #expect(result == -10)
            #expect(call(slot) == 5)
            #expect(seen.withLock { $0?.isActive } == false)
        }
    }

    struct Failure: Error {}

    @Test func theHookIsRemovedWhenTheBodyThrows() throws {
        withAddSlot { slot in
            #expect(throws: Failure.self) {
                try Hook.scoped {
                    try returning(-1, on: slot)
                } during: {
                    #expect(call(slot) == -1)
                    throw Failure()
                }
            }
            #expect(call(slot) == 5)
        }
    }

    /// A token whose removal changes errno, as a removal that makes system calls may.
    final class ErrnoChangingToken: RemovableHook {
        func remove() -> Bool {
            ct_errno_set(1)
            return true
        }
    }

    /// The removal at the end of a scope leaves errno as the body left it.
    @Test func errnoSurvivesTheRemoval() throws {
        try withAddSlot { slot in
            let result = try Hook.scoped {
                ErrnoChangingToken()
            } during: {
                try Hook.scoped {
                    try Hook.before(on: FunctionSlot(slot), signature: add) { _ in }
                } during: {
                    let result = call(slot)
                    ct_errno_set(Int32(25))
                    return result
                }
            }
            #expect(result == 5)
            #expect(ct_errno_get() == 25)
        }
    }

    @Test func aFailedInstallRunsNoBody() throws {
        let ran = Mutex(false)
        #expect(throws: HookError.self) {
            try Hook.scoped {
                try Hook.before(on: FunctionSlot(address: 8), signature: add) { _ in }
            } during: {
                ran.withLock { $0 = true }
            }
        }
        #expect(!ran.withLock { $0 })
    }

    @Test func scopesNestAndEachRemovesItsOwnHook() throws {
        try withAddSlot { slot in
            try Hook.scoped {
                try Hook.after(on: FunctionSlot(slot), signature: add, options: .inCurrentTaskOnly) { call in
                    call.setReturnValue(call.returnValue(as: Int32.self) + 100)
                }
            } during: {
                #expect(call(slot) == 105)
                try Hook.scoped {
                    try Hook.after(on: FunctionSlot(slot), signature: add, options: .inCurrentTaskOnly) { call in
                        call.setReturnValue(call.returnValue(as: Int32.self) * 2)
                    }
                } during: {
                    // Both run: the outer scope's calls include the inner one's.
                    #expect(call(slot) == 210)
                }
                #expect(call(slot) == 105)
            }
            #expect(call(slot) == 5)
        }
    }

    @Test func hooksTheBodyInstallsStayUntilTheirTokensGo() throws {
        try withAddSlot { slot in
            let inner = try Hook.scoped {
                try returning(-1, on: slot)
            } during: {
                try Hook.after(on: FunctionSlot(slot), signature: add) { call in
                    call.setReturnValue(call.returnValue(as: Int32.self) + 1)
                }
            }
            #expect(call(slot) == 6)
            inner.remove()
            #expect(call(slot) == 5)
        }
    }

    @Test func everyKindOfTokenIsRemoved() throws {
        try withAddSlot { slot in
            let negate: AddFunction = { a, b in -(a + b) }
            let replaced = try Hook.scoped {
                try Hook.replace(on: FunctionSlot(slot), with: negate)
            } during: {
                call(slot)
            }
            #expect(replaced == -5 && call(slot) == 5)
            let typed = try Hook.scoped {
                try Hook.instead(
                    on: FunctionSlot(slot), arguments: Int32.self, Int32.self, returning: Int32.self
                ) { original, a, b in
                    original(a, b) + 1000
                }
            } during: {
                call(slot)
            }
            #expect(typed == 1005 && call(slot) == 5)
        }
    }

    // MARK: - The task limit

    @Test func aTaskLimitOutsideAScopeAndALimitedReplacementAreRefused() throws {
        withAddSlot { slot in
            // The error names the slot, as every error about a slot does.
            #expect {
                try returning(-1, on: slot, options: .inCurrentTaskOnly)
            } throws: { error in
                guard let error = error as? HookError else { return false }
                return error.code == .unsupportedCallerLimit && error.slot?.address == UInt(bitPattern: slot)
                    && error.description.contains(String(UInt(bitPattern: slot), radix: 16))
            }
            let negate: AddFunction = { a, b in -(a + b) }
            for option in [HookOptions.inCurrentTaskOnly, .onInstallingThreadOnly] {
                #expect {
                    try Hook.scoped {
                        try Hook.replace(on: FunctionSlot(slot), with: negate, options: option)
                    } during: {
                    }
                } throws: { error in
                    (error as? HookError)?.code == .unsupportedCallerLimit
                }
            }
            #expect(call(slot) == 5)
        }
    }

    /// Many tasks call the slot while one scoped task, its child tasks and a task it starts
    /// call it too: only the scope's calls see the hook.
    @Test func onlyTheScopedTaskAndItsChildrenAreAffected() async throws {
        try await withAsyncAddSlot { slot in
            let scopeDone = Tally()
            let othersHooked = Tally()
            let othersCalls = Tally()
            let address = UInt(bitPattern: slot)
            @Sendable func call() -> Int32 { Self.call(at: address) }
            let scopeResults = try await withThrowingTaskGroup(of: [Int32].self) { group in
                for _ in 0..<24 {
                    group.addTask {
                        var calls = 0
                        // Until the scope has finished, and at least some calls each.
                        while scopeDone.value == 0 || calls < 200 {
                            if call() != 5 { othersHooked.add(1) }
                            calls += 1
                            if calls % 16 == 0 { await Task.yield() }
                        }
                        othersCalls.add(calls)
                        return []
                    }
                }
                group.addTask {
                    defer { scopeDone.add(1) }
                    return try await Hook.scoped {
                        try Hook.instead(
                            on: FunctionSlot(address: address), signature: add, options: .inCurrentTaskOnly
                        ) {
                            call in call.setReturnValue(Int32(-1))
                        }
                    } during: {
                        var results: [Int32] = []
                        for index in 0..<500 {
                            results.append(call())
                            if index % 16 == 0 { await Task.yield() }
                        }
                        async let child = (0..<200).map { _ in call() }
                        let grandchildren = await withTaskGroup(of: Int32.self) { children in
                            for _ in 0..<8 { children.addTask { call() } }
                            return await children.reduce(into: [Int32]()) { $0.append($1) }
                        }
                        let started = await Task { call() }.value
                        let detached = await Task.detached { call() }.value
                        #expect(detached == 5)
                        return results + (await child) + grandchildren + [started]
                    }
                }
                var all: [Int32] = []
                for try await results in group { all += results }
                return all
            }
            let expectedCount = 500 + 200 + 8 + 1
            #expect(scopeResults.count == expectedCount)
            #expect(scopeResults.allSatisfy { $0 == -1 })
            #expect(othersHooked.value == 0)
            #expect(othersCalls.value >= 24 * 200)
            #expect(call() == 5)
        }
    }

    @Test func aCallOutsideTheTaskPassesAnInsteadBlockByToTheNextOneIn() async throws {
        try await withAsyncAddSlot { slot in
            let address = UInt(bitPattern: slot)
            let inner = try returning(1000, on: slot)
            defer { inner.remove() }
            try await Hook.scoped {
                try Hook.instead(on: FunctionSlot(address: address), signature: add, options: .inCurrentTaskOnly) {
                    call in
                    call.callOriginal()
                    call.setReturnValue(call.returnValue(as: Int32.self) + 1)
                }
            } during: {
                #expect(Self.call(at: address) == 1001)
                let outside = await Task.detached { Self.call(at: address) }.value
                #expect(outside == 1000)
            }
        }
    }

    @Test func onceCountsOnlyTheCallsOfTheTask() async throws {
        try await withAsyncAddSlot { slot in
            let address = UInt(bitPattern: slot)
            let runs = Counter()
            @Sendable func call() -> Int32 { Self.call(at: address) }
            let token = Mutex<HookToken?>(nil)
            try await Hook.scoped {
                let installed = try Hook.before(
                    on: FunctionSlot(address: address), signature: add, options: [.inCurrentTaskOnly, .once]
                ) { _ in runs.increment() }
                token.withLock { $0 = installed }
                return installed
            } during: {
                for _ in 0..<100 { _ = await Task.detached { call() }.value }
                #expect(runs.count == 0 && token.withLock { $0?.isActive } == true)
                _ = call()
                _ = call()
                #expect(runs.count == 1 && token.withLock { $0?.isActive } == false)
            }
        }
    }

    // MARK: - The thread limit

    @Test func aThreadLimitLeavesOtherThreadsCallsAlone() throws {
        try withAddSlot { slot in
            try Hook.scoped {
                try returning(-1, on: slot, options: .onInstallingThreadOnly)
            } during: {
                let sums = threadSums(slot)
                #expect(sums.got == sums.original)
                #expect(call(slot) == -1)
            }
            // Without the limit, the same threads see the hook.
            try Hook.scoped {
                try returning(-1, on: slot)
            } during: {
                #expect(threadSums(slot, calls: 10).got == -40)
            }
        }
    }

    @Test func onceCountsOnlyTheCallsOfTheThread() throws {
        try withAddSlot { slot in
            let runs = Counter()
            let token = try Hook.before(
                on: FunctionSlot(slot), signature: add, options: [.onInstallingThreadOnly, .once]
            ) { _ in runs.increment() }
            defer { token.remove() }
            let sums = threadSums(slot)
            #expect(sums.got == sums.original)
            #expect(runs.count == 0 && token.isActive)
            _ = call(slot)
            _ = call(slot)
            #expect(runs.count == 1 && !token.isActive)
        }
    }

    @Test func anImportTableHookKeepsItsThreadLimit() throws {
        var seen: Int32 = 0
        let counted = Counter()
        try Hook.scoped {
            try ImportTable.before(
                symbol: "fsync", in: .mainProgram, signature: Signature("ii"), options: .onInstallingThreadOnly
            ) { call in
                if call.argument(0, as: Int32.self) == -7 { counted.increment() }
            }
        } during: {
            _ = ct_errno_call_fsync(0, -7, &seen)
            #expect(counted.count == 1)
            #expect(ct_fsync_on_new_thread(-7) == -1)
            #expect(counted.count == 1)
        }
    }
}
