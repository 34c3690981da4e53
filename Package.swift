// swift-tools-version: 6.1
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

// The tests' own code is not optimised in a release build: what a release test run checks is
// the libraries' optimised code, and optimising the test modules (one whole-module job each)
// took most of that build's time.
let testSettings = strictSettings + [.unsafeFlags(["-Onone"], .when(configuration: .release))]

// With FFI_HOOK_DIRECT_METADATA=1 in the build's environment, the libraries make the metadata
// of their generic types by accessor functions rather than from mangled names: the first use of
// each (about a hundred of them where a process starts hooking) costs a call rather than a
// demangling and a decoding, about 10,000 instructions. The tracer's builds set it (a process the
// tracer starts in pays it before its first call). An environment variable, not a trait: the flag
// is unsafe, and a package that depends on this one by version is refused one, whatever its
// condition; without the variable the manifest has none.
let directMetadataAccess: [SwiftSetting] =
    Context.environment["FFI_HOOK_DIRECT_METADATA"] == "1"
    ? [.unsafeFlags(["-Xfrontend", "-disable-concrete-type-metadata-mangled-name-accessors"])] : []
let librarySettings = strictSettings + directMetadataAccess

// The example (ffi-hook-trace) and the soak (ffi-hook-soak) are in Programs/, the
// benchmarks in Benchmarks/ and the fuzzers in Fuzz/: packages of their own that depend on
// this one by path. SwiftPM lists every executable target of a root package as a product;
// kept apart, they leave this package with its two libraries.

let package = Package(
    name: "swift-ffi-hook",
    products: [
        .library(name: "FFIHook", targets: ["FFIHook"]),
        .library(name: "FFIHookCore", targets: ["FFIHookCore"]),
        .library(name: "FFIHookObjC", targets: ["FFIHookObjC"]),
        .library(name: "FFIHookInline", targets: ["FFIHookInline"]),
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
            swiftSettings: librarySettings
        ),
        // Hooking them: slots, tables, import tables, and the engine underneath.
        .target(
            name: "FFIHook",
            dependencies: ["FFIHookCore", "CFFI", "CFFIHookSupport"],
            swiftSettings: librarySettings
        ),

        // Hooking Objective-C methods of the GNU runtime, found at run time.
        .target(
            name: "FFIHookObjC",
            dependencies: ["FFIHook", "FFIHookCore", "CFFI", "CFFIHookObjC"],
            swiftSettings: librarySettings
        ),

        // Hooking any function in its own code (inline hooks, x86-64 Linux): the relocator
        // over the system Zydis, the patcher, and a jump cell per function that the engine
        // hooks as a slot. A product of its own, so that users of FFIHook alone need no Zydis.
        .target(
            name: "FFIHookInline",
            dependencies: ["FFIHook", "FFIHookCore", "CFFIHookSupport", "CFFIHookPatch", "CZydis"],
            swiftSettings: librarySettings
        ),

        // MARK: - C shims

        // The system libffi (Debian's libffi-dev).
        .systemLibrary(
            name: "CFFI",
            pkgConfig: "libffi",
            providers: [.apt(["libffi-dev"])]
        ),
        // The system Zydis 4 disassembler (Debian's libzydis-dev; it has no pkg-config file).
        .systemLibrary(name: "CZydis", providers: [.apt(["libzydis-dev"])]),
        // Per-thread records and the closure handler, register calls, memory barriers and
        // fault-free reads, the walk over loaded objects' import tables (prefix ffh_).
        // gcc_s: the unwinder and the C personality of the closure entry's landing pad.
        .target(name: "CFFIHookSupport", linkerSettings: [.linkedLibrary("gcc_s")]),
        // Writing code that other threads may be running, for inline hooks: the other threads
        // stopped once per batch of writes, and moved out of the bytes being replaced (prefix
        // ffh_patch_). Built on CFFIHookSupport's system calls and fault guard.
        .target(name: "CFFIHookPatch", dependencies: ["CFFIHookSupport"]),
        // The GNU Objective-C runtime's functions, looked up by name in the process (prefix
        // ffh_objc_): nothing links the runtime.
        .target(
            name: "CFFIHookObjC", dependencies: ["CFFI", "CFFIHookSupport"], linkerSettings: [.linkedLibrary("dl")]
        ),

        // MARK: - Test support

        // Compiler-built C functions and layouts that the tests check the library against.
        // (The import-table fixture libraries in Tests/Fixtures are built by the tests.)
        .target(name: "CTestSupport", dependencies: ["CFFI", "CFFIHookSupport"], path: "Tests/Support/CTestSupport"),
        // The test trait that keeps hook-installing tests of one target from running while
        // another target's test compares the process's hook figures.
        .target(
            name: "TestHookLock", dependencies: ["CTestSupport"], path: "Tests/Support/TestHookLock",
            swiftSettings: strictSettings),
        // Real C libraries from Debian that the tests hook.
        .systemLibrary(
            name: "CSQLite", path: "Tests/Support/CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(
            name: "CZlib", path: "Tests/Support/CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),

        // MARK: - Tests

        .testTarget(
            name: "FFIHookCoreTests",
            dependencies: ["FFIHookCore", "CTestSupport"],
            swiftSettings: testSettings
        ),
        .testTarget(
            name: "FFIHookTests",
            dependencies: [
                "FFIHook", "FFIHookCore", "FFIHookObjC", "CFFIHookSupport", "CTestSupport", "CSQLite", "CZlib",
                "TestHookLock",
            ],
            swiftSettings: testSettings
        ),
        .testTarget(
            name: "FFIHookInlineTests",
            dependencies: [
                "FFIHookInline", "FFIHook", "FFIHookCore", "CFFIHookSupport", "CTestSupport", "CZlib", "CSQLite",
                "CZydis", "TestHookLock",
            ],
            swiftSettings: testSettings
        ),
    ]
)
