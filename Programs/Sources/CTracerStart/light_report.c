#define _GNU_SOURCE
#include "light_report.h"
/* (Header-only: the hooking library's system calls by instruction.) */
#include "../../../Sources/CFFIHookSupport/include/ffh_syscall.h"
#include "descriptor_floor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The process the wrapper started may never load a library it traces (a shell that runs the
   program which does, a misspelt `--library`). Loading the tracer there only to say so cost
   about 3 ms of its run (the tracer's library, with the Swift runtime in it, and its start); the
   report such a process makes holds nothing the tracer must count: what each `--library` name
   is closest to among the loaded objects, and an empty table. So this library writes it, in the
   tracer's words, until a traced library is loaded (then the tracer is, and reports itself). */

/* 1 while this report stands in for the tracer's; 1 once it is written. */
static int fhs_light_on;
static int fhs_light_written;
/* The process it is written in: the one the wrapper started (its forked children, whose ID
   differs, write none, as the tracer's do not). */
static long fhs_light_process;
/* A duplicate of standard error taken at start (closed on exec), and the file it is. */
static int fhs_light_output = -1;
static uint64_t fhs_light_device, fhs_light_inode;

/* The names of the objects seen loaded, each ending with a zero byte, and a table of their
   places (offset + 1; 0: empty) by a hash of the name. Written only inside the loader's walks
   (dl_iterate_phdr runs one at a time), read by the report: `fhs_names_used` is published after
   the bytes it covers. Full, it takes no more names (the report then suggests among fewer). */
#define FHS_NAME_BYTES 32768
#define FHS_NAME_SLOTS 2048
static char fhs_names[FHS_NAME_BYTES];
static size_t fhs_names_used;
static uint32_t fhs_name_slots[FHS_NAME_SLOTS];

static int fhs_variable_is(const char *name, const char *const allowed[], size_t count) {
    const char *value = getenv(name);
    if (!value || !*value) return 1;
    for (size_t index = 0; index < count; index++) {
        if (strcmp(value, allowed[index]) == 0) return 1;
    }
    return 0;
}

int fhs_light_applies(void) {
    /* Files and a join's output are written by the tracer (a JSON file with no functions, a
       timeline of no events): it is loaded for them. */
    static const char *const outputs[] = {
        "FFI_HOOK_TRACER_JSON",     "FFI_HOOK_TRACER_CHROME_TRACE", "FFI_HOOK_TRACER_FOLDED",
        "FFI_HOOK_TRACER_FLAMEGRAPH", "FFI_HOOK_TRACER_TIMELINE",   "FFI_HOOK_TRACER_EVENTS",
        "FFI_HOOK_TRACER_LOG",      "FFI_HOOK_TRACER_OUTPUT"};
    for (size_t index = 0; index < sizeof outputs / sizeof outputs[0]; index++) {
        const char *value = getenv(outputs[index]);
        if (value && *value) return 0;
    }
    /* A value the tracer would say it cannot use. */
    static const char *const scopes[] = {"program", "main", "all"};
    static const char *const switches[] = {"0", "1"};
    if (!fhs_variable_is("FFI_HOOK_TRACER_SCOPE", scopes, 3) || !fhs_variable_is("FFI_HOOK_TRACER_INLINE", switches, 2)) {
        return 0;
    }
    /* A list that names no library: the tracer says so. */
    const char *list = fhs_libraries();
    if (!list) return 0;
    for (const char *at = list; *at; at++) {
        if (*at != ',' && *at != ' ') return 1;
    }
    return 0;
}

void fhs_light_begin(void) {
    fhs_light_process = (long)ffh_syscall0(SYS_getpid);
    struct stat status;
    if (ffh_syscall3(SYS_fstat, 2, (long)&status, 0) == 0) {
        long duplicate = ffh_syscall3(SYS_fcntl, 2, F_DUPFD_CLOEXEC, fht_descriptor_floor());
        if (duplicate >= 0) {
            fhs_light_device = (uint64_t)status.st_dev;
            fhs_light_inode = (uint64_t)status.st_ino;
            fhs_light_output = (int)duplicate;
        }
    }
    __atomic_store_n(&fhs_light_on, 1, __ATOMIC_RELEASE);
}

void fhs_light_end(void) {
    if (!__atomic_exchange_n(&fhs_light_on, 0, __ATOMIC_ACQ_REL)) return;
    int output = __atomic_exchange_n(&fhs_light_output, -1, __ATOMIC_ACQ_REL);
    if (output >= 0) ffh_syscall3(SYS_close, output, 0, 0);
}

int fhs_light_active(void) { return __atomic_load_n(&fhs_light_on, __ATOMIC_ACQUIRE); }


/* Whether the light report is this process's to write: the one the wrapper started. */
static int fhs_light_writes_here(void) { return (long)ffh_syscall0(SYS_getpid) == fhs_light_process; }

void fhs_light_note_name(const char *path, const char *soname) {
    if (!fhs_light_active()) return;
    /* (The main program has no name here; the tracer never suggests it.) */
    if (!*path) return;
    const char *slash = strrchr(path, '/');
    /* The tracer's name for an object: its soname, else its file's name. */
    const char *name = soname ? soname : slash ? slash + 1 : path;
    size_t length = strlen(name);
    if (length == 0) return;
    uint32_t hash = 2166136261u;
    for (size_t index = 0; index < length; index++) hash = (hash ^ (unsigned char)name[index]) * 16777619u;
    size_t used = __atomic_load_n(&fhs_names_used, __ATOMIC_ACQUIRE);
    for (uint32_t probe = 0; probe < FHS_NAME_SLOTS; probe++) {
        uint32_t *slot = &fhs_name_slots[(hash + probe) % FHS_NAME_SLOTS];
        if (*slot == 0) {
            if (used + length + 1 > FHS_NAME_BYTES) return;
            memcpy(fhs_names + used, name, length + 1);
            *slot = (uint32_t)used + 1;
            __atomic_store_n(&fhs_names_used, used + length + 1, __ATOMIC_RELEASE);
            return;
        }
        if (strcmp(fhs_names + *slot - 1, name) == 0) return;
    }
}

/* The edit distance between two names (characters inserted, deleted or replaced), as the
   tracer's own; names longer than the rows here are compared by their first 511 bytes. Its rows,
   like the report's other buffers, are not on the stack: the report may run in a signal
   handler on a small alternate stack (it runs once). */
static size_t fhs_distance(const char *one, const char *other) {
    enum { most = 511 };
    size_t one_length = strnlen(one, most), other_length = strnlen(other, most);
    static size_t previous[most + 1], current[most + 1];
    for (size_t index = 0; index <= other_length; index++) previous[index] = index;
    for (size_t index = 0; index < one_length; index++) {
        current[0] = index + 1;
        for (size_t at = 0; at < other_length; at++) {
            size_t replace = previous[at] + (one[index] == other[at] ? 0 : 1);
            size_t insert = current[at] + 1, remove = previous[at + 1] + 1;
            size_t best = replace < insert ? replace : insert;
            current[at + 1] = best < remove ? best : remove;
        }
        memcpy(previous, current, (other_length + 1) * sizeof previous[0]);
    }
    return previous[other_length];
}

/* The report's text as it is built: written out whenever its buffer fills, and at the end. */
typedef struct {
    char bytes[4096];
    size_t used;
    int descriptor;
} fhs_text;

static void fhs_write_all(int descriptor, const char *bytes, size_t length);

static void fhs_add_bytes(fhs_text *text, const char *part, size_t length) {
    while (length > 0) {
        if (text->used == sizeof text->bytes) {
            fhs_write_all(text->descriptor, text->bytes, text->used);
            text->used = 0;
        }
        size_t room = sizeof text->bytes - text->used, taken = length < room ? length : room;
        memcpy(text->bytes + text->used, part, taken);
        text->used += taken;
        part += taken;
        length -= taken;
    }
}

static void fhs_add(fhs_text *text, const char *part) { fhs_add_bytes(text, part, strlen(part)); }

static void fhs_add_number(fhs_text *text, long value) {
    char digits[24];
    size_t count = 0;
    unsigned long magnitude = value < 0 ? (unsigned long)-value : (unsigned long)value;
    do {
        digits[count++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude > 0);
    char reversed[25];
    size_t length = 0;
    if (value < 0) reversed[length++] = '-';
    while (count > 0) reversed[length++] = digits[--count];
    reversed[length] = 0;
    fhs_add(text, reversed);
}

/* The tracer's line for a `--library` name (the `length` bytes at `name`) that no loaded object
   answers to. */
static void fhs_add_unmatched(fhs_text *text, const char *name, size_t length) {
    static char wanted[4096];
    size_t kept = length < sizeof wanted ? length : sizeof wanted - 1;
    memcpy(wanted, name, kept);
    wanted[kept] = 0;
    /* The three closest, by distance and then by name. */
    const char *closest[3] = {NULL, NULL, NULL};
    size_t distances[3] = {0, 0, 0};
    size_t used = __atomic_load_n(&fhs_names_used, __ATOMIC_ACQUIRE);
    for (size_t at = 0; at < used; at += strlen(fhs_names + at) + 1) {
        const char *seen = fhs_names + at;
        size_t distance = fhs_distance(wanted, seen);
        for (size_t place = 0; place < 3; place++) {
            if (closest[place] && (distances[place] < distance ||
                                   (distances[place] == distance && strcmp(closest[place], seen) < 0))) {
                continue;
            }
            for (size_t later = 2; later > place; later--) {
                closest[later] = closest[later - 1];
                distances[later] = distances[later - 1];
            }
            closest[place] = seen;
            distances[place] = distance;
            break;
        }
    }
    fhs_add(text, "ffi-hook-tracer: error: --library ");
    fhs_add_bytes(text, name, length);
    fhs_add(text, " names none of the objects this process loaded, so none of its calls were traced");
    for (size_t place = 0; place < 3 && closest[place]; place++) {
        fhs_add(text, place == 0 ? "; the closest loaded: " : ", ");
        fhs_add(text, closest[place]);
    }
    fhs_add(text, "\n");
}

/* The descriptor to write to: the duplicate while it is still standard error's file as it was
   at start, else 2. */
static int fhs_output(void) {
    int output = __atomic_load_n(&fhs_light_output, __ATOMIC_ACQUIRE);
    struct stat status;
    if (output < 0 || ffh_syscall3(SYS_fstat, output, (long)&status, 0) != 0) return 2;
    if ((uint64_t)status.st_dev != fhs_light_device || (uint64_t)status.st_ino != fhs_light_inode) return 2;
    return output;
}

/* Writes `length` bytes whole, with SIGPIPE held off: a reader that went away (`| head`) makes
   the write fail, and the signal it raised is dropped (not one the program had pending). */
static void fhs_write_all(int descriptor, const char *bytes, size_t length) {
    uint64_t pipe_only = (uint64_t)1 << (SIGPIPE - 1), previous = 0, before = 0, after = 0;
    ffh_syscall6(SYS_rt_sigprocmask, SIG_BLOCK, (long)&pipe_only, (long)&previous, sizeof pipe_only, 0, 0);
    ffh_syscall3(SYS_rt_sigpending, (long)&before, sizeof before, 0);
    size_t done = 0;
    while (done < length) {
        long written = ffh_syscall3(SYS_write, descriptor, (long)(bytes + done), (long)(length - done));
        if (written == -EINTR) continue;
        if (written <= 0) break;
        done += (size_t)written;
    }
    ffh_syscall3(SYS_rt_sigpending, (long)&after, sizeof after, 0);
    if ((after & pipe_only) && !(before & pipe_only)) {
        struct timespec now = {0, 0};
        ffh_syscall6(SYS_rt_sigtimedwait, (long)&pipe_only, 0, (long)&now, sizeof pipe_only, 0, 0);
    }
    ffh_syscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&previous, 0, sizeof previous, 0, 0);
}

int fhs_light_claim(void) {
    if (!fhs_light_active() || !fhs_light_writes_here()) return 0;
    return !__atomic_exchange_n(&fhs_light_written, 1, __ATOMIC_ACQ_REL);
}

void fhs_light_report(int signal, uint64_t matched) {
    static fhs_text text;
    text.used = 0;
    text.descriptor = fhs_output();
    const char *list = fhs_libraries();
    if (!list) list = "";
    /* Each name as the tracer reads the list: split at commas, spaces trimmed, empty ones
       dropped, repeated ones repeated. */
    unsigned place = 0;
    for (const char *at = list; *at;) {
        size_t length = strcspn(at, ",");
        const char *name = at;
        size_t kept = length;
        while (kept > 0 && *name == ' ') {
            name++;
            kept--;
        }
        while (kept > 0 && name[kept - 1] == ' ') kept--;
        if (kept > 0) {
            if (place >= 64 || !((matched >> place) & 1)) fhs_add_unmatched(&text, name, kept);
            place++;
        }
        at += length;
        if (*at == ',') at++;
    }
    /* The program's file name (the calling thread's link first: the main thread's is gone once
       it has ended by pthread_exit). */
    static char path[4096];
    long length = ffh_syscall3(SYS_readlink, (long)"/proc/thread-self/exe", (long)path, sizeof path - 1);
    if (length <= 0) length = ffh_syscall3(SYS_readlink, (long)"/proc/self/exe", (long)path, sizeof path - 1);
    const char *program = "?";
    if (length > 0) {
        path[length] = 0;
        const char *slash = strrchr(path, '/');
        program = slash && slash[1] ? slash + 1 : path;
    }
    fhs_add(&text, "ffi-hook-tracer: ");
    fhs_add(&text, program);
    fhs_add(&text, " (pid ");
    fhs_add_number(&text, fhs_light_process);
    if (signal) {
        const char *abbreviation = sigabbrev_np(signal);
        fhs_add(&text, ", ended by ");
        if (abbreviation) {
            fhs_add(&text, "SIG");
            fhs_add(&text, abbreviation);
        } else {
            fhs_add(&text, "signal ");
            fhs_add_number(&text, signal);
        }
    }
    fhs_add(&text, "): 0 calls of 0 functions, 0 ns in them\nfunction  calls  total  self  mean  share\n");
    fhs_write_all(text.descriptor, text.bytes, text.used);
    text.used = 0;
}
