import CSQLite
import CTestSupport
import CZlib
import FFIHookCore
import Foundation
import Testing

@testable import FFIHook

/// Hooks on tables that real C libraries from Debian own, checked against sources the hooks
/// do not control: the file system, the allocator's own counters, zlib's output.
extension FixtureTableTests {
    @Suite struct SQLiteTests {
        /// What the VFS and io-method hooks saw.
        final class Trace: @unchecked Sendable {
            // Sendable: every field is only touched with `lock` held.
            private let lock = NSLock()
            private var names: [UInt: String] = [:]
            private(set) var opened: [String] = []
            private(set) var deleted: [String] = []
            /// The end of the furthest write per file name.
            private(set) var extent: [String: Int64] = [:]
            private(set) var bytesWritten: [String: Int64] = [:]

            func open(_ file: UInt, _ name: String) {
                lock.withLock {
                    names[file] = name
                    opened.append(name)
                }
            }
            func delete(_ name: String) { lock.withLock { deleted.append(name) } }
            func write(_ file: UInt, amount: Int32, offset: Int64) {
                lock.withLock {
                    let name = names[file] ?? "?"
                    extent[name] = max(extent[name] ?? 0, offset + Int64(amount))
                    bytesWritten[name, default: 0] += Int64(amount)
                }
            }
            func snapshot() -> (opened: [String], deleted: [String], extent: [String: Int64], written: [String: Int64])
            {
                lock.withLock { (opened, deleted, extent, bytesWritten) }
            }
        }

        static let vfsLayout = TableLayout<sqlite3_vfs>([
            .init("xOpen", \.xOpen, try! Signature("i^v*^vi^i")),
            .init("xDelete", \.xDelete, try! Signature("i^vr*i")),
        ])

        static let ioLayout = TableLayout<sqlite3_io_methods>([
            .init("xWrite", \.xWrite, try! Signature("i^vr^viq"))
        ])

        func execute(_ database: OpaquePointer, _ sql: String) {
            #expect(sqlite3_exec(database, sql, nil, nil, nil) == SQLITE_OK, "\(sql)")
        }

        @Test func aRealTransactionMatchesTheFileSystem() throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ffihook-sqlite-\(getpid())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let path = directory.appendingPathComponent("test.db").path
            let trace = Trace()
            let vfs = try #require(sqlite3_vfs_find(nil))
            let vfsHooks = try Hook.install(on: vfs, layout: Self.vfsLayout, position: .after) { slot, call in
                guard let name = call.argument(1, as: UnsafePointer<CChar>?.self).map({ String(cString: $0) }) else {
                    return
                }
                if slot.name == "xOpen" {
                    trace.open(call.argument(2, as: UInt.self), URL(fileURLWithPath: name).lastPathComponent)
                } else {
                    trace.delete(URL(fileURLWithPath: name).lastPathComponent)
                }
            }
            defer { vfsHooks.remove() }

            var opened: OpaquePointer?
            #expect(sqlite3_open(path, &opened) == SQLITE_OK)
            let database = try #require(opened)
            execute(database, "PRAGMA journal_mode = DELETE")
            var file: UnsafeMutablePointer<sqlite3_file>?
            sqlite3_file_control(database, "main", SQLITE_FCNTL_FILE_POINTER, &file)
            let methods = UnsafeMutablePointer(mutating: try #require(file?.pointee.pMethods))
            // SQLite's io-methods table is const; where the loader made its page read-only,
            // hooking it needs the protection lifted.
            let readOnly = SlotMemory.protection(of: UInt(bitPattern: methods))?.writable == false
            if readOnly {
                #expect(throws: HookError.self) {
                    try Hook.install(on: methods, layout: Self.ioLayout, position: .before) { _, _ in }
                }
            }
            let ioHooks = try Hook.install(
                on: methods, layout: Self.ioLayout, position: .before, options: .liftsPageProtection
            ) { _, call in
                trace.write(
                    call.argument(0, as: UInt.self), amount: call.argument(2, as: Int32.self),
                    offset: call.argument(3, as: Int64.self))
            }
            execute(database, "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
            execute(database, "BEGIN")
            for index in 0..<500 {
                execute(
                    database, "INSERT INTO notes (text) VALUES ('note \(index) \(String(repeating: "x", count: 40))')")
            }
            execute(database, "COMMIT")
            #expect(sqlite3_close(database) == SQLITE_OK)
            ioHooks.remove()

            let seen = trace.snapshot()
            let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int
            #expect(seen.opened.contains("test.db"))
            #expect(seen.opened.contains("test.db-journal"))
            #expect(seen.deleted.contains("test.db-journal"))
            #expect(!FileManager.default.fileExists(atPath: path + "-journal"))
            // Every byte of the file on disk was written through the hooked xWrite.
            #expect(seen.extent["test.db"] == Int64(size))
            #expect((seen.written["test.db"] ?? 0) >= Int64(size))
            if readOnly {
                // Read-only again once the hooks are gone. Another suite's import-table hook
                // may lift the same page (SQLite's relocated read-only data shares pages with
                // its import table) for the moment of its own write: a page that stays
                // writable fails, one lifted for a moment does not.
                var protection = SlotMemory.protection(of: UInt(bitPattern: methods))
                for _ in 0..<200 where protection?.writable != false {
                    usleep(5000)
                    protection = SlotMemory.protection(of: UInt(bitPattern: methods))
                }
                #expect(protection?.writable == false)
            }
        }

        @Test func randomnessMadeDeterministicWithAnInsteadHook() throws {
            let vfs = try #require(sqlite3_vfs_find(nil))
            let counter = Counter()
            let token = try Hook.instead(
                on: FunctionSlot.field(\sqlite3_vfs.xRandomness, of: vfs), signature: Signature("i^vi*")
            ) { call in
                counter.increment()
                let count = Int(call.argument(1, as: Int32.self))
                let buffer = call.argument(2, as: UnsafeMutablePointer<UInt8>.self)
                for index in 0..<count { buffer[index] = UInt8(truncatingIfNeeded: index &* 31 &+ 7) }
                call.setReturnValue(Int32(count))
            }
            defer { token.remove() }
            func sequence() -> [UInt8] {
                sqlite3_randomness(0, nil)  // reseeds from the VFS's xRandomness
                var bytes = [UInt8](repeating: 0, count: 32)
                sqlite3_randomness(32, &bytes)
                return bytes
            }
            let first = sequence()
            let second = sequence()
            #expect(counter.count >= 2)
            #expect(first == second)
            token.remove()
            #expect(sequence() != first)
        }
    }

    @Suite struct ZlibTests {
        @Test func everyByteARealCompressionAllocatesAndFrees() throws {
            ct_fix_zalloc_reset()
            let allocated = Counter()
            let bytes = Locked<(allocated: Int, freed: Int, live: [UInt: Int])>((0, 0, [:]))
            // The stream lives at a fixed address: its allocator fields are the hooked slots.
            let streamPointer = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
            defer { streamPointer.deallocate() }
            streamPointer.initialize(to: z_stream())
            streamPointer.pointee.zalloc = ct_fix_zalloc
            streamPointer.pointee.zfree = ct_fix_zfree
            let alloc = try Hook.after(
                on: FunctionSlot.field(\z_stream.zalloc, of: streamPointer), signature: Signature("^v^vII")
            ) {
                call in
                allocated.increment()
                let size = Int(call.argument(1, as: UInt32.self)) * Int(call.argument(2, as: UInt32.self))
                let block = call.returnValue(as: UInt.self)
                bytes.withLock { state in
                    state.allocated += size
                    state.live[block] = size
                }
            }
            let free = try Hook.before(
                on: FunctionSlot.field(\z_stream.zfree, of: streamPointer), signature: Signature("v^v^v")
            ) {
                call in
                let block = call.argument(1, as: UInt.self)
                bytes.withLock { state in
                    state.freed += state.live.removeValue(forKey: block) ?? 0
                }
            }
            defer {
                alloc.remove()
                free.remove()
            }

            #expect(CZlib_deflateInit(streamPointer, Z_BEST_COMPRESSION) == Z_OK)
            let produced = ZlibImportTests.deflateSample(streamPointer)
            let input = ZlibImportTests.sample
            let output = produced.output
            #expect(produced.status == Z_STREAM_END)
            #expect(Int(streamPointer.pointee.total_in) == input.count)
            #expect(deflateEnd(streamPointer) == Z_OK)

            let seen = bytes.withLock { $0 }
            // The hooks saw exactly what the allocator itself handed out and took back.
            #expect(UInt64(seen.allocated) == ct_fix_zalloc_bytes())
            #expect(UInt64(seen.freed) == ct_fix_zfree_bytes())
            #expect(UInt64(allocated.count) == ct_fix_zalloc_blocks())
            #expect(seen.allocated == seen.freed)
            #expect(seen.live.isEmpty)
            // zlib's documented deflate memory: (1 << (windowBits + 2)) + (1 << (memLevel + 9)).
            #expect(seen.allocated >= (1 << 17) + (1 << 17))

            // And the compressed bytes are real: they inflate back to the input.
            var restored = [UInt8](repeating: 0, count: input.count)
            var inflater = z_stream()
            #expect(CZlib_inflateInit(&inflater) == Z_OK)
            var compressed = output
            compressed.withUnsafeMutableBufferPointer { source in
                restored.withUnsafeMutableBufferPointer { target in
                    inflater.next_in = source.baseAddress
                    inflater.avail_in = UInt32(produced.count)
                    inflater.next_out = target.baseAddress
                    inflater.avail_out = UInt32(target.count)
                    #expect(inflate(&inflater, Z_FINISH) == Z_STREAM_END)
                }
            }
            inflateEnd(&inflater)
            #expect(restored == input)
        }
    }
}

extension FixtureTableTests {
    /// Import-table rebinding of libc's allocator as called from Debian's zlib.
    @Suite struct ZlibImportTests {
        /// The data both zlib tests compress.
        static let sample = [UInt8]((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7 / 13) })

        /// Deflates ``sample`` in one call on an initialised stream; the stream stays open.
        static func deflateSample(_ stream: UnsafeMutablePointer<z_stream>) -> (
            status: Int32, output: [UInt8], count: Int
        ) {
            var output = [UInt8](repeating: 0, count: Int(compressBound(UInt(sample.count))))
            let status = sample.withUnsafeBufferPointer { source in
                output.withUnsafeMutableBufferPointer { target in
                    stream.pointee.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
                    stream.pointee.avail_in = UInt32(source.count)
                    stream.pointee.next_out = target.baseAddress
                    stream.pointee.avail_out = UInt32(target.count)
                    return deflate(stream, Z_FINISH)
                }
            }
            return (status, output, Int(stream.pointee.total_out))
        }

        /// Compresses ``sample`` from initialisation to end with the stream's allocator.
        static func compress(_ stream: UnsafeMutablePointer<z_stream>) -> Int32 {
            guard CZlib_deflateInit(stream, Z_BEST_COMPRESSION) == Z_OK else { return -100 }
            let status = deflateSample(stream).status
            _ = deflateEnd(stream)
            return status
        }

        @Test func mallocAndFreeAsCalledFromZlib() throws {
            // The allocator's own counts for this compression, through a counting allocator.
            ct_fix_zalloc_reset()
            let counted = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
            defer { counted.deallocate() }
            counted.initialize(to: z_stream())
            counted.pointee.zalloc = ct_fix_zalloc
            counted.pointee.zfree = ct_fix_zfree
            #expect(Self.compress(counted) == Z_STREAM_END)
            let expectedBytes = ct_fix_zalloc_bytes()

            // The same compression with zlib's default allocator, which calls libc's malloc
            // and free through zlib's import table. This thread's calls only: a test of another
            // suite may compress meanwhile (the README's batch example does), through the same
            // entries.
            let me = at_gettid()
            let state = Locked<(bytes: Int, blocks: Int, live: [UInt: Int])>((0, 0, [:]))
            let mallocs = try ImportTable.hook(
                symbol: "malloc", in: .object("libz.so.1"), signature: Signature("^vQ"), position: .after
            ) { call in
                guard at_gettid() == me else { return }
                let size = Int(call.argument(0, as: UInt.self))
                let block = call.returnValue(as: UInt.self)
                state.withLock { state in
                    state.bytes += size
                    state.blocks += 1
                    state.live[block] = size
                }
            }
            let frees = try ImportTable.hook(
                symbol: "free", in: .object("libz.so.1"), signature: Signature("v^v"), position: .before
            ) { call in
                guard at_gettid() == me else { return }
                let block = call.argument(0, as: UInt.self)
                _ = state.withLock { $0.live.removeValue(forKey: block) }
            }
            let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
            defer { stream.deallocate() }
            stream.initialize(to: z_stream())
            #expect(Self.compress(stream) == Z_STREAM_END)
            mallocs.remove()
            frees.remove()

            let seen = state.withLock { $0 }
            #expect(UInt64(seen.bytes) == expectedBytes)
            #expect(UInt64(seen.blocks) == ct_fix_zalloc_blocks())
            #expect(seen.live.isEmpty)
        }
    }
}
