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
            #expect(error?.slot == UInt(bitPattern: storage + 3))
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
            #expect(error?.code == .signatureMismatch(installed: "iii"))
            // Types the registers pass alike still differ: a block reads and returns the
            // slot's values as one signature says, and the message does not claim otherwise.
            let unsigned = #expect(throws: HookError.self) {
                try Hook.before(on: fixtureSlot(\.add), signature: Signature("III")) { _ in }
            }
            #expect(unsigned?.code == .signatureMismatch(installed: "iii"))
            #expect(unsigned?.description.hasSuffix("every hook of a slot must use the same types") == true)
            // Names and qualifiers do not matter.
            let same = try Hook.after(on: fixtureSlot(\.add), signature: Signature("i8i0i4")) { _ in }
            same.remove()
        }

        @Test func aSignatureThePlatformCannotPass() throws {
            let error = #expect(throws: HookError.self) {
                try Hook.before(on: fixtureSlot(\.add), signature: Signature("v{Empty=}")) { _ in }
            }
            guard case .unsupportedSignature(let reason)? = error?.code else {
                Issue.record("expected unsupportedSignature, got \(String(describing: error))")
                return
            }
            #expect(reason.position == .argument(0))
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
            #expect(error?.code == .invalidSlot("the key path names no stored field of Table"))
            #expect("\(error!)".hasSuffix(": the key path names no stored field of Table"))
            // A layout slot over such a key path fails the whole install, naming the slot.
            let layout = TableLayout<Table>([.init("computed", \.computed, FixtureSignature.add)])
            let group = #expect(throws: HookError.self) {
                try Hook.install(on: table, layout: layout, position: .instead) { _, _ in }
            }
            #expect(group?.code == .invalidSlot("slot \"computed\": the key path names no stored field of Table"))
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
            #expect(field?.code == .invalidSlot("field \\Table.count is 4 bytes, not a 8-byte function pointer"))
            // A pointer to the whole struct is not a pointer to one of its fields.
            let whole = #expect(throws: HookError.self) {
                try Hook.instead(on: FunctionSlot(table), signature: FixtureSignature.add) { _ in }
            }
            #expect(whole?.code == .invalidSlot("a pointer to Table is 16 bytes, not a 8-byte function pointer"))
            #expect(table.pointee.function == nil)
            // A layout slot over such a field fails the whole install, naming the slot.
            let layout = TableLayout<Table>([.init("count", \.count, FixtureSignature.add)])
            let group = #expect(throws: HookError.self) {
                try Hook.install(on: table, layout: layout, position: .instead) { _, _ in }
            }
            #expect(
                group?.code
                    == .invalidSlot("slot \"count\": field \\Table.count is 4 bytes, not a 8-byte function pointer"))
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
    /// One of each code.
    static let everyCode: [HookError.Code] = {
        let signature = try! Signature("v{Empty=}")
        let unsupported = CallInterfaceError(
            signature: signature, position: .argument(0), code: .unsupportedValue(reason: "an empty struct"))
        return [
            .nullSlot, .misalignedSlot, .invalidSlot("the key path names no stored field of Table"), .emptySlot,
            .signatureMismatch(installed: "ddd"),
            .typeMismatch(position: .argument(1), swiftType: "Double", cType: "i"),
            .argumentCountMismatch(expected: 2, actual: 3), .unsupportedSignature(unsupported),
            .closureAllocationFailed, .closurePreparationFailed(status: 1), .slotContention, .unmappedSlot,
            .readOnlySlot, .protectionChangeFailed, .calledFromHookBlock, .objectNotFound("libNoSuchObject.so"),
            .symbolNotImported("no_such_symbol"),
        ]
    }()

    /// Whether a code is about installing a hook. The switch is exhaustive, so a new code
    /// does not compile until it is sorted here (and added to `everyCode`).
    static func isInstallFailure(_ code: HookError.Code) -> Bool {
        switch code {
        case .nullSlot, .misalignedSlot, .invalidSlot, .emptySlot, .signatureMismatch, .typeMismatch,
            .argumentCountMismatch, .unsupportedSignature, .closureAllocationFailed, .closurePreparationFailed,
            .slotContention, .unmappedSlot, .readOnlySlot, .objectNotFound, .symbolNotImported:
            true
        case .protectionChangeFailed, .calledFromHookBlock: false
        }
    }

    @Test func everyCodeIsListedOnce() {
        let names = Set(Self.everyCode.map { String(describing: $0).prefix { $0 != "(" } })
        #expect(names.count == Self.everyCode.count)
        #expect(names.count == 17)
    }

    @Test(arguments: everyCode)
    func everyCodeHasADescription(code: HookError.Code) {
        for (slot, signature) in [(UInt(0x7f3a_2c00_1008), "iii"), (nil, "iii"), (0x7f3a_2c00_1008, nil), (nil, nil)]
            as [(UInt?, String?)]
        {
            let text = HookError(slot: slot, signature: signature, code: code).description
            #expect(!text.isEmpty)
            #expect(!text.contains("\n"))
            #expect(text.hasPrefix("cannot hook") == Self.isInstallFailure(code), "\(text)")
            if slot != nil { #expect(text.contains("slot 0x00007f3a2c001008"), "\(text)") }
            if signature != nil { #expect(text.contains(#"signature "iii""#), "\(text)") }
        }
    }

    @Test func installFailuresNameTheSlotAndSignature() {
        let error = HookError(slot: 0x7f3a_2c00_1008, signature: "iii", code: .emptySlot)
        #expect(
            error.description
                == #"cannot hook slot 0x00007f3a2c001008 with signature "iii": "#
                + "it holds NULL, and a before or after hook needs an original to run")
        #expect(
            HookError(slot: nil, signature: "iii", code: .objectNotFound("libX.so")).description
                == #"cannot hook with signature "iii": no loaded object has a path ending in "libX.so" or that soname"#)
    }

    @Test func waitingFromAHookBlockDoesNotReadAsAnInstall() {
        let bare = HookError(slot: nil, signature: nil, code: .calledFromHookBlock).description
        #expect(!bare.hasPrefix("cannot hook"))
        #expect(
            bare
                == "called from inside a hook block, where it would wait for itself (waitForReclamation() in a hooked call, or an install or a read of Hook.statistics in a block that runs within the library's own install or removal on this thread)"
        )
        let named = HookError(slot: 0x7f3a_2c00_1008, signature: "iii", code: .calledFromHookBlock).description
        #expect(
            named
                == "called from inside a hook block, where it would wait for itself (waitForReclamation() in a hooked call, or an install or a read of Hook.statistics in a block that runs within the library's own install or removal on this thread)"
                + #" (slot 0x00007f3a2c001008, signature "iii")"#)
    }

    @Test func aProtectionChangeDoesNotReadAsAnInstall() {
        #expect(
            HookError(slot: 0x7f3a_2c00_1008, signature: "iii", code: .protectionChangeFailed).description
                == #"the page protection of slot 0x00007f3a2c001008 with signature "iii" could not be changed"#
                + " (mprotect failed)")
        #expect(
            HookError(slot: nil, signature: nil, code: .protectionChangeFailed).description
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
