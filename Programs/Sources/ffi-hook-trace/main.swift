// A live trace of what SQLite asks of its file system during a small database session.
//
// It hooks the default VFS of the system's SQLite (opening, deleting, randomness) and the
// io-methods table of the files it opens (reads, writes, syncs, closes), then creates a
// database in a temporary directory, runs a transaction and a query, and prints each call.
//
//     swift run ffi-hook-trace                          (from Programs/)
//     swift run --package-path Programs ffi-hook-trace  (from the repository's root)

import CSQLite
import FFIHook
import Foundation

/// Paths by `sqlite3_file *`, filled by the xOpen hook, read by the io hooks.
final class OpenFiles: @unchecked Sendable {
    // Sendable: `names` is only touched with `lock` held.
    private let lock = NSLock()
    private var names: [UInt: String] = [:]
    func open(_ file: UInt, _ name: String) { lock.withLock { names[file] = name } }
    func name(_ file: UInt) -> String { lock.withLock { names[file] ?? "?" } }
}

let files = OpenFiles()
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ffi-hook-trace-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }

/// Shortens a path to its file name.
func short(_ path: String) -> String { URL(fileURLWithPath: path).lastPathComponent }

guard let vfs = sqlite3_vfs_find(nil) else { fatalError("SQLite has no default VFS") }
let vfsLayout = TableLayout<sqlite3_vfs>([
    .init("xOpen", \.xOpen, try Signature("i^v*^vi^i")),
    .init("xDelete", \.xDelete, try Signature("i^vr*i")),
])
var tokens: [HookGroupToken] = []
tokens.append(
    try Hook.install(on: vfs, layout: vfsLayout, position: .after) { slot, call in
        let path = call.argument(1, as: UnsafePointer<CChar>?.self).map { String(cString: $0) } ?? "(temporary)"
        switch slot.name {
        case "xOpen":
            let file = call.argument(2, as: UInt.self)
            files.open(file, short(path))
            print("open    \(short(path))")
        default:
            print("delete  \(short(path))")
        }
    })

// Open the database, which makes SQLite open its file, and find the io-methods table.
var opened: OpaquePointer?
let path = directory.appendingPathComponent("trace.db").path
guard sqlite3_open(path, &opened) == SQLITE_OK, let database = opened else { fatalError("cannot open \(path)") }
func execute(_ sql: String) {
    print("-- \(sql)")
    var error: UnsafeMutablePointer<CChar>?
    if sqlite3_exec(database, sql, nil, nil, &error) != SQLITE_OK {
        print("error: \(String(cString: error!))")
        sqlite3_free(error)
    }
}
execute("PRAGMA journal_mode = DELETE")

var file: UnsafeMutablePointer<sqlite3_file>?
sqlite3_file_control(database, "main", SQLITE_FCNTL_FILE_POINTER, &file)
guard let methods = file?.pointee.pMethods else { fatalError("no io methods") }
let ioLayout = TableLayout<sqlite3_io_methods>([
    .init("xRead", \.xRead, try Signature("i^v^viq")),
    .init("xWrite", \.xWrite, try Signature("i^vr^viq")),
    .init("xSync", \.xSync, try Signature("i^vi")),
    .init("xClose", \.xClose, try Signature("i^v")),
])
// The methods table is `const` in SQLite: the loader may have made its page read-only.
tokens.append(
    try Hook.install(
        on: UnsafeMutablePointer(mutating: methods), layout: ioLayout, position: .before,
        options: .liftsPageProtection
    ) { slot, call in
        let name = files.name(call.argument(0, as: UInt.self))
        switch slot.name {
        case "xRead", "xWrite":
            let amount = call.argument(2, as: Int32.self)
            let offset = call.argument(3, as: Int64.self)
            print("\(slot.name == "xRead" ? "read " : "write") \(name) \(amount) bytes at \(offset)")
        case "xSync": print("sync    \(name)")
        default: print("close   \(name)")
        }
    })

execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
execute("BEGIN; INSERT INTO notes (text) VALUES ('hello'), ('hooks'); COMMIT")
execute("SELECT count(*) FROM notes")
sqlite3_close(database)

for token in tokens { token.remove() }
print("done: every hook removed")
