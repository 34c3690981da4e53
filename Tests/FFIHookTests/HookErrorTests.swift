import CTestSupport
import FFIHook
import Foundation
import Testing

/// Bad input to the hook API gets a HookError that names the problem; nothing is changed.
extension FixtureTableTests {
    @Suite struct HookErrorTests {
        init() {
            ct_fix_reset()
        }

        @Test func nullSlot() throws {
            let error = #expect(throws: HookError.self) {
                try Hook.before(on: FunctionSlot(address: 0), signature: FixtureSignature.add) { _ in }
            }
            #expect(error?.code == .nullSlot)
        }

        @Test func misalignedSlot() throws {
            let storage = UnsafeMutableRawPointer.allocate(byteCount: 16, alignment: 8)
            defer { storage.deallocate() }
            let error = #expect(throws: HookError.self) {
                try Hook.before(on: FunctionSlot(storage + 3), signature: FixtureSignature.add) { _ in }
            }
            #expect(error?.code == .misalignedSlot)
            #expect(error?.slot == FunctionSlot(storage + 3))
            #expect(error?.description.contains("not aligned") == true)
        }

        @Test func emptySlotNeedsAnInsteadHook() throws {
            let slot = UnsafeMutablePointer<AddFunction?>.allocate(capacity: 1)
            defer { slot.deallocate() }
            slot.initialize(to: nil)
            for position in [HookPosition.before, .after] {
                let error = #expect(throws: HookError.self) {
                    try Hook.install(on: FunctionSlot(slot), signature: FixtureSignature.add, position: position) { _ in
                    }
                }
                #expect(error?.code == .emptySlot)
                #expect(slot.pointee == nil)
            }
            let provider = try Hook.instead(on: FunctionSlot(slot), signature: FixtureSignature.add) { call in
                call.setReturnValue(call.argument(0, as: Int32.self) * call.argument(1, as: Int32.self))
            }
            #expect(slot.pointee != nil)
            let counter = Counter()
            let observer = try Hook.before(on: FunctionSlot(slot), signature: FixtureSignature.add) { _ in
                counter.increment()
            }
            #expect(ct_fix_call_add_through(slot, 3) == 0 * 1 + 1 * 1 + 2 * 1)
            #expect(counter.count == 3)
            // Without the instead hook there is no original: the call returns zero.
            provider.remove()
            #expect(ct_fix_call_add_through(slot, 3) == 0)
            observer.remove()
            #expect(slot.pointee == nil)
        }

        @Test func aSlotHookedWithAnotherSignature() throws {
            let token = try Hook.before(on: fixtureSlot(\.add), signature: FixtureSignature.add) { _ in }
            defer { token.remove() }
            let error = #expect(throws: HookError.self) {
                try Hook.before(on: fixtureSlot(\.add), signature: Signature("ddd")) { _ in }
            }
            #expect(error?.is(.signatureMismatch(installed: "iii")) == true)
            // Integers of 4 bytes or more pass alike whatever their signedness: a hook that
            // says "III" shares the slot, and reads and writes the values by size.
            let unsigned = try Hook.after(on: fixtureSlot(\.add), signature: Signature("III")) { call in
                call.setReturnValue(call.returnValue(as: UInt32.self) &+ 100)
            }
            #expect(ct_fix_call_add(2, 3) == 105)
            unsigned.remove()
            // Another size does not, and the message says what may differ.
            let wider = #expect(throws: HookError.self) {
                try Hook.before(on: fixtureSlot(\.add), signature: Signature("qqq")) { _ in }
            }
            #expect(wider?.is(.signatureMismatch(installed: "iii")) == true)
            #expect(
                wider?.description.hasSuffix(
                    "every hook of a slot must use the same types and the same variadic call shape "
                        + "(integers of 4 bytes or more may differ in signedness, pointers from integers of their size)"
                )
                    == true)
            // Names and qualifiers do not matter.
            let same = try Hook.after(on: fixtureSlot(\.add), signature: Signature("i8i0i4")) { _ in }
            same.remove()
        }

        @Test func aSignatureThePlatformCannotPass() throws {
            let error = #expect(throws: HookError.self) {
                try Hook.before(on: fixtureSlot(\.add), signature: Signature("v{Empty=}")) { _ in }
            }
            #expect(error?.code == .invalidSignature)
            #expect(error?.callInterfaceError?.code == .unsupportedValue)
            #expect(error?.callInterfaceError?.position == .argument(0))
            #expect(error?.signature == (try Signature("v{Empty=}")))
            #expect(
                fixtureField(\.add)
                    == addOriginalAddress)
        }

        @Test func aKeyPathThatNamesNoStoredField() throws {
            struct Table {
                var function: UnsafeRawPointer?
                var computed: UnsafeRawPointer? { function }
            }
            let table = UnsafeMutablePointer<Table>.allocate(capacity: 1)
            defer { table.deallocate() }
            table.initialize(to: Table(function: nil))
            let slot = FunctionSlot.field(\Table.computed, of: table)
            let error = #expect(throws: HookError.self) {
                try Hook.instead(on: slot, signature: FixtureSignature.add) { _ in }
            }
            #expect(error?.is(.invalidSlot("the key path names no stored field of Table")) == true)
            #expect("\(error!)".hasSuffix(": the key path names no stored field of Table"))
            // A layout slot over such a key path fails the whole install, naming the slot.
            let layout = TableLayout<Table>([.init("computed", \.computed, FixtureSignature.add)])
            let group = #expect(throws: HookError.self) {
                try Hook.install(on: table, layout: layout, position: .instead) { _, _ in }
            }
            #expect(group?.is(.invalidSlot("slot \"computed\": the key path names no stored field of Table")) == true)
            #expect(FunctionSlot.field(\Table.function, of: table).address == UInt(bitPattern: table))
        }

        @Test func aSlotThatIsNotPointerSizedIsRefused() throws {
            struct Table {
                var count: Int32
                var function: UnsafeRawPointer?
            }
            let table = UnsafeMutablePointer<Table>.allocate(capacity: 1)
            defer { table.deallocate() }
            table.initialize(to: Table(count: 0, function: nil))
            let field = #expect(throws: HookError.self) {
                try Hook.instead(on: .field(\Table.count, of: table), signature: FixtureSignature.add) { _ in }
            }
            #expect(field?.is(.invalidSlot("field \\Table.count is 4 bytes, not a 8-byte function pointer")) == true)
            // A pointer to the whole struct is not a pointer to one of its fields.
            let whole = #expect(throws: HookError.self) {
                try Hook.instead(on: FunctionSlot(table), signature: FixtureSignature.add) { _ in }
            }
            #expect(whole?.is(.invalidSlot("a pointer to Table is 16 bytes, not a 8-byte function pointer")) == true)
            #expect(table.pointee.function == nil)
            // A layout slot over such a field fails the whole install, naming the slot.
            let layout = TableLayout<Table>([.init("count", \.count, FixtureSignature.add)])
            let group = #expect(throws: HookError.self) {
                try Hook.install(on: table, layout: layout, position: .instead) { _, _ in }
            }
            #expect(
                group?.is(.invalidSlot("slot \"count\": field \\Table.count is 4 bytes, not a 8-byte function pointer"))
                    == true)
        }

        @Test func waitingForReclamationFromInsideABlockIsRefused() throws {
            let outcome = Locked<HookError?>(nil)
            let token = try Hook.before(on: fixtureSlot(\.add), signature: FixtureSignature.add) { _ in
                do throws(HookError) {
                    try Hook.waitForReclamation()
                } catch {
                    outcome.withLock { $0 = error }
                }
            }
            defer { token.remove() }
            _ = ct_fix_call_add(1, 2)
            let error = outcome.withLock { $0 }
            #expect(error?.code == .calledFromHookBlock)
            #expect(
                error?.description
                    == "called from inside a hook block, where it would wait for itself (waitForReclamation() in a hooked call, or an install or a read of Hook.statistics in a block that runs within the library's own install or removal on this thread)"
            )
        }
    }
}

/// Each code's description says what happened: an install failure reads "cannot hook …",
/// anything else in its own words, naming the slot and signature it has.
@Suite struct HookErrorMessageTests {
    /// One problem of each code.
    static let everyProblem: [HookError.Problem] = [
        .nullSlot, .misalignedSlot, .invalidSlot("the key path names no stored field of Table"), .emptySlot,
        .signatureMismatch(installed: "ddd"),
        .invalidSignature("argument 0 ({Empty}) cannot be passed: an empty struct"),
        .closureAllocationFailed, .closurePreparationFailed(status: 1), .slotContention, .unmappedSlot,
        .readOnlySlot, .protectionChangeFailed, .calledFromHookBlock, .objectNotFound("libNoSuchObject.so"),
        .symbolNotImported("no_such_symbol"), .unsupportedScope, .taskLimitOutsideScope,
    ]

    /// Whether a problem is about installing a hook. The switch is exhaustive, so a new
    /// problem does not compile until it is sorted here (and added to `everyProblem`).
    static func isInstallFailure(_ problem: HookError.Problem) -> Bool {
        switch problem {
        case .nullSlot, .misalignedSlot, .invalidSlot, .emptySlot, .signatureMismatch, .invalidSignature,
            .closureAllocationFailed, .closurePreparationFailed, .slotContention, .unmappedSlot, .inaccessibleSlot,
            .readOnlySlot, .objectNotFound, .symbolNotImported, .unsupportedScope, .unsupportedCallerLimit:
            true
        case .protectionChangeFailed, .calledFromHookBlock: false
        }
    }

    @Test func everyCodeIsListedOnceWithItsOwnName() {
        let codes = Set(Self.everyProblem.map(\.code))
        #expect(codes.count == Self.everyProblem.count)
        #expect(codes.count == 17)
        let names = Set(codes.map(\.description))
        #expect(names.count == codes.count)
        for problem in Self.everyProblem {
            #expect(String(describing: problem).hasPrefix(problem.code.description))
        }
    }

    @Test(arguments: everyProblem)
    func everyCodeHasADescription(problem: HookError.Problem) throws {
        let iii = try Signature("iii")
        for (slot, signature) in [(UInt(0x7f3a_2c00_1008), iii), (nil, iii), (0x7f3a_2c00_1008, nil), (nil, nil)]
            as [(UInt?, Signature?)]
        {
            let error = HookError(slot: slot, signature: signature, problem: problem)
            let text = error.description
            #expect(!text.isEmpty)
            #expect(!text.contains("\n"))
            #expect(text.hasPrefix("cannot hook") == Self.isInstallFailure(problem), "\(text)")
            if slot != nil { #expect(text.contains("slot 0x00007f3a2c001008"), "\(text)") }
            if signature != nil { #expect(text.contains(#"signature "iii""#), "\(text)") }
            #expect(error.slot?.address == slot)
            #expect(error.signature == signature)
            #expect(!error.message.isEmpty)
        }
    }

    /// The example of the Getting Started article, as it is written there.
    @Test func theGettingStartedExample() throws {
        let signature = try Signature("iii")
        var caught: HookError?
        do throws(HookError) {
            _ = try Hook.before(on: FunctionSlot(address: 0x1003), signature: signature) { _ in }
        } catch {
            caught = error
        }
        #expect(
            caught?.description
                == #"cannot hook slot 0x0000000000001003 with signature "iii": the slot address is not aligned to 8 bytes"#
        )
        #expect(caught?.code == .misalignedSlot)
    }

    @Test func importTableErrorsNameTheSymbol() throws {
        let error = HookError(slot: 0x7f3a_2c00_1008, signature: try Signature("i"), problem: .unmappedSlot)
            .naming(symbol: "getpid")
        #expect(
            error.description
                == #"cannot hook "getpid" at slot 0x00007f3a2c001008 with signature "i": no memory is mapped at that address"#
        )
    }

    @Test func aSlotAtAddressZeroIsNoSlot() {
        #expect(HookError(slot: 0, signature: nil, problem: .nullSlot).slot == nil)
    }

    @Test func importTableErrorsCarryTheirNames() {
        let object = HookError(slot: nil, signature: nil, problem: .objectNotFound("libX.so"))
        #expect(object.object == "libX.so")
        #expect(object.symbol == nil)
        let symbol = HookError(slot: nil, signature: nil, problem: .symbolNotImported("x_open"))
        #expect(symbol.symbol == "x_open")
        #expect(symbol.object == nil)
    }

    @Test func aPublicInitializerMakesTheSameError() throws {
        let iii = try Signature("iii")
        let made = HookError(
            code: .emptySlot, message: HookError.Problem.emptySlot.message, slot: FunctionSlot(address: 0x1000),
            signature: iii)
        #expect(made == HookError(slot: 0x1000, signature: iii, problem: .emptySlot))
    }

    @Test func installFailuresNameTheSlotAndSignature() throws {
        let error = HookError(slot: 0x7f3a_2c00_1008, signature: try Signature("iii"), problem: .emptySlot)
        #expect(
            error.description
                == #"cannot hook slot 0x00007f3a2c001008 with signature "iii": "#
                + "it holds NULL, and a before or after hook needs an original to run")
        #expect(
            HookError(slot: nil, signature: try Signature("iii"), problem: .objectNotFound("libX.so")).description
                == #"cannot hook with signature "iii": no loaded object has a path ending in "libX.so" or that soname"#)
    }

    @Test func waitingFromAHookBlockDoesNotReadAsAnInstall() throws {
        let bare = HookError(slot: nil, signature: nil, problem: .calledFromHookBlock).description
        #expect(!bare.hasPrefix("cannot hook"))
        #expect(
            bare
                == "called from inside a hook block, where it would wait for itself (waitForReclamation() in a hooked call, or an install or a read of Hook.statistics in a block that runs within the library's own install or removal on this thread)"
        )
        let named = HookError(slot: 0x7f3a_2c00_1008, signature: try Signature("iii"), problem: .calledFromHookBlock)
            .description
        #expect(
            named
                == "called from inside a hook block, where it would wait for itself (waitForReclamation() in a hooked call, or an install or a read of Hook.statistics in a block that runs within the library's own install or removal on this thread)"
                + #" (slot 0x00007f3a2c001008, signature "iii")"#)
    }

    @Test func aProtectionChangeDoesNotReadAsAnInstall() throws {
        #expect(
            HookError(slot: 0x7f3a_2c00_1008, signature: try Signature("iii"), problem: .protectionChangeFailed)
                .description
                == #"the page protection of slot 0x00007f3a2c001008 with signature "iii" could not be changed"#
                + " (mprotect failed)")
        #expect(
            HookError(slot: nil, signature: nil, problem: .protectionChangeFailed).description
                == "the page protection of the slot could not be changed (mprotect failed)")
    }
}

/// Closure memory under policies that forbid writable and executable pages.
@Suite struct ClosureAllocationTests {
    /// Under memory-deny-write-execute libffi maps closures twice (code apart from data);
    /// hooks still work. Runs in a child process, since the policy cannot be lifted.
    @Test func hooksWorkUnderDenyWriteExecute() async {
        await #expect(processExitsWith: .success) {
            guard ct_deny_write_execute() == 0 else { return }  // the kernel lacks the policy
            ct_fix_reset()
            let token = try Hook.after(on: fixtureSlot(\.add), signature: FixtureSignature.add) { call in
                call.setReturnValue(call.returnValue(as: Int32.self) + 100)
            }
            guard ct_fix_call_add(1, 2) == 103, token.remove(), ct_fix_call_add(1, 2) == 3 else { exit(1) }
        }
    }
}
