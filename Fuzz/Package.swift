// swift-tools-version: 6.1
import PackageDescription

// libFuzzer targets over FFIHookCore and FFIHook:
//
// - EncodingFuzzer: the type-encoding parser (`Signature`, `CType(_:)`).
// - InterfaceFuzzer: lowering signatures and preparing call interfaces, and calls through
//   interfaces whose arguments all travel in registers.
// - HookSequenceFuzzer: sequences of hook installs, removals and calls on a few slots,
//   while another thread keeps calling through them.
//
// Build and run them with `Scripts/fuzz.sh`, which adds the coverage and sanitizer flags and
// links libFuzzer's driver; a plain `swift build` of this package does not link.

let swiftSettings: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "swift-ffi-hook-fuzz",
    dependencies: [
        .package(name: "swift-ffi-hook", path: "../")
    ],
    targets: [
        // The libFuzzer entry point and failure reporting the fuzzers share.
        .target(name: "FuzzKit", swiftSettings: swiftSettings),
        // C functions the fuzzers call and hook: a register probe and small arithmetic.
        .target(name: "CFuzzSupport"),
        .executableTarget(
            name: "EncodingFuzzer",
            dependencies: [
                "FuzzKit",
                .product(name: "FFIHookCore", package: "swift-ffi-hook"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "InterfaceFuzzer",
            dependencies: [
                "FuzzKit",
                "CFuzzSupport",
                .product(name: "FFIHookCore", package: "swift-ffi-hook"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "HookSequenceFuzzer",
            dependencies: [
                "FuzzKit",
                "CFuzzSupport",
                .product(name: "FFIHook", package: "swift-ffi-hook"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
