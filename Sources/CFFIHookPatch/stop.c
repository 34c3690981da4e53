#define _GNU_SOURCE
#include "stop.h"

#if defined(__linux__) && defined(__x86_64__)

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>

#include "ffh_guard.h"
#include "ffh_syscall.h"

/* No sanitizer instruments this file: a sanitizer's hooks take the sanitizer's own locks,
   which a stopped thread may hold, and ThreadSanitizer has no shadow memory for the code
   being written. */
#if defined(__clang__) && __has_attribute(disable_sanitizer_instrumentation)
#pragma clang attribute push(__attribute__((disable_sanitizer_instrumentation)), apply_to = function)
#define FFH_PATCH_PRAGMA_PUSHED 1
#endif

// Nothing here calls libc between stopping the threads and releasing them (see stop.h):
// system calls go through ffh_syscall6, memory is copied by loops over volatile bytes (a
// compiler may turn a plain loop into a call of memcpy or memset), and the handler that
// parks each thread does the same.

// MARK: - The kernel's signal actions

/* struct sigaction as the x86-64 kernel takes it (see guard.c, whose restorer is reused). */
typedef struct {
    void *handler;
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
} ffh_patch_action;

#define FFH_PATCH_SA_RESTORER 0x04000000UL

static long ffh_patch_sigaction(int signal, const ffh_patch_action *action, ffh_patch_action *previous) {
    return ffh_syscall6(SYS_rt_sigaction, signal, (long)action, (long)previous, 8, 0, 0);
}

// MARK: - Stopped threads

/* One thread of one stop: the stopper fills `thread` and `stop`, sends the signal with the
   entry's address, and the thread's handler reports `pc` and parks until the stop ends. */
typedef struct {
    int32_t state;
    int32_t thread;
    uint64_t stop;
    uintptr_t pc;
    uintptr_t new_pc;
    /* Set by the stopper for a thread that did not park but is known quiet: gone (pc 0) or
       blocking the signal inside a system call at `pc`. */
    int32_t quiet;
    uintptr_t quiet_pc;
    /* Whether the request went again as SIGSEGV. */
    int32_t segv_sent;
    /* Asked by SIGSEGV first, the thread having said it takes faults only: looked at in /proc
       only after a longer wait. */
    int32_t faults_only;
    /* What the last look at a thread that had not parked found (FFH_UNRESPONSIVE_* bits), for
       the error of a stop that gives up on it. */
    int32_t seen;
} ffh_stop_entry;

enum {
    /// Not (or no longer) part of a stop: a late signal for it is ignored.
    FFH_ENTRY_IDLE = 0,
    /// Signalled, not yet parked.
    FFH_ENTRY_SIGNALLED = 1,
    /// Parked in the handler, `pc` reported.
    FFH_ENTRY_PARKED = 2,
    /// Released and back from the handler (its move applied): free for a later stop.
    FFH_ENTRY_DONE = 3,
};

/* The code a thread runs while it answers a stop request, in a section of its own: a thread
   seen there (running, or in one of its system calls) is on its way to park with its real
   place in hand, and is neither quiet nor asked again. */
#define FFH_STOP_CODE __attribute__((section("ffh_stop_text"), noinline))
extern const char __start_ffh_stop_text[];
extern const char __stop_ffh_stop_text[];

static int ffh_in_stop_code(uintptr_t pc) {
    return pc >= (uintptr_t)__start_ffh_stop_text && pc < (uintptr_t)__stop_ffh_stop_text;
}

/* Entries are never unmapped: a signal that arrives late (to a thread that had it blocked)
   still points at one, and finds it idle or belonging to a later stop. A stop takes the free
   entries from the first on; one whose thread is still parked from an earlier stop (released,
   but not yet back on a processor to read its move) is skipped until that thread is done. */
#define FFH_CHUNK_ENTRIES 1024
#define FFH_CHUNKS 64
static ffh_stop_entry *ffh_chunks[FFH_CHUNKS];

static ffh_stop_entry *ffh_entry(size_t index) {
    size_t chunk = index / FFH_CHUNK_ENTRIES;
    if (chunk >= FFH_CHUNKS) return NULL;
    ffh_stop_entry *entries = __atomic_load_n(&ffh_chunks[chunk], __ATOMIC_ACQUIRE);
    if (entries == NULL) {
        long mapped = ffh_syscall6(
            SYS_mmap, 0, sizeof(ffh_stop_entry) * FFH_CHUNK_ENTRIES, PROT_READ | PROT_WRITE,
            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mapped < 0 && mapped > -4096) return NULL;
        entries = (ffh_stop_entry *)mapped;
        __atomic_store_n(&ffh_chunks[chunk], entries, __ATOMIC_RELEASE);
    }
    return &entries[index % FFH_CHUNK_ENTRIES];
}

/* The stop in progress (0 when none), the last stop released (the futex the parked threads
   wait on, its low 32 bits), and how many threads have parked in this stop. */
static uint64_t ffh_active_stop;
static uint32_t ffh_released_stop;
static uint32_t ffh_parked_count;
static uint64_t ffh_stop_number;
static int ffh_stop_signal;

/* Serialises stops (and the signal's installation): a spin lock, held only by a thread
   that makes no call that could wait on another thread. */
static int ffh_stop_lock;

FFH_STOP_CODE static long ffh_futex(uint32_t *word, int op, uint32_t value, const struct timespec *timeout) {
    return ffh_syscall6(SYS_futex, (long)word, op, value, (long)timeout, 0, 0);
}

FFH_STOP_CODE static long ffh_gettid(void) { return ffh_syscall0(SYS_gettid); }

/* Whether `entry` is one of the entries (a signal's value is only trusted when it is). */
FFH_STOP_CODE static int ffh_is_entry(const void *entry) {
    for (size_t chunk = 0; chunk < FFH_CHUNKS; chunk++) {
        ffh_stop_entry *entries = __atomic_load_n(&ffh_chunks[chunk], __ATOMIC_ACQUIRE);
        if (entries == NULL) return 0;
        uintptr_t offset = (uintptr_t)entry - (uintptr_t)entries;
        if ((uintptr_t)entry >= (uintptr_t)entries && offset < sizeof(ffh_stop_entry) * FFH_CHUNK_ENTRIES &&
            offset % sizeof(ffh_stop_entry) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Parks the thread if the signal is a stop request of the stop in progress for it: 1 when
   it was a request of this writer's (current or late), 0 when it is someone else's signal. */
FFH_STOP_CODE static int ffh_stop_park(siginfo_t *info, void *context) {
    if (info->si_code != SI_QUEUE) return 0;
    ffh_stop_entry *entry = info->si_value.sival_ptr;
    if (entry == NULL || !ffh_is_entry(entry)) return 0;
    if (info->si_pid != (pid_t)ffh_syscall0(SYS_getpid)) return 0;
    uint64_t stop = __atomic_load_n(&ffh_active_stop, __ATOMIC_ACQUIRE);
    if (stop == 0 || __atomic_load_n(&entry->stop, __ATOMIC_ACQUIRE) != stop) return 1;
    if (__atomic_load_n(&entry->thread, __ATOMIC_RELAXED) != (int32_t)ffh_gettid()) return 1;
    /* Reached through SIGSEGV, the thread may still take other signals: block them all
       until it returns (the interrupted mask comes back with the context). */
    uint64_t all = ~0ull;
    ffh_syscall6(SYS_rt_sigprocmask, SIG_BLOCK, (long)&all, 0, 8, 0, 0);
    ucontext_t *interrupted = context;
    entry->pc = (uintptr_t)interrupted->uc_mcontext.gregs[REG_RIP];
    int32_t expected = FFH_ENTRY_SIGNALLED;
    if (!__atomic_compare_exchange_n(
            &entry->state, &expected, FFH_ENTRY_PARKED, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        return 1;
    }
    __atomic_add_fetch(&ffh_parked_count, 1, __ATOMIC_ACQ_REL);
    ffh_futex(&ffh_parked_count, FUTEX_WAKE_PRIVATE, 1, NULL);
    /* Released once the last stop released is this one or a later one (stops may follow each
       other before this thread is back on a processor). */
    for (;;) {
        uint32_t released = __atomic_load_n(&ffh_released_stop, __ATOMIC_ACQUIRE);
        if ((int32_t)(released - (uint32_t)stop) >= 0) break;
        ffh_futex(&ffh_released_stop, FUTEX_WAIT_PRIVATE, released, NULL);
    }
    uintptr_t destination = __atomic_load_n(&entry->new_pc, __ATOMIC_ACQUIRE);
    if (destination != 0) interrupted->uc_mcontext.gregs[REG_RIP] = (greg_t)destination;
    /* The entry is free for a later stop from here on: nothing reads it after this store. */
    __atomic_store_n(&entry->state, FFH_ENTRY_DONE, __ATOMIC_RELEASE);
    return 1;
}

/* Set while this thread is in a stop's signal handler: parked there, with every signal
   blocked, while a writer on another thread rewrites code it may be about to run. Code that
   is made to run on a thread from outside the process (a debugger's or a tracer's call, made
   on a thread it stopped at some instruction) must not run there. */
static __thread int ffh_in_stop_handler __attribute__((tls_model("initial-exec")));

int ffh_patch_thread_is_parked(void) { return __atomic_load_n(&ffh_in_stop_handler, __ATOMIC_RELAXED) != 0; }

/* Parks the thread for a stop request, marked as parked meanwhile; 0 when `info` is no request
   of a stop's. The fault guard's handler passes on the requests sent again as SIGSEGV here. */
FFH_STOP_CODE static int ffh_stop_claim(siginfo_t *info, void *context) {
    ffh_in_stop_handler++;
    int claimed = ffh_stop_park(info, context);
    ffh_in_stop_handler--;
    return claimed;
}

FFH_STOP_CODE static void ffh_stop_handler(int signal, siginfo_t *info, void *context) {
    (void)signal;
    (void)ffh_stop_claim(info, context);
}

/* Installs the handler on a real-time signal nobody handles, once; keeps it while it is
   still installed, and picks another if someone replaced it. 0 when ready. */
static int ffh_ensure_signal(void) {
    ffh_patch_action current;
    if (ffh_stop_signal != 0 && ffh_patch_sigaction(ffh_stop_signal, NULL, &current) == 0 &&
        current.handler == (void *)ffh_stop_handler) {
        return 0;
    }
    /* Every signal is blocked while a thread is parked: a handler of the program's must not
       run (and call the function being written) on a stopped thread, and a stop request
       sent again as SIGSEGV must not find the thread inside this handler. */
    ffh_patch_action action = {
        (void *)ffh_stop_handler, SA_SIGINFO | SA_RESTART | SA_ONSTACK | FFH_PATCH_SA_RESTORER, ffh_guard_restorer,
        ~0ull};
    /* From the top of the real-time range down: the low ones are glibc's and commonly taken. */
    for (int signal = 64; signal >= 40; signal--) {
        if (ffh_patch_sigaction(signal, NULL, &current) != 0) continue;
        if (current.handler != SIG_DFL) continue;
        if (ffh_patch_sigaction(signal, &action, NULL) != 0) continue;
        __atomic_store_n(&ffh_stop_signal, signal, __ATOMIC_RELEASE);
        ffh_guard_block_during(signal);
        ffh_guard_set_claimer(ffh_stop_claim);
        return 0;
    }
    return -1;
}

int ffh_patch_signal(void) { return __atomic_load_n(&ffh_stop_signal, __ATOMIC_ACQUIRE); }

uint64_t ffh_patch_stop_count(void) { return __atomic_load_n(&ffh_stop_number, __ATOMIC_ACQUIRE); }

// MARK: - Small tools without libc

static void ffh_zero(void *memory, size_t length) {
    volatile uint8_t *bytes = memory;
    for (size_t index = 0; index < length; index++) bytes[index] = 0;
}

static uint64_t ffh_now_ns(void) {
    struct timespec now;
    ffh_syscall6(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&now, 0, 0, 0, 0);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static void ffh_sleep_ns(long nanoseconds) {
    struct timespec pause = {0, nanoseconds};
    ffh_syscall6(SYS_nanosleep, (long)&pause, 0, 0, 0, 0, 0);
}

/* Writes "/proc/self/task/<thread>/<file>" into `path` (64 bytes). */
static void ffh_task_path(char *path, int32_t thread, const char *file) {
    const char *prefix = "/proc/self/task/";
    size_t length = 0;
    while (prefix[length] != 0) {
        path[length] = prefix[length];
        length++;
    }
    char digits[12];
    int count = 0;
    uint32_t value = (uint32_t)thread;
    do {
        digits[count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    while (count > 0) path[length++] = digits[--count];
    path[length++] = '/';
    for (size_t index = 0; file[index] != 0 && length < 62; index++) path[length++] = file[index];
    path[length] = 0;
}

/* Reads up to `capacity - 1` bytes of a small file, NUL-terminated; the length, or -1. */
static long ffh_read_file(const char *path, char *buffer, size_t capacity) {
    long descriptor = ffh_syscall6(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
    if (descriptor < 0) return -1;
    long total = 0;
    while ((size_t)total < capacity - 1) {
        long count = ffh_syscall3(SYS_read, descriptor, (long)(buffer + total), (long)(capacity - 1 - (size_t)total));
        if (count <= 0) break;
        total += count;
    }
    ffh_syscall6(SYS_close, descriptor, 0, 0, 0, 0, 0);
    buffer[total] = 0;
    return total;
}

/* The text after `key` in `text`, or NULL. */
static const char *ffh_find(const char *text, const char *key) {
    for (const char *line = text; *line != 0; line++) {
        size_t index = 0;
        while (key[index] != 0 && line[index] == key[index]) index++;
        if (key[index] == 0) return line + index;
    }
    return NULL;
}

static uint64_t ffh_parse_hex(const char *text) {
    uint64_t value = 0;
    for (;; text++) {
        char c = *text;
        if (c >= '0' && c <= '9') value = value * 16 + (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f') value = value * 16 + (uint64_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') value = value * 16 + (uint64_t)(c - 'A' + 10);
        else return value;
    }
}

/* What a thread that has not parked is doing. */
typedef enum {
    FFH_QUIET_UNKNOWN,   // may still park
    FFH_QUIET_GONE,      // exited, or exiting
    FFH_QUIET_SYSCALL,   // blocks the signal and sits in a system call at `pc`
    FFH_QUIET_BLOCKED,   // blocks the signal and runs: nothing to learn
} ffh_quiet;

/* How many times a stop looked at the thread ffh_inspected_thread in /proc
   (ffh_patch_inspections). */
static uint64_t ffh_inspections;
static int32_t ffh_inspected_thread;

uint64_t ffh_patch_inspections(int32_t thread) {
    __atomic_store_n(&ffh_inspected_thread, thread, __ATOMIC_RELAXED);
    return __atomic_exchange_n(&ffh_inspections, 0, __ATOMIC_RELAXED);
}

static ffh_quiet ffh_inspect(int32_t thread, int signal, uintptr_t *pc, int *blocks_segv) {
    char path[64];
    char text[4096];
    if (thread == __atomic_load_n(&ffh_inspected_thread, __ATOMIC_RELAXED)) {
        __atomic_add_fetch(&ffh_inspections, 1, __ATOMIC_RELAXED);
    }
    ffh_task_path(path, thread, "status");
    if (ffh_read_file(path, text, sizeof text) < 0) return FFH_QUIET_GONE;
    const char *state = ffh_find(text, "State:\t");
    if (state != NULL && (*state == 'Z' || *state == 'X')) return FFH_QUIET_GONE;
    const char *blocked = ffh_find(text, "SigBlk:\t");
    uint64_t mask = blocked != NULL ? ffh_parse_hex(blocked) : 0;
    int blocks = (mask >> (signal - 1)) & 1;
    *blocks_segv = (mask >> (SIGSEGV - 1)) & 1;
    /* A thread that does not block the signal gets it as soon as it runs; one asleep in an
       uninterruptible wait may still be read from its system call. */
    ffh_task_path(path, thread, "syscall");
    if (ffh_read_file(path, text, sizeof text) <= 0) return blocks ? FFH_QUIET_BLOCKED : FFH_QUIET_UNKNOWN;
    if (text[0] == 'r') return blocks ? FFH_QUIET_BLOCKED : FFH_QUIET_UNKNOWN;  // "running"
    /* "number args... sp pc" or "-1 sp pc": the last field is the instruction pointer. */
    const char *last = text;
    for (const char *cursor = text; *cursor != 0; cursor++) {
        if (*cursor == ' ' && cursor[1] != 0 && cursor[1] != '\n') last = cursor + 1;
    }
    if (last[0] != '0' || last[1] != 'x') return blocks ? FFH_QUIET_BLOCKED : FFH_QUIET_UNKNOWN;
    *pc = (uintptr_t)ffh_parse_hex(last + 2);
    /* In a system call of the stop handler: about to park. */
    if (ffh_in_stop_code(*pc)) return FFH_QUIET_UNKNOWN;
    return FFH_QUIET_SYSCALL;
}

// MARK: - Stopping and releasing

static int ffh_signal_thread(long process, ffh_stop_entry *entry, int signal) {
    siginfo_t info;
    ffh_zero(&info, sizeof info);
    info.si_signo = signal;
    info.si_code = SI_QUEUE;
    info.si_pid = (pid_t)process;
    info.si_uid = (uid_t)ffh_syscall0(SYS_getuid);
    info.si_value.sival_ptr = entry;
    return (int)ffh_syscall6(SYS_rt_tgsigqueueinfo, process, entry->thread, signal, (long)&info, 0, 0);
}

/* The entry of this stop at `index`, or NULL when the entry belongs to none of its threads. */
static ffh_stop_entry *ffh_stop_entry_at(const ffh_stop *stop, size_t index) {
    ffh_stop_entry *entry = ffh_entry(index);
    if (entry == NULL || __atomic_load_n(&entry->stop, __ATOMIC_ACQUIRE) != stop->number) return NULL;
    return entry;
}

/* Whether `thread` already has an entry in this stop. */
static int ffh_known(const ffh_stop *stop, int32_t thread) {
    for (size_t index = 0; index < stop->limit; index++) {
        ffh_stop_entry *entry = ffh_stop_entry_at(stop, index);
        if (entry != NULL && entry->thread == thread) return 1;
    }
    return 0;
}

/* A free entry for this stop (at `stop->limit` or after it: one still parked from an earlier
   stop is passed over), or NULL when no more can be mapped. */
static ffh_stop_entry *ffh_take_entry(ffh_stop *stop) {
    for (;;) {
        ffh_stop_entry *entry = ffh_entry(stop->limit);
        if (entry == NULL) return NULL;
        stop->limit++;
        if (__atomic_load_n(&entry->state, __ATOMIC_ACQUIRE) != FFH_ENTRY_PARKED) return entry;
    }
}

/* Signals every thread of /proc/self/task that has no entry yet; how many were signalled,
   or -1 when the directory cannot be read or entries cannot be mapped. */
/* The threads that block every signal but the faults and said so (a tracer's own threads,
   ffh_patch_thread_takes_faults_only): asked by SIGSEGV at once. The stop signal, which they
   never take, would cost each stop a wait and a look at /proc before SIGSEGV went anyway. */
#define FFH_FAULTS_ONLY 16
static int32_t ffh_faults_only[FFH_FAULTS_ONLY];

void ffh_patch_thread_takes_faults_only(int yes) {
    int32_t self = (int32_t)ffh_gettid();
    for (size_t index = 0; index < FFH_FAULTS_ONLY; index++) {
        int32_t expected = yes ? 0 : self;
        if (__atomic_compare_exchange_n(&ffh_faults_only[index], &expected, yes ? self : 0, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            return;
        }
    }
}

static int ffh_takes_faults_only(int32_t thread) {
    for (size_t index = 0; index < FFH_FAULTS_ONLY; index++) {
        if (__atomic_load_n(&ffh_faults_only[index], __ATOMIC_ACQUIRE) == thread) return 1;
    }
    return 0;
}

static long ffh_signal_new_threads(ffh_stop *stop, long process, long self, int signal) {
    long directory =
        ffh_syscall6(SYS_openat, AT_FDCWD, (long)"/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, 0, 0);
    if (directory < 0) return -1;
    long signalled = 0;
    char buffer[4096] __attribute__((aligned(8)));
    for (;;) {
        long length = ffh_syscall3(SYS_getdents64, directory, (long)buffer, sizeof buffer);
        if (length <= 0) break;
        for (long offset = 0; offset < length;) {
            /* struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name. */
            uint16_t record = *(uint16_t *)(buffer + offset + 16);
            const char *name = buffer + offset + 19;
            offset += record;
            if (name[0] < '0' || name[0] > '9') continue;
            int32_t thread = 0;
            for (const char *digit = name; *digit >= '0' && *digit <= '9'; digit++) {
                thread = thread * 10 + (*digit - '0');
            }
            if (thread == self || ffh_known(stop, thread)) continue;
            ffh_stop_entry *entry = ffh_take_entry(stop);
            if (entry == NULL) {
                ffh_syscall6(SYS_close, directory, 0, 0, 0, 0, 0);
                return -1;
            }
            __atomic_store_n(&entry->state, FFH_ENTRY_IDLE, __ATOMIC_RELEASE);
            entry->thread = thread;
            entry->pc = 0;
            entry->quiet = 0;
            entry->quiet_pc = 0;
            entry->segv_sent = 0;
            entry->seen = 0;
            __atomic_store_n(&entry->new_pc, 0, __ATOMIC_RELEASE);
            __atomic_store_n(&entry->stop, stop->number, __ATOMIC_RELEASE);
            __atomic_store_n(&entry->state, FFH_ENTRY_SIGNALLED, __ATOMIC_RELEASE);
            entry->segv_sent = ffh_takes_faults_only(thread) && ffh_guard_install() == 0;
            entry->faults_only = entry->segv_sent;
            if (ffh_signal_thread(process, entry, entry->segv_sent ? SIGSEGV : signal) != 0) {
                /* Gone already. */
                __atomic_store_n(&entry->state, FFH_ENTRY_IDLE, __ATOMIC_RELEASE);
                __atomic_store_n(&entry->stop, 0, __ATOMIC_RELEASE);
                continue;
            }
            signalled++;
        }
    }
    ffh_syscall6(SYS_close, directory, 0, 0, 0, 0, 0);
    return signalled;
}

/* The threads found quiet (blocking the signal) in the last stop: looked at without waiting
   in the next one, since they are likely to be quiet again. */
#define FFH_QUIET_CACHE 64
static int32_t ffh_quiet_cache[FFH_QUIET_CACHE];
static size_t ffh_quiet_cache_count;

static int ffh_was_quiet(int32_t thread) {
    for (size_t index = 0; index < ffh_quiet_cache_count; index++) {
        if (ffh_quiet_cache[index] == thread) return 1;
    }
    return 0;
}

/* The entries that have not parked, checked for good reasons not to: gone, or blocking the
   signal (then in a system call at a known place, or unknowable). Returns whether every
   entry is settled: parked, gone or known; sets `*unknown` to an entry that is not. */
static int ffh_settled(const ffh_stop *stop, int signal, int inspect, int inspect_faults_only,
                       ffh_stop_entry **unknown) {
    int settled = 1;
    for (size_t index = 0; index < stop->limit; index++) {
        ffh_stop_entry *entry = ffh_stop_entry_at(stop, index);
        if (entry == NULL) continue;
        int32_t state = __atomic_load_n(&entry->state, __ATOMIC_ACQUIRE);
        if (state != FFH_ENTRY_SIGNALLED) continue;
        if (entry->quiet) continue;
        int looked_at = entry->faults_only ? inspect_faults_only
                                           : inspect || (ffh_was_quiet(entry->thread) && !entry->segv_sent);
        if (!looked_at) {
            settled = 0;
            *unknown = entry;
            continue;
        }
        uintptr_t pc = 0;
        int blocks_segv = 1;
        ffh_quiet kind = ffh_inspect(entry->thread, signal, &pc, &blocks_segv);
        entry->seen = (kind == FFH_QUIET_BLOCKED ? FFH_UNRESPONSIVE_BLOCKS_SIGNAL : 0) |
                      (kind != FFH_QUIET_GONE && blocks_segv ? FFH_UNRESPONSIVE_BLOCKS_SEGV : 0) |
                      (entry->segv_sent ? FFH_UNRESPONSIVE_ASKED_BY_SEGV : 0);
        switch (kind) {
        case FFH_QUIET_GONE:
            entry->quiet = 1;
            break;
        case FFH_QUIET_SYSCALL:
            /* Reported apart from `pc`, which the handler writes if the thread parks yet. */
            entry->quiet_pc = pc;
            /* Asleep in a system call with the signal blocked, the thread may still wake and run
               any code while the bytes are written (a lock's futex, released meanwhile, and the
               thread back in the function at once: seen under ThreadSanitizer, whose lazy
               globals take a lock). Unless it blocks SIGSEGV too, the request goes again as
               SIGSEGV, which wakes it to park; one the kernel cannot wake yet is delivered as
               the call returns, before the thread's next instruction, so a thread found in its
               call after that is settled. */
            if (!entry->segv_sent && !blocks_segv && ffh_guard_install() == 0) {
                entry->segv_sent = 1;
                ffh_signal_thread(ffh_syscall0(SYS_getpid), entry, SIGSEGV);
                settled = 0;
                *unknown = entry;
                break;
            }
            entry->quiet = 2;
            break;
        case FFH_QUIET_BLOCKED:
            /* Running with the signal blocked, as libdispatch's worker threads (those that
               run Swift's tasks) do for every signal but the synchronous ones, or still in the
               handler of an earlier stop: ask again with SIGSEGV, which the fault guard's
               handler passes to the stop's (once). */
            if (!entry->segv_sent && !blocks_segv && ffh_guard_install() == 0) {
                entry->segv_sent = 1;
                ffh_signal_thread(ffh_syscall0(SYS_getpid), entry, SIGSEGV);
            }
            settled = 0;
            *unknown = entry;
            break;
        case FFH_QUIET_UNKNOWN:
            settled = 0;
            *unknown = entry;
            break;
        }
    }
    return settled;
}

static void ffh_lock(void) {
    while (__atomic_exchange_n(&ffh_stop_lock, 1, __ATOMIC_ACQUIRE) != 0) ffh_syscall0(SYS_sched_yield);
}

static void ffh_unlock(void) { __atomic_store_n(&ffh_stop_lock, 0, __ATOMIC_RELEASE); }

ffh_patch_status ffh_stop_world(ffh_stop *stop, ffh_patch_result *result) {
    ffh_lock();
    /* Block every signal here: a handler of this thread must not run the bytes mid-write. */
    uint64_t all = ~0ull;
    ffh_syscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, (long)&stop->saved_mask, 8, 0, 0);
    stop->number = __atomic_add_fetch(&ffh_stop_number, 1, __ATOMIC_ACQ_REL);
    stop->limit = 0;
    stop->stopped = 0;
    if (ffh_ensure_signal() != 0) return FFH_PATCH_NO_SIGNAL;
    int signal = ffh_stop_signal;
    long process = ffh_syscall0(SYS_getpid);
    long self = ffh_gettid();
    __atomic_store_n(&ffh_parked_count, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&ffh_active_stop, stop->number, __ATOMIC_RELEASE);
    uint64_t deadline = ffh_now_ns() + 2000000000ull;
    for (int round = 0;; round++) {
        long signalled = ffh_signal_new_threads(stop, process, self, signal);
        if (signalled < 0) return FFH_PATCH_NO_MEMORY;
        if (signalled == 0 && round > 0) break;
        /* Wait for them. A thread that blocks the signal never parks: after a short wait,
           the quiet ones are looked at (a thread asleep in a system call with the signal
           blocked is common: a signal-handling thread in sigwait, a runtime's helper), and
           again now and then while others are still on their way. */
        for (int attempt = 0;; attempt++) {
            uint32_t parked = __atomic_load_n(&ffh_parked_count, __ATOMIC_ACQUIRE);
            ffh_stop_entry *unknown = NULL;
            int later = attempt > 1 && attempt % 16 == 0;
            if (ffh_settled(stop, signal, attempt == 1 || later, later, &unknown)) break;
            if (ffh_now_ns() > deadline) {
                result->thread = unknown ? unknown->thread : 0;
                result->error = unknown ? unknown->seen : 0;
                return FFH_PATCH_THREAD_UNRESPONSIVE;
            }
            if (attempt < 200) {
                struct timespec pause = {0, attempt < 2 ? 100000 : 1000000};
                ffh_futex(&ffh_parked_count, FUTEX_WAIT_PRIVATE, parked, &pause);
            } else {
                ffh_sleep_ns(5000000);
            }
        }
    }
    stop->stopped = (int32_t)__atomic_load_n(&ffh_parked_count, __ATOMIC_ACQUIRE);
    return FFH_PATCH_DONE;
}

ffh_stopped_kind ffh_stop_thread(const ffh_stop *stop, size_t index, int32_t *thread, uintptr_t *pc) {
    ffh_stop_entry *entry = ffh_stop_entry_at(stop, index);
    if (entry == NULL) return FFH_STOPPED_NONE;
    int32_t state = __atomic_load_n(&entry->state, __ATOMIC_ACQUIRE);
    *thread = entry->thread;
    if (state == FFH_ENTRY_PARKED) {
        *pc = entry->pc;
        return FFH_STOPPED_PARKED;
    }
    if (state == FFH_ENTRY_SIGNALLED && entry->quiet == 2) {
        /* If it parks after all, it parks where it sits, at this address. */
        *pc = entry->quiet_pc;
        return FFH_STOPPED_IN_SYSCALL;
    }
    return FFH_STOPPED_NONE;
}

void ffh_stop_move(const ffh_stop *stop, size_t index, uintptr_t destination) {
    ffh_stop_entry *entry = ffh_stop_entry_at(stop, index);
    if (entry != NULL) __atomic_store_n(&entry->new_pc, destination, __ATOMIC_RELEASE);
}

/* Entries that never parked are left idle (a late signal finds them so); the parked ones are
   released, and each frees its entry once it has read its move. Nobody waits for them: a
   released thread may need a processor others hold, and the next stop passes its entry over. */
void ffh_release_world(ffh_stop *stop) {
    __atomic_store_n(&ffh_active_stop, 0, __ATOMIC_RELEASE);
    ffh_quiet_cache_count = 0;
    for (size_t index = 0; index < stop->limit; index++) {
        ffh_stop_entry *entry = ffh_stop_entry_at(stop, index);
        if (entry == NULL) continue;
        if ((entry->quiet == 2 || entry->segv_sent) && ffh_quiet_cache_count < FFH_QUIET_CACHE) {
            ffh_quiet_cache[ffh_quiet_cache_count++] = entry->thread;
        }
        int32_t expected = FFH_ENTRY_SIGNALLED;
        __atomic_compare_exchange_n(&entry->state, &expected, FFH_ENTRY_IDLE, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    __atomic_store_n(&ffh_released_stop, (uint32_t)stop->number, __ATOMIC_RELEASE);
    ffh_futex(&ffh_released_stop, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL);
    ffh_syscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&stop->saved_mask, 0, 8, 0, 0);
    ffh_unlock();
}


#ifdef FFH_PATCH_PRAGMA_PUSHED
#pragma clang attribute pop
#endif

#else

int ffh_patch_signal(void) { return 0; }

void ffh_patch_thread_takes_faults_only(int yes) { (void)yes; }

int ffh_patch_thread_is_parked(void) { return 0; }

uint64_t ffh_patch_stop_count(void) { return 0; }

uint64_t ffh_patch_inspections(int32_t thread) {
    (void)thread;
    return 0;
}

#endif
