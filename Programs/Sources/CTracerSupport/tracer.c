#define _GNU_SOURCE
#include "CTracerSupport.h"
/* (Header-only use: the hooking library's record of the calling thread.) */
#include "../../../Sources/CFFIHookSupport/include/ffh_thread.h"
#include "../../../Sources/CFFIHookPatch/include/ffh_patch.h"
/* (And the layout of an attach's frames.) */
#include "../../../Sources/CFFIHookSupport/include/ffh_attach.h"
#include "../../../Sources/CFFIHookSupport/include/ffh_elf.h"
#include "../../../Sources/CFFIHookSupport/include/ffh_gnu_hash.h"
#include "../../../Sources/CFFIHookSupport/include/ffh_memory.h"
#include "../CTracerStart/signal_default.h"
#include "../CTracerStart/descriptor_floor.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Read by the Swift driver when it links the tracer's library (see start.c): the libraries every
   Swift module is linked with are recorded only where the library uses them. The tracer does not
   use the string-processing module, so a traced process does not load it and the regular-expression
   parser it needs (libswift_StringProcessing, libswift_RegexParser) when the tracer arrives; the
   concurrency module stays (FFIHook's task-local scopes use it). */
__attribute__((section(".swift1_autolink_entries"), used)) static const char fht_link_as_needed[] = "-Wl,--as-needed";

// The Swift side (FFIHookTracer), exported with @_cdecl.
extern void ffi_hook_tracer_finish(void);

// MARK: - Start

/* Whether LD_PRELOAD names this library (by its file name): ffi-hook-tracer preloads it so.
   Loaded otherwise (ffi-hook-tracer --pid loads it with dlopen and calls the join), the
   library waits to be told what to trace. */
static int fht_preloaded(void) {
    const char *preload = getenv("LD_PRELOAD");
    Dl_info information;
    if (!preload || !dladdr((const void *)fht_preloaded, &information) || !information.dli_fname) return 0;
    const char *slash = strrchr(information.dli_fname, '/');
    const char *name = slash ? slash + 1 : information.dli_fname;
    size_t length = strlen(name);
    /* Items are separated by colons or spaces; compare each item's file name. */
    for (const char *item = preload; *item;) {
        size_t size = strcspn(item, ": ");
        const char *end = item + size;
        const char *start = item;
        for (const char *cursor = item; cursor < end; cursor++) {
            if (*cursor == '/') start = cursor + 1;
        }
        if ((size_t)(end - start) == length && memcmp(start, name, length) == 0) return 1;
        item = *end ? end + 1 : end;
    }
    return 0;
}

// MARK: - SWIFT_BACKTRACE, hidden from the library's runtime

extern char **environ;

/* The process's environment while the library loads with SWIFT_BACKTRACE hidden from it (see
   fht_hide_swift_backtrace), and the copy without it; NULL otherwise. */
static char **fht_environment_kept;
static char **fht_environment_hidden;

/* The library carries its own Swift runtime, linked in, which reads SWIFT_BACKTRACE as the
   library loads: set for a Swift program, it would print in a process the tracer joins that it
   cannot find its backtracer, or, given the backtracer's path, install its crash handler there.
   First of the library's constructors (priority 101, before those of the runtime): when the
   library is loaded with dlopen (a join; the start library hides the variable itself), the
   runtime sees an environment without it, until fht_environment_restore. */
__attribute__((constructor(101))) static void fht_hide_swift_backtrace(void) {
    static const char name[] = "SWIFT_BACKTRACE=";
    char **environment = environ;
    size_t count = 0, found = 0;
    for (char **entry = environment; entry && *entry; entry++, count++) {
        if (strncmp(*entry, name, sizeof name - 1) == 0) found++;
    }
    if (found == 0) return;
    char **copy = malloc((count - found + 1) * sizeof *copy);
    if (!copy) return;
    size_t kept = 0;
    for (char **entry = environment; *entry; entry++) {
        if (strncmp(*entry, name, sizeof name - 1) != 0) copy[kept++] = *entry;
    }
    copy[kept] = NULL;
    fht_environment_kept = environment;
    fht_environment_hidden = copy;
    environ = copy;
}

void fht_environment_restore(void) {
    char **hidden = fht_environment_hidden;
    if (!hidden) return;
    fht_environment_hidden = NULL;
    /* (Otherwise a variable was set meanwhile, in a copy made from the hidden list, which
       stays: so does the hidden list it no longer uses.) */
    if (environ == hidden) {
        environ = fht_environment_kept;
        free(hidden);
    }
    fht_environment_kept = NULL;
}

/* Runs when the loader maps the library. Preloaded itself (LD_PRELOAD naming this library, not
   the start library), the tracer does not start: the Swift runtime linked into the library is
   initialized by constructors of its own that run after this one (they follow the library's C
   objects in the link), so a start here made the tracer's first sets before the runtime chose
   its hashing seed, and the first walk stopped the process with a fatal error. The start
   library loads the tracer with dlopen, which runs all of them first; it is what to preload. */
__attribute__((constructor)) static void fht_load(void) {
    if (!fht_preloaded()) return;
    static const char message[] =
        "ffi-hook-tracer: libFFIHookTracer.so was preloaded itself and traces nothing: preload "
        "libFFIHookTracerStart.so, beside it, or run the program under ffi-hook-tracer\n";
    ssize_t written = write(STDERR_FILENO, message, sizeof message - 1);
    (void)written;
}

int fht_high_descriptor_floor(void) { return fht_descriptor_floor(); }

uint64_t fht_monotonic_nanoseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

// MARK: - Counters

/* Reserved once, never moved or freed: blocks hold pointers into it. Pages are touched
   only as counters are handed out. Its counters name the functions (and hold the shortest
   call's initial value); the counting happens in each thread's own arena of the same shape. */
enum { FHT_CAPACITY = 1 << 16 };
fht_counter *fht_arena;
static size_t fht_used;
static pthread_mutex_t fht_arena_lock = PTHREAD_MUTEX_INITIALIZER;

__thread fht_counter *fht_mine __attribute__((tls_model("initial-exec")));
__thread fht_calls *fht_in_flight __attribute__((tls_model("initial-exec")));
__thread int fht_thread_marks __attribute__((tls_model("initial-exec")));

int fht_tail_called(uint64_t sp) { return ffh_attach_is_return_thunk(*(const uintptr_t *)(uintptr_t)sp); }

void fht_enter_function(void *counter, void *frame) {
    fht_enter((fht_counter *)counter, ((const ffh_attach_enter_frame *)frame)->sp);
}

void fht_leave_function(void *counter, void *frame) {
    fht_leave((fht_counter *)counter, ((const ffh_attach_leave_frame *)frame)->sp);
}

// MARK: - Children on the caller's memory

__thread int32_t fht_spawning __attribute__((tls_model("initial-exec")));
/* The spawning call whose return ends the mark; NULL for vfork (the caller's next call ends it). */
static __thread const fht_counter *fht_spawning_counter __attribute__((tls_model("initial-exec")));

/* gettid by instruction: libc's gettid or syscall may be among the traced functions. */
static int32_t fht_thread_id(void) {
    long result;
    __asm__ volatile("syscall" : "=a"(result) : "a"((long)SYS_gettid) : "rcx", "r11", "memory");
    return (int32_t)result;
}

void fht_set_kind(fht_counter *counter, uint8_t kind) { counter->kind = kind; }

int fht_kind_enters(const fht_counter *counter, uint8_t kind) {
    if (kind == FHT_KIND_ONCE) return 1;
    /* An outer spawning call's mark stays (system calls posix_spawn where both are traced). */
    if (!fht_spawning) {
        fht_spawning_counter = kind == FHT_KIND_SPAWN ? counter : NULL;
        fht_spawning = fht_thread_id();
        fht_thread_marks |= FHT_MARK_SPAWNING;
    }
    return kind == FHT_KIND_VFORK;
}

void fht_spawn_ends(const fht_counter *counter) {
    if (counter != fht_spawning_counter) return;
    fht_thread_marks &= ~FHT_MARK_SPAWNING;
    fht_spawning = 0;
    fht_spawning_counter = NULL;
}

__thread uintptr_t fht_own_work_sp __attribute__((tls_model("initial-exec")));

/* Whether a traced call that finds the tracer's own work marked on its thread is a signal
   handler's that interrupted a stretch of that work (the walk after a dlopen or a dlclose):
   the program's call, counted. Out of line: this frame lies below the handler's signal frame,
   which lies below the stretch's first frame. */
static __attribute__((noinline)) int fht_own_work_interrupted(void) {
    uintptr_t top = fht_own_work_sp;
    return top != 0 && ffh_interrupted_below((uintptr_t)__builtin_frame_address(0), top);
}

int fht_marked_ignores(int marks) {
    if ((marks & FHT_MARK_OWN_WORK) && !fht_own_work_interrupted()) return 1;
    if (!(marks & FHT_MARK_SPAWNING)) return 0;
    if (fht_thread_id() != fht_spawning) return 1; /* the child */
    /* The thread itself: back from a vfork, whose child has exec'd or exited. */
    if (!fht_spawning_counter) {
        fht_thread_marks &= ~FHT_MARK_SPAWNING;
        fht_spawning = 0;
    }
    return 0;
}


/* Every thread's arena, newest first (arenas of threads that ended stay, with their counts). */
typedef struct fht_arena_node {
    fht_counter *counters;
    struct fht_arena_node *next;
} fht_arena_node;
static fht_arena_node *fht_arenas;

/* Anonymous memory of `size` bytes, by the system call itself (NULL when refused): the C
   library's mmap may be traced (inline), and a call of it from here would run the tracer's
   blocks inside its own set-up. */
static void *fht_map_memory(size_t size) {
    long result;
    register long flags __asm__("r10") = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    register long descriptor __asm__("r8") = -1;
    register long offset __asm__("r9") = 0;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"((long)SYS_mmap), "D"(0L), "S"((long)size), "d"((long)(PROT_READ | PROT_WRITE)), "r"(flags),
                       "r"(descriptor), "r"(offset)
                     : "rcx", "r11", "memory");
    return result < 0 && result > -4096 ? NULL : (void *)result;
}

/* Unmaps what fht_map_memory mapped, by the system call. */
static void fht_unmap_memory(void *address, size_t size) {
    long result;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"((long)SYS_munmap), "D"(address), "S"((long)size)
                     : "rcx", "r11", "memory");
    (void)result;
}

static fht_counter *fht_map(void) { return fht_map_memory(FHT_CAPACITY * sizeof(fht_counter)); }

fht_counter *fht_counters(size_t count) {
    pthread_mutex_lock(&fht_arena_lock);
    fht_counter *made = NULL;
    if (!fht_arena) fht_arena = fht_map();
    /* The last counter of every thread's arena holds the arena's list node. */
    if (fht_arena && count <= FHT_CAPACITY - 1 - fht_used) {
        made = fht_arena + fht_used;
        for (size_t index = 0; index < count; index++) made[index].shortest = UINT64_MAX;
        __atomic_store_n(&fht_used, fht_used + count, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&fht_arena_lock);
    return made;
}

// MARK: - Counters by name

/* The traced functions' counters by name: a list of names (copied, never freed, as the
   counters) in the order they were named, and an open-addressing table (a power of two of
   cells, linear probing, at most half full) of places in it plus one (0: empty). A dlopen of a
   library of 1,500 functions looks up thousands of names here: a string hash and a dictionary
   of strings cost five times as much. Used under the tracer's state lock: no lock of its own. */
typedef struct {
    uint64_t hash;
    const char *name;
    size_t length;
    fht_counter *counter;
    /* The trace that named it (fht_names_forget): a name of an earlier trace of the process (a
       join before a leave) keeps its counter, unseen until a later trace names it again. */
    uint32_t generation;
} fht_named;

static fht_named *fht_names;
static size_t fht_names_count, fht_names_capacity;
static uint32_t fht_names_generation;
static uint32_t *fht_name_cells;
static size_t fht_name_cell_count;

static uint64_t fht_name_hash(const char *name, size_t length) {
    uint64_t hash = 0xcbf29ce484222325u; /* FNV-1a */
    for (size_t index = 0; index < length; index++) hash = (hash ^ (unsigned char)name[index]) * 0x100000001b3u;
    return hash;
}

/* The cell that holds the name, or the empty cell where it would go. */
static size_t fht_name_cell(const char *name, size_t length, uint64_t hash) {
    size_t mask = fht_name_cell_count - 1;
    for (size_t cell = (size_t)hash & mask;; cell = (cell + 1) & mask) {
        uint32_t held = fht_name_cells[cell];
        if (!held) return cell;
        const fht_named *named = &fht_names[held - 1];
        if (named->hash == hash && named->length == length && memcmp(named->name, name, length) == 0) return cell;
    }
}

/* The names' text, copied into blocks of FHT_NAME_BLOCK bytes that are never freed (as the
   counters): one allocation a block rather than one a name (a dlopen of SQLite names 1,200
   functions at once). A name longer than a sixteenth of a block gets one of its own. */
#define FHT_NAME_BLOCK 65536
static char *fht_name_text;
static size_t fht_name_text_left;

/* A copy of `name` (`length` bytes) and a NUL, or NULL when no memory is left. */
static char *fht_name_copy(const char *name, size_t length) {
    char *copy;
    if (length + 1 > FHT_NAME_BLOCK / 16) {
        copy = malloc(length + 1);
        if (!copy) return NULL;
    } else {
        if (length + 1 > fht_name_text_left) {
            char *block = malloc(FHT_NAME_BLOCK);
            if (!block) return NULL;
            fht_name_text = block;
            fht_name_text_left = FHT_NAME_BLOCK;
        }
        copy = fht_name_text;
        fht_name_text += length + 1;
        fht_name_text_left -= length + 1;
    }
    memcpy(copy, name, length);
    copy[length] = 0;
    return copy;
}

fht_counter *fht_counter_named(const char *name, size_t length) {
    if (!fht_name_cell_count) return NULL;
    uint32_t held = fht_name_cells[fht_name_cell(name, length, fht_name_hash(name, length))];
    return held && fht_names[held - 1].generation == fht_names_generation ? fht_names[held - 1].counter : NULL;
}

void fht_names_forget(void) { fht_names_generation++; }

/* Room for one more name: the list and the table grown (the table rebuilt) as needed. */
static int fht_name_room(void) {
    if (fht_names_count == fht_names_capacity) {
        size_t capacity = fht_names_capacity ? fht_names_capacity * 2 : 1024;
        fht_named *grown = realloc(fht_names, capacity * sizeof *grown);
        if (!grown) return 0;
        fht_names = grown;
        fht_names_capacity = capacity;
    }
    if ((fht_names_count + 1) * 2 > fht_name_cell_count) {
        size_t count = fht_name_cell_count ? fht_name_cell_count * 2 : 2048;
        uint32_t *cells = calloc(count, sizeof *cells);
        if (!cells) return 0;
        free(fht_name_cells);
        fht_name_cells = cells;
        fht_name_cell_count = count;
        for (size_t place = 0; place < fht_names_count; place++) {
            const fht_named *named = &fht_names[place];
            fht_name_cells[fht_name_cell(named->name, named->length, named->hash)] = (uint32_t)(place + 1);
        }
    }
    return 1;
}

fht_counter *fht_counter_naming(const char *name, size_t length, int *made) {
    *made = 0;
    uint64_t hash = fht_name_hash(name, length);
    if (fht_name_cell_count) {
        uint32_t held = fht_name_cells[fht_name_cell(name, length, hash)];
        if (held) {
            fht_named *named = &fht_names[held - 1];
            /* Named by an earlier trace: this one names it now (the counter is zeroed at the
               start of every trace). */
            if (named->generation != fht_names_generation) {
                named->generation = fht_names_generation;
                *made = 1;
            }
            return named->counter;
        }
    }
    if (fht_names_count >= UINT32_MAX - 1 || !fht_name_room()) return NULL;
    fht_counter *counter = fht_counters(1);
    if (!counter) return NULL;
    /* (Should the copy fail, the counter stays unused in its arena.) */
    char *copy = fht_name_copy(name, length);
    if (!copy) return NULL;
    fht_names[fht_names_count] = (fht_named){hash, copy, length, counter, fht_names_generation};
    /* (The table may have grown since the look above: the cell is found again.) */
    fht_name_cells[fht_name_cell(name, length, hash)] = (uint32_t)(++fht_names_count);
    *made = 1;
    return counter;
}

size_t fht_named_count(void) { return fht_names_count; }

const char *fht_named_at(size_t index, size_t *length, fht_counter **counter) {
    *length = fht_names[index].length;
    *counter = fht_names[index].generation == fht_names_generation ? fht_names[index].counter : NULL;
    return fht_names[index].name;
}

/* A thread's first call: its arena (zero-filled, untouched pages unmapped; a shortest call of
   0 means none yet), linked in without a lock. */
/* A signal handler that interrupts this and makes a traced call maps counters of its own for
   the thread, linked in like any thread's (its counts are summed with the rest); the
   interrupted call then puts its own in place. Nothing here calls a function the tracer may
   trace. */
fht_counter *fht_local_slow(const fht_counter *counter) {
    if (fht_first_call_is_own()) return NULL;
    fht_counter *mine = fht_map();
    void *calls = fht_map_memory(sizeof(fht_calls));
    if (!mine) return NULL;
    if (calls) fht_in_flight = calls;
    fht_arena_node *node = (fht_arena_node *)(void *)&mine[FHT_CAPACITY - 1];
    node->counters = mine;
    node->next = __atomic_load_n(&fht_arenas, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&fht_arenas, &node->next, node, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
    fht_mine = mine;
    return mine + (counter - fht_arena);
}

fht_counter fht_read(const fht_counter *counter) {
    size_t index = (size_t)(counter - fht_arena);
    fht_counter sum = {.shortest = UINT64_MAX};
    for (fht_arena_node *node = __atomic_load_n(&fht_arenas, __ATOMIC_ACQUIRE); node; node = node->next) {
        const fht_counter *copy = &node->counters[index];
        uint64_t completed = __atomic_load_n(&copy->completed, __ATOMIC_RELAXED);
        sum.calls += __atomic_load_n(&copy->calls, __ATOMIC_RELAXED);
        sum.completed += __atomic_load_n(&copy->completed, __ATOMIC_RELAXED);
        sum.total += __atomic_load_n(&copy->total, __ATOMIC_RELAXED);
        sum.own += __atomic_load_n(&copy->own, __ATOMIC_RELAXED);
        sum.every += __atomic_load_n(&copy->every, __ATOMIC_RELAXED);
        uint64_t shortest = __atomic_load_n(&copy->shortest, __ATOMIC_RELAXED);
        uint64_t longest = __atomic_load_n(&copy->longest, __ATOMIC_RELAXED);
        if (completed > 0 && shortest != 0 && shortest < sum.shortest) sum.shortest = shortest;
        if (longest > sum.longest) sum.longest = longest;
    }
    return sum;
}

/* No lock: it runs in a forked child, where another thread of the parent may have held one. */
void fht_reset_counters(void) {
    size_t used = __atomic_load_n(&fht_used, __ATOMIC_ACQUIRE);
    for (fht_arena_node *node = __atomic_load_n(&fht_arenas, __ATOMIC_ACQUIRE); node; node = node->next) {
        for (size_t index = 0; index < used; index++) {
            fht_counter *counter = &node->counters[index];
            __atomic_store_n(&counter->calls, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&counter->completed, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&counter->total, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&counter->shortest, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&counter->longest, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&counter->own, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&counter->every, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&counter->active, 0, __ATOMIC_RELAXED);
        }
    }
}

// MARK: - Process

/* The report: when the loader runs the library's finalizer at exit (after the program's own
   exit handlers and finalizers, before those of the libraries it needs). An
   atexit handler registered at load would run after the finalizers, since the program's
   start registers the loader's finalizer run later. */
static int fht_started;
__attribute__((destructor)) static void fht_unload(void) {
    if (fht_started) ffi_hook_tracer_finish();
}

/* The eventfd that stops the watch, -1 when none runs; the watch's thread closes it. */
static int fht_watch_stop = -1;
static pthread_mutex_t fht_watch_lock = PTHREAD_MUTEX_INITIALIZER;

/* The eventfd that wakes the watching thread when a signal asks a joined process to end (see
   fht_join_handler); -1 when no join traces. */
static int fht_join_wake = -1;

static void fht_forked(void) {
    /* The watch's thread is the parent's: its eventfds are shared with the parent's (a signal
       to the child must not wake the parent's watch: the child takes the default action). */
    fht_watch_stop = -1;
    __atomic_store_n(&fht_join_wake, -1, __ATOMIC_RELEASE);
    pthread_mutex_init(&fht_watch_lock, NULL);
    /* The calls in flight on the forking thread began in the parent, which counted them: their
       returns in the child (the fork's, first) count nowhere (see fht_leave_at). */
    fht_calls *calls = fht_in_flight;
    if (calls) {
        for (uint64_t depth = 0; depth < calls->depth && depth < FHT_FRAMES; depth++) calls->frames[depth].counter = NULL;
    }
    fht_reset_counters();
    fht_reset_events();
    pthread_mutex_init(&fht_arena_lock, NULL);
}

void ffi_hook_tracer_forked_while_starting(void) { __atomic_store_n(&fht_started, 0, __ATOMIC_RELEASE); }

void fht_install_process_handlers(void) {
    /* Once: a process joined again after a leave registers nothing twice. */
    if (__atomic_exchange_n(&fht_started, 1, __ATOMIC_ACQ_REL)) return;
    pthread_atfork(NULL, NULL, fht_forked);
}

void ffi_hook_tracer_own_thread(void) { fht_set_own_work(1); }

int ffi_hook_tracer_begin_own_work(void) { return fht_begin_own_work(); }

void fht_as_own_work(void (*body)(void *), void *context) {
    int was = fht_begin_own_work();
    body(context);
    /* (Not a tail call: the end is a store, made in this frame.) */
    fht_set_own_work(was);
}

void ffi_hook_tracer_end_own_work(int was) { fht_set_own_work(was); }

/* Set once the report is written: the mark of the tracer's own work stays on the thread that
   wrote it, which holds none of its locks after. */
static int fht_written;

void fht_report_written(void) { __atomic_store_n(&fht_written, 1, __ATOMIC_RELEASE); }

/* The hooking library's own work on the thread (the walk that follows a dlopen holds its
   registry's lock, which the report reads). */
static int fht_library_busy(void) {
    const ffh_thread *library = ffh_current_thread;
    return library && __atomic_load_n(&library->busy, __ATOMIC_RELAXED);
}

int ffi_hook_tracer_busy(void) {
    return fht_library_busy() || (fht_own_work() && !__atomic_load_n(&fht_written, __ATOMIC_ACQUIRE));
}

void fht_report_begins(void) { __atomic_store_n(&fht_written, 0, __ATOMIC_RELEASE); }

void fht_register_barriers(void) { (void)ffh_membarrier_register(); }

static int fht_loads_told;

void ffi_hook_tracer_loads_told(void) { __atomic_store_n(&fht_loads_told, 1, __ATOMIC_RELEASE); }

int fht_loads_are_told(void) { return __atomic_load_n(&fht_loads_told, __ATOMIC_ACQUIRE); }

int fht_may_follow_loads(void) { return !fht_library_busy() && !fht_own_work(); }

int fht_thread_busy(void) {
    /* (The tracer's own threads are marked as its work for good, and hold no lock between
       their tasks.) A thread parked by the library's stop, which another thread's attach or
       removal made, is in a signal handler with every signal blocked, where the library's
       fault guard cannot work: the call is made again when it is back. */
    return fht_library_busy() || (fht_own_work() && !fht_on_own_thread()) || ffh_patch_thread_is_parked();
}

volatile uint64_t ffi_hook_tracer_progress;

void fht_report_progress(void) { __atomic_add_fetch(&ffi_hook_tracer_progress, 1, __ATOMIC_RELAXED); }

const char *fht_signal_name(int signal) {
    static __thread char name[16];
    const char *abbreviation = sigabbrev_np(signal);
    if (abbreviation) {
        snprintf(name, sizeof name, "SIG%s", abbreviation);
    } else {
        snprintf(name, sizeof name, "signal %d", signal);
    }
    return name;
}

// MARK: - The joiner's watch

typedef struct {
    int joiner;
    int stop;
    void (*gone)(void);
    void (*signalled)(int);
} fht_watch_arguments;

// MARK: - Signals while joined

/* The signals another process (or the terminal, a timer, a closed pipe) sends to end a process
   whose action for them is the default: while a process is joined, the tracer's handler stands
   in for that action, so that the process reports the window before it dies of the signal, as a
   started program does. (Faults are left alone: a joined process's crash stays its own.) The
   handler does not wait for the report: it wakes the watching thread, which makes the report
   and then sends the signal again with the default action back in place; the interrupted thread
   goes on meanwhile, and so releases any lock the report needs. */
static const int fht_request_signals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGUSR1, SIGUSR2,   SIGPIPE, SIGALRM,
                                          SIGTERM, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGSTKFLT, SIGIO,
                                          SIGPWR};
#define FHT_REQUEST_SIGNALS (sizeof fht_request_signals / sizeof fht_request_signals[0])
/* (Not the real-time signals, whose default action ends a process too: the hooking library
   takes a free one to stop the threads while it patches code inline, which a stand-in would
   leave none of.) */


/* 1 where the handler stands in for the default action. */
static int fht_join_owned[NSIG];
/* The signal the process ends of (0 until one came), and whether its report is made. */
static int fht_join_ending;
static int fht_join_reported;
/* The timer that sends the signal again if the report stops moving, -1 when none. */
static int fht_join_timer = -1;
static uint64_t fht_join_progress_seen;

/* The default action for `signal` again, and the signal sent to the process: it ends of it. */
static void fht_join_end_with(int signal) {
    __atomic_store_n(&fht_join_owned[signal], 0, __ATOMIC_RELEASE);
    (void)fht_signal_default(signal, sigaction);
    kill(getpid(), signal);
}

/* Has `signal` sent to the process again in three seconds (SI_TIMER), to look at the report. */
static void fht_join_arm(int signal) {
    if (fht_join_timer < 0) {
        struct sigevent event;
        memset(&event, 0, sizeof event);
        event.sigev_notify = SIGEV_SIGNAL;
        event.sigev_signo = signal;
        int timer;
        if (syscall(SYS_timer_create, CLOCK_MONOTONIC, &event, &timer) != 0) return;
        fht_join_timer = timer;
    }
    struct itimerspec when;
    memset(&when, 0, sizeof when);
    when.it_value.tv_sec = 3;
    (void)syscall(SYS_timer_settime, fht_join_timer, 0, &when, NULL);
}

static void fht_join_handler(int signal, siginfo_t *info, void *context) {
    (void)context;
    int saved = errno;
    int wake = __atomic_load_n(&fht_join_wake, __ATOMIC_ACQUIRE);
    int ending = __atomic_load_n(&fht_join_ending, __ATOMIC_ACQUIRE);
    if (wake < 0 && !ending) {
        /* Not traced (the tracer left, and the program put the handler back): the default. */
        fht_join_end_with(signal);
    } else if (ending && info->si_code == SI_TIMER && info->si_timerid == fht_join_timer) {
        /* The report's timer: it goes on while it moves, else the process ends unreported. */
        uint64_t progress = __atomic_load_n(&ffi_hook_tracer_progress, __ATOMIC_RELAXED);
        if (__atomic_load_n(&fht_join_reported, __ATOMIC_ACQUIRE)) {
            /* Made: the watching thread ends the process. */
        } else if (progress != fht_join_progress_seen) {
            fht_join_progress_seen = progress;
            fht_join_arm(ending);
        } else {
            static const char message[] = "ffi-hook-tracer: the joined process's report stopped for 3 s: no report\n";
            (void)!write(2, message, sizeof message - 1);
            fht_join_end_with(ending);
        }
    } else {
        int first = 0;
        if (__atomic_compare_exchange_n(&fht_join_ending, &first, signal, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            uint64_t one = 1;
            fht_join_progress_seen = __atomic_load_n(&ffi_hook_tracer_progress, __ATOMIC_RELAXED);
            if (write(wake, &one, sizeof one) == (ssize_t)sizeof one) {
                fht_join_arm(signal);
            } else {
                fht_join_end_with(signal);
            }
        } else if (signal != SIGPIPE) {
            /* Another signal while the report is made (a second Ctrl-C): the user insists, and
               the process ends of the first. (A write to a closed pipe again only fails.) */
            fht_join_end_with(first);
        }
    }
    errno = saved;
}

/* Puts the handler where a request signal's action is the default. */
static void fht_join_take_signals(int wake) {
    __atomic_store_n(&fht_join_ending, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&fht_join_reported, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&fht_join_wake, wake, __ATOMIC_RELEASE);
    for (size_t index = 0; index < FHT_REQUEST_SIGNALS; index++) {
        int signal = fht_request_signals[index];
        struct sigaction current;
        if (sigaction(signal, NULL, &current) != 0) continue;
        if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) continue;
        struct sigaction handler;
        memset(&handler, 0, sizeof handler);
        handler.sa_sigaction = fht_join_handler;
        /* Entered again by a second signal, and on the program's alternate stack if it has one. */
        handler.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK | SA_RESTART;
        sigemptyset(&handler.sa_mask);
        __atomic_store_n(&fht_join_owned[signal], 1, __ATOMIC_RELEASE);
        if (sigaction(signal, &handler, NULL) != 0) __atomic_store_n(&fht_join_owned[signal], 0, __ATOMIC_RELEASE);
    }
}

void fht_join_release_signals(void) {
    /* A signal from now on takes the default action (the handler acts as it, where the program
       took it for its own and puts it back later). */
    __atomic_store_n(&fht_join_wake, -1, __ATOMIC_RELEASE);
    for (size_t index = 0; index < FHT_REQUEST_SIGNALS; index++) {
        int signal = fht_request_signals[index];
        if (!__atomic_load_n(&fht_join_owned[signal], __ATOMIC_ACQUIRE)) continue;
        __atomic_store_n(&fht_join_owned[signal], 0, __ATOMIC_RELEASE);
        struct sigaction current;
        if (sigaction(signal, NULL, &current) != 0 || !(current.sa_flags & SA_SIGINFO) ||
            current.sa_sigaction != fht_join_handler) {
            continue; /* the program has set its own since */
        }
        (void)fht_signal_default(signal, sigaction);
    }
}

static void *fht_watch(void *argument) {
    /* The thread is the tracer's: the traced functions it calls (poll, close) are not counted. */
    fht_set_own_work(1);
    fht_watch_arguments watch = *(fht_watch_arguments *)argument;
    free(argument);
    /* A pidfd reads ready when the process ends; without one (a kernel before 5.3), the
       process is asked after every 100 ms. */
    int process = (int)syscall(SYS_pidfd_open, watch.joiner, 0);
    int signalled = __atomic_load_n(&fht_join_wake, __ATOMIC_ACQUIRE);
    int gone = 0;
    int ending = 0;
    for (;;) {
        /* (A negative descriptor is left out of poll.) */
        struct pollfd ready[3] = {
            {.fd = watch.stop, .events = POLLIN}, {.fd = signalled, .events = POLLIN}, {.fd = process, .events = POLLIN}};
        int count = poll(ready, 3, process >= 0 ? -1 : 100);
        if (count < 0 && errno == EINTR) continue;
        if (count < 0 || ready[0].revents) break;
        if (ready[1].revents) break;
        if (process >= 0 ? ready[2].revents != 0 : kill(watch.joiner, 0) != 0 && errno == ESRCH) {
            gone = 1;
            break;
        }
    }
    if (process >= 0) close(process);
    /* A signal that came, also one that came as the tracer left (the leave then makes the
       report, and this waits for it). */
    ending = signalled >= 0 ? __atomic_load_n(&fht_join_ending, __ATOMIC_ACQUIRE) : 0;
    if (ending) {
        /* The report of the window, then the signal again, its default action back in place. */
        watch.signalled(ending);
        __atomic_store_n(&fht_join_reported, 1, __ATOMIC_RELEASE);
        fht_join_end_with(ending);
        return NULL;
    }
    pthread_mutex_lock(&fht_watch_lock);
    if (fht_watch_stop == watch.stop) fht_watch_stop = -1;
    pthread_mutex_unlock(&fht_watch_lock);
    close(watch.stop);
    if (gone) watch.gone();
    return NULL;
}

/* The stacks of the tracer's own threads, which it maps itself: what such a thread calls before
   its body marks it as the tracer's (the C library's start of a thread: __ctype_init, _setjmp)
   is found to be the tracer's by the stack it runs on, at the thread's first traced call.
   A stack serves the next thread once its thread has ended (it is joined then: the C library
   runs on a thread's stack after its body has returned); past FHT_OWN_STACKS threads alive
   at once, the C library's stacks. (A process joined and left many times starts a watching
   thread at every join: with stacks kept for good, the 17th found its leave refused, its
   thread not known as the tracer's.) */
#define FHT_OWN_STACKS 16
#define FHT_OWN_STACK_SIZE ((size_t)8 << 20)
static uintptr_t fht_own_stacks[FHT_OWN_STACKS];
static int fht_own_stack_count;
/* The thread that runs on each stack, while it has not been joined. */
static pthread_t fht_own_stack_threads[FHT_OWN_STACKS];
static int fht_own_stack_busy[FHT_OWN_STACKS];
static pthread_mutex_t fht_own_stack_lock = PTHREAD_MUTEX_INITIALIZER;

int fht_on_own_thread(void) {
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    int count = __atomic_load_n(&fht_own_stack_count, __ATOMIC_ACQUIRE);
    for (int index = 0; index < count; index++) {
        uintptr_t low = fht_own_stacks[index];
        if (here >= low && here - low < FHT_OWN_STACK_SIZE) return 1;
    }
    return 0;
}

int fht_first_call_is_own(void) {
    if (!fht_on_own_thread()) return 0;
    fht_set_own_work(1);
    return 1;
}

/* The index of a stack for a new thread of the tracer's, its lowest page a guard: one whose
   thread has ended, or a new one; -1 past FHT_OWN_STACKS threads alive. Called under
   fht_own_stack_lock. */
static int fht_own_stack(void) {
    for (int index = 0; index < fht_own_stack_count; index++) {
        if (fht_own_stack_busy[index] && pthread_tryjoin_np(fht_own_stack_threads[index], NULL) == 0) {
            fht_own_stack_busy[index] = 0;
        }
        if (!fht_own_stack_busy[index]) return index;
    }
    if (fht_own_stack_count == FHT_OWN_STACKS) return -1;
    void *stack = mmap(NULL, FHT_OWN_STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                       -1, 0);
    if (stack == MAP_FAILED) return -1;
    if (mprotect(stack, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE) != 0) {
        munmap(stack, FHT_OWN_STACK_SIZE);
        return -1;
    }
    int index = fht_own_stack_count;
    fht_own_stacks[index] = (uintptr_t)stack;
    fht_own_stack_busy[index] = 0;
    __atomic_store_n(&fht_own_stack_count, index + 1, __ATOMIC_RELEASE);
    return index;
}

/* glibc's count of the threads that keep the process alive (`__nptl_nthreads`, which it exports
   for thread debuggers): the last of them to end calls exit(0), which runs the atexit handlers
   (the tracer's report among them). The tracer's own threads are taken out of it while they
   run, so that a program whose main thread ended with pthread_exit still ends when its last
   thread does; NULL where there is no such count. Looked up as the library loads, before any
   function is traced (dlvsym's calls of the loader's functions are not the program's). */
static unsigned int *fht_program_threads;

__attribute__((constructor)) static void fht_find_program_threads(void) {
    fht_program_threads = (unsigned int *)dlvsym(RTLD_DEFAULT, "__nptl_nthreads", "GLIBC_PRIVATE");
}

/* What an own thread runs, and with what. */
typedef struct {
    void *(*body)(void *);
    void *argument;
} fht_own_start;

/* An own thread: its body, then its place in the count given back for the C library's end of
   the thread to take (see fht_program_threads). */
static void *fht_own_body(void *argument) {
    fht_own_start start = *(fht_own_start *)argument;
    free(argument);
    /* (It blocks the stop signal: a stop asks it by SIGSEGV at once.) */
    ffh_patch_thread_takes_faults_only(1);
    void *result = start.body(start.argument);
    ffh_patch_thread_takes_faults_only(0);
    if (fht_program_threads) __atomic_add_fetch(fht_program_threads, 1, __ATOMIC_SEQ_CST);
    return result;
}

int ffi_hook_tracer_thread(void *(*body)(void *), void *argument, const char *name) {
    fht_own_start *start = malloc(sizeof *start);
    if (!start) return -1;
    *start = (fht_own_start){.body = body, .argument = argument};
    /* Every signal blocked, so that none of the process's is delivered to the thread, but those
       a fault raises: the thread reads and writes under the library's fault guard, whose
       SIGSEGV would otherwise end the process, and inline patching stops every thread through
       SIGSEGV. */
    sigset_t all, previous;
    sigfillset(&all);
    static const int faults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS};
    for (size_t index = 0; index < sizeof faults / sizeof faults[0]; index++) sigdelset(&all, faults[index]);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pthread_mutex_lock(&fht_own_stack_lock);
    int stack = fht_own_stack();
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    /* On a stack of its own, joinable (joined when the stack is needed again); else detached. */
    if (stack >= 0) {
        pthread_attr_setstack(&attributes, (void *)fht_own_stacks[stack], FHT_OWN_STACK_SIZE);
    } else {
        pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    }
    pthread_t thread;
    int created = pthread_create(&thread, &attributes, fht_own_body, start);
    pthread_attr_destroy(&attributes);
    if (created == 0 && stack >= 0) {
        fht_own_stack_threads[stack] = thread;
        fht_own_stack_busy[stack] = 1;
    }
    /* (pthread_create counted it; the thread gives it back as it ends.) */
    if (created == 0 && fht_program_threads) __atomic_sub_fetch(fht_program_threads, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&fht_own_stack_lock);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (created != 0) {
        free(start);
        return -1;
    }
    pthread_setname_np(thread, name);
    return 0;
}

int fht_watch_joiner(int joiner, void (*gone)(void), void (*signalled)(int)) {
    fht_watch_arguments *watch = malloc(sizeof *watch);
    if (!watch) return -1;
    int stop = eventfd(0, EFD_CLOEXEC);
    if (stop < 0) {
        free(watch);
        return -1;
    }
    /* The signals' eventfd is made once and kept: a handler may still write to it after a leave. */
    static int wake = -1;
    if (wake < 0) wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    uint64_t stale;
    if (wake >= 0) (void)!read(wake, &stale, sizeof stale);
    *watch = (fht_watch_arguments){.joiner = joiner, .stop = stop, .gone = gone, .signalled = signalled};
    pthread_mutex_lock(&fht_watch_lock);
    fht_watch_stop = stop;
    pthread_mutex_unlock(&fht_watch_lock);
    if (wake >= 0) __atomic_store_n(&fht_join_wake, wake, __ATOMIC_RELEASE);
    if (ffi_hook_tracer_thread(fht_watch, watch, "ffi-hook-watch") != 0) {
        __atomic_store_n(&fht_join_wake, -1, __ATOMIC_RELEASE);
        pthread_mutex_lock(&fht_watch_lock);
        fht_watch_stop = -1;
        pthread_mutex_unlock(&fht_watch_lock);
        close(stop);
        free(watch);
        return -1;
    }
    if (wake >= 0) fht_join_take_signals(wake);
    return 0;
}

void fht_stop_watching(void) {
    pthread_mutex_lock(&fht_watch_lock);
    if (fht_watch_stop >= 0) {
        uint64_t one = 1;
        (void)!write(fht_watch_stop, &one, sizeof one);
        fht_watch_stop = -1;
    }
    pthread_mutex_unlock(&fht_watch_lock);
}

// MARK: - Loaded objects

/* The loader rewrites the address entries of a writable dynamic section to run-time
   addresses; a read-only one (the vDSO's) keeps link-time ones. */
static uintptr_t fht_address(uintptr_t base, uintptr_t value) { return value < base ? value + base : value; }

typedef struct {
    const ElfW(Sym) *symbols;
    const char *strings;
    const ElfW(Half) *versions;
    const uint32_t *gnu_hash;
    const uint32_t *sysv_hash;
    const ElfW(Rela) *plt;
    size_t plt_size;
    const ElfW(Rela) *rela;
    size_t rela_size;
    size_t rela_entry;
} fht_dynamic;

/* The number of dynamic symbols: DT_HASH's chain count, else past the last chain of the
   GNU hash table. */
static size_t fht_symbol_count(const fht_dynamic *dynamic) {
    if (dynamic->sysv_hash) return dynamic->sysv_hash[1];
    const uint32_t *table = dynamic->gnu_hash;
    if (!table) return 0;
    uint32_t buckets = table[0], offset = table[1], bloom = table[2];
    const uint32_t *bucket = table + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
    const uint32_t *chain = bucket + buckets;
    uint32_t last = 0;
    for (uint32_t index = 0; index < buckets; index++) {
        if (bucket[index] > last) last = bucket[index];
    }
    if (last < offset) return offset;
    while (!(chain[last - offset] & 1)) last++;
    return (size_t)last + 1;
}

/* Reports the symbol of each JUMP_SLOT and GLOB_DAT relocation of the table, once per symbol
   (`reported`, when not NULL, has a bit per symbol index below `count`, shared by the object's
   tables: a function both called and taken by address has two entries). */
static void fht_report_relocations(
    const fht_dynamic *dynamic, const ElfW(Rela) *table, size_t size, size_t entry_size, fht_visitor visit,
    void *context, uintptr_t base, uint8_t *reported, size_t count) {
    if (!table || entry_size == 0) return;
    for (size_t offset = 0; offset + entry_size <= size; offset += entry_size) {
        const ElfW(Rela) *relocation = (const ElfW(Rela) *)((const char *)table + offset);
        unsigned long type = ELF64_R_TYPE(relocation->r_info);
        size_t index = ELF64_R_SYM(relocation->r_info);
        if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || index == 0) continue;
        const ElfW(Sym) *symbol = &dynamic->symbols[index];
        unsigned char kind = ELF64_ST_TYPE(symbol->st_info);
        if (kind != STT_FUNC && kind != STT_GNU_IFUNC && kind != STT_NOTYPE) continue;
        /* The address an object takes of a function it defines itself: no import, and the
           library puts no hook in it (see elf.c). */
        if (type == R_X86_64_GLOB_DAT && symbol->st_shndx != SHN_UNDEF) continue;
        if (reported && index < count) {
            if (reported[index / 8] & (1u << (index % 8))) continue;
            reported[index / 8] |= (uint8_t)(1u << (index % 8));
        }
        visit(context, FHT_IMPORT, dynamic->strings + symbol->st_name, base);
    }
}

typedef struct {
    fht_visitor visit;
    void *context;
} fht_walk_context;

/* The object's dynamic section, NULL when it has none. */
static const ElfW(Dyn) *fht_dynamic_section(const struct dl_phdr_info *info) {
    const ElfW(Dyn) *entry = NULL;
    for (ElfW(Half) index = 0; index < info->dlpi_phnum; index++) {
        if (info->dlpi_phdr[index].p_type == PT_DYNAMIC) {
            entry = (const ElfW(Dyn) *)((uintptr_t)info->dlpi_addr + info->dlpi_phdr[index].p_vaddr);
        }
    }
    return entry;
}

/* Reads the tables of the dynamic section `entry` of the object loaded at `base`; whether the
   PLT's relocations are RELA ones. */
static int fht_read_dynamic(const ElfW(Dyn) *entry, uintptr_t base, fht_dynamic *out) {
    fht_dynamic dynamic = {.rela_entry = sizeof(ElfW(Rela))};
    int plt_is_rela = 1;
    for (; entry->d_tag != DT_NULL; entry++) {
        uintptr_t value = entry->d_un.d_ptr;
        switch (entry->d_tag) {
        case DT_SYMTAB: dynamic.symbols = (const ElfW(Sym) *)fht_address(base, value); break;
        case DT_STRTAB: dynamic.strings = (const char *)fht_address(base, value); break;
        case DT_VERSYM: dynamic.versions = (const ElfW(Half) *)fht_address(base, value); break;
        case DT_GNU_HASH: dynamic.gnu_hash = (const uint32_t *)fht_address(base, value); break;
        case DT_HASH: dynamic.sysv_hash = (const uint32_t *)fht_address(base, value); break;
        case DT_JMPREL: dynamic.plt = (const ElfW(Rela) *)fht_address(base, value); break;
        case DT_PLTRELSZ: dynamic.plt_size = entry->d_un.d_val; break;
        case DT_PLTREL: plt_is_rela = entry->d_un.d_val == DT_RELA; break;
        case DT_RELA: dynamic.rela = (const ElfW(Rela) *)fht_address(base, value); break;
        case DT_RELASZ: dynamic.rela_size = entry->d_un.d_val; break;
        case DT_RELAENT: dynamic.rela_entry = entry->d_un.d_val; break;
        default: break;
        }
    }
    *out = dynamic;
    return plt_is_rela;
}

/* Whether symbol `index` is a function the object exports (what FHT_EXPORT reports). */
static int fht_is_export(const fht_dynamic *dynamic, size_t index) {
    const ElfW(Sym) *symbol = &dynamic->symbols[index];
    unsigned char kind = ELF64_ST_TYPE(symbol->st_info);
    unsigned char binding = ELF64_ST_BIND(symbol->st_info);
    if (symbol->st_shndx == SHN_UNDEF || (kind != STT_FUNC && kind != STT_GNU_IFUNC)) return 0;
    if (binding != STB_GLOBAL && binding != STB_WEAK && binding != STB_GNU_UNIQUE) return 0;
    if (dynamic->versions && (dynamic->versions[index] & 0x8000)) return 0; /* a hidden, older version */
    return dynamic->strings[symbol->st_name] != 0;
}

static int fht_visit_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    fht_walk_context *walk = data;
    uintptr_t base = (uintptr_t)info->dlpi_addr;
    if (walk->visit(walk->context, FHT_OBJECT, info->dlpi_name ? info->dlpi_name : "", base) == FHT_KNOWN_OBJECT) {
        return 0;
    }
    const ElfW(Dyn) *first = fht_dynamic_section(info);
    if (!first) return 0;
    fht_dynamic dynamic;
    int plt_is_rela = fht_read_dynamic(first, base, &dynamic);
    if (!dynamic.symbols || !dynamic.strings) return 0;
    for (const ElfW(Dyn) *entry = first; entry->d_tag != DT_NULL; entry++) {
        if (entry->d_tag == DT_SONAME) walk->visit(walk->context, FHT_SONAME, dynamic.strings + entry->d_un.d_val, base);
        if (entry->d_tag == DT_NEEDED) walk->visit(walk->context, FHT_NEEDED, dynamic.strings + entry->d_un.d_val, base);
    }
    int wants = walk->visit(walk->context, FHT_NAMED, "", base);
    size_t count = wants & FHT_WANTS_EXPORTS ? fht_symbol_count(&dynamic) : 0;
    for (size_t index = 1; index < count; index++) {
        if (fht_is_export(&dynamic, index)) {
            walk->visit(walk->context, FHT_EXPORT, dynamic.strings + dynamic.symbols[index].st_name, base);
        }
    }
    if (!(wants & FHT_WANTS_IMPORTS)) return 0;
    /* On the stack for up to 32,768 symbols, else mapped by the system call (the C library's
       mmap may be traced); without it, a symbol with two entries is reported twice. */
    size_t symbols = fht_symbol_count(&dynamic);
    size_t bytes = (symbols + 7) / 8;
    uint8_t local[4096];
    uint8_t *reported = bytes <= sizeof local ? local : fht_map_memory(bytes);
    if (reported == local) memset(local, 0, bytes);
    if (plt_is_rela) {
        fht_report_relocations(
            &dynamic, dynamic.plt, dynamic.plt_size, sizeof(ElfW(Rela)), walk->visit, walk->context, base, reported,
            symbols);
    }
    fht_report_relocations(
        &dynamic, dynamic.rela, dynamic.rela_size, dynamic.rela_entry, walk->visit, walk->context, base, reported,
        symbols);
    if (reported && reported != local) fht_unmap_memory(reported, bytes);
    return 0;
}

void fht_walk(fht_visitor visit, void *context) {
    /* A fork's child whose parent had a thread walking, loading or unloading as it forked has
       the loader's list locked for good: a walk there would wait for ever (the report at the
       child's exit walks). It walks nothing: the objects known from before the fork stand. */
    if (ffh_elf_list_lock_orphaned()) return;
    fht_walk_context walk = {visit, context};
    dl_iterate_phdr(fht_visit_object, &walk);
}

typedef struct {
    const char *path;
    uintptr_t base;
    const char *const *names;
    size_t count;
    uint8_t *found;
    int loaded;
} fht_export_lookup;

/* Whether the object exports `name` as a function: its symbols whose hashes match, through the
   GNU or the SysV hash table, else (an object with neither) every symbol. */
static int fht_exports(const fht_dynamic *dynamic, const char *name) {
    if (dynamic->gnu_hash) {
        ffh_gnu_hash_walk walk;
        ffh_gnu_hash_begin(&walk, dynamic->gnu_hash, ffh_gnu_hash(name));
        for (long index; (index = ffh_gnu_hash_next(&walk)) >= 0;) {
            if (strcmp(dynamic->strings + dynamic->symbols[index].st_name, name) == 0 &&
                fht_is_export(dynamic, (size_t)index)) {
                return 1;
            }
        }
        return 0;
    }
    size_t count = fht_symbol_count(dynamic);
    for (size_t index = 1; index < count; index++) {
        if (strcmp(dynamic->strings + dynamic->symbols[index].st_name, name) == 0 && fht_is_export(dynamic, index)) {
            return 1;
        }
    }
    return 0;
}

static int fht_look_up_exports(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    fht_export_lookup *lookup = data;
    if ((uintptr_t)info->dlpi_addr != lookup->base || strcmp(info->dlpi_name ? info->dlpi_name : "", lookup->path) != 0) {
        return 0;
    }
    lookup->loaded = 1;
    const ElfW(Dyn) *first = fht_dynamic_section(info);
    if (!first) return 1;
    fht_dynamic dynamic;
    (void)fht_read_dynamic(first, lookup->base, &dynamic);
    if (!dynamic.symbols || !dynamic.strings) return 1;
    for (size_t index = 0; index < lookup->count; index++) {
        if (fht_exports(&dynamic, lookup->names[index])) lookup->found[index] = 1;
    }
    return 1;
}

int fht_find_exports(const char *path, uintptr_t base, const char *const *names, size_t count, uint8_t *found) {
    fht_export_lookup lookup = {path, base, names, count, found, 0};
    dl_iterate_phdr(fht_look_up_exports, &lookup);
    return lookup.loaded;
}

static int fht_read_counts(struct dl_phdr_info *info, size_t size, void *data) {
    uint64_t *counts = data;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        counts[0] = info->dlpi_adds;
        counts[1] = info->dlpi_subs;
    }
    return 1;
}

void fht_load_counts(uint64_t *adds, uint64_t *subs) {
    uint64_t counts[2] = {0, 0};
    dl_iterate_phdr(fht_read_counts, counts);
    *adds = counts[0];
    *subs = counts[1];
}

int fht_start_library_path(char *buffer, size_t size) {
    const void *marker = dlsym(RTLD_DEFAULT, "ffi_hook_tracer_preloaded");
    return marker ? fht_object_path(marker, buffer, size) : 0;
}

typedef struct {
    uintptr_t address;
    char *buffer;
    size_t size;
    /* 1: the object was found and named, -1: found with no name (the main program). */
    int found;
} fht_holder;

/* The object's path copied while the loader holds its lock (the object cannot go meanwhile). */
static int fht_find_holder(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    fht_holder *holder = data;
    for (ElfW(Half) index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        uintptr_t start = info->dlpi_addr + header->p_vaddr;
        if (header->p_type == PT_LOAD && holder->address >= start && holder->address - start < header->p_memsz) {
            if (!info->dlpi_name || !*info->dlpi_name) {
                holder->found = -1;
                return 1;
            }
            strncpy(holder->buffer, info->dlpi_name, holder->size - 1);
            holder->buffer[holder->size - 1] = 0;
            holder->found = 1;
            return 1;
        }
    }
    return 0;
}

/* By the loaded objects' segments, not dladdr, which also looks for the nearest symbol in the
   object's whole symbol table (about a quarter of a million instructions in the Swift
   runtime's); dladdr only for an object the loader names with no path (the main program). */
typedef struct {
    void (*visit)(void *context, const char *path);
    void *context;
} fht_namespaces_request;

/* (In dl_iterate_phdr's callback, once: the loader's lock keeps the lists still.) */
static int fht_namespaces_visit(struct dl_phdr_info *info, size_t size, void *data) {
    (void)info;
    (void)size;
    const fht_namespaces_request *request = data;
    const struct r_debug_extended *space = (const struct r_debug_extended *)&_r_debug;
    if (space->base.r_version < 2) return 1;
    for (space = space->r_next; space; space = space->r_next) {
        for (const struct link_map *map = space->base.r_map; map; map = map->l_next) {
            if (map->l_name && map->l_name[0]) request->visit(request->context, map->l_name);
        }
    }
    return 1;
}

void fht_other_namespaces(void (*visit)(void *context, const char *path), void *context) {
    fht_namespaces_request request = {visit, context};
    dl_iterate_phdr(fht_namespaces_visit, &request);
}

typedef struct {
    uintptr_t base, low, high;
    int found;
} fht_span_request;

static int fht_find_span(struct dl_phdr_info *info, size_t size, void *context) {
    (void)size;
    fht_span_request *request = context;
    if (info->dlpi_addr != request->base) return 0;
    uintptr_t low = UINTPTR_MAX, high = 0;
    for (ElfW(Half) index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *segment = &info->dlpi_phdr[index];
        if (segment->p_type != PT_LOAD) continue;
        uintptr_t start = info->dlpi_addr + segment->p_vaddr;
        if (start < low) low = start;
        if (start + segment->p_memsz > high) high = start + segment->p_memsz;
    }
    if (low >= high) return 0;
    request->low = low;
    request->high = high;
    request->found = 1;
    return 1;
}

int fht_object_span(uintptr_t base, uintptr_t *low, uintptr_t *high) {
    fht_span_request request = {base, 0, 0, 0};
    dl_iterate_phdr(fht_find_span, &request);
    if (!request.found) return 0;
    *low = request.low;
    *high = request.high;
    return 1;
}

int fht_object_path(const void *address, char *buffer, size_t size) {
    if (size == 0) return 0;
    fht_holder holder = {(uintptr_t)address, buffer, size, 0};
    dl_iterate_phdr(fht_find_holder, &holder);
    if (holder.found == 1) return 1;
    Dl_info info;
    if (!dladdr(address, &info) || !info.dli_fname) return 0;
    strncpy(buffer, info.dli_fname, size - 1);
    buffer[size - 1] = 0;
    return 1;
}
