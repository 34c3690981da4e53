/* The wrapper's first instructions: the common run (--library, --symbols, --json, --scope,
   --inline, then the program) made with system calls alone, before the C library starts.

   The C library's start in a statically linked program asks the processor for its features
   and cache sizes (cpuid, dozens of times), which a virtual machine traps: about 0.3 ms there,
   half of what the wrapper costs, paid before every traced program. The entry below
   (fhw_fast_entry, the executable's entry point) reads the arguments and the environment the
   kernel put on the stack and, when everything is as the common run needs it, executes the
   program itself with the variables main.c would have set. Anything else (another option, a
   value to refuse, a file missing, a program to warn about or that cannot be executed, a
   buffer too small) returns, and the entry goes on to the C library's own start (_start) with
   the stack and registers as the kernel left them: main.c then runs and says what it always
   said. Nothing here may call into the C library (not started yet: no thread pointer, no
   resolved IFUNCs): compiled freestanding, without the stack protector, and the object file
   must name no symbol it does not define (Scripts/tracer-test.sh checks). */

#include <stddef.h>
#include <stdint.h>

#include <asm/unistd.h>
#include <linux/fcntl.h>
#include <linux/stat.h>

/* The entry: the kernel's stack pointer (argc, argv, NULL, envp, NULL, auxv) to fhw_fast; when
   it returns, the same stack pointer and %rdx (the loader's finalizer, 0 for a static program)
   to the C library's start, which sees what the kernel left. */
__asm__(".text\n"
        ".globl fhw_fast_entry\n"
        ".type fhw_fast_entry, @function\n"
        "fhw_fast_entry:\n"
        "    mov %rsp, %rbx\n"
        "    mov %rdx, %r12\n"
        "    mov %rsp, %rdi\n"
        "    call fhw_fast\n"
        "    mov %rbx, %rsp\n"
        "    mov %r12, %rdx\n"
        "    jmp _start\n"
        ".size fhw_fast_entry, . - fhw_fast_entry\n");

// MARK: - System calls

static long fhf_call(long number, long a, long b, long c, long d) {
    long result;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return result;
}

static long fhf_call3(long number, long a, long b, long c) { return fhf_call(number, a, b, c, 0); }

/* struct stat as x86-64's kernel fills it (only the fields read here named). */
typedef struct {
    uint64_t dev, ino, nlink;
    uint32_t mode, uid, gid, pad0;
    uint64_t rdev;
    int64_t size, blksize, blocks;
    uint64_t times[6];
    int64_t unused[3];
} fhf_stat;

static int fhf_stat_of(const char *path, fhf_stat *status) {
    return fhf_call3(__NR_stat, (long)path, (long)status, 0) == 0;
}

static int fhf_access(const char *path, int mode) { return fhf_call3(__NR_access, (long)path, mode, 0) == 0; }

// MARK: - Text

static size_t fhf_length(const char *text) {
    size_t length = 0;
    while (text[length]) length++;
    return length;
}

static int fhf_equal(const char *a, const char *b) {
    while (*a && *a == *b) a++, b++;
    return *a == *b;
}

/* Whether `text` begins with `prefix`. */
static int fhf_begins(const char *text, const char *prefix) {
    while (*prefix && *text == *prefix) text++, prefix++;
    return !*prefix;
}

static const char *fhf_find(const char *text, char character) {
    for (; *text; text++) {
        if (*text == character) return text;
    }
    return NULL;
}

/* Memory for the strings and the environment made here: what the common run needs fits in a
   small part of it; a run that needs more is main.c's. */
static char fhf_arena[1 << 20];
static size_t fhf_used;

static char *fhf_take(size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (size > sizeof fhf_arena - fhf_used) return NULL;
    char *taken = fhf_arena + fhf_used;
    fhf_used += size;
    return taken;
}

/* A string made of up to three pieces (the first `a_length` bytes of `a`, then `b` and `c`);
   NULL when the arena is full. */
static char *fhf_join(const char *a, size_t a_length, const char *b, const char *c) {
    size_t b_length = fhf_length(b), c_length = fhf_length(c);
    char *joined = fhf_take(a_length + b_length + c_length + 1);
    if (!joined) return NULL;
    char *at = joined;
    for (size_t index = 0; index < a_length; index++) *at++ = a[index];
    while (*b) *at++ = *b++;
    while (*c) *at++ = *c++;
    *at = 0;
    return joined;
}

static char *fhf_concat(const char *a, const char *b, const char *c) { return fhf_join(a, fhf_length(a), b, c); }

// MARK: - The run

enum { FHF_MOST = 64 };

typedef struct {
    const char *libraries[FHF_MOST], *symbols[FHF_MOST];
    size_t library_count, symbol_count;
    const char *json, *scope;
    int inline_code;
    char **command;
} fhf_options;

/* Whether `value` holds a pattern (main.c's fhw_holds_pattern). */
static int fhf_holds_pattern(const char *value) {
    for (; *value; value++) {
        if (*value != ',' && *value != ' ' && (*value < '\t' || *value > '\r')) return 1;
    }
    return 0;
}

/* The options as main.c reads them, when they are only the common run's; 0 otherwise. */
static int fhf_parse(int argc, char **argv, fhf_options *options) {
    for (int index = 1; index < argc; index++) {
        const char *argument = argv[index];
        if (fhf_equal(argument, "--")) {
            options->command = argv + index + 1;
            break;
        }
        if (fhf_equal(argument, "--inline")) {
            options->inline_code = 1;
            continue;
        }
        static const char *const known[] = {"--library", "--symbols", "--json", "--scope"};
        int option = -1;
        const char *value = NULL;
        for (int candidate = 0; candidate < 4; candidate++) {
            size_t length = fhf_length(known[candidate]);
            if (fhf_begins(argument, known[candidate]) && (argument[length] == 0 || argument[length] == '=')) {
                option = candidate;
                if (argument[length] == '=') value = argument + length + 1;
            }
        }
        if (option < 0) {
            /* Another option (main.c's to take or refuse), or the program. */
            if (argument[0] == '-') return 0;
            options->command = argv + index;
            break;
        }
        if (!value) {
            if (index + 1 >= argc || fhf_equal(argv[index + 1], "--")) return 0;
            value = argv[++index];
        }
        if (!value[0]) return 0;
        switch (option) {
        case 0:
            if (fhf_find(value, ',') || options->library_count == FHF_MOST) return 0;
            options->libraries[options->library_count++] = value;
            break;
        case 1:
            if (!fhf_holds_pattern(value) || options->symbol_count == FHF_MOST) return 0;
            options->symbols[options->symbol_count++] = value;
            break;
        case 2: options->json = value; break;
        default:
            if (!fhf_equal(value, "program") && !fhf_equal(value, "main") && !fhf_equal(value, "all")) return 0;
            options->scope = value;
            break;
        }
    }
    return options->command && options->command[0] && options->library_count > 0;
}

/* `path` from the working directory (main.c's fhw_absolute); NULL when it cannot be made. */
static const char *fhf_absolute(const char *path) {
    if (path[0] == '/') return path;
    char *directory = fhf_take(4096);
    if (!directory || fhf_call3(__NR_getcwd, (long)directory, 4096, 0) <= 0 || directory[0] != '/') return NULL;
    return fhf_concat(directory, "/", path);
}

/* Whether the file `path` (absolute) can be written as main.c's fhw_refuse_unwritable finds:
   an existing file that is no directory and may be written, or a new one in a directory where
   a file can be made (one is made and removed). */
static int fhf_writable(const char *path) {
    for (const char *at = path; *at; at++) {
        if (at[0] == '%' && at[1] == 'p') return 0;
    }
    fhf_stat status;
    if (fhf_stat_of(path, &status)) return !S_ISDIR(status.mode) && fhf_access(path, 2 /* W_OK */);
    const char *slash = path;
    for (const char *at = path; *at; at++) {
        if (*at == '/') slash = at;
    }
    const char *directory = slash == path ? "/" : fhf_join(path, (size_t)(slash - path), "", "");
    if (!directory || !fhf_stat_of(directory, &status) || !S_ISDIR(status.mode) ||
        !fhf_access(directory, 3 /* W_OK | X_OK */)) {
        return 0;
    }
    uint64_t random = 0;
    if (fhf_call3(__NR_getrandom, (long)&random, sizeof random, 0) != (long)sizeof random) return 0;
    char suffix[7];
    for (int index = 0; index < 6; index++, random >>= 6) {
        suffix[index] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._"[random & 63];
    }
    suffix[6] = 0;
    char *probe = fhf_concat(directory, "/.ffi-hook-tracer-", suffix);
    if (!probe) return 0;
    long descriptor = fhf_call(__NR_open, (long)probe, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600, 0);
    if (descriptor < 0) return 0;
    fhf_call3(__NR_close, descriptor, 0, 0);
    fhf_call3(__NR_unlink, (long)probe, 0, 0);
    return 1;
}

/* The value of `name` in `environment`, NULL when it is not set. */
static const char *fhf_variable(char **environment, const char *name) {
    size_t length = fhf_length(name);
    for (char **entry = environment; *entry; entry++) {
        if (fhf_begins(*entry, name) && (*entry)[length] == '=') return *entry + length + 1;
    }
    return NULL;
}

/* The file execvp would execute for `command`, by the name it would give the kernel: itself
   when it holds a slash, else the first executable regular file of that name in PATH (an empty
   entry the bare name, in the working directory). NULL when none is, when PATH is unset, and
   where execvp would stop at an entry with an error (a loop of links, a name too long): main.c's
   to run, and say. `status` is the file's; a command with a slash that cannot be looked at is
   main.c's too. */
static const char *fhf_program(const char *command, char **environment, fhf_stat *status) {
    if (fhf_find(command, '/')) return fhf_stat_of(command, status) ? command : NULL;
    const char *path = fhf_variable(environment, "PATH");
    if (!path) return NULL;
    for (const char *start = path;;) {
        const char *end = fhf_find(start, ':');
        size_t length = end ? (size_t)(end - start) : fhf_length(start);
        const char *candidate = length ? fhf_join(start, length, "/", command) : command;
        if (!candidate) return NULL;
        long refused = fhf_call3(__NR_access, (long)candidate, 1 /* X_OK */, 0);
        if (refused == 0 && fhf_stat_of(candidate, status) && S_ISREG(status->mode)) return candidate;
        /* The errors execvp passes over (ENOENT, ENOTDIR, EACCES, ENODEV, ETIMEDOUT, ESTALE); a
           directory or FIFO, which execve refuses with EACCES, too. */
        if (refused != 0 && refused != -2 && refused != -20 && refused != -13 && refused != -19 && refused != -110 &&
            refused != -116) {
            return NULL;
        }
        if (!end) return NULL;
        start = end + 1;
    }
}

/* Whether the program at `path` is one main.c warns about or refuses: an ELF file without a
   program interpreter (linked statically, or a library), or one the loader runs in its secure
   mode (set-user-ID or set-group-ID to another, or with file capabilities), where LD_PRELOAD is
   ignored. A file that cannot be read is left to main.c too. `status` is the file's. */
static int fhf_unusual(const char *path, const fhf_stat *status) {
    if (!S_ISREG(status->mode)) return 1;
    if ((status->mode & S_ISUID) && status->uid != (uint32_t)fhf_call3(__NR_geteuid, 0, 0, 0)) return 1;
    if ((status->mode & S_ISGID) && status->gid != (uint32_t)fhf_call3(__NR_getegid, 0, 0, 0)) return 1;
    if (fhf_call(__NR_getxattr, (long)path, (long)"security.capability", 0, 0) >= 0) return 1;
    long descriptor = fhf_call3(__NR_open, (long)path, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
    if (descriptor < 0) return 1;
    unsigned char header[64];
    long read = fhf_call(__NR_pread64, descriptor, (long)header, sizeof header, 0);
    int elf = read >= 4 && header[0] == 0x7F && header[1] == 'E' && header[2] == 'L' && header[3] == 'F';
    /* A script, or no ELF file: main.c looks at it no further either. */
    int unusual = read < 0 || elf;
    if (elf && read == (long)sizeof header && header[4] == 2) {
        uint64_t table = 0;
        uint16_t size = 0, count = 0;
        for (int byte = 7; byte >= 0; byte--) table = table << 8 | header[0x20 + byte];
        size = (uint16_t)(header[0x36] | header[0x37] << 8);
        count = (uint16_t)(header[0x38] | header[0x39] << 8);
        unsigned char entries[4096];
        size_t bytes = (size_t)size * count;
        if (size >= 4 && count > 0 && bytes <= sizeof entries &&
            fhf_call(__NR_pread64, descriptor, (long)entries, (long)bytes, (long)table) == (long)bytes) {
            for (uint16_t index = 0; index < count; index++) {
                const unsigned char *entry = entries + (size_t)index * size;
                if ((entry[0] | entry[1] << 8 | entry[2] << 16 | (uint32_t)entry[3] << 24) == 3) unusual = 0;
            }
        }
    }
    fhf_call3(__NR_close, descriptor, 0, 0);
    return unusual;
}

/* Whether `entry` (NAME=VALUE) sets one of the variables main.c sets or removes: every copy
   of each goes, as main.c removes them before it sets one. */
static int fhf_replaced(const char *entry) {
    static const char *const names[] = {
        "FFI_HOOK_TRACER_LIBRARIES", "FFI_HOOK_TRACER_SYMBOLS",   "FFI_HOOK_TRACER_PID",
        "FFI_HOOK_TRACER_JSON",      "FFI_HOOK_TRACER_SCOPE",     "FFI_HOOK_TRACER_INLINE",
        "FFI_HOOK_TRACER_CHROME_TRACE", "FFI_HOOK_TRACER_FOLDED", "FFI_HOOK_TRACER_FLAMEGRAPH",
        "FFI_HOOK_TRACER_TIMELINE",  "FFI_HOOK_TRACER_EVENTS",    "FFI_HOOK_TRACER_LOG",
        "FFI_HOOK_TRACER_SIGNATURES", "FFI_HOOK_TRACER_LOG_OPENED", "FFI_HOOK_TRACER_OUTPUT",
        "LD_PRELOAD",
    };
    for (size_t index = 0; index < sizeof names / sizeof names[0]; index++) {
        size_t length = fhf_length(names[index]);
        if (fhf_begins(entry, names[index]) && entry[length] == '=') return 1;
    }
    return 0;
}

/* The list's items joined with commas, after `prefix`. */
static char *fhf_joined(const char *prefix, const char *const *items, size_t count) {
    char *joined = fhf_concat(prefix, "", "");
    for (size_t index = 0; joined && index < count; index++) joined = fhf_concat(joined, index ? "," : "", items[index]);
    return joined;
}

/* The common run, from the kernel's stack: returns when main.c is to run instead. */
void fhw_fast(long *stack) {
    int argc = (int)stack[0];
    char **argv = (char **)(stack + 1);
    char **environment = argv + argc + 1;
    /* (Static: zeroed by the kernel, where a local would be zeroed by a call of memset.) */
    static fhf_options options;
    if (!fhf_parse(argc, argv, &options)) return;
    if (options.json && (!(options.json = fhf_absolute(options.json)) || !fhf_writable(options.json))) return;

    /* The tracer's libraries, beside this executable. */
    char *executable = fhf_take(4097);
    if (!executable) return;
    long length = fhf_call3(__NR_readlink, (long)"/proc/self/exe", (long)executable, 4096);
    if (length <= 0) return;
    executable[length] = 0;
    size_t directory = 0;
    for (long index = 0; index < length; index++) {
        if (executable[index] == '/') directory = (size_t)index;
    }
    char *library = fhf_join(executable, directory, "/libFFIHookTracer.so", "");
    char *start = fhf_join(executable, directory, "/libFFIHookTracerStart.so", "");
    if (!library || !start || !fhf_access(library, 4 /* R_OK */) || !fhf_access(start, 4 /* R_OK */)) return;
    if (fhf_find(start, ' ') || fhf_find(start, ':')) return;

    fhf_stat status;
    const char *program = fhf_program(options.command[0], environment, &status);
    if (!program || fhf_unusual(program, &status)) return;

    /* The environment main.c makes: every entry but those it sets or removes, then its own. */
    size_t entries = 0;
    while (environment[entries]) entries++;
    char **made = (char **)(void *)fhf_take((entries + 16) * sizeof(char *));
    if (!made) return;
    size_t count = 0;
    for (size_t index = 0; index < entries; index++) {
        if (!fhf_replaced(environment[index])) made[count++] = environment[index];
    }
    char pid[24], digits[24];
    long process = fhf_call3(__NR_getpid, 0, 0, 0);
    int used = 0;
    do {
        digits[used++] = (char)('0' + process % 10);
        process /= 10;
    } while (process > 0);
    for (int index = 0; index < used; index++) pid[index] = digits[used - 1 - index];
    pid[used] = 0;
    const char *preload = fhf_variable(environment, "LD_PRELOAD");
    char *set[7];
    set[0] = fhf_joined("FFI_HOOK_TRACER_LIBRARIES=", options.libraries, options.library_count);
    /* (Set when empty, as main.c sets it.) */
    set[1] = fhf_joined("FFI_HOOK_TRACER_SYMBOLS=", options.symbols, options.symbol_count);
    set[2] = fhf_concat("FFI_HOOK_TRACER_PID=", pid, "");
    set[3] = options.json ? fhf_concat("FFI_HOOK_TRACER_JSON=", options.json, "") : (char *)"";
    set[4] = options.scope ? fhf_concat("FFI_HOOK_TRACER_SCOPE=", options.scope, "") : (char *)"";
    set[5] = options.inline_code ? (char *)"FFI_HOOK_TRACER_INLINE=1" : (char *)"";
    set[6] = fhf_concat("LD_PRELOAD=", start, preload && preload[0] ? ":" : "");
    if (set[6] && preload && preload[0]) set[6] = fhf_concat(set[6], preload, "");
    for (size_t index = 0; index < 7; index++) {
        if (!set[index]) return;
        if (set[index][0]) made[count++] = set[index];
    }
    made[count] = NULL;
    /* Executed: this process becomes the program (its ID is FFI_HOOK_TRACER_PID's). Refused
       (a script without #!, a file that cannot be executed): main.c tries as execvp does and
       says why it cannot. */
    fhf_call3(__NR_execve, (long)program, (long)options.command, (long)made);
}
