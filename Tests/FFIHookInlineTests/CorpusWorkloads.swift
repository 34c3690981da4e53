import CSQLite
import CZlib

/// What a workload that failed outright says (a result code where success was expected).
struct WorkloadFailure: Error, CustomStringConvertible {
    let description: String
}

/// FNV-1a over bytes, to fold a workload's output into one comparable number.
struct Digest: Equatable, CustomStringConvertible {
    private(set) var value: UInt64 = 0xCBF2_9CE4_8422_2325

    mutating func add<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        for byte in bytes {
            value ^= UInt64(byte)
            value = value &* 0x100_0000_01B3
        }
    }

    mutating func add<T: FixedWidthInteger>(_ number: T) {
        withUnsafeBytes(of: number.littleEndian) { add($0) }
    }

    var description: String { "0x" + String(value, radix: 16) }
}

// MARK: - SQLite

/// What a SQLite transaction computed.
struct SQLiteOutcome: Equatable {
    var count: Int64 = 0
    var sum: Int64 = 0
    var total: Double = 0
    var nameLengths: Int64 = 0
    var largestName = ""
    /// Every row, in a fixed order.
    var rows = Digest()
    var closeResult: Int32 = -1
}

/// Opens `:memory:`, creates a table, inserts 1,000 rows in one transaction with a prepared
/// statement, reads aggregates and every row back, finalizes and closes.
func sqliteTransaction() throws -> SQLiteOutcome {
    var opened: OpaquePointer?
    guard sqlite3_open(":memory:", &opened) == SQLITE_OK, let db = opened else {
        throw WorkloadFailure(description: "sqlite3_open failed")
    }
    var closed = false
    defer { if !closed { sqlite3_close(db) } }
    func check(_ result: Int32, _ what: String, expected: Int32 = SQLITE_OK) throws {
        guard result == expected else {
            throw WorkloadFailure(description: "\(what): \(result) \(String(cString: sqlite3_errmsg(db)))")
        }
    }
    func prepare(_ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        try check(sqlite3_prepare_v2(db, sql, -1, &statement, nil), "prepare \(sql)")
        return statement!
    }
    try check(
        sqlite3_exec(
            db, "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT NOT NULL, value REAL, n INTEGER)", nil, nil, nil),
        "create")
    try check(sqlite3_exec(db, "CREATE INDEX t_n ON t(n)", nil, nil, nil), "create index")
    try check(sqlite3_exec(db, "BEGIN", nil, nil, nil), "begin")
    let insert = try prepare("INSERT INTO t(name, value, n) VALUES(?1, ?2, ?3)")
    for index in 0..<1000 {
        try check(sqlite3_bind_text(insert, 1, "row \(index * 7919 % 1000)", -1, CSQLite_transient()), "bind text")
        try check(sqlite3_bind_double(insert, 2, Double(index) * 0.25 - 100), "bind double")
        try check(sqlite3_bind_int64(insert, 3, Int64(index * index % 977)), "bind int64")
        try check(sqlite3_step(insert), "insert", expected: SQLITE_DONE)
        try check(sqlite3_reset(insert), "reset")
        try check(sqlite3_clear_bindings(insert), "clear bindings")
    }
    try check(sqlite3_finalize(insert), "finalize insert")
    try check(sqlite3_exec(db, "COMMIT", nil, nil, nil), "commit")

    var outcome = SQLiteOutcome()
    let aggregate = try prepare("SELECT count(*), sum(n), total(value), sum(length(name)), max(name) FROM t")
    try check(sqlite3_step(aggregate), "aggregate", expected: SQLITE_ROW)
    outcome.count = sqlite3_column_int64(aggregate, 0)
    outcome.sum = sqlite3_column_int64(aggregate, 1)
    outcome.total = sqlite3_column_double(aggregate, 2)
    outcome.nameLengths = sqlite3_column_int64(aggregate, 3)
    outcome.largestName = String(cString: sqlite3_column_text(aggregate, 4))
    try check(sqlite3_step(aggregate), "aggregate end", expected: SQLITE_DONE)
    try check(sqlite3_finalize(aggregate), "finalize aggregate")

    let rows = try prepare("SELECT id, name, value, n FROM t WHERE n >= ?1 ORDER BY n DESC, id")
    try check(sqlite3_bind_int(rows, 1, 0), "bind int")
    while true {
        let step = sqlite3_step(rows)
        if step == SQLITE_DONE { break }
        try check(step, "rows", expected: SQLITE_ROW)
        outcome.rows.add(sqlite3_column_int64(rows, 0))
        outcome.rows.add(
            UnsafeRawBufferPointer(start: sqlite3_column_text(rows, 1), count: Int(sqlite3_column_bytes(rows, 1))))
        outcome.rows.add(sqlite3_column_double(rows, 2).bitPattern)
        outcome.rows.add(sqlite3_column_int64(rows, 3))
    }
    try check(sqlite3_finalize(rows), "finalize rows")
    outcome.closeResult = sqlite3_close(db)
    closed = true
    return outcome
}

// MARK: - zlib

/// What a zlib round trip computed.
struct ZlibOutcome: Equatable {
    var crc32: UInt = 0
    var adler32: UInt = 0
    var combinedCRC32: UInt = 0
    var deflatedCount = 0
    var deflated = Digest()
    var inflatedMatches = false
    var compressedCount = 0
    var compressed = Digest()
    var uncompressedMatches = false
}

/// 1 MB of varied bytes: runs of words (which compress) between runs of xorshift noise
/// (which does not), the same every time.
func zlibInput() -> [UInt8] {
    let words = ["inline ", "hook ", "trampoline ", "relocate ", "the ", "a ", "patch ", "cell "].map { Array($0.utf8) }
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
    var data: [UInt8] = []
    data.reserveCapacity(1 << 20)
    while data.count < 1 << 20 {
        let choice = next()
        if choice % 4 == 0 {
            for _ in 0..<(choice >> 8) % 64 { data.append(UInt8(truncatingIfNeeded: next())) }
        } else {
            for _ in 0..<(choice >> 8) % 32 { data += words[Int(next() % UInt64(words.count))] }
        }
    }
    return Array(data.prefix(1 << 20))
}

/// deflate then inflate in 64 KiB pieces, compress2 then uncompress, crc32, adler32 and
/// crc32_combine over `input`.
func zlibRoundTrip(_ input: [UInt8]) throws -> ZlibOutcome {
    var input = input
    var outcome = ZlibOutcome()
    let count = input.count
    try input.withUnsafeMutableBufferPointer { source throws in
        let base = source.baseAddress!
        outcome.crc32 = CZlib.crc32(0, base, UInt32(count))
        outcome.adler32 = CZlib.adler32(1, base, UInt32(count))
        let half = count / 2
        outcome.combinedCRC32 = crc32_combine(
            CZlib.crc32(0, base, UInt32(half)), CZlib.crc32(0, base + half, UInt32(count - half)), Int(count - half))

        // deflate, fed and drained in 64 KiB pieces.
        var stream = z_stream()
        guard CZlib_deflateInit(&stream, 6) == Z_OK else { throw WorkloadFailure(description: "deflateInit") }
        var deflated = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(count))))
        let deflatedCount = try deflated.withUnsafeMutableBufferPointer { output throws -> Int in
            stream.next_out = output.baseAddress
            stream.avail_out = 0
            var fed = 0
            var result = Z_OK
            while result != Z_STREAM_END {
                if stream.avail_in == 0 && fed < count {
                    let piece = min(65536, count - fed)
                    stream.next_in = base + fed
                    stream.avail_in = UInt32(piece)
                    fed += piece
                }
                if stream.avail_out == 0 { stream.avail_out = UInt32(min(65536, output.count - Int(stream.total_out))) }
                result = deflate(&stream, fed == count ? Z_FINISH : Z_NO_FLUSH)
                guard result == Z_OK || result == Z_STREAM_END || result == Z_BUF_ERROR else {
                    throw WorkloadFailure(description: "deflate: \(result)")
                }
            }
            return Int(stream.total_out)
        }
        guard deflateEnd(&stream) == Z_OK else { throw WorkloadFailure(description: "deflateEnd") }
        outcome.deflatedCount = deflatedCount
        outcome.deflated.add(deflated.prefix(deflatedCount))

        // inflate into 64 KiB pieces.
        var inflated = [UInt8](repeating: 0, count: count)
        stream = z_stream()
        guard CZlib_inflateInit(&stream) == Z_OK else { throw WorkloadFailure(description: "inflateInit") }
        try deflated.withUnsafeMutableBufferPointer { compressed throws in
            try inflated.withUnsafeMutableBufferPointer { output throws in
                stream.next_in = compressed.baseAddress
                stream.avail_in = UInt32(deflatedCount)
                var result = Z_OK
                while result != Z_STREAM_END {
                    stream.next_out = output.baseAddress! + Int(stream.total_out)
                    stream.avail_out = UInt32(min(65536, count - Int(stream.total_out)))
                    result = inflate(&stream, Z_NO_FLUSH)
                    guard result == Z_OK || result == Z_STREAM_END else {
                        throw WorkloadFailure(description: "inflate: \(result)")
                    }
                }
            }
        }
        guard inflateEnd(&stream) == Z_OK else { throw WorkloadFailure(description: "inflateEnd") }
        outcome.inflatedMatches = inflated.elementsEqual(source)

        // compress2 and uncompress.
        var compressedLength = compressBound(UInt(count))
        var compressed = [UInt8](repeating: 0, count: Int(compressedLength))
        guard compress2(&compressed, &compressedLength, base, UInt(count), 9) == Z_OK else {
            throw WorkloadFailure(description: "compress2")
        }
        outcome.compressedCount = Int(compressedLength)
        outcome.compressed.add(compressed.prefix(Int(compressedLength)))
        var uncompressed = [UInt8](repeating: 0, count: count)
        var uncompressedLength = UInt(count)
        guard uncompress(&uncompressed, &uncompressedLength, compressed, compressedLength) == Z_OK else {
            throw WorkloadFailure(description: "uncompress")
        }
        outcome.uncompressedMatches = uncompressedLength == UInt(count) && uncompressed.elementsEqual(source)
    }
    return outcome
}
