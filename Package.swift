// swift-tools-version: 6.1
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "swift-ffi-hook",
    products: [
        .library(name: "FFIHook", targets: ["FFIHook"]),
        .library(name: "FFIHookCore", targets: ["FFIHookCore"]),
    ],
    targets: [
        .systemLibrary(
            name: "CFFI",
            pkgConfig: "libffi",
            providers: [.apt(["libffi-dev"])]
        ),
        // The register-passing thunk of the fast call path (see RegisterCallPlan).
        .target(name: "CHookSupport"),
        .target(
            name: "FFIHookCore",
            dependencies: ["CFFI", "CHookSupport"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "FFIHook",
            dependencies: ["FFIHookCore"],
            swiftSettings: strictSettings
        ),
        // Compiler-built C functions and layouts that the tests check the library against.
        .target(name: "CTestSupport", dependencies: ["CFFI"]),
        .testTarget(
            name: "FFIHookCoreTests",
            dependencies: ["FFIHookCore", "CTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FFIHookTests",
            dependencies: ["FFIHook", "FFIHookCore", "CTestSupport"],
            swiftSettings: strictSettings
        ),
    ]
)
