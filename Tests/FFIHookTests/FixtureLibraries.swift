import CTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The shared libraries the import-table and process-life tests open with `dlopen`, built
/// from `Tests/Fixtures` with the system C compiler the first time a test asks for one.
///
/// Their linker flags (full RELRO, lazy binding) are what the tests are about, and a package
/// builds a shared library only as a product, which would publish them. Each is built once
/// per build directory (again when its source is newer), into a temporary file renamed into
/// place, so that tests in parallel and the child processes of exit tests share one copy.
/// Only C calls here (`posix_spawn`, `stat`, `rename`): an exit test's child checks for
/// leaks as it exits.
enum FixtureLibraries {
    /// How one library is built: its directory under `Tests/Fixtures`, its linker flags and,
    /// for one that is not C, its source file, language flags, libraries and compilers.
    private struct Recipe: Sendable {
        let directory: String
        let linkerFlags: [String]
        var source = "fixture.c"
        var compilerFlags: @Sendable () -> [String] = { [] }
        var libraries: [String] = []
        var compilers: [String]? = nil
        /// Fixture libraries it links with, built first (found beside it: `-L`, `$ORIGIN`).
        var needs: [String] = []
    }

    private static let fullRELRO = ["-Wl,-z,relro", "-Wl,-z,now"]
    private static let lazyBinding = ["-Wl,-z,relro", "-Wl,-z,lazy"]

    private static let recipes: [String: Recipe] = [
        // Full RELRO: the import table is read-only once relocated. Its DT_RUNPATH is its own
        // directory, where it finds libBareNameFixture.so by that name.
        "libImportFixture.so": Recipe(directory: "ImportFixture", linkerFlags: fullRELRO + ["-Wl,-rpath,$ORIGIN"]),
        // Opened by bare name by libImportFixture.so alone.
        "libBareNameFixture.so": Recipe(
            directory: "BareNameFixture", linkerFlags: fullRELRO + ["-Wl,-rpath,$ORIGIN"],
            libraries: ["-l:libNextFixture.so"], needs: ["libNextFixture.so"]),
        // Linked with by libBareNameFixture.so alone.
        "libNextFixture.so": Recipe(directory: "NextFixture", linkerFlags: fullRELRO),
        // Lazy binding with partial RELRO: PLT entries are bound on first call.
        "libLazyImportFixture.so": Recipe(directory: "LazyImportFixture", linkerFlags: lazyBinding),
        // Opened late, to test following loads.
        "libLaterImportFixture.so": Recipe(directory: "LaterImportFixture", linkerFlags: fullRELRO),
        // Unloaded under its hooks by the process-life tests.
        "libProcessFixture.so": Recipe(directory: "ProcessFixture", linkerFlags: lazyBinding),
        // Objective-C classes of GNUstep Base for the GNU runtime, built by gcc (the runtime's
        // own compiler; clang needs flags of its own for it).
        "libObjCFixture.so": Recipe(
            directory: "ObjCFixture", linkerFlags: [], source: "fixture.m",
            compilerFlags: { ["-x", "objective-c", "-std=gnu11"] + gnustepFlags() },
            libraries: ["-lgnustep-base", "-lobjc"], compilers: ["gcc"]),
        // The same runtime's classes built by clang, whose metaclasses the runtime reads as
        // under construction. clang needs gcc's runtime headers (after its own) and library.
        "libObjCClangFixture.so": Recipe(
            directory: "ObjCClangFixture", linkerFlags: [], source: "fixture.m",
            compilerFlags: {
                ["-x", "objective-c", "-fobjc-runtime=gcc", "-fno-blocks", "-fobjc-exceptions"]
                    + gnustepFlags().filter { !$0.hasPrefix("-f") }
                    + ["-idirafter", commandOutput("gcc -print-file-name=include")]
            },
            libraries: [
                "-L", directory(of: commandOutput("gcc -print-file-name=libobjc.so")), "-lgnustep-base", "-lobjc",
            ],
            compilers: ["clang"]),
    ]

    /// GNUstep's defines, include directories and code-generation flags for Objective-C, from
    /// `gnustep-config` (its dependency-file and warning flags left out).
    private static func gnustepFlags() -> [String] {
        commandOutput("gnustep-config --objc-flags").split(whereSeparator: { $0 == " " || $0 == "\n" })
            .map(String.init).filter { ($0.hasPrefix("-D") || $0.hasPrefix("-I") || $0.hasPrefix("-f")) && $0 != "-I." }
    }

    /// The standard output of a shell command, its last newline removed ("" when it fails).
    private static func commandOutput(_ command: String) -> String {
        guard let pipe = popen(command + " 2>/dev/null", "r") else { return "" }
        defer { pclose(pipe) }
        var output = ""
        var buffer = [CChar](repeating: 0, count: 4096)
        while fgets(&buffer, Int32(buffer.count), pipe) != nil {
            output += String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        return output.hasSuffix("\n") ? String(output.dropLast()) : output
    }

    /// `Tests/Fixtures`, found from this file's path.
    private static let sources = directory(of: directory(of: #filePath)) + "/Fixtures"

    /// Next to the running test executable, in the build directory.
    private static let output: String = {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, Int(PATH_MAX))
        let executable =
            length > 0 ? String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "."
        return directory(of: executable) + "/fixture-libraries"
    }()

    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return String(path[..<slash])
    }

    /// The path of library `name` (such as `"libImportFixture.so"`), built if need be; stops
    /// the test process with a message naming the command when it cannot be built.
    static func path(_ name: String) -> String {
        guard let recipe = recipes[name] else { fatalError("no fixture library named \(name)") }
        let library = output + "/" + name
        let directory = sources + "/" + recipe.directory
        let source = directory + "/" + recipe.source
        for needed in recipe.needs { _ = path(needed) }
        let built = pf_modified(library)
        if built >= 0 && built >= pf_modified(source) { return library }
        mkdir(output, 0o755)
        let temporary = library + ".\(getpid()).\(UInt(pthread_self())).tmp"
        // -O0 keeps each call the source makes (an optimiser turns atoi into strtol).
        let arguments =
            recipe.compilerFlags() + ["-shared", "-fPIC", "-O0", "-I", directory + "/include"] + recipe.linkerFlags
            + ["-o", temporary, source] + (recipe.needs.isEmpty ? [] : ["-L", output]) + recipe.libraries
        let compilers = recipe.compilers ?? getenv("CC").map { [String(cString: $0)] } ?? ["cc", "gcc", "clang"]
        for compiler in compilers where run([compiler] + arguments) == 0 {
            guard rename(temporary, library) == 0 else { break }
            return library
        }
        fatalError("cannot build \(name): \(compilers.joined(separator: "/")) \(arguments.joined(separator: " "))")
    }

    /// Runs a command found on the PATH; its exit status, or -1.
    private static func run(_ command: [String]) -> Int32 {
        var argv = command.map { strdup($0) }
        argv.append(nil)
        defer { for argument in argv { free(argument) } }
        return pf_run(&argv)
    }
}
