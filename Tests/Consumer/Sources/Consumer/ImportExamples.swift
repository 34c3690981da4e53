import CConsumerSQLite
import FFIHook
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The documentation's import-table tasks: where Swift's `open` is imported (the Glibc
/// overlay, not the program), and the SQLite calls of a workload profiled with one group.
func runImportExamples() throws {
    // Swift's open is called from the Glibc overlay's import table, not the program's: the
    // error for the main program says so, and the bindings list the overlay's entry.
    let openSignature = try Signature(variadic: "i*iI", fixedArgumentCount: 2)
    do {
        let group = try ImportTable.instead(symbol: "open", in: .mainProgram, signature: openSignature) { call in
            call.callOriginal()
        }
        group.remove()
        check(false, "the main program imports open")
    } catch {
        check(error.code == .symbolNotImported, "open in the main program: \(error)")
        check(error.message.contains(#".object("libswiftGlibc.so")"#), "the error names the overlay: \(error)")
    }
    let overlay = try ImportTable.bindings(of: "open", in: .object("libswiftGlibc.so"))
    check(overlay.count == 1 && overlay[0].entry.symbol == "open", "the overlay's entry of open: \(overlay)")
    let refused = Atomic<Int>(0)
    let faults = try ImportTable.instead(symbol: "open", in: overlay[0].entry.scope, signature: openSignature) {
        call in
        if String(cString: call.argument(0, as: UnsafePointer<CChar>.self)) == "/consumer-denied" {
            refused.add(1, ordering: .relaxed)
            errno = EACCES
            call.setReturnValue(Int32(-1))
        } else {
            call.callOriginal()
        }
    }
    let denied = open("/consumer-denied", O_RDONLY)
    check(denied == -1 && errno == EACCES, "the injected failure and its errno")
    let devNull = open("/dev/null", O_RDONLY)
    check(devNull >= 0, "other paths open")
    close(devNull)
    check(refused.load(ordering: .relaxed) == 1, "one refused open")
    faults.remove()

    // Profiling SQLite's calls with one group: the calls counted per symbol.
    let counts = Mutex<[String: Int]>([:])
    let sqlite = try ImportTable.before(
        symbols: [
            ImportSymbol("sqlite3_open", signature: Signature("i*^^v")),
            ImportSymbol("sqlite3_exec", signature: Signature("i^v*^?^v^*")),
            ImportSymbol("sqlite3_prepare_v2", signature: Signature("i^v*i^^v^*")),
            ImportSymbol("sqlite3_bind_int", signature: Signature("i^vii")),
            ImportSymbol("sqlite3_step", signature: Signature("i^v")),
            ImportSymbol("sqlite3_reset", signature: Signature("i^v")),
            ImportSymbol("sqlite3_column_int", signature: Signature("i^vi")),
            ImportSymbol("sqlite3_finalize", signature: Signature("i^v")),
            ImportSymbol("sqlite3_close", signature: Signature("i^v")),
        ],
        in: .mainProgram
    ) { _, entry in
        counts.withLock { $0[entry.symbol, default: 0] += 1 }
    }
    var database: OpaquePointer?
    check(sqlite3_open(":memory:", &database) == SQLITE_OK, "sqlite3_open")
    check(sqlite3_exec(database, "CREATE TABLE t(x INTEGER)", nil, nil, nil) == SQLITE_OK, "CREATE TABLE")
    var insert: OpaquePointer?
    check(sqlite3_prepare_v2(database, "INSERT INTO t VALUES(?)", -1, &insert, nil) == SQLITE_OK, "prepare INSERT")
    for value in 1...3 {
        _ = sqlite3_bind_int(insert, 1, Int32(value))
        check(sqlite3_step(insert) == SQLITE_DONE, "INSERT")
        _ = sqlite3_reset(insert)
    }
    _ = sqlite3_finalize(insert)
    var select: OpaquePointer?
    check(sqlite3_prepare_v2(database, "SELECT x FROM t", -1, &select, nil) == SQLITE_OK, "prepare SELECT")
    var sum: Int32 = 0
    while sqlite3_step(select) == SQLITE_ROW { sum += sqlite3_column_int(select, 0) }
    _ = sqlite3_finalize(select)
    _ = sqlite3_close(database)
    sqlite.remove()
    check(sum == 6, "the rows")
    let expected = [
        "sqlite3_open": 1, "sqlite3_exec": 1, "sqlite3_prepare_v2": 2, "sqlite3_bind_int": 3, "sqlite3_step": 7,
        "sqlite3_reset": 3, "sqlite3_column_int": 3, "sqlite3_finalize": 2, "sqlite3_close": 1,
    ]
    check(counts.withLock { $0 } == expected, "the calls per symbol: \(counts.withLock { $0 })")
}

/// The README's example of bindings and a group of symbols.
func runReadmeImportExample() throws {
    let bindings = try ImportTable.bindings(of: "open")
    check(
        bindings.contains { $0.entry.objectName == "libswiftGlibc.so" && !"\($0)".isEmpty },
        "the bindings of open list the Glibc overlay: \(bindings)")

    let calls = Mutex<[String: Int]>([:])
    let profile = try ImportTable.before(
        symbols: [
            ImportSymbol("sqlite3_prepare_v2", signature: Signature("i^v*i^^v^*")),
            ImportSymbol("sqlite3_step", signature: Signature("i^v")),
            ImportSymbol("sqlite3_finalize", signature: Signature("i^v")),
        ],
        in: .mainProgram  // the program's calls; .all also counts SQLite's calls to itself
    ) { call, entry in
        calls.withLock { $0[entry.symbol, default: 0] += 1 }
    }
    var database: OpaquePointer?
    check(sqlite3_open(":memory:", &database) == SQLITE_OK, "sqlite3_open")
    var statement: OpaquePointer?
    check(sqlite3_prepare_v2(database, "SELECT 1", -1, &statement, nil) == SQLITE_OK, "prepare")
    check(sqlite3_step(statement) == SQLITE_ROW, "step")
    _ = sqlite3_finalize(statement)
    _ = sqlite3_close(database)
    profile.remove()
    check(
        calls.withLock { $0 } == ["sqlite3_prepare_v2": 1, "sqlite3_step": 1, "sqlite3_finalize": 1],
        "the README's group counted \(calls.withLock { $0 })")
}
