import FFIHook
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// The documentation's fault-injection task as a package's own tests: Swift Testing runs them
// in parallel, and each injects faults into `open` and `write` that only its own calls see.

/// A file each test can open and write, made once.
private func makeFile(_ name: String) -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("consumer-\(getpid())-\(name)").path
    _ = FileManager.default.createFile(atPath: path, contents: Data("contents".utf8))
    return path
}

private let openShape = try! Signature(variadic: "i*ii", fixedArgumentCount: 2)

/// Opens `denied` and `allowed` many times while `open` of `denied` fails with EACCES for
/// this task's calls only; returns how many opens of each failed.
private func openWithFault(denied: String, allowed: String) async throws -> (denied: Int, allowed: Int) {
    try await Hook.scoped {
        try ImportTable.instead(symbol: "open", in: .all, signature: openShape, options: .inCurrentTaskOnly) {
            call in
            if String(cString: call.argument(0, as: UnsafePointer<CChar>.self)) == denied {
                errno = EACCES
                call.setReturnValue(Int32(-1))
            } else {
                call.callOriginal()
            }
        }
    } during: {
        var failures = (denied: 0, allowed: 0)
        for _ in 0..<300 {
            for (path, isDenied) in [(denied, true), (allowed, false)] {
                let descriptor = open(path, O_RDONLY)
                if descriptor >= 0 {
                    close(descriptor)
                } else if errno == EACCES {
                    if isDenied { failures.denied += 1 } else { failures.allowed += 1 }
                }
            }
            await Task.yield()
        }
        return failures
    }
}

@Suite struct FaultInjectionTests {
    static let first = makeFile("first")
    static let second = makeFile("second")

    // These two run at the same time, each denying the path the other opens.
    @Test func theFirstTestSeesOnlyItsOwnFault() async throws {
        let failures = try await openWithFault(denied: Self.first, allowed: Self.second)
        #expect(failures.denied == 300)
        #expect(failures.allowed == 0)
    }

    @Test func theSecondTestSeesOnlyItsOwnFault() async throws {
        let failures = try await openWithFault(denied: Self.second, allowed: Self.first)
        #expect(failures.denied == 300)
        #expect(failures.allowed == 0)
    }

    @Test func aShortWriteForThisTestOnly() throws {
        let descriptor = open(Self.first, O_WRONLY)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        let written = try Hook.scoped {
            try ImportTable.before(
                symbol: "write", in: .all, signature: Signature("qi^vQ"), options: .onInstallingThreadOnly
            ) { call in
                // Half of what was asked: the caller must write the rest itself.
                call.setArgument(2, to: call.argument(2, as: UInt.self) / 2)
            }
        } during: {
            let bytes = Array("0123456789".utf8)
            return write(descriptor, bytes, bytes.count)
        }
        #expect(written == 5)
        // The hook went with the scope.
        #expect(write(descriptor, "ab", 2) == 2)
    }

    @Test func theHookGoesWhenTheBodyThrows() throws {
        struct Failure: Error {}
        // Made before the fault: Foundation's own open, inside the scope, would fail too.
        let path = Self.first
        #expect(throws: Failure.self) {
            try Hook.scoped {
                try ImportTable.instead(
                    symbol: "open", in: .all, signature: openShape, options: .onInstallingThreadOnly
                ) { call in
                    errno = ENOENT
                    call.setReturnValue(Int32(-1))
                }
            } during: {
                #expect(open(path, O_RDONLY) == -1)
                throw Failure()
            }
        }
        let descriptor = open(path, O_RDONLY)
        #expect(descriptor >= 0)
        close(descriptor)
    }
}
