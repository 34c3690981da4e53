// swift-tools-version: 6.1
import Foundation
import PackageDescription

// Programs that use swift-ffi-hook, kept apart so the library's package declares no
// executables (SwiftPM lists every executable target of a root package as a product):
//
// - ffi-hook-trace: the example, a live trace of what SQLite asks of its file system.
//   `swift run ffi-hook-trace` from this directory.
// - ffi-hook-soak: callers, hook mutators and reclamation at once, then checks of the end
//   state; `--inline`, callers of a C function while its inline hook is installed and
//   removed. `Scripts/soak.sh` builds it with AddressSanitizer and runs it.
// - ffi-hook-lifecycle: an Objective-C application's delegate messages fanned out to
//   components (FFIHookObjC). `swift run ffi-hook-lifecycle` from this directory.
// - ffi-hook-tracer and the FFIHookTracer library: calls and time per function of the
//   libraries a user names, in any program started with the library preloaded (or a running
//   process, which ffi-hook-tracer-join, its --pid, joins).
//   `swift build -c release`, then `.build/release/ffi-hook-tracer --library libc.so.6 -- ls`.

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

// The example's Objective-C target is compiled by clang for the GNU runtime and GNUstep Base:
// GNUstep's defines and headers from `gnustep-config`, the runtime's headers and library
// from gcc's directory (`-idirafter` keeps clang's own headers first).
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

// The tracer's library and its wrapper carry their own Swift runtime and C++ library, hidden
// (`-static-stdlib` hides every archive's symbols): a traced process then loads neither
// libswiftCore.so, its concurrency and dispatch libraries, nor libstdc++.so.6 for the tracer
// (about 2 ms of every traced process), and a traced Swift or C++ program keeps its own. `Link/`
// holds a linker script that stands for libstdc++.so and names the static archive.
let staticRuntime = ["-static-stdlib", "-L", Context.packageDirectory + "/Link"]

// The tracer's library exports only its entry points (`Link/tracer.map`): its own calls and
// references bind inside it when it is linked, not by the loader's lookups in every traced process.
let tracerExports = ["-Xlinker", "--version-script=" + Context.packageDirectory + "/Link/tracer.map"]

// The tracer's types' metadata made by their accessors, not from mangled names: a process the
// tracer starts in instantiates about a hundred generic types once each, and finding one from its
// mangled name (demangling it, then decoding the tree) took about 10,000 instructions, a quarter
// of the tracer's start in `gzip` on one byte. The libraries of this package's dependency take the
// same flag from FFI_HOOK_DIRECT_METADATA=1 in the build's environment (its manifest), which the
// scripts that build the tracer set: another 0.8 million instructions of that start.
let directMetadataAccess = ["-Xfrontend", "-disable-concrete-type-metadata-mangled-name-accessors"]

// Linked by lld with the relative relocations packed (DT_RELR, which the C library's loader
// reads since glibc 2.36): the loader reads a 5 KB table rather than 600 KB of 24,000 entries
// in every traced process.
let packedRelocations = ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"]

// The start library is C and needs the C library alone: without the Swift toolchain's directory
// in its run path, the loader never looks for that there.
let noToolchainPath = ["-no-toolchain-stdlib-rpath"]

// The wrapper, linked statically: it runs without the loader, which mapped and relocated the C
// library for it (and searched the toolchain's directories for it first) before every traced
// program (0.15 to 0.25 ms). `-static-stdlib` only lets the driver's Swift libraries be found:
// nothing of them is linked into a C program.
let staticWrapper =
    staticRuntime + ["-Xclang-linker", "-static", "-Xclang-linker", "-Wno-unused-command-line-argument"]

let package = Package(
    name: "swift-ffi-hook-programs",
    products: [
        // The tracer's library, and the small one ffi-hook-tracer preloads (LD_PRELOAD), which
        // loads the tracer once a library to trace is loaded; the wrapper finds both beside itself.
        .library(name: "FFIHookTracer", type: .dynamic, targets: ["FFIHookTracer"]),
        .library(name: "FFIHookTracerStart", type: .dynamic, targets: ["CTracerStart"]),
    ],
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
        // The soak: callers, hook mutators and reclamation at once, then checks of the end state;
        // with --inline, callers of a C function while its inline hook comes and goes.
        .executableTarget(
            name: "ffi-hook-soak",
            dependencies: [
                "CSoakSupport",
                .product(name: "FFIHook", package: "swift-ffi-hook"),
                .product(name: "FFIHookCore", package: "swift-ffi-hook"),
                .product(name: "FFIHookInline", package: "swift-ffi-hook"),
            ],
            swiftSettings: strictSettings
        ),

        // The lifecycle example: an Objective-C application, its delegate and components.
        .executableTarget(
            name: "ffi-hook-lifecycle",
            dependencies: ["CLifecycleApp", .product(name: "FFIHookObjC", package: "swift-ffi-hook")],
            swiftSettings: strictSettings
        ),

        // The tracer: a library that attaches to the exported functions of the libraries a user
        // names when it is preloaded, and the wrapper that starts a program with it preloaded.
        .target(
            name: "FFIHookTracer",
            dependencies: [
                "CTracerSupport", .product(name: "FFIHook", package: "swift-ffi-hook"),
                .product(name: "FFIHookInline", package: "swift-ffi-hook"),
            ],
            swiftSettings: strictSettings + [.unsafeFlags(directMetadataAccess)],
            linkerSettings: [.unsafeFlags(staticRuntime + tracerExports + packedRelocations)]
        ),
        // The wrapper starts before every traced program: in C, which starts in a tenth of the
        // time a Swift program's runtime takes to. With --pid it executes the join, in Swift,
        // without the concurrency and string processing modules (three libraries fewer).
        // Its entry point is CTracerFast's, which runs the common run with system calls alone
        // before the C library starts (about 0.3 ms in these virtual machines) and hands any
        // other to the C library's start and main.c.
        .executableTarget(
            name: "ffi-hook-tracer", dependencies: ["CTracerFast"],
            linkerSettings: [.unsafeFlags(staticWrapper + ["-Xlinker", "-e", "-Xlinker", "fhw_fast_entry"])]),
        // Freestanding: it runs before the C library has started, so it may call none of it.
        .target(
            name: "CTracerFast",
            cSettings: [.unsafeFlags(["-ffreestanding", "-fno-builtin", "-fno-stack-protector"])]),
        .executableTarget(
            name: "ffi-hook-tracer-join", dependencies: ["CTracerJoin"],
            swiftSettings: strictSettings + [
                .unsafeFlags([
                    "-Xfrontend", "-disable-implicit-concurrency-module-import",
                    "-Xfrontend", "-disable-implicit-string-processing-module-import",
                ])
            ],
            linkerSettings: [.unsafeFlags(staticRuntime)]),

        // MARK: - C support

        // The soak's C shapes and tables.
        .target(name: "CSoakSupport"),
        // The tracer's constructor, exit and fork handlers, loaded-object walk and counters.
        .target(name: "CTracerSupport"),
        // The start library: plain C (no Swift of its own), which loads the tracer when needed.
        // Preloaded in every process a traced program starts, it must not bring the Swift
        // runtime: without Swift's start files nothing in it needs the runtime, and start.c asks
        // the linker (through an autolink entry, which comes before the runtime on the link
        // line) to record only the libraries it needs: the C library alone.
        .target(
            name: "CTracerStart",
            linkerSettings: [
                .linkedLibrary("dl"),
                // Its calls bound as it loads (-z now): the report a signal handler makes on a
                // small alternate stack must not meet the loader's lazy binding there.
                .unsafeFlags(["-nostartfiles", "-Xlinker", "-z", "-Xlinker", "now"] + noToolchainPath),
            ]),
        // The tracer's --pid: calls made in a running process with ptrace (dlopen, the join).
        .target(name: "CTracerJoin"),
        // The lifecycle example's application, delegate and components (Objective-C).
        .target(
            name: "CLifecycleApp",
            cSettings: [.unsafeFlags(["-fobjc-runtime=gcc", "-fno-blocks"] + gnustepFlags + gccHeaders)],
            linkerSettings: [
                .linkedLibrary("gnustep-base"),
                .linkedLibrary("objc"),
                .unsafeFlags(runtimeLibraryFlags),
            ]
        ),
        // The system's SQLite (Debian's libsqlite3-dev), which the example hooks.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
    ]
)
