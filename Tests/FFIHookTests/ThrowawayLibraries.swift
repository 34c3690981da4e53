import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Shared libraries built from C source for one test, in a directory of its own that the test
/// removes when it ends (the fixtures of ``FixtureLibraries`` are shared by every test and
/// kept): for a test that unloads its library, or needs one no other test loads.
///
///     let libraries = try ThrowawayLibraries("late-restore")
///     defer { libraries.remove() }
///     let library = try libraries.build("liblate.so", source: "int late_data[2048] = { 1 };")
struct ThrowawayLibraries {
    /// A compiler run that failed, with its command line.
    struct BuildFailure: Error, CustomStringConvertible {
        let command: String
        var description: String { "the C compiler failed: \(command)" }
    }

    /// The directory, named for the test and the process.
    let directory: String

    /// Makes the directory `ffihook-<name>-<pid>` in the temporary directory; `name` tells apart
    /// the tests (and the arguments of one test) that may run at once.
    init(_ name: String) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ffihook-\(name)-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    /// Builds `file` in the directory from the C `source` with `cc -O1 -shared -fPIC`, then
    /// `flags` (after the source, so that libraries named there are linked; `$DIR` stands for
    /// the directory, quoted, where libraries built before lie); returns its path.
    func build(_ file: String, source: String, flags: String = "") throws -> String {
        let path = directory + "/" + file
        let sourcePath = path + ".c"
        try source.write(toFile: sourcePath, atomically: true, encoding: .utf8)
        let command =
            "cc -O1 -shared -fPIC -o '\(path)' '\(sourcePath)' "
            + flags.replacingOccurrences(of: "$DIR", with: "'\(directory)'")
        guard system(command) == 0 else { throw BuildFailure(command: command) }
        return path
    }

    /// Removes the directory and what was built in it.
    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }
}
