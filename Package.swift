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
    dependencies: [
        // `swift package generate-documentation` (Scripts/docs.sh); no target depends on it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0")
    ],
    targets: [
        // MARK: - Libraries

        // Describing and calling C functions: type encodings, call interfaces.
        .target(
            name: "FFIHookCore",
            dependencies: ["CFFI", "CFFIHookSupport"],
            swiftSettings: strictSettings
        ),
        // Hooking them: slots, tables, import tables, and the engine underneath.
        .target(
            name: "FFIHook",
            dependencies: ["FFIHookCore", "CFFI", "CFFIHookSupport"],
            swiftSettings: strictSettings
        ),

        // MARK: - C shims

        // The system libffi (Debian's libffi-dev).
        .systemLibrary(
            name: "CFFI",
            pkgConfig: "libffi",
            providers: [.apt(["libffi-dev"])]
        ),
        // Per-thread records and the closure handler, register calls, memory barriers and
        // fault-free reads, the walk over loaded objects' import tables (prefix ffh_).
        .target(name: "CFFIHookSupport"),

        // MARK: - Programs (run with `swift run`; not products)

        // The example: a live trace of what SQLite asks of its file system.
        .executableTarget(
            name: "ffi-hook-trace",
            dependencies: ["FFIHook", "CSQLite"],
            swiftSettings: strictSettings
        ),
        // The soak: callers, hook mutators and reclamation at once, then checks of the end state.
        .executableTarget(
            name: "ffi-hook-soak",
            dependencies: ["FFIHook", "FFIHookCore", "CSoakSupport"],
            swiftSettings: strictSettings
        ),

        // MARK: - Test support

        // Compiler-built C functions and layouts that the tests check the library against.
        // (The import-table fixture libraries in Tests/Fixtures are built by the tests.)
        .target(name: "CTestSupport", dependencies: ["CFFI"], path: "Tests/Support/CTestSupport"),
        // The soak's C shapes and tables.
        .target(name: "CSoakSupport", path: "Tests/Support/CSoakSupport"),
        // Real C libraries from Debian that the tests and the example hook.
        .systemLibrary(
            name: "CSQLite", path: "Tests/Support/CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(
            name: "CZlib", path: "Tests/Support/CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),

        // MARK: - Tests

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
