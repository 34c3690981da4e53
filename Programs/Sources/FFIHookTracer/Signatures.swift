internal import CTracerSupport
internal import FFIHook

/// A function's signature as the call log decodes it: a type encoding (``Signature``: the
/// return type, then the arguments), whether more arguments follow them (a variadic
/// function's), and for a built-in one, which `char *` argument's length another argument
/// gives (`write`'s buffer, whose length is its third argument: it holds bytes, not a string)
/// and which buffer argument the function fills, returning its length (`read`'s).
struct LogSignature: Sendable {
    /// The return type and the arguments.
    let signature: Signature
    /// Whether more arguments follow the ones the signature names (`, ...` in the log).
    let isVariadic: Bool
    /// A string argument's index and the index of the argument that gives its length.
    let stringLength: (string: Int, length: Int)?
    /// The index of a buffer argument that the function fills, returning how many bytes it
    /// filled: printed as the call returns.
    let filled: Int?

    /// Reads `encoding`: a type encoding, followed by `...` for a variadic function.
    init(
        _ encoding: String, stringLength: (string: Int, length: Int)? = nil, filled: Int? = nil
    ) throws(EncodingError) {
        isVariadic = encoding.hasSuffix("...")
        signature = try Signature(isVariadic ? String(encoding.dropLast(3)) : encoding)
        self.stringLength = stringLength
        self.filled = filled
    }

    /// The signatures of common C library functions, from their prototypes (x86-64: `long` and
    /// `size_t` are `q` and `Q`, 8 bytes; `FILE *` and other structures' addresses `^v`). A
    /// buffer that `read`, `pread`, `recv` or `readlink` fills is printed as the call returns,
    /// as many bytes as it returned (its address when it failed), as ltrace prints it.
    static let builtIn: [String: LogSignature] = {
        var table: [String: LogSignature] = [:]
        /// A buffer argument that the function fills, returning its length (`-1` in a pair).
        func filledAt(_ index: Int) -> (Int, Int) { (index, -1) }
        // name, encoding (`...`: variadic), and the string whose length an argument gives, or
        // the buffer it fills.
        let entries: [(String, String, (Int, Int)?)] = [
            // Files and descriptors.
            ("open", "i*i...", nil), ("open64", "i*i...", nil), ("openat", "ii*i...", nil),
            ("creat", "i*I", nil), ("close", "ii", nil), ("read", "qi^vQ", filledAt(1)), ("write", "qi*Q", (1, 2)),
            ("pread", "qi^vQq", filledAt(1)), ("pread64", "qi^vQq", filledAt(1)), ("pwrite", "qi*Qq", (1, 2)),
            ("pwrite64", "qi*Qq", (1, 2)), ("lseek", "qiqi", nil), ("lseek64", "qiqi", nil), ("dup", "ii", nil),
            ("dup2", "iii", nil), ("pipe", "i^i", nil), ("fsync", "ii", nil), ("unlink", "i*", nil),
            ("access", "i*i", nil), ("mkdir", "i*I", nil), ("rmdir", "i*", nil), ("chdir", "i*", nil),
            ("rename", "i**", nil), ("stat", "i*^v", nil), ("fstat", "ii^v", nil), ("lstat", "i*^v", nil),
            ("ioctl", "iiQ...", nil), ("fcntl", "iii...", nil),
            // Memory.
            ("malloc", "^vQ", nil), ("calloc", "^vQQ", nil), ("realloc", "^v^vQ", nil), ("free", "v^v", nil),
            ("aligned_alloc", "^vQQ", nil), ("posix_memalign", "i^^vQQ", nil), ("memcpy", "^v^v^vQ", nil),
            ("memmove", "^v^v^vQ", nil), ("memset", "^v^viQ", nil), ("memcmp", "i^v^vQ", nil),
            ("memchr", "^v^viQ", nil), ("mmap", "^v^vQiiiq", nil), ("munmap", "i^vQ", nil),
            ("mprotect", "i^vQi", nil),
            // Strings.
            ("strlen", "Q*", nil), ("strnlen", "Q*Q", nil), ("strcmp", "i**", nil), ("strncmp", "i**Q", nil),
            ("strcasecmp", "i**", nil), ("strcpy", "^v^v*", nil), ("strncpy", "^v^v*Q", nil),
            ("strcat", "*^v*", nil), ("strdup", "**", nil), ("strndup", "**Q", nil), ("strchr", "**i", nil),
            ("strrchr", "**i", nil), ("strstr", "***", nil), ("strtol", "q*^vi", nil), ("strtoul", "Q*^vi", nil),
            ("strtod", "d*^v", nil), ("atoi", "i*", nil), ("atol", "q*", nil), ("atof", "d*", nil),
            ("strerror", "*i", nil),
            // Standard input and output.
            ("fopen", "^v**", nil), ("fdopen", "^vi*", nil), ("fclose", "i^v", nil), ("fflush", "i^v", nil),
            ("fread", "Q^vQQ^v", nil), ("fwrite", "Q^vQQ^v", nil), ("fgets", "*^vi^v", nil),
            ("fputs", "i*^v", nil), ("fputc", "ii^v", nil), ("fgetc", "i^v", nil), ("puts", "i*", nil),
            ("putchar", "ii", nil), ("printf", "i*...", nil), ("fprintf", "i^v*...", nil),
            ("sprintf", "i^v*...", nil), ("snprintf", "i^vQ*...", nil), ("perror", "v*", nil),
            ("fileno", "i^v", nil),
            // Processes and the environment.
            ("getenv", "**", nil), ("setenv", "i**i", nil), ("unsetenv", "i*", nil), ("system", "i*", nil),
            ("exit", "vi", nil), ("_exit", "vi", nil), ("abort", "v", nil), ("getpid", "i", nil),
            ("getppid", "i", nil), ("fork", "i", nil), ("execve", "i*^v^v", nil), ("execvp", "i*^v", nil),
            ("waitpid", "ii^ii", nil), ("kill", "iii", nil), ("sleep", "II", nil), ("usleep", "iI", nil),
            ("nanosleep", "i^v^v", nil), ("time", "q^v", nil), ("dlopen", "^v*i", nil),
            ("dlsym", "^v^v*", nil), ("dlclose", "i^v", nil),
            // Threads.
            ("pthread_create", "i^v^v^?^v", nil), ("pthread_join", "iQ^^v", nil),
            ("pthread_mutex_lock", "i^v", nil), ("pthread_mutex_unlock", "i^v", nil),
            // Sockets.
            ("socket", "iiii", nil), ("connect", "ii^vI", nil), ("bind", "ii^vI", nil), ("listen", "iii", nil),
            ("accept", "ii^v^I", nil), ("send", "qi*Qi", (1, 2)), ("recv", "qi^vQi", filledAt(1)),
            ("readlink", "q*^vQ", filledAt(1)),
            // The maths library.
            ("sqrt", "dd", nil), ("pow", "ddd", nil), ("sin", "dd", nil), ("cos", "dd", nil), ("exp", "dd", nil),
            ("log", "dd", nil), ("floor", "dd", nil), ("ceil", "dd", nil), ("fabs", "dd", nil),
        ]
        for (name, encoding, length) in entries {
            // The table is written here: an encoding that does not parse is a mistake in it.
            let fills = length.flatMap { $0.1 < 0 ? $0.0 : nil }
            let bounded = length.flatMap { $0.1 < 0 ? nil : (string: $0.0, length: $0.1) }
            guard let signature = try? LogSignature(encoding, stringLength: bounded, filled: fills) else {
                preconditionFailure("built-in signature \(name)=\(encoding) does not parse")
            }
            table[name] = signature
        }
        return table
    }()

    /// Reads `name=encoding` entries separated by newlines or `;`: the signatures given on the
    /// command line (`--signature`, `--signatures FILE`). Entries that cannot be read are
    /// described in `problems`.
    static func parse(_ text: String, _ problems: inout [String]) -> [String: LogSignature] {
        var table: [String: LogSignature] = [:]
        for entry in text.split(whereSeparator: { $0 == "\n" || $0 == ";" }) {
            let line = String(entry).trimmingCharacters
            if line.isEmpty || line.hasPrefix("#") { continue }
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty else {
                problems.append("signature \(line) is not NAME=ENCODING; ignored")
                continue
            }
            do {
                table[parts[0].trimmingCharacters] = try LogSignature(parts[1].trimmingCharacters)
            } catch {
                let name = parts[0].trimmingCharacters
                problems.append(
                    "signature \(line): \(error); "
                        + (builtIn[name] == nil
                            ? "the function's calls are logged raw" : "its built-in signature is used instead"))
            }
        }
        return table
    }

    /// How the log prints this signature's calls of `name`: each argument where the System V
    /// x86-64 convention puts it (integers and pointers in six registers, floating-point
    /// numbers in eight vector registers, the rest on the stack in order), up to the first one
    /// it cannot decode (a structure or union passed by value, a `long double`, a 128-bit
    /// integer), after which `...` stands for the rest; such a result is printed `?`.
    func description(named name: UnsafePointer<CChar>, length: Int) -> fht_log_function {
        var function = fht_log_function()
        function.name = name
        function.name_length = UInt32(length)
        function.result =
            Self.value(signature.returnType)
            ?? fht_log_value(kind: UInt8(FHT_LOG_UNKNOWN), size: 0, source: 0, length: UInt8(FHT_LOG_NO_LENGTH))
        // A structure returned in memory: its address comes first, in rdi.
        var integers = signature.returnType.isAggregate && signature.returnType.size > 16 ? 1 : 0
        var vectors = 0
        var stack = 0
        var values: [fht_log_value] = []
        var more = isVariadic
        for type in signature.argumentTypes {
            guard values.count < Int(FHT_LOG_MOST_ARGUMENTS), var value = Self.value(type), value.kind != FHT_LOG_VOID
            else {
                more = true
                break
            }
            if value.kind == FHT_LOG_FLOAT || value.kind == FHT_LOG_DOUBLE {
                if vectors < 8 {
                    value.source = UInt8(Int(FHT_LOG_VECTOR_REGISTER) + vectors)
                    vectors += 1
                    function.flags |= UInt8(FHT_LOG_VECTORS)
                } else {
                    value.source = UInt8(Int(FHT_LOG_STACK_WORD) + stack)
                    stack += 1
                }
            } else if integers < 6 {
                value.source = UInt8(Int(FHT_LOG_INTEGER_REGISTER) + integers)
                integers += 1
            } else {
                value.source = UInt8(Int(FHT_LOG_STACK_WORD) + stack)
                stack += 1
            }
            values.append(value)
        }
        if let (string, length) = stringLength, string < values.count, length < values.count {
            values[string].length = UInt8(length)
        }
        if let filled, filled < values.count, values[filled].kind == FHT_LOG_POINTER {
            values[filled].kind = UInt8(FHT_LOG_FILLED)
        }
        function.count = UInt8(values.count)
        if more { function.flags |= UInt8(FHT_LOG_MORE) }
        withUnsafeMutableBytes(of: &function.arguments) { arguments in
            for (index, value) in values.enumerated() {
                arguments.storeBytes(
                    of: value, toByteOffset: index * MemoryLayout<fht_log_value>.stride, as: fht_log_value.self)
            }
        }
        return function
    }

    /// The log's description of raw calls: the six integer argument registers and rax.
    static func rawDescription(named name: UnsafePointer<CChar>, length: Int) -> fht_log_function {
        var function = fht_log_function()
        function.name = name
        function.name_length = UInt32(length)
        function.flags = UInt8(FHT_LOG_RAW)
        return function
    }

    /// How a value of `type` is printed; nil for a type the log cannot decode.
    private static func value(_ type: CType) -> fht_log_value? {
        func make(_ kind: Int, size: Int = 8) -> fht_log_value {
            fht_log_value(kind: UInt8(kind), size: UInt8(size), source: 0, length: UInt8(FHT_LOG_NO_LENGTH))
        }
        switch type.kind {
        case .void: return make(FHT_LOG_VOID)
        case .primitive(let primitive):
            switch primitive {
            case .char, .short, .int, .long, .longLong: return make(FHT_LOG_SIGNED, size: type.size)
            case .unsignedChar, .unsignedShort, .unsignedInt, .unsignedLong, .unsignedLongLong:
                return make(FHT_LOG_UNSIGNED, size: type.size)
            case .bool: return make(FHT_LOG_BOOL, size: 1)
            case .float: return make(FHT_LOG_FLOAT, size: 4)
            case .double: return make(FHT_LOG_DOUBLE)
            case .int128, .unsignedInt128, .longDouble: return nil
            }
        case .cString: return make(FHT_LOG_STRING)
        case .pointer, .object, .block, .objectClass, .selector, .unknown, .array: return make(FHT_LOG_POINTER)
        case .structure, .union, .complex, .bitField: return nil
        }
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    fileprivate var trimmingCharacters: String {
        var characters = Substring(self)
        while characters.first == " " || characters.first == "\t" { characters.removeFirst() }
        while characters.last == " " || characters.last == "\t" { characters.removeLast() }
        return String(characters)
    }
}
