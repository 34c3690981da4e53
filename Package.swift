// swift-tools-version: 6.1
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

// Linker flags of the import-table fixtures.
let fullRELRO = ["-Xlinker", "-z", "-Xlinker", "relro", "-Xlinker", "-z", "-Xlinker", "now"]
let lazyBinding = ["-Xlinker", "-z", "-Xlinker", "relro", "-Xlinker", "-z", "-Xlinker", "lazy"]

let package = Package(
    name: "swift-ffi-hook",
    products: [
        .library(name: "FFIHook", targets: ["FFIHook"]),
        .library(name: "FFIHookCore", targets: ["FFIHookCore"]),
        .executable(name: "ffi-hook-trace", targets: ["ffi-hook-trace"]),
        .executable(name: "ffi-hook-soak", targets: ["ffi-hook-soak"]),
        // Shared libraries the import-table tests open with dlopen (never linked).
        .library(name: "ImportFixture", type: .dynamic, targets: ["CImportFixture"]),
        .library(name: "LazyImportFixture", type: .dynamic, targets: ["CLazyImportFixture"]),
        .library(name: "LaterImportFixture", type: .dynamic, targets: ["CLaterImportFixture"]),
        .library(name: "ProcessFixture", type: .dynamic, targets: ["CProcessFixture"]),
    ],
    dependencies: [
        // `swift package generate-documentation` (Scripts/docs.sh); no target depends on it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0")
    ],
    targets: [
        .systemLibrary(
            name: "CFFI",
            pkgConfig: "libffi",
            providers: [.apt(["libffi-dev"])]
        ),
        // The C shim: per-thread records and the closure handler, register calls, memory
        // barriers and fault-free reads, the walk over loaded objects' import tables.
        .target(name: "CFFIHookSupport"),
        .target(
            name: "FFIHookCore",
            dependencies: ["CFFI", "CFFIHookSupport"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "FFIHook",
            dependencies: ["FFIHookCore", "CFFI", "CFFIHookSupport"],
            swiftSettings: strictSettings
        ),
        // Real C libraries from Debian that the tests and the example hook.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // The example: a live trace of what SQLite asks of its file system.
        .executableTarget(
            name: "ffi-hook-trace",
            dependencies: ["FFIHook", "CSQLite"],
            swiftSettings: strictSettings
        ),
        // The soak: callers, hook mutators and reclamation at once, then checks of the end state.
        .target(name: "CSoakSupport"),
        .executableTarget(
            name: "ffi-hook-soak",
            dependencies: ["FFIHook", "FFIHookCore", "CSoakSupport"],
            swiftSettings: strictSettings
        ),
        // Compiler-built C functions and layouts that the tests check the library against.
        .target(name: "CTestSupport", dependencies: ["CFFI"]),
        // Import-table fixtures: full RELRO, lazy binding with partial RELRO, and one opened late.
        .target(name: "CImportFixture", linkerSettings: [.unsafeFlags(fullRELRO)]),
        .target(name: "CLazyImportFixture", linkerSettings: [.unsafeFlags(lazyBinding)]),
        .target(name: "CLaterImportFixture", linkerSettings: [.unsafeFlags(fullRELRO)]),
        // A library the process-life tests unload: lazy binding, and no Swift startup object
        // (-nostartfiles), which would register it with the Swift runtime for good.
        .target(name: "CProcessFixture", linkerSettings: [.unsafeFlags(lazyBinding + ["-nostartfiles"])]),
        .testTarget(
            name: "FFIHookCoreTests",
            dependencies: ["FFIHookCore", "CTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FFIHookTests",
            dependencies: ["FFIHook", "FFIHookCore", "CTestSupport", "CSQLite", "CZlib"],
            swiftSettings: strictSettings
        ),
    ]
)
