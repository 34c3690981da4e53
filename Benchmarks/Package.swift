// swift-tools-version: 6.1
import Foundation
import PackageDescription

// Benchmarks of swift-ffi-hook, kept apart so the library depends on no benchmark tool.
//
// `hookbench` times hooked calls against a direct call, raw libffi closures and
// Objective-C message forwarding; `HookAllocations` is a package-benchmark suite that fails
// when a hooked call starts allocating. Run them with `Scripts/bench.sh` and
// `swift package benchmark thresholds check` (from this directory).

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

// The Objective-C target is compiled by clang against the GNU runtime and GNUstep Base.
// Their locations differ between machines, so they are asked for here: GNUstep's defines
// and header directories from `gnustep-config`, and the runtime's headers (`objc/*.h`) and
// library from gcc's own directory. `-idirafter` keeps clang's builtin headers ahead of gcc's.
let gnustepFlags = (commandOutput(["gnustep-config", "--objc-flags"]) ?? "")
    .split(separator: " ").map(String.init)
    .filter { ($0.hasPrefix("-D") || $0.hasPrefix("-I")) && $0 != "-I." }
let gccHeaders = commandOutput(["gcc", "-print-file-name=include"]).map { ["-idirafter", $0] } ?? []
let runtimeLibrary = commandOutput(["gcc", "-print-file-name=libobjc.so"]) ?? ""
let runtimeLibraryFlags =
    runtimeLibrary.hasPrefix("/") ? ["-L", URL(fileURLWithPath: runtimeLibrary).deletingLastPathComponent().path] : []

let strictSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "swift-ffi-hook-benchmarks",
    dependencies: [
        .package(name: "swift-ffi-hook", path: "../"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
        .package(url: "https://github.com/ordo-one/package-benchmark", from: "1.0.0", traits: ["MallocInterposer"]),
    ],
    targets: [
        // The functions under test, the slots that hold them, and C loops that call through a slot.
        .target(
            name: "CHookBench",
            cSettings: [.unsafeFlags(["-O2"])],
            linkerSettings: [.linkedLibrary("ffi"), .linkedLibrary("pthread")]
        ),
        // Counts calls to malloc and its relatives in the hookbench process.
        .target(name: "CMallocCounter"),
        // The same functions as Objective-C methods, sent as messages and hooked through
        // message forwarding.
        .target(
            name: "CObjCForward",
            dependencies: ["CHookBench"],
            cSettings: [.unsafeFlags(["-fobjc-runtime=gcc", "-fno-blocks", "-O2"] + gnustepFlags + gccHeaders)],
            linkerSettings: [
                .linkedLibrary("gnustep-base"),
                .linkedLibrary("objc"),
                .unsafeFlags(runtimeLibraryFlags),
            ]
        ),
        // The signatures, their typed hooks and the hooks on their Objective-C methods, shared
        // by hookbench and HookAllocations.
        .target(
            name: "HookFixtures",
            dependencies: [
                "CHookBench",
                "CObjCForward",
                .product(name: "FFIHook", package: "swift-ffi-hook"),
                .product(name: "FFIHookObjC", package: "swift-ffi-hook"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "hookbench",
            dependencies: [
                "CHookBench",
                "HookFixtures",
                "CMallocCounter",
                "CObjCForward",
                .product(name: "FFIHook", package: "swift-ffi-hook"),
                .product(name: "FFIHookInline", package: "swift-ffi-hook"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "HookAllocations",
            dependencies: [
                "CHookBench",
                "CObjCForward",
                "HookFixtures",
                .product(name: "FFIHook", package: "swift-ffi-hook"),
                .product(name: "Benchmark", package: "package-benchmark"),
            ],
            path: "Benchmarks/HookAllocations",
            swiftSettings: strictSettings,
            plugins: [
                .plugin(name: "BenchmarkPlugin", package: "package-benchmark")
            ]
        ),
    ]
)
