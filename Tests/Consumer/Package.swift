// swift-tools-version: 6.1
// A package that uses swift-ffi-hook as users do: by version, from a tagged clone
// (Scripts/consumer.sh puts the clone's URL in place of SWIFT_FFI_HOOK_URL), and runs the
// README's examples and the documentation's tasks.
import Foundation
import PackageDescription

// MARK: - An Objective-C target for GNUstep (the documentation's "Objective-C targets on Linux")

/// The trimmed standard output of a command found on `PATH`, or nil when it cannot run.
func commandOutput(_ arguments: [String]) -> String? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    do {
        try process.run()
    } catch {
        return nil
    }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { return nil }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

// SwiftPM compiles .m files with clang: for gcc's runtime, with GNUstep's defines and
// headers, and the runtime's headers from gcc's own directory after clang's.
let gnustepFlags = (commandOutput(["gnustep-config", "--objc-flags"]) ?? "")
    .split(separator: " ").map(String.init)
    .filter { ($0.hasPrefix("-D") || $0.hasPrefix("-I")) && $0 != "-I." }
let gccHeaders = commandOutput(["gcc", "-print-file-name=include"]).map { ["-idirafter", $0] } ?? []
let objectiveCFlags =
    ["-fobjc-runtime=gcc", "-fno-blocks", "-fconstant-string-class=NSConstantString", "-fexceptions"]
    + gnustepFlags + gccHeaders

let package = Package(
    name: "consumer",
    dependencies: [
        .package(url: "SWIFT_FFI_HOOK_URL", from: "1.0.0")
    ],
    targets: [
        // MARK: - Programs

        // The README's examples, the zlib, open and SQLite tasks; opens an Objective-C runtime as a plug-in.
        .executableTarget(
            name: "Consumer",
            dependencies: [
                "CConsumerTable", "CConsumerZlib", "CConsumerSQLite",
                .product(name: "FFIHook", package: "swift-ffi-hook"),
                .product(name: "FFIHookObjC", package: "swift-ffi-hook"),
                .product(name: "FFIHookInline", package: "swift-ffi-hook"),
            ]
        ),
        // A per-instance hook on a GNUstep class compiled here; links the runtime.
        .executableTarget(
            name: "ConsumerObjC",
            dependencies: ["CConsumerGreeter", .product(name: "FFIHookObjC", package: "swift-ffi-hook")]
        ),

        // Attach in Swift 5 language mode: a lone trailing closure is the enter block there too.
        .executableTarget(
            name: "ConsumerSwift5",
            dependencies: [.product(name: "FFIHook", package: "swift-ffi-hook")],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),

        // The fault-injection task as the package's own tests, which Swift Testing runs in
        // parallel.
        .testTarget(
            name: "ConsumerTests",
            dependencies: [.product(name: "FFIHook", package: "swift-ffi-hook")]
        ),

        // MARK: - C and Objective-C

        .target(name: "CConsumerTable", linkerSettings: [.linkedLibrary("dl")]),
        // The GNUstep class Greeter, with a plain C header for Swift.
        .target(
            name: "CConsumerGreeter",
            cSettings: [.unsafeFlags(objectiveCFlags)],
            linkerSettings: [.linkedLibrary("gnustep-base"), .linkedLibrary("objc")]
        ),
        // The system's zlib (Debian's zlib1g-dev).
        .systemLibrary(name: "CConsumerZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // The system's SQLite (Debian's libsqlite3-dev).
        .systemLibrary(name: "CConsumerSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
    ]
)
