// swift-tools-version: 6.1
import PackageDescription

// Programs that use swift-ffi-hook, kept apart so the library's package declares no
// executables (SwiftPM lists every executable target of a root package as a product):
//
// - ffi-hook-trace: the example, a live trace of what SQLite asks of its file system.
//   `swift run ffi-hook-trace` from this directory.
// - ffi-hook-soak: callers, hook mutators and reclamation at once, then checks of the end
//   state. `Scripts/soak.sh` builds it with AddressSanitizer and runs it.

let strictSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "swift-ffi-hook-programs",
    dependencies: [
        .package(name: "swift-ffi-hook", path: "../")
    ],
    targets: [
        // MARK: - Programs

        // The example: hooks on the VFS and io-methods tables of the system's SQLite.
        .executableTarget(
            name: "ffi-hook-trace",
            dependencies: ["CSQLite", .product(name: "FFIHook", package: "swift-ffi-hook")],
            swiftSettings: strictSettings
        ),
        // The soak: callers, hook mutators and reclamation at once, then checks of the end state.
        .executableTarget(
            name: "ffi-hook-soak",
            dependencies: [
                "CSoakSupport",
                .product(name: "FFIHook", package: "swift-ffi-hook"),
                .product(name: "FFIHookCore", package: "swift-ffi-hook"),
            ],
            swiftSettings: strictSettings
        ),

        // MARK: - C support

        // The soak's C shapes and tables.
        .target(name: "CSoakSupport"),
        // The system's SQLite (Debian's libsqlite3-dev), which the example hooks.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
    ]
)
