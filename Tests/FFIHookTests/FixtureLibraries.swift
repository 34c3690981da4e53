import Foundation

/// The shared libraries the import-table and process-life tests open with `dlopen`, built
/// from `Tests/Fixtures` with the system C compiler the first time a test asks for one.
///
/// Their linker flags (full RELRO, lazy binding) are what the tests are about, and a package
/// builds a shared library only as a product, which would publish them. Each is built once
/// per build directory (again when its source is newer), into a temporary file renamed into
/// place, so that tests in parallel and the child processes of exit tests share one copy.
enum FixtureLibraries {
    /// How one library is built: its directory under `Tests/Fixtures`, and its linker flags.
    private struct Recipe {
        let directory: String
        let linkerFlags: [String]
    }

    private static let fullRELRO = ["-Wl,-z,relro", "-Wl,-z,now"]
    private static let lazyBinding = ["-Wl,-z,relro", "-Wl,-z,lazy"]

    private static let recipes: [String: Recipe] = [
        // Full RELRO: the import table is read-only once relocated.
        "libImportFixture.so": Recipe(directory: "ImportFixture", linkerFlags: fullRELRO),
        // Lazy binding with partial RELRO: PLT entries are bound on first call.
        "libLazyImportFixture.so": Recipe(directory: "LazyImportFixture", linkerFlags: lazyBinding),
        // Opened late, to test following loads.
        "libLaterImportFixture.so": Recipe(directory: "LaterImportFixture", linkerFlags: fullRELRO),
        // Unloaded under its hooks by the process-life tests.
        "libProcessFixture.so": Recipe(directory: "ProcessFixture", linkerFlags: lazyBinding),
    ]

    /// `Tests/Fixtures`, found from this file's path.
    private static let sources = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures")

    /// Next to the running test executable, in the build directory.
    private static let output: URL = {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return executable.deletingLastPathComponent().appendingPathComponent("fixture-libraries")
    }()

    /// The path of library `name` (such as `"libImportFixture.so"`), built if need be; stops
    /// the test process with a message naming the command when it cannot be built.
    static func path(_ name: String) -> String {
        guard let recipe = recipes[name] else { fatalError("no fixture library named \(name)") }
        let library = output.appendingPathComponent(name)
        let directory = sources.appendingPathComponent(recipe.directory)
        let source = directory.appendingPathComponent("fixture.c")
        if let built = modified(library), let written = modified(source), built >= written { return library.path }
        try? FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
        let temporary = output.appendingPathComponent("\(name).\(getpid()).\(UInt(pthread_self())).tmp")
        // -O0 keeps each call the source makes (an optimiser turns atoi into strtol).
        let arguments =
            ["-shared", "-fPIC", "-O0", "-I", directory.appendingPathComponent("include").path]
            + recipe.linkerFlags + ["-o", temporary.path, source.path]
        let compilers = ProcessInfo.processInfo.environment["CC"].map { [$0] } ?? ["cc", "gcc", "clang"]
        for compiler in compilers where run(compiler, arguments) {
            guard rename(temporary.path, library.path) == 0 else { break }
            return library.path
        }
        fatalError("cannot build \(name): \(compilers.joined(separator: "/")) \(arguments.joined(separator: " "))")
    }

    private static func modified(_ file: URL) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: file.path))?[.modificationDate] as? Date
    }

    /// Runs `command` found on the PATH; whether it exited with 0.
    private static func run(_ command: String, _ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [command] + arguments
        process.standardOutput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            return false
        }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}
