// swift-tools-version: 6.1
// A package that uses swift-ffi-hook as users do: by version, from a tagged clone
// (Scripts/consumer.sh puts the clone's URL in place of SWIFT_FFI_HOOK_URL), and runs the
// README's examples.
import PackageDescription

let package = Package(
    name: "consumer",
    dependencies: [
        .package(url: "SWIFT_FFI_HOOK_URL", from: "1.0.0")
    ],
    targets: [
        .target(name: "CConsumerTable", linkerSettings: [.linkedLibrary("dl")]),
        .executableTarget(
            name: "Consumer",
            dependencies: [
                "CConsumerTable", .product(name: "FFIHook", package: "swift-ffi-hook"),
                .product(name: "FFIHookObjC", package: "swift-ffi-hook"),
            ]
        ),
    ]
)
