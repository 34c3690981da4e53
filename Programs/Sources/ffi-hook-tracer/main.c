/* ffi-hook-tracer: runs a program with the FFIHookTracer library preloaded, which counts the
   calls and time of the functions the options select and prints a table at exit.

       ffi-hook-tracer [--library NAME]... [--symbols PATTERN]... [--json FILE]
                       [--scope program|main|all] [--inline] -- PROGRAM [ARGUMENT]...
       ffi-hook-tracer [options] --pid PID [--duration SECONDS]

   The options become the environment variables the library reads (see its
   TracerConfiguration); the library is found beside this executable. Written in C: it runs
   before every traced program, where a Swift program's runtime alone takes about 0.8 ms to
   start (linked in statically; more as shared libraries) and a C program's 0.1 ms. The common
   run does not reach this file: the executable's entry point is CTracerFast's (fast.c), which
   executes the program before the C library starts and hands every other run, unchanged, to the
   C library's start and main below, which then says what it always said. With --pid
   it executes ffi-hook-tracer-join, beside it, which joins the running process (ptrace, not
   timed), the options in the environment as for a started program. */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "usage.h"

// MARK: - Messages

/* Writes `length` bytes of `text` to `descriptor`, all of them. */
static void fhw_write(int descriptor, const char *text, size_t length) {
    while (length > 0) {
        ssize_t written = write(descriptor, text, length);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return;
        text += written;
        length -= (size_t)written;
    }
}

static void fhw_put(int descriptor, const char *text) { fhw_write(descriptor, text, strlen(text)); }

/* Writes "ffi-hook-tracer: " and the message (a printf format and its arguments) to standard
   error, without a line's end. */
__attribute__((format(printf, 1, 0))) static void fhw_say(const char *format, va_list arguments) {
    char message[16384];
    vsnprintf(message, sizeof message, format, arguments);
    fhw_put(2, "ffi-hook-tracer: ");
    fhw_put(2, message);
}

/* Prints the message (a printf format) and the usage lines to standard error, exits with 64. */
__attribute__((noreturn, format(printf, 1, 2))) static void fhw_fail(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    fhw_say(format, arguments);
    va_end(arguments);
    fhw_put(2, "\n" FHW_SYNOPSIS "\nffi-hook-tracer --help describes each option.\n");
    exit(64);
}

/* Prints the message (a printf format) to standard error and exits with 127: the program cannot
   be run traced, though the options are right (the tracer's files are missing or unusable). */
__attribute__((noreturn, format(printf, 1, 2))) static void fhw_cannot_run(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    fhw_say(format, arguments);
    va_end(arguments);
    fhw_put(2, "\n");
    exit(127);
}

/* `first` followed by `second` (and `third`), in memory of its own; exits when memory runs out. */
static char *fhw_join3(const char *first, const char *second, const char *third) {
    size_t a = strlen(first), b = strlen(second), c = strlen(third);
    char *joined = malloc(a + b + c + 1);
    if (!joined) {
        fhw_put(2, "ffi-hook-tracer: out of memory\n");
        exit(1);
    }
    memcpy(joined, first, a);
    memcpy(joined + a, second, b);
    memcpy(joined + a + b, third, c + 1);
    return joined;
}

static char *fhw_join(const char *first, const char *second) { return fhw_join3(first, second, ""); }

// MARK: - Lists

/* A growing list of strings. */
typedef struct {
    const char **items;
    size_t count, capacity;
} fhw_list;

static void fhw_append(fhw_list *list, const char *item) {
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 8;
        const char **grown = realloc(list->items, capacity * sizeof *grown);
        if (!grown) {
            fhw_put(2, "ffi-hook-tracer: out of memory\n");
            exit(1);
        }
        list->items = grown;
        list->capacity = capacity;
    }
    list->items[list->count++] = item;
}

/* The list's items joined with `separator` ("" for none). */
static char *fhw_joined(const fhw_list *list, const char *separator) {
    char *result = fhw_join("", "");
    for (size_t index = 0; index < list->count; index++) {
        char *next = fhw_join3(result, index ? separator : "", list->items[index]);
        free(result);
        result = next;
    }
    return result;
}

// MARK: - Values

/* `path` from the directory the tracer was started in: each traced process writes its files at
   its exit, from whatever directory it is in then (a shell's `cd`). */
static const char *fhw_absolute(const char *path) {
    if (path[0] == '/') return path;
    char *directory = getcwd(NULL, 0);
    if (!directory) return path;
    return fhw_join3(directory, "/", path);
}

/* Exits with the usage when an option's value is empty (`--library ''`, `--json=`): an empty
   value would otherwise read as no option at all (every function, no file). */
static void fhw_refuse_empty(const char *value, const char *option) {
    if (!value[0]) fhw_fail("%s needs a value: it was given an empty one", option);
}

/* The whole of `text` as a decimal integer (an optional sign, then digits); 0 when it is not one. */
static int fhw_integer(const char *text, long long *value) {
    const char *digits = text + (text[0] == '+' || text[0] == '-');
    if (*digits < '0' || *digits > '9') return 0;
    errno = 0;
    char *end = NULL;
    long long parsed = strtoll(text, &end, 10);
    if (errno || !end || *end) return 0;
    *value = parsed;
    return 1;
}

/* The whole of `text` as a number (no leading space); 0 when it is not one. */
static int fhw_number(const char *text, double *value) {
    if (!text[0] || text[0] == ' ' || (text[0] >= '\t' && text[0] <= '\r')) return 0;
    char *end = NULL;
    double parsed = strtod(text, &end);
    if (!end || *end) return 0;
    *value = parsed;
    return 1;
}

/* The text of the file at `path` (a file of /proc too, whose size reads as 0), NULL when it
   cannot be read. */
static char *fhw_contents(const char *path) {
    int descriptor = open(path, O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) return NULL;
    size_t length = 0, capacity = 65536;
    char *bytes = malloc(capacity + 1);
    while (bytes) {
        if (capacity - length < 65536) {
            char *grown = realloc(bytes, capacity * 2 + 1);
            if (!grown) break;
            bytes = grown;
            capacity *= 2;
        }
        ssize_t count = read(descriptor, bytes + length, capacity - length);
        if (count < 0 && errno == EINTR) continue;
        if (count < 0) {
            int error = errno;
            free(bytes);
            close(descriptor);
            errno = error;
            return NULL;
        }
        if (count == 0) {
            bytes[length] = 0;
            close(descriptor);
            return bytes;
        }
        length += (size_t)count;
    }
    free(bytes);
    close(descriptor);
    errno = ENOMEM;
    return NULL;
}

// MARK: - Options

/* Each output option built from calls' begins and ends, and the variable the library reads. */
static const struct {
    const char *option, *variable;
} fhw_event_options[] = {
    {"--chrome-trace", "FFI_HOOK_TRACER_CHROME_TRACE"}, {"--folded", "FFI_HOOK_TRACER_FOLDED"},
    {"--flamegraph", "FFI_HOOK_TRACER_FLAMEGRAPH"},     {"--timeline", "FFI_HOOK_TRACER_TIMELINE"},
    {"--events", "FFI_HOOK_TRACER_EVENTS"},
};
enum { FHW_EVENT_OPTIONS = sizeof fhw_event_options / sizeof fhw_event_options[0] };

/* The variables the library reads the log's file and the signatures from (the signatures'
   entries separated by line breaks). */
static const char fhw_log_variable[] = "FFI_HOOK_TRACER_LOG";
static const char fhw_signatures_variable[] = "FFI_HOOK_TRACER_SIGNATURES";

/* The options, parsed by hand. */
typedef struct {
    fhw_list libraries, symbols;
    const char *json, *scope;
    int inline_code;
    char **command;
    /* The output options' variables and values, in the order given. */
    fhw_list event_variables, event_values;
    /* The log's file (the last --log) and the signatures given, in order. */
    const char *log;
    fhw_list signatures;
    /* The process to join (--pid), 0 for none; how long to trace it (--duration), NULL for
       until interrupted. */
    long long pid;
    const char *duration;
} fhw_options;

/* The value of the option `name`: `inline_value` (--name=VALUE) or the next argument, which may
   begin with a dash (a file named so), but is not `--`, which ends the options. */
static const char *fhw_value(const char *name, const char *inline_value, int argc, char **argv, int *index) {
    if (inline_value) return inline_value;
    if (*index + 1 >= argc) fhw_fail("%s needs a value", name);
    if (strcmp(argv[*index + 1], "--") == 0) fhw_fail("%s needs a value: -- ends the options", name);
    return argv[++*index];
}

/* Whether `value` holds a pattern: a comma-separated piece that is not all spaces. */
static int fhw_holds_pattern(const char *value) {
    for (const char *character = value; *character; character++) {
        if (*character != ',' && *character != ' ' && (*character < '\t' || *character > '\r')) return 1;
    }
    return 0;
}

/* Exits with the usage when the file `path` (absolute) of an output option could not be
   written: its directory is missing or not writable, or the file is a directory or not
   writable. With `%p` in the name, only the directory is looked at. */
static void fhw_refuse_unwritable(const char *path, const char *option) {
    const char *slash = strrchr(path, '/');
    char *directory = strndup(path, slash ? (size_t)(slash - path) : 0);
    if (!directory) fhw_fail("out of memory");
    const char *checked = directory[0] ? directory : "/";
    struct stat status;
    if (!strstr(path, "%p") && stat(path, &status) == 0) {
        if (S_ISDIR(status.st_mode)) fhw_fail("cannot write %s %s: it is a directory", option, path);
        if (access(path, W_OK) != 0) fhw_fail("cannot write %s %s: %s", option, path, strerror(errno));
        free(directory);
        return;
    }
    if (stat(checked, &status) != 0 || !S_ISDIR(status.st_mode)) {
        fhw_fail("cannot write %s %s: its directory %s does not exist", option, path, directory);
    }
    if (access(checked, W_OK | X_OK) != 0) {
        fhw_fail("cannot write %s %s: %s (in %s)", option, path, strerror(errno), directory);
    }
    /* A directory whose file system may still refuse new files (/proc, /sys, a read-only
       mount; root passes the access check anywhere): a file made in it and removed at once. */
    char *probe = fhw_join(directory, "/.ffi-hook-tracer-XXXXXX");
    int descriptor = mkstemp(probe);
    if (descriptor < 0) {
        fhw_fail("cannot write %s %s: no file can be made in %s (%s)", option, path, directory, strerror(errno));
    }
    close(descriptor);
    unlink(probe);
    free(probe);
    free(directory);
}

/* Whether the directory part of the absolute path `path` (up to its last slash) and that of
   `other` are one directory. */
static int fhw_same_directory(const char *path, const char *other) {
    char *first = strndup(path, (size_t)(strrchr(path, '/') - path));
    char *second = strndup(other, (size_t)(strrchr(other, '/') - other));
    if (!first || !second) fhw_fail("out of memory");
    struct stat one, two;
    int same = stat(first[0] ? first : "/", &one) == 0 && stat(second[0] ? second : "/", &two) == 0 &&
               one.st_dev == two.st_dev && one.st_ino == two.st_ino;
    free(first);
    free(second);
    return same;
}

/* Whether the absolute paths `a` and `b` name one file: the same path, one existing file by two
   paths (a link, `..`), or one name in one directory reached by two paths. */
static int fhw_same_file(const char *a, const char *b) {
    if (strcmp(a, b) == 0) return 1;
    struct stat first, second;
    if (stat(a, &first) == 0 && stat(b, &second) == 0) {
        return first.st_dev == second.st_dev && first.st_ino == second.st_ino;
    }
    return strcmp(strrchr(a, '/'), strrchr(b, '/')) == 0 && fhw_same_directory(a, b);
}

/* Exits with the usage when two output options name one file: each writes a whole file of its
   own at the end, and the last one written would be all the file held. An option given twice
   writes its last file only. */
static void fhw_refuse_shared_files(const fhw_options *options) {
    const char *paths[FHW_EVENT_OPTIONS + 2];
    const char *names[FHW_EVENT_OPTIONS + 2];
    size_t count = 0;
    if (options->json) {
        paths[count] = options->json;
        names[count++] = "--json";
    }
    for (int event = 0; event < FHW_EVENT_OPTIONS; event++) {
        if (strcmp(fhw_event_options[event].option, "--events") == 0) continue;
        const char *last = NULL;
        for (size_t index = 0; index < options->event_variables.count; index++) {
            if (strcmp(fhw_event_options[event].variable, options->event_variables.items[index]) == 0) {
                last = options->event_values.items[index];
            }
        }
        if (!last) continue;
        paths[count] = last;
        names[count++] = fhw_event_options[event].option;
    }
    if (options->log) {
        paths[count] = options->log;
        names[count++] = "--log";
    }
    for (size_t first = 0; first < count; first++) {
        for (size_t second = first + 1; second < count; second++) {
            if (fhw_same_file(paths[first], paths[second])) {
                fhw_fail("%s and %s name the same file, %s: give each a file of its own", names[first],
                         names[second], paths[second]);
            }
        }
    }
}

static void fhw_parse(int argc, char **argv, fhw_options *options) {
    static char *no_command[] = {NULL};
    options->command = no_command;
    for (int index = 1; index < argc; index++) {
        const char *argument = argv[index];
        if (strcmp(argument, "--") == 0) {
            options->command = argv + index + 1;
            break;
        }
        if (strcmp(argument, "-h") == 0 || strcmp(argument, "--help") == 0) {
            fhw_put(1, FHW_SYNOPSIS);
            fhw_put(1, fhw_usage_rest);
            exit(0);
        }
        if (strcmp(argument, "--inline") == 0) {
            options->inline_code = 1;
            continue;
        }
        /* --name VALUE and --name=VALUE. */
        const char *equals = strchr(argument, '=');
        char *name = strndup(argument, equals ? (size_t)(equals - argument) : strlen(argument));
        if (!name) fhw_fail("out of memory");
        const char *inline_value = equals ? equals + 1 : NULL;
        int event = -1;
        for (int candidate = 0; candidate < FHW_EVENT_OPTIONS; candidate++) {
            if (strcmp(name, fhw_event_options[candidate].option) == 0) event = candidate;
        }
        if (event >= 0) {
            const char *value = fhw_value(name, inline_value, argc, argv, &index);
            fhw_refuse_empty(value, name);
            int is_count = strcmp(name, "--events") == 0;
            /* The bounds the library takes (TraceEvents.maximumCapacity: 1 << 28). */
            long long count = 0;
            if (is_count && (!fhw_integer(value, &count) || count < 2 || count > 268435456)) {
                fhw_fail("--events takes a number of events from 2 to 268435456");
            }
            fhw_append(&options->event_variables, fhw_event_options[event].variable);
            fhw_append(&options->event_values, is_count ? value : fhw_absolute(value));
            continue;
        }
        if (strcmp(name, "--log") == 0 || strcmp(name, "--signature") == 0 || strcmp(name, "--signatures") == 0) {
            const char *value = fhw_value(name, inline_value, argc, argv, &index);
            fhw_refuse_empty(value, name);
            if (strcmp(name, "--log") == 0) {
                options->log = fhw_absolute(value);
            } else if (strcmp(name, "--signature") == 0) {
                size_t length = strlen(value);
                if (!strchr(value, '=') || value[0] == '=' || value[length - 1] == '=') {
                    fhw_fail("--signature takes NAME=ENCODING, with neither empty, not %s", value);
                }
                fhw_append(&options->signatures, value);
            } else {
                char *text = fhw_contents(value);
                if (!text) fhw_fail("cannot read --signatures %s: %s", value, strerror(errno));
                fhw_append(&options->signatures, text);
            }
            continue;
        }
        static const char *const known[] = {"--library", "--symbols", "--json", "--scope", "--pid", "--duration"};
        int option = -1;
        for (int candidate = 0; candidate < (int)(sizeof known / sizeof known[0]); candidate++) {
            if (strcmp(name, known[candidate]) == 0) option = candidate;
        }
        if (option < 0) {
            if (argument[0] == '-') fhw_fail("unknown option %s", argument);
            options->command = argv + index;
            break;
        }
        const char *value = fhw_value(name, inline_value, argc, argv, &index);
        fhw_refuse_empty(value, name);
        switch (option) {
        case 0: fhw_append(&options->libraries, value); break;
        case 1:
            /* An empty pattern would select every function (what leaving --symbols out does). */
            if (!fhw_holds_pattern(value)) {
                fhw_fail("--symbols needs a pattern: '%s' holds none (leave it out to trace every function)", value);
            }
            fhw_append(&options->symbols, value);
            break;
        case 2: options->json = fhw_absolute(value); break;
        case 3:
            if (strcmp(value, "program") != 0 && strcmp(value, "main") != 0 && strcmp(value, "all") != 0) {
                fhw_fail("--scope is program, main or all");
            }
            options->scope = value;
            break;
        case 4: {
            long long pid = 0;
            if (!fhw_integer(value, &pid) || pid <= 0 || pid > INT32_MAX) fhw_fail("--pid needs a process ID");
            options->pid = pid;
            break;
        }
        default: {
            double seconds = 0;
            if (!fhw_number(value, &seconds) || !(seconds > 0)) fhw_fail("--duration needs a number of seconds above 0");
            if (!(seconds < 1e9)) fhw_fail("--duration takes fewer than 1000000000 seconds (31 years)");
            options->duration = value;
            break;
        }
        }
        free(name);
    }
    int has_command = options->command[0] != NULL;
    if (options->pid && has_command) fhw_fail("--pid joins a running process: give no program to run");
    if (options->duration && !options->pid) fhw_fail("--duration goes with --pid");
    if (options->pid && options->log) fhw_fail("--log does not work with --pid yet: a joined process writes no call log");
    if (!options->log && options->signatures.count) {
        fhw_fail("--signature and --signatures say how --log shows arguments: give --log FILE too");
    }
    if (!has_command && !options->pid) fhw_fail("no program to run");
    if (!options->libraries.count) fhw_fail("no --library: name at least one library to trace");
    for (size_t index = 0; index < options->libraries.count; index++) {
        if (strchr(options->libraries.items[index], ',')) fhw_fail("a library name cannot hold a comma");
    }
    /* The files are written at the end of the run: a path that cannot be written is said now,
       not after the program has run (or the process has been traced). */
    if (options->json) fhw_refuse_unwritable(options->json, "--json");
    for (size_t index = 0; index < options->event_variables.count; index++) {
        for (int event = 0; event < FHW_EVENT_OPTIONS; event++) {
            if (strcmp(fhw_event_options[event].variable, options->event_variables.items[index]) == 0 &&
                strcmp(fhw_event_options[event].option, "--events") != 0) {
                fhw_refuse_unwritable(options->event_values.items[index], fhw_event_options[event].option);
            }
        }
    }
    if (options->log) fhw_refuse_unwritable(options->log, "--log");
    fhw_refuse_shared_files(options);
}

// MARK: - The program

/* Whether the program at `path` runs in the loader's secure mode, where it ignores LD_PRELOAD:
   set-user-ID to another user, set-group-ID to another group, or with file capabilities. */
static int fhw_runs_securely(const char *path) {
    struct stat status;
    if (stat(path, &status) != 0) return 0;
    if ((status.st_mode & S_ISUID) && status.st_uid != geteuid()) return 1;
    if ((status.st_mode & S_ISGID) && status.st_gid != getegid()) return 1;
    return getxattr(path, "security.capability", NULL, 0) >= 0;
}

/* What the ELF file at `path` is when no loader runs in it: 1 a program linked statically, 2 a
   shared library (no entry point); 0 for one with a program interpreter, or no ELF file. */
static int fhw_without_loader(const char *path) {
    /* (Not blocking: an executable FIFO would wait for a writer.) */
    int descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (descriptor < 0) return 0;
    struct stat status;
    if (fstat(descriptor, &status) != 0 || !S_ISREG(status.st_mode)) {
        close(descriptor);
        return 0;
    }
    unsigned char header[64];
    int kind = 0;
    if (pread(descriptor, header, sizeof header, 0) == (ssize_t)sizeof header && memcmp(header, "\177ELF", 4) == 0 &&
        header[4] == 2) {
        uint64_t table = 0, entry = 0;
        uint16_t size = 0, count = 0, type = 0;
        memcpy(&table, header + 0x20, sizeof table);
        memcpy(&size, header + 0x36, sizeof size);
        memcpy(&count, header + 0x38, sizeof count);
        memcpy(&type, header + 0x10, sizeof type);
        memcpy(&entry, header + 0x18, sizeof entry);
        unsigned char *entries = size >= 4 && count > 0 && count < 4096 ? malloc((size_t)size * count) : NULL;
        if (entries && pread(descriptor, entries, (size_t)size * count, (off_t)table) == (ssize_t)((size_t)size * count)) {
            int interpreted = 0;
            for (uint16_t index = 0; index < count; index++) {
                uint32_t segment = 0;
                memcpy(&segment, entries + (size_t)index * size, sizeof segment);
                if (segment == 3) interpreted = 1; /* PT_INTERP names the loader */
            }
            /* A shared object (ET_DYN) with no entry point is a library; with one, a static PIE. */
            if (!interpreted) kind = type == 3 && entry == 0 ? 2 : 1;
        }
        free(entries);
    }
    close(descriptor);
    return kind;
}

/* The file `execvp` runs for `command`: itself when it holds a slash, else the first executable
   regular file of that name in PATH (execve refuses a directory or a FIFO, and execvp goes on to
   the next); NULL when none is. */
static const char *fhw_program_path(const char *command) {
    if (strchr(command, '/')) return command;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *start = path;; ) {
        const char *end = strchr(start, ':');
        size_t length = end ? (size_t)(end - start) : strlen(start);
        char *directory = length ? strndup(start, length) : strdup(".");
        if (directory) {
            char *candidate = fhw_join3(directory, "/", command);
            free(directory);
            struct stat status;
            if (access(candidate, X_OK) == 0 && stat(candidate, &status) == 0 && S_ISREG(status.st_mode)) {
                return candidate;
            }
            free(candidate);
        }
        if (!end) return NULL;
        start = end + 1;
    }
}

/* Sets `variable` to `value`, or removes it when `value` is NULL. Every copy of it in the
   environment goes first: setenv changes only the first, and the loader reads the last
   LD_PRELOAD, which would run the program untraced. */
static void fhw_set(const char *variable, const char *value) {
    unsetenv(variable);
    if (value) setenv(variable, value, 1);
}

int main(int argc, char **argv) {
    fhw_options options = {0};
    fhw_parse(argc, argv, &options);

    char executable[PATH_MAX + 1];
    ssize_t length = readlink("/proc/self/exe", executable, PATH_MAX);
    if (length <= 0) fhw_cannot_run("cannot read /proc/self/exe to find the tracer's libraries beside it");
    executable[length] = 0;
    char *slash = strrchr(executable, '/');
    if (slash) *slash = 0;
    const char *directory = slash ? executable : "";
    char *library = fhw_join(directory, "/libFFIHookTracer.so");
    if (access(library, R_OK) != 0) {
        fhw_cannot_run("%s is missing: the tracer's libraries must lie beside ffi-hook-tracer (build the "
                       "FFIHookTracer product, or copy them with it)",
                       library);
    }
    /* The small start library is what is preloaded: it loads the tracer (beside it) in the
       program at once, and in the processes the program starts only once a traced library is
       loaded there. */
    char *start = fhw_join(directory, "/libFFIHookTracerStart.so");
    if (access(start, R_OK) != 0) {
        fhw_cannot_run("%s is missing: the tracer's libraries must lie beside ffi-hook-tracer (build the "
                       "FFIHookTracerStart product, or copy them with it)",
                       start);
    }

    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    fhw_set("FFI_HOOK_TRACER_LIBRARIES", fhw_joined(&options.libraries, ","));
    fhw_set("FFI_HOOK_TRACER_SYMBOLS", fhw_joined(&options.symbols, ","));
    fhw_set("FFI_HOOK_TRACER_PID", pid);
    fhw_set("FFI_HOOK_TRACER_JSON", options.json);
    fhw_set("FFI_HOOK_TRACER_SCOPE", options.scope);
    fhw_set("FFI_HOOK_TRACER_INLINE", options.inline_code ? "1" : NULL);
    for (int event = 0; event < FHW_EVENT_OPTIONS; event++) unsetenv(fhw_event_options[event].variable);
    for (size_t index = 0; index < options.event_variables.count; index++) {
        setenv(options.event_variables.items[index], options.event_values.items[index], 1);
    }
    fhw_set(fhw_log_variable, options.log);
    fhw_set(fhw_signatures_variable, options.signatures.count ? fhw_joined(&options.signatures, "\n") : NULL);
    unsetenv("FFI_HOOK_TRACER_LOG_OPENED");
    /* Set by the join for the process it joins, never for a started one: one left in the
       environment (a shell that exported it) would send the table to its file. */
    unsetenv("FFI_HOOK_TRACER_OUTPUT");

    if (options.pid) {
        /* The join is another program's (not preloaded with the start library: it would trace
           itself); it reads the options from the environment. */
        char *join = fhw_join(directory, "/ffi-hook-tracer-join");
        if (access(join, X_OK) != 0) {
            fhw_put(2, "ffi-hook-tracer: ");
            fhw_put(2, join);
            fhw_put(2, " is missing: build the ffi-hook-tracer-join product, or copy it with ffi-hook-tracer\n");
            return 1;
        }
        char process[32];
        snprintf(process, sizeof process, "%lld", options.pid);
        char *arguments[] = {join, process, (char *)(options.duration ? options.duration : "-"), library, NULL};
        execv(join, arguments);
        fprintf(stderr, "ffi-hook-tracer: cannot run %s: %s\n", join, strerror(errno));
        return 1;
    }

    /* The loader splits LD_PRELOAD at spaces and colons, and has no way to quote one: from a
       directory whose path holds either, the start library would not be preloaded and the
       program would run untraced, with only the loader's warning. */
    if (strpbrk(start, " :")) {
        fhw_cannot_run("the tracer's directory (%s) has a space or a colon in its path, which LD_PRELOAD cannot "
                       "carry: move or copy ffi-hook-tracer and its libraries to a directory without one",
                       directory);
    }
    const char *preload = getenv("LD_PRELOAD");
    fhw_set("LD_PRELOAD", preload && preload[0] ? fhw_join3(start, ":", preload) : start);

    const char *program = fhw_program_path(options.command[0]);
    int kind = program ? fhw_without_loader(program) : 0;
    if (kind == 1) {
        fprintf(stderr,
                "ffi-hook-tracer: %s is linked statically: no loader runs in it to load the tracer, so none of its "
                "calls are traced (the processes it starts may be)\n",
                options.command[0]);
    } else if (kind == 2) {
        fprintf(stderr,
                "ffi-hook-tracer: %s is a shared library with no entry point, not a program: run a program that "
                "loads it, and name the library with --library\n",
                options.command[0]);
    } else if (program && fhw_runs_securely(program)) {
        fprintf(stderr,
                "ffi-hook-tracer: %s is set-user-ID, set-group-ID or has file capabilities: the loader ignores "
                "LD_PRELOAD in it, so none of its calls are traced (the processes it starts may be)\n",
                options.command[0]);
    }
    /* execvp keeps this process (and its ID, which FFI_HOOK_TRACER_PID names). */
    execvp(options.command[0], options.command);
    int failure = errno;
    fprintf(stderr, "ffi-hook-tracer: cannot run %s: %s\n", options.command[0], strerror(failure));
    /* As shells say it: 127 for a program not found, 126 for one found that cannot be run. */
    return failure == ENOENT || failure == ENOTDIR ? 127 : 126;
}

// MARK: - No Swift runtime

/* The Swift driver links every executable with its start file, whose constructor registers the
   program's Swift metadata with the runtime (swift_addNewDSOImage) and which keeps a reference
   to the runtime's backtracer: this program has no Swift code and needs neither. Defined here,
   they leave the linker nothing to take from the runtime's archives (the program is linked
   statically, Package.swift), and the entry below keeps a dynamic build of it to the libraries
   it needs (the C library): without the Swift runtime and the C++ library, it starts in the
   time a C program takes. */
__attribute__((section(".swift1_autolink_entries"), used)) static const char fhw_link_as_needed[] = "-Wl,--as-needed";

void swift_addNewDSOImage(const void *sections) { (void)sections; }

int _swift_backtrace_isThunkFunction(const char *name) {
    (void)name;
    return 0;
}
