// swift-tools-version: 6.1
import PackageDescription

// A libFuzzer target over the type-encoding parser of FFIHookCore.
//
// Build and run it with `Scripts/fuzz.sh`, which adds the coverage and sanitizer flags and
// links libFuzzer's driver; a plain `swift build` of this package does not link.
let package = Package(
    name: "swift-ffi-hook-fuzz",
    dependencies: [
        .package(name: "swift-ffi-hook", path: "../")
    ],
    targets: [
        .executableTarget(
            name: "EncodingFuzzer",
            dependencies: [
                .product(name: "FFIHookCore", package: "swift-ffi-hook")
            ],
            swiftSettings: [
                .swiftLanguageMode(.v6)
            ]
        )
    ]
)
