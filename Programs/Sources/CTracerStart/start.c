#define _GNU_SOURCE
#include "CTracerStart.h"
#include "signal_default.h"
#include "descriptor_floor.h"
#include "light_report.h"
/* (Header-only: the hooking library's system calls by instruction.) */
#include "../../../Sources/CFFIHookSupport/include/ffh_syscall.h"
/* (And its walk of a GNU hash table.) */
#include "../../../Sources/CFFIHookSupport/include/ffh_gnu_hash.h"
/* (And its call of the loader as from the caller's object.) */
#include "../../../Sources/CFFIHookSupport/ffh_return_site.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <link.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

const int ffi_hook_tracer_preloaded = 1;

/* Read by the Swift driver when it links this library (swift-autolink-extract gathers such
   entries ahead of the Swift runtime on the link line): the runtime it links every library with
   is recorded only if needed, and nothing here needs it. A process that never loads a traced
   library then loads the C library and this one, not the Swift runtime (about 1.7 ms less per
   process). */
__attribute__((section(".swift1_autolink_entries"), used)) static const char fhs_link_as_needed[] = "-Wl,--as-needed";

/* 1 once the tracer is loaded (or could not be): nothing more to look for. */
static int fhs_loaded;
static pthread_mutex_t fhs_lock = PTHREAD_MUTEX_INITIALIZER;
/* The tracer's marks of a stretch of its own work (``fht_begin_own_work``), once it is loaded
   (both, or neither). */
static int (*fhs_begin_own_work)(void);
static void (*fhs_end_own_work)(int);
/* 1 on the thread that is loading the tracer: the loader's and the tracer's own calls of
   dlopen meanwhile (it pins objects with dlopen) go straight to the C library's. */
static __thread int fhs_loading;

/* The C library's dlopen, which this library's own shadows. */
typedef void *(*fhs_dlopen_function)(const char *, int);
static fhs_dlopen_function fhs_real_dlopen;
/* And its dlclose. */
typedef int (*fhs_dlclose_function)(void *);
static fhs_dlclose_function fhs_real_dlclose;
/* The C library's dlmopen: a load into the program's own namespace (LM_ID_BASE) is traced
   like one by dlopen. */
typedef void *(*fhs_dlmopen_function)(Lmid_t, const char *, int);
static fhs_dlmopen_function fhs_real_dlmopen;

/* Whether `path` ends in the relative path `name` (links/libz.so.1), a whole component of it. */
static int fhs_ends_in(const char *path, const char *name) {
    size_t length = strlen(path), tail = strlen(name);
    return name[0] != '/' && tail < length && path[length - tail - 1] == '/' && strcmp(path + length - tail, name) == 0;
}

/* Whether `name` (an entry of FFI_HOOK_TRACER_LIBRARIES) names the object with this path and
   soname: the tracer's own rule (TracerConfiguration.libraries(naming:soname:)), the file the
   path leads to after symbolic links included (by its path, any path to it, or its name). */
static int fhs_names(const char *name, const char *path, const char *soname) {
    const char *slash = strrchr(path, '/');
    const char *file = slash ? slash + 1 : path;
    if (!*path) return 0; /* the main program */
    /* A name with a slash is a path or a pattern of paths (/usr/lib/x86_64-linux-gnu/libz.so*);
       a relative one names the end of a path (links/libz.so.1). */
    int is_path = strchr(name, '/') != NULL;
    if (strcmp(name, path) == 0 || strcmp(name, file) == 0 || fnmatch(name, file, 0) == 0) return 1;
    if (is_path && (fnmatch(name, path, 0) == 0 || fhs_ends_in(path, name))) return 1;
    if (soname && (strcmp(name, soname) == 0 || fnmatch(name, soname, 0) == 0)) return 1;
    /* Where the path's last component is no symbolic link, the file it leads to has its file
       name: a name without a slash, which did not match that, matches nothing more. */
    struct stat status;
    if (!is_path && (lstat(path, &status) != 0 || !S_ISLNK(status.st_mode))) return 0;
    char real[PATH_MAX], named[PATH_MAX];
    if (!realpath(path, real)) return 0;
    const char *real_slash = strrchr(real, '/');
    const char *real_file = real_slash ? real_slash + 1 : real;
    if (strcmp(name, real_file) == 0 || fnmatch(name, real_file, 0) == 0) return 1;
    if (is_path && (fnmatch(name, real, 0) == 0 || fhs_ends_in(real, name))) return 1;
    return is_path && realpath(name, named) && strcmp(named, real) == 0;
}

/* The object's DT_SONAME, or NULL. */
static const char *fhs_soname(const struct dl_phdr_info *info) {
    const ElfW(Dyn) *dynamic = NULL;
    for (ElfW(Half) index = 0; index < info->dlpi_phnum; index++) {
        if (info->dlpi_phdr[index].p_type == PT_DYNAMIC) {
            dynamic = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[index].p_vaddr);
        }
    }
    if (!dynamic) return NULL;
    uintptr_t strings = 0, soname = 0;
    int has_soname = 0;
    for (const ElfW(Dyn) *entry = dynamic; entry->d_tag != DT_NULL; entry++) {
        if (entry->d_tag == DT_STRTAB) strings = entry->d_un.d_ptr;
        if (entry->d_tag == DT_SONAME) {
            soname = entry->d_un.d_val;
            has_soname = 1;
        }
    }
    if (!strings || !has_soname) return NULL;
    /* The loader rewrites a writable dynamic section's addresses to run-time ones; the vDSO's
       keeps link-time ones. */
    if (strings < info->dlpi_addr) strings += info->dlpi_addr;
    return (const char *)strings + soname;
}

/* Whether an entry of `list` names the object with this path and soname; with `matched`, every
   entry is tried and bit N set for the Nth non-empty one that does (the first 64), else the
   first that does ends the search. */
static int fhs_matching(const char *list, const char *path, const char *soname, uint64_t *matched) {
    char name[4096];
    int any = 0;
    unsigned place = 0;
    for (const char *at = list; *at;) {
        size_t length = strcspn(at, ",");
        while (length > 0 && *at == ' ') {
            at++;
            length--;
        }
        size_t kept = length;
        while (kept > 0 && at[kept - 1] == ' ') kept--;
        if (kept > 0 && kept < sizeof name) {
            memcpy(name, at, kept);
            name[kept] = 0;
            if (fhs_names(name, path, soname)) {
                if (!matched) return 1;
                any = 1;
                if (place < 64) *matched |= (uint64_t)1 << place;
            }
        }
        if (kept > 0) place++;
        at += length;
        if (*at == ',') at++;
    }
    return any;
}

/* This library's link map (set where the light report stands in): its object is never a name
   the report suggests. */
static struct link_map *fhs_own_map;

/* Whether the object loaded at `base` is this library. */
static int fhs_is_own(uintptr_t base) { return fhs_own_map && base == (uintptr_t)fhs_own_map->l_addr; }

/* A walk of the loaded objects: for one that an entry of `list` names (the walk stops there),
   or, with `matched`, for every entry that one names (fhs_matching's bits). */
typedef struct {
    const char *list;
    uint64_t *matched;
} fhs_walk;

/* The objects a walk found answering to no entry of the list, by load bias and a hash of the
   loader's path for them: later walks (one at every dlopen until a traced library appears) pass
   over them without matching them again, which resolves each one's symbolic links: a program
   that opens hundreds of objects otherwise paid for every loaded object at every dlopen (150
   dlopens took 49 ms where they take 5). An object unloaded and another loaded at its address
   under the same path is the same file, with the same answer. Read and written inside the
   loader's walk (dl_iterate_phdr), which it makes for one thread at a time; kept for the list
   it was made for. A full table remembers no more: the walks then match as before. */
enum { FHS_SEEN_SLOTS = 4096 };
typedef struct {
    uintptr_t base;
    uint64_t hash; /* 0: an empty slot */
} fhs_seen_object;
static fhs_seen_object fhs_seen[FHS_SEEN_SLOTS];
static size_t fhs_seen_count;
static const char *fhs_seen_list;

/* FNV-1a of the path, never 0. */
static uint64_t fhs_path_hash(const char *path) {
    uint64_t hash = 0xcbf29ce484222325u;
    for (const unsigned char *at = (const unsigned char *)path; *at; at++) hash = (hash ^ *at) * 0x100000001b3u;
    return hash | 1;
}

/* The slot that holds the object, or the empty one where it would go (NULL: the table is full). */
static fhs_seen_object *fhs_seen_slot(uintptr_t base, uint64_t hash) {
    size_t mask = FHS_SEEN_SLOTS - 1;
    for (size_t probe = 0, at = (size_t)(hash ^ (base >> 12)) & mask; probe < FHS_SEEN_SLOTS; probe++, at = (at + 1) & mask) {
        fhs_seen_object *slot = &fhs_seen[at];
        if (slot->hash == 0 || (slot->hash == hash && slot->base == base)) return slot;
    }
    return NULL;
}

/* Visits an object of a walk (noted for the light report on the way). */
static int fhs_visit(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    const fhs_walk *walk = data;
    const char *path = info->dlpi_name ? info->dlpi_name : "";
    if (!*path) return 0;
    /* (A walk that collects every entry's matches looks at every object.) */
    fhs_seen_object *seen = NULL;
    uint64_t hash = 0;
    if (!walk->matched) {
        if (fhs_seen_list != walk->list) {
            /* (Empty at the first walk: its pages are touched only as objects are remembered.) */
            if (fhs_seen_list) memset(fhs_seen, 0, sizeof fhs_seen);
            fhs_seen_count = 0;
            fhs_seen_list = walk->list;
        }
        hash = fhs_path_hash(path);
        seen = fhs_seen_slot((uintptr_t)info->dlpi_addr, hash);
        if (seen && seen->hash) return 0;
    }
    const char *soname = fhs_soname(info);
    if (!fhs_is_own(info->dlpi_addr)) fhs_light_note_name(path, soname);
    int matches = fhs_matching(walk->list, path, soname, walk->matched);
    if (seen && !matches && (fhs_seen_count + 1) * 2 <= FHS_SEEN_SLOTS) {
        *seen = (fhs_seen_object){(uintptr_t)info->dlpi_addr, hash};
        fhs_seen_count++;
    }
    return matches && !walk->matched;
}

/* Whether an entry of the list names an object of the namespace, other than the program's, that
   `handle` (dlmopen's) is in: by its path alone, as the tracer names such objects. */
static int fhs_names_in_namespace(void *handle) {
    Lmid_t namespace = LM_ID_BASE;
    struct link_map *map = NULL;
    const char *list = fhs_libraries();
    if (!list || dlinfo(handle, RTLD_DI_LMID, &namespace) != 0 || namespace == LM_ID_BASE ||
        dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map) {
        return 0;
    }
    while (map->l_prev) map = map->l_prev;
    for (; map; map = map->l_next) {
        if (map->l_name && *map->l_name && fhs_matching(list, map->l_name, NULL, NULL)) return 1;
    }
    return 0;
}

/* Reads `size` bytes at `address` of the process's own memory into `into` without faulting (a
   system call, which fails where a plain read would fault); the bytes read. */
static size_t fhs_read_safely(void *into, uintptr_t address, size_t size) {
    struct iovec local = {into, size}, remote = {(void *)address, size};
    long read = ffh_syscall6(SYS_process_vm_readv, ffh_syscall0(SYS_getpid), (long)&local, 1, (long)&remote, 1, 0);
    return read > 0 ? (size_t)read : 0;
}

/* Reads the string at `address` into `into` (`size` bytes, ending with a zero byte); 0 when it
   cannot be read whole. */
static int fhs_read_string(char *into, size_t size, uintptr_t address) {
    size_t used = 0;
    while (address && used + 1 < size) {
        size_t want = size - 1 - used < 64 ? size - 1 - used : 64;
        size_t got = fhs_read_safely(into + used, address + used, want);
        if (got == 0) return 0;
        void *end = memchr(into + used, 0, got);
        if (end) return 1;
        used += got;
    }
    return 0;
}

/* The DT_SONAME of the object whose dynamic section is at `dynamic` (load bias `base`), read
   without faulting into `into`; 0 when it has none or it cannot be read. */
static int fhs_read_soname(char *into, size_t size, uintptr_t dynamic, uintptr_t base) {
    uintptr_t strings = 0, soname = 0;
    int has_soname = 0;
    for (int index = 0; dynamic && index < 4096; index++) {
        ElfW(Dyn) entry;
        if (fhs_read_safely(&entry, dynamic + (uintptr_t)index * sizeof entry, sizeof entry) != sizeof entry) return 0;
        if (entry.d_tag == DT_NULL) break;
        if (entry.d_tag == DT_STRTAB) strings = entry.d_un.d_ptr;
        if (entry.d_tag == DT_SONAME) {
            soname = entry.d_un.d_val;
            has_soname = 1;
        }
    }
    if (!strings || !has_soname) return 0;
    if (strings < base) strings += base;
    return fhs_read_string(into, size, strings + soname);
}

/* The light report's last walk: the loader's list of the program's objects (its debugger
   interface, read without its lock and without faulting: a signal handler's report may have
   interrupted the loader), each object noted, and the entries of the list that one answers to
   now set in `matched` (an object loaded by a dlopen that has not returned yet counts). */
static void fhs_walk_links(uint64_t *matched) {
    const char *list = fhs_libraries();
    if (!list) return;
    uintptr_t map = 0;
    if (fhs_read_safely(&map, (uintptr_t)&_r_debug.r_map, sizeof map) != sizeof map) return;
    static char path[4096], soname[4096];
    for (int count = 0; map && count < 65536; count++) {
        struct link_map entry;
        if (fhs_read_safely(&entry, map, sizeof entry) != sizeof entry) return;
        if (!fhs_is_own(entry.l_addr) && fhs_read_string(path, sizeof path, (uintptr_t)entry.l_name) && path[0]) {
            const char *name = fhs_read_soname(soname, sizeof soname, (uintptr_t)entry.l_ld, entry.l_addr) ? soname : NULL;
            fhs_light_note_name(path, name);
            (void)fhs_matching(list, path, name, matched);
        }
        map = (uintptr_t)entry.l_next;
    }
}

/* The stack the light report runs on: the thread's own may be a signal handler's small
   alternate stack (a handler that calls _exit), too small for the walk and the report. One,
   since the report is made once. */
static char fhs_report_stack[65536] __attribute__((aligned(64)));

/* Runs `function(argument)` on fhs_report_stack. */
static void fhs_on_report_stack(void (*function)(void *), void *argument) {
#if defined(__x86_64__)
    void *top = fhs_report_stack + sizeof fhs_report_stack;
    __asm__ volatile("mov %%rsp, %%rbx\n\t"
                     "mov %[top], %%rsp\n\t"
                     "call *%[function]\n\t"
                     "mov %%rbx, %%rsp"
                     : "+D"(argument)
                     : [function] "r"(function), [top] "r"(top)
                     : "rbx", "rax", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "xmm0", "xmm1", "xmm2", "xmm3",
                       "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
                       "xmm15", "memory", "cc");
#else
    function(argument);
#endif
}

static void fhs_light_run(void *argument) {
    uint64_t matched = 0;
    fhs_walk_links(&matched);
    fhs_light_report(*(const int *)argument, matched);
}

/* The light report (light_report.c), once, after a last walk of the loaded objects, on a stack
   of its own. */
static void fhs_light_finish(int signal) {
    if (!fhs_light_claim()) return;
    fhs_on_report_stack(fhs_light_run, &signal);
}

// MARK: - The report when a signal ends the process

/* A process that a signal ends (Ctrl-C, kill, a crash, a write to a closed pipe) runs no exit
   handler, so the tracer's report, made at exit, would be lost. Where the program leaves such a
   signal's action at its default, this library puts a handler there that has the report made
   and then lets the signal end the process as it would have: same signal, same status, a core
   file where there would have been one.

   The handler does no work itself where it can help it: the thread it interrupted may hold a
   lock the report needs (the allocator's, say). It wakes a thread that waits for nothing else
   (its calls the tracer's own, every signal blocked but those of faults) and waits while that
   thread makes the report: until it is made, until it stops moving for 3 seconds (it waits for
   a lock the interrupted thread holds: the allocator aborted with its lock held), or until
   another signal comes (a second Ctrl-C: the process ends of the first). A signal sent from
   outside that finds the thread where it may hold such a lock (in the allocator, the loader,
   the tracer's own code or work) is taken when the thread returns from the dlopen or dlclose
   it is inside (this library's wrappers), or else sent again a quarter of a millisecond later
   (200 times, then every millisecond: about a second at most), once the thread has moved on.
   In a process forked from the traced one, where the report thread is not (it is the
   parent's), the handler makes the report itself where the thread can hold no such lock, and
   says why not otherwise. While the tracer starts, a signal ends the process at once. A signal
   sent to the report thread itself (tgkill) stays pending there: it blocks the program's
   signals, so as to take none of them.

   The program sees the default action it left: `sigaction` and the `signal` family, defined
   here (the program's calls reach them first), report SIG_DFL where the handler is, so that a
   program that installs its own handler only over a default one (Python's KeyboardInterrupt)
   still does. A handler the program installs replaces this one (the report is made at exit,
   if its handler has it exit); a default action it sets is stood in for again (Python puts
   back the default to die of SIGINT after its traceback), and so is the default a handler set
   to run once (SA_RESETHAND) leaves behind it. */

/* The signals whose default action ends the process. Not the real-time ones (theirs too): the
   hooking library takes a free one (its action the default) to stop the threads while it
   patches code inline, which a stand-in would leave none of. */
static const int fhs_deadly_signals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,    SIGTRAP, SIGABRT,   SIGBUS,
                                         SIGFPE,  SIGUSR1, SIGSEGV, SIGUSR2,   SIGPIPE, SIGALRM,   SIGTERM,
                                         SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGSYS,  SIGSTKFLT, SIGIO,
                                         SIGPWR};
#define FHS_DEADLY_SIGNALS (sizeof fhs_deadly_signals / sizeof fhs_deadly_signals[0])

/* 1 where this library's handler is the action and the program is told SIG_DFL. */
static int fhs_owned[NSIG];
/* The eventfd that wakes the report thread; -1 when none waits (a forked child). */
static int fhs_report_wake = -1;
/* Its device and inode: a program may close the descriptor or put a file of its own at its
   number (dup2, a shell's `exec 3>file`), and nothing is written to a file that is not it. */
static uint64_t fhs_report_wake_device, fhs_report_wake_inode;
/* 0 until a signal asks for the report, 1 asked, 2 made (or given up). */
static int fhs_report_state;
/* The signal that asked. */
static int fhs_report_signal;
/* 1 while the tracer starts: a report then would wait for the thread the signal interrupted
   (which holds the tracer's locks and its lazily made globals), and would have nothing to say. */
static int fhs_tracer_starting;
/* The tracer's report for a process a signal ends, its mark of a thread as its own, and how it
   starts a thread of its own. */
static void (*fhs_finish_signalled)(int);
/* Its table of the calls so far, as the process executes another program (see fhs_before_exec). */
static void (*fhs_report_before_exec)(const char *);
/* The program an exec is about to run, handed to the report thread (NULL: none asked), and 1
   once that report is made. */
static const char *fhs_exec_path;
static int fhs_exec_reported;
static void (*fhs_own_thread)(void);
static int (*fhs_thread)(void *(*)(void *), void *, const char *);

typedef int (*fhs_sigaction_function)(int, const struct sigaction *, struct sigaction *);
typedef void (*fhs_signal_handler)(int);

/* The C library's sigaction, which this library's own shadows. */
static fhs_sigaction_function fhs_real_sigaction(void) {
    static fhs_sigaction_function real;
    fhs_sigaction_function found = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (!found) {
        found = (fhs_sigaction_function)dlsym(RTLD_NEXT, "sigaction");
        __atomic_store_n(&real, found, __ATOMIC_RELEASE);
    }
    return found;
}

/* Whether `signal` is one whose default action the handler stands in for now. */
static int fhs_is_owned(int signal) {
    return signal > 0 && signal < NSIG && __atomic_load_n(&fhs_owned[signal], __ATOMIC_ACQUIRE);
}

/* A crash: a signal the kernel sends the thread whose instruction faulted (or abort raises). */
static int fhs_is_crash(int signal) {
    return signal == SIGSEGV || signal == SIGBUS || signal == SIGFPE || signal == SIGILL || signal == SIGTRAP ||
           signal == SIGSYS || signal == SIGABRT;
}

/* Puts back the default action and raises `signal` again, which ends the process (the handler
   does not block its own signal: SA_NODEFER). */
static void fhs_end_with(int signal) {
    __atomic_store_n(&fhs_owned[signal], 0, __ATOMIC_RELEASE);
    (void)fht_signal_default(signal, fhs_real_sigaction());
    raise(signal);
}

/* 1 on the report thread. */
static __thread int fhs_on_reporter;

/* The executable text of the objects in which an interrupted thread may hold a lock the report
   needs: the loader, and the tracer's own (its library, with the Swift runtime in it, and
   what it brought). Listed once the tracer has started; the C library's locking functions are listed
   apart (fhs_locking). */
#define FHS_UNSAFE_RANGES 64
static struct {
    uintptr_t low, high;
} fhs_unsafe[FHS_UNSAFE_RANGES];
static int fhs_unsafe_count;

static void fhs_add_unsafe(uintptr_t low, uintptr_t high) {
    if (fhs_unsafe_count == FHS_UNSAFE_RANGES || low >= high) return;
    fhs_unsafe[fhs_unsafe_count].low = low;
    fhs_unsafe[fhs_unsafe_count].high = high;
    fhs_unsafe_count++;
}

static int fhs_list_unsafe(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    const char *path = info->dlpi_name ? info->dlpi_name : "";
    const char *slash = strrchr(path, '/');
    const char *file = slash ? slash + 1 : path;
    static const char *const prefixes[] = {"ld-linux",       "libFFIHookTracer.so", "libswift",  "libdispatch.so",
                                           "libFoundation",  "libBlocksRuntime.so", "libffi.so", "libstdc++.so",
                                           "libgcc_s.so"};
    int unsafe = 0;
    for (size_t index = 0; index < sizeof prefixes / sizeof prefixes[0]; index++) {
        unsafe |= strncmp(file, prefixes[index], strlen(prefixes[index])) == 0;
    }
    if (!unsafe) return 0;
    for (ElfW(Half) index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        if (header->p_type != PT_LOAD || !(header->p_flags & PF_X)) continue;
        fhs_add_unsafe(info->dlpi_addr + header->p_vaddr, info->dlpi_addr + header->p_vaddr + header->p_memsz);
    }
    return 0;
}

/* The C library's functions that take a lock the report needs and may be interrupted holding
   it: the allocator's entry points (their callees, static, run below one of them on the
   stack), and dl_iterate_phdr, which holds the loader's lock while its callback runs. */
#define FHS_LOCKING 24
static struct {
    uintptr_t low, high;
} fhs_locking[FHS_LOCKING];
static int fhs_locking_count;

/* The names of the locking functions, and where each is (dlsym): a walk of the loaded objects
   finds each one's size in the symbol table of the object that holds it. */
static const char *const fhs_locking_names[] = {
    "malloc",        "free",           "calloc", "realloc", "reallocarray", "memalign",
    "aligned_alloc", "posix_memalign", "valloc", "pvalloc", "malloc_trim",  "malloc_usable_size",
    "mallopt",       "mallinfo2",      "malloc_stats", "malloc_info", "dl_iterate_phdr"};
#define FHS_LOCKING_NAMES (sizeof fhs_locking_names / sizeof fhs_locking_names[0])
static uintptr_t fhs_locking_addresses[FHS_LOCKING_NAMES];

static uintptr_t fhs_address(uintptr_t base, uintptr_t value) { return value < base ? value + base : value; }

/* The size of the function `name` at `address` in the object `info` describes, by its GNU hash
   table (0 when it has none or the name is not there at that address). dladdr1, which finds a
   symbol by address, reads the object's whole symbol table each time: 17 of them cost about 1.5
   million instructions at every start. */
static size_t fhs_function_size(const struct dl_phdr_info *info, const char *name, uintptr_t address) {
    const ElfW(Dyn) *dynamic = NULL;
    for (ElfW(Half) index = 0; index < info->dlpi_phnum; index++) {
        if (info->dlpi_phdr[index].p_type == PT_DYNAMIC) {
            dynamic = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[index].p_vaddr);
        }
    }
    if (!dynamic) return 0;
    const ElfW(Sym) *symbols = NULL;
    const char *strings = NULL;
    const uint32_t *table = NULL;
    for (; dynamic->d_tag != DT_NULL; dynamic++) {
        uintptr_t value = fhs_address(info->dlpi_addr, dynamic->d_un.d_ptr);
        if (dynamic->d_tag == DT_SYMTAB) symbols = (const ElfW(Sym) *)value;
        if (dynamic->d_tag == DT_STRTAB) strings = (const char *)value;
        if (dynamic->d_tag == DT_GNU_HASH) table = (const uint32_t *)value;
    }
    if (!symbols || !strings || !table) return 0;
    /* Every symbol of the name (one per version): the one at the address dlsym gave. */
    ffh_gnu_hash_walk walk;
    ffh_gnu_hash_begin(&walk, table, ffh_gnu_hash(name));
    for (long index; (index = ffh_gnu_hash_next(&walk)) >= 0;) {
        const ElfW(Sym) *symbol = &symbols[index];
        if (strcmp(strings + symbol->st_name, name) == 0 && symbol->st_shndx != SHN_UNDEF &&
            info->dlpi_addr + symbol->st_value == address) {
            return symbol->st_size;
        }
    }
    return 0;
}

static int fhs_list_locking_in(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    for (size_t name = 0; name < FHS_LOCKING_NAMES && fhs_locking_count < FHS_LOCKING; name++) {
        uintptr_t address = fhs_locking_addresses[name];
        if (!address) continue;
        int holds = 0;
        for (ElfW(Half) index = 0; index < info->dlpi_phnum && !holds; index++) {
            const ElfW(Phdr) *header = &info->dlpi_phdr[index];
            uintptr_t start = info->dlpi_addr + header->p_vaddr;
            holds = header->p_type == PT_LOAD && address >= start && address - start < header->p_memsz;
        }
        if (!holds) continue;
        fhs_locking_addresses[name] = 0;
        size_t length = fhs_function_size(info, fhs_locking_names[name], address);
        if (!length) continue;
        fhs_locking[fhs_locking_count].low = address;
        fhs_locking[fhs_locking_count].high = address + length;
        fhs_locking_count++;
    }
    return 0;
}

static void fhs_list_locking(void) {
    for (size_t name = 0; name < FHS_LOCKING_NAMES; name++) {
        fhs_locking_addresses[name] = (uintptr_t)dlsym(RTLD_DEFAULT, fhs_locking_names[name]);
    }
    dl_iterate_phdr(fhs_list_locking_in, NULL);
}

static int fhs_is_locking(uintptr_t address) {
    for (int index = 0; index < fhs_locking_count; index++) {
        if (address >= fhs_locking[index].low && address < fhs_locking[index].high) return 1;
    }
    return 0;
}

/* The handler's work before it knows the process ends (a signal taken later, sent again) calls
   no function of the C library, which the tracer may trace in its own code (--inline), where
   it would count as the program's call, nested in the one the signal interrupted: system calls
   by instruction (the hooking library's own header, which this library shares without linking
   the hooking library), memory zeroed here. */
static void fhs_zero(void *memory, size_t size) {
    volatile unsigned char *bytes = memory;
    for (size_t index = 0; index < size; index++) bytes[index] = 0;
}

/* Whether the interrupted thread can hold no lock the report needs, by where it is (the
   handler also asks the tracer whether the thread is doing its work, in whatever code). Not
   when it was in the loader or the tracer's own code (its library, with the Swift runtime in it,
   and what it brought), nor
   inside one of the C library's locking functions: its instruction pointer there, or a return
   address into one among the stack's top 2 KiB (read with process_vm_readv, which does not
   fault). But yes when it is asleep in a system call (the kernel moved its instruction pointer
   back onto the `syscall` to restart it, or the call ended with EINTR), or, for a signal of the
   process's own (`raise`, `kill` of itself) but SIGABRT (which the allocator raises when it
   finds its heap broken, its lock held), just back from the system call that sent it. A thread
   stopped holding the allocator's lock would keep it for as long as the report waits. */
static int fhs_interrupted_safely(int signal, const siginfo_t *info, const ucontext_t *context) {
    uintptr_t ip = (uintptr_t)context->uc_mcontext.gregs[REG_RIP];
    const unsigned char *code = (const unsigned char *)ip;
    int in_code = 0;
    for (int index = 0; index < fhs_unsafe_count && !in_code; index++) {
        in_code = ip >= fhs_unsafe[index].low && ip < fhs_unsafe[index].high;
    }
    uintptr_t words[256];
    struct iovec local = {words, sizeof words};
    struct iovec remote = {(void *)(uintptr_t)context->uc_mcontext.gregs[REG_RSP], sizeof words};
    long got = ffh_syscall6(SYS_process_vm_readv, ffh_syscall0(SYS_getpid), (long)&local, 1, (long)&remote, 1, 0);
    int locking = fhs_is_locking(ip);
    for (long index = 0; !locking && index < got / (long)sizeof words[0]; index++) {
        locking = fhs_is_locking(words[index]);
    }
    if (!in_code && !locking) return 1;
    /* (ip is mapped and executable: the bytes before and at it can be read.) */
    if (code[0] == 0x0F && code[1] == 0x05) return 1;
    if (code[-2] != 0x0F || code[-1] != 0x05) return 0;
    if (context->uc_mcontext.gregs[REG_RAX] == -EINTR) return 1;
    return signal != SIGABRT && (info->si_code == SI_USER || info->si_code == SI_TKILL) &&
           info->si_pid == (pid_t)ffh_syscall0(SYS_getpid);
}

/* The timer that sends a signal again, -1 when none is armed, and how many times it has. */
static int fhs_retry_timer = -1;
static int fhs_retries;

/* Has the kernel send `signal` again to the calling thread in a quarter of a millisecond, when
   it has left the code it was interrupted in: 0 when it will. 200 times, then every millisecond,
   1,200 times in all (about a second): a program that spends 98% of its time in the allocator
   (a loop of malloc and free) was found there at 200 tries in a row once in about a hundred
   signals, and its report, made then, waited on the allocator's lock until it was given up. */
static int fhs_send_again(int signal) {
    if (fhs_retries >= 1200) return -1;
    if (fhs_retry_timer >= 0) ffh_syscall3(SYS_timer_delete, fhs_retry_timer, 0, 0);
    fhs_retry_timer = -1;
    struct sigevent event;
    fhs_zero(&event, sizeof event);
    event.sigev_notify = SIGEV_THREAD_ID;
    event.sigev_signo = signal;
    event._sigev_un._tid = (pid_t)ffh_syscall0(SYS_gettid);
    int timer;
    if (ffh_syscall3(SYS_timer_create, CLOCK_MONOTONIC, (long)&event, (long)&timer) != 0) return -1;
    fhs_retry_timer = timer;
    struct itimerspec when;
    fhs_zero(&when, sizeof when);
    when.it_value.tv_nsec = fhs_retries < 200 ? 250000 : 1000000;
    if (ffh_syscall6(SYS_timer_settime, fhs_retry_timer, 0, (long)&when, 0, 0, 0) != 0) return -1;
    fhs_retries++;
    return 0;
}

/* The tracer's count of its report's steps: a report that stops counting for 3 seconds waits
   for a lock it will not get. */
static const volatile uint64_t *fhs_progress;

/* The signal the process is ending of: the first that came (one sent again comes back with
   SI_TIMER), 0 until one does. */
static int fhs_ending_signal;

/* How many calls of the loader (dlopen, dlclose, through this library's wrappers) the thread is
   inside, and a signal that found it inside one, where the loader's lock may be held: taken
   when the outermost returns. A loop of dlopen and dlclose spends nearly all its time in the
   loader and the tracer's attach, and a signal is delivered where a system call returns, which
   there is inside them: one sent again was found there every time, a thousand times over. */
static __thread int fhs_loader_depth;
static __thread int fhs_pending_signal;

/* The tracer's test of whether the thread is doing the tracer's own work, before its report:
   then it may hold the tracer's locks, whatever code it is in (the C library's mprotect, for
   the tracer's attach). */
static int (*fhs_busy)(void);

static int fhs_in_own_work(void) { return fhs_busy && fhs_busy(); }

/* Writes "ffi-hook-tracer: process PID ended by SIGNAME <why>: no report". */
static void fhs_say_no_report(int signal, const char *why) {
    char text[160];
    size_t length = 0;
    static const char start[] = "ffi-hook-tracer: process ";
    memcpy(text, start, sizeof start - 1);
    length = sizeof start - 1;
    char digits[12];
    int count = 0;
    for (long pid = (long)syscall(SYS_getpid); pid > 0 && count < 12; pid /= 10) digits[count++] = (char)('0' + pid % 10);
    while (count > 0) text[length++] = digits[--count];
    const char *name = signal ? sigabbrev_np(signal) : NULL;
    const char *parts[] = {signal ? " ended by SIG" : " ended by _exit", signal ? (name ? name : "?") : "", " ", why,
                           ": no report\n"};
    for (size_t index = 0; index < sizeof parts / sizeof parts[0]; index++) {
        size_t part = strlen(parts[index]);
        if (length + part > sizeof text) break;
        memcpy(text + length, parts[index], part);
        length += part;
    }
    (void)!write(2, text, length);
}

/* Marks the thread's calls from now on as the tracer's (not counted): the process is ending,
   and what the handler calls (write, nanosleep) is not the program's. */
static void fhs_mark_own_work(void) {
    if (fhs_own_thread) fhs_own_thread();
}

/* Has the report made (by the report thread, or here in a forked child, where no lock it needs
   can be held when `safe`), waits while it moves on, and ends the process of `ending`. */
static void fhs_report_and_wait(int ending, int safe);
static int fhs_wake_descriptor(void);

/* Waits until `word` holds `wanted`, while the report moves on: 3 s at most without progress.
   With system calls of its own (a thread that goes on as the program's must not have called
   traced functions meanwhile). */
static void fhs_wait_for(const int *word, int wanted) {
    uint64_t seen = fhs_progress ? *fhs_progress : 0;
    struct timespec start, now;
    ffh_syscall3(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&start, 0);
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) != wanted) {
        ffh_syscall3(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&now, 0);
        uint64_t progress = fhs_progress ? *fhs_progress : 0;
        if (progress != seen) {
            seen = progress;
            start = now;
        }
        /* Three whole seconds (whole seconds of the clock gave up after 2.0 to 3.0 s). */
        int64_t waited = (int64_t)(now.tv_sec - start.tv_sec) * 1000000000 + (now.tv_nsec - start.tv_nsec);
        if (waited >= 3000000000) break;
        struct timespec pause = {0, 500000};
        ffh_syscall3(SYS_nanosleep, (long)&pause, 0, 0);
    }
}

static void fhs_report_and_end(int ending, int safe) {
    /* Marked before errno is read: the C library's __errno_location may be traced (--inline),
       and the signal's report was counting that call as the program's. */
    fhs_mark_own_work();
    int saved = errno;
    fhs_report_and_wait(ending, safe);
    fhs_end_with(ending);
    errno = saved;
}

/* Has the report made (by the report thread, which it wakes; here, with no such thread, when
   `safe`) unless it is made already, and waits while it moves on, 3 s at most without progress.
   `ending`: the signal ending the process, 0 for _exit. */
static void fhs_report_and_wait(int ending, int safe) {
    if (fhs_light_active()) {
        (void)safe;
        fhs_light_finish(ending);
        return;
    }
    fhs_mark_own_work();
    int expected = 0;
    int state = __atomic_load_n(&fhs_report_state, __ATOMIC_ACQUIRE);
    int wake = fhs_wake_descriptor();
    if (state == 0 && __atomic_compare_exchange_n(&fhs_report_state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&fhs_report_signal, ending, __ATOMIC_RELEASE);
        uint64_t one = 1;
        if (wake < 0) {
            /* No report thread (a forked child): the report is made here, where no lock it needs
               can be held. */
            if (safe) {
                fhs_finish_signalled(ending);
            } else {
                fhs_say_no_report(ending, "where a lock its report needs may be held");
            }
            __atomic_store_n(&fhs_report_state, 2, __ATOMIC_RELEASE);
        } else if (write(wake, &one, sizeof one) != (ssize_t)sizeof one) {
            __atomic_store_n(&fhs_report_state, 2, __ATOMIC_RELEASE);
        }
    }
    fhs_wait_for(&fhs_report_state, 2);
    /* A report that stopped moving is not left to end the process unsaid. */
    if (__atomic_load_n(&fhs_report_state, __ATOMIC_ACQUIRE) != 2) {
        fhs_say_no_report(ending, safe ? "after its report stopped for 3 s"
                                       : "after its report stopped for 3 s (interrupted where a lock may be held)");
    }
}

static void fhs_deadly(int signal, siginfo_t *info, void *context) {
    int expected = 0;
    if (fhs_on_reporter) {
        int saved = errno;
        /* A fault signal another process sent (the thread leaves those unblocked, for the fault
           guard), while the thread waits: it holds no lock then, and makes the report itself.
           Or a fault of the report's: the process ends. */
        if (__atomic_compare_exchange_n(&fhs_report_state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&fhs_report_signal, signal, __ATOMIC_RELEASE);
            fhs_finish_signalled(signal);
            __atomic_store_n(&fhs_report_state, 2, __ATOMIC_RELEASE);
        }
        fhs_end_with(signal);
        errno = saved;
        return;
    }
    /* No tracer yet, or one still starting (it has counted nothing), and the light report
       needs no lock: written here, at once. */
    if (fhs_light_active()) {
        int saved = errno;
        fhs_light_finish(signal);
        fhs_end_with(signal);
        errno = saved;
        return;
    }
    if (__atomic_load_n(&fhs_tracer_starting, __ATOMIC_ACQUIRE)) {
        int saved = errno;
        static const char message[] = "ffi-hook-tracer: a signal ended the process while the tracer was starting in it: no report\n";
        (void)!write(2, message, sizeof message - 1);
        fhs_end_with(signal);
        errno = saved;
        return;
    }
    /* A fault the kernel raised for an instruction of the thread, which comes back if the
       handler returns, or a crash signal the process raised itself (abort: it dies of it
       whatever the handler does); a crash signal sent by another process is a request like
       SIGTERM. */
    int self_sent = (info->si_code == SI_USER || info->si_code == SI_TKILL) &&
                    info->si_pid == (pid_t)ffh_syscall0(SYS_getpid);
    int fault = fhs_is_crash(signal) && (info->si_code > 0 || self_sent);
    int again = info->si_code == SI_TIMER;
    int first = 0;
    if (!again && !__atomic_compare_exchange_n(&fhs_ending_signal, &first, signal, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
        !fault) {
        /* Another signal after the first (a second Ctrl-C, or one while the first waits to be
           taken again): the user insists. The process ends of the first, as it would have
           without the tracer. */
        fhs_mark_own_work();
        int saved = errno;
        fhs_end_with(first);
        errno = saved;
        return;
    }
    int ending = __atomic_load_n(&fhs_ending_signal, __ATOMIC_ACQUIRE);
    if (!ending) ending = signal;
    int state = __atomic_load_n(&fhs_report_state, __ATOMIC_ACQUIRE);
    /* Inside a loader call, the loader's lock may be held wherever the thread is (a library's
       constructor, the allocator the loader calls). */
    int own_work = fhs_in_own_work();
    int safe = fhs_loader_depth == 0 && !own_work && fhs_interrupted_safely(signal, info, context);
    /* A signal sent from outside, to a thread that may hold a lock the report needs: taken
       when the loader call it interrupted returns, or it comes again once the thread has moved
       on (a fault repeats where it is). */
    if (state == 0 && !safe && !fault) {
        if (fhs_loader_depth > 0 && !own_work) {
            fhs_pending_signal = ending;
            return;
        }
        if (fhs_send_again(signal) == 0) return;
    }
    fhs_report_and_end(ending, safe);
}

static void *fhs_reporter(void *unused) {
    (void)unused;
    fhs_on_reporter = 1;
    if (fhs_own_thread) fhs_own_thread();
    uint64_t value;
    for (;;) {
        /* (Not from a file the program put at the descriptor's number.) */
        int wake = fhs_wake_descriptor();
        if (wake < 0) return NULL;
        ssize_t count = read(wake, &value, sizeof value);
        if (count == (ssize_t)sizeof value) {
            /* An exec's table, then waiting on; or a signal's report, the last. */
            const char *path = __atomic_exchange_n(&fhs_exec_path, NULL, __ATOMIC_ACQ_REL);
            if (path && fhs_report_before_exec) fhs_report_before_exec(path);
            if (path) __atomic_store_n(&fhs_exec_reported, 1, __ATOMIC_RELEASE);
            if (__atomic_load_n(&fhs_report_state, __ATOMIC_ACQUIRE) == 1) break;
            continue;
        }
        if (count < 0 && errno == EINTR) continue;
        return NULL;
    }
    fhs_finish_signalled(__atomic_load_n(&fhs_report_signal, __ATOMIC_ACQUIRE));
    __atomic_store_n(&fhs_report_state, 2, __ATOMIC_RELEASE);
    return NULL;
}

/* In a forked child: the report thread is the parent's. */
static void fhs_forked(void) {
    __atomic_store_n(&fhs_report_wake, -1, __ATOMIC_RELEASE);
    __atomic_store_n(&fhs_report_state, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&fhs_ending_signal, 0, __ATOMIC_RELEASE);
    /* POSIX timers are not inherited. */
    fhs_retry_timer = -1;
    fhs_retries = 0;
}

static void fhs_handler_action(struct sigaction *action);
static int fhs_is_default(const struct sigaction *action);

static void fhs_stand_in_for_defaults(void);

/* Finds the tracer's functions for the report, and puts the handler where a deadly signal's
   action is the default. */
static void fhs_report_on_signals(void *tracer) {
    fhs_finish_signalled = (void (*)(int))dlsym(tracer, "ffi_hook_tracer_finish_signalled");
    fhs_own_thread = (void (*)(void))dlsym(tracer, "ffi_hook_tracer_own_thread");
    fhs_report_before_exec = (void (*)(const char *))dlsym(tracer, "ffi_hook_tracer_report_before_exec");
    fhs_busy = (int (*)(void))dlsym(tracer, "ffi_hook_tracer_busy");
    fhs_thread = (int (*)(void *(*)(void *), void *, const char *))dlsym(tracer, "ffi_hook_tracer_thread");
    fhs_progress = (const volatile uint64_t *)dlsym(tracer, "ffi_hook_tracer_progress");
    if (fhs_finish_signalled) fhs_stand_in_for_defaults();
}

/* Puts the handler where a deadly signal's action is the default. */
static void fhs_stand_in_for_defaults(void) {
    fhs_sigaction_function real = fhs_real_sigaction();
    if (!real) return;
    for (size_t index = 0; index < FHS_DEADLY_SIGNALS; index++) {
        int signal = fhs_deadly_signals[index];
        struct sigaction current;
        if (real(signal, NULL, &current) != 0 || !fhs_is_default(&current)) continue;
        struct sigaction handler;
        fhs_handler_action(&handler);
        __atomic_store_n(&fhs_owned[signal], 1, __ATOMIC_RELEASE);
        if (real(signal, &handler, NULL) != 0) __atomic_store_n(&fhs_owned[signal], 0, __ATOMIC_RELEASE);
    }
}

/* The report thread's eventfd while it is still that file (see fhs_report_wake_inode); -1 when
   there is none, or the program closed it or put another file at its number. */
static int fhs_wake_descriptor(void) {
    int wake = __atomic_load_n(&fhs_report_wake, __ATOMIC_ACQUIRE);
    struct stat status;
    if (wake < 0 || ffh_syscall3(SYS_fstat, wake, (long)&status, 0) != 0) return -1;
    if ((uint64_t)status.st_dev != fhs_report_wake_device || (uint64_t)status.st_ino != fhs_report_wake_inode) return -1;
    return wake;
}

/* Starts the report thread, once the tracer has started: a second thread makes the start's
   registration for membarrier wait for an RCU grace period (about 10 ms). Until it runs, the
   handler ends the process at once. */
static void fhs_start_reporter(void) {
    if (!fhs_finish_signalled || !fhs_thread) return;
    dl_iterate_phdr(fhs_list_unsafe, NULL);
    fhs_list_locking();
    int made = eventfd(0, EFD_CLOEXEC);
    if (made < 0) return;
    int wake = fcntl(made, F_DUPFD_CLOEXEC, fht_descriptor_floor());
    close(made);
    struct stat status;
    if (wake < 0 || fstat(wake, &status) != 0) {
        if (wake >= 0) close(wake);
        return;
    }
    fhs_report_wake_device = (uint64_t)status.st_dev;
    fhs_report_wake_inode = (uint64_t)status.st_ino;
    __atomic_store_n(&fhs_report_wake, wake, __ATOMIC_RELEASE);
    if (fhs_thread(fhs_reporter, NULL, "ffi-hook-report") != 0) {
        __atomic_store_n(&fhs_report_wake, -1, __ATOMIC_RELEASE);
        close(wake);
        return;
    }
    pthread_atfork(NULL, NULL, fhs_forked);
}

/* The default action the program set where the handler stands in for it, read back as it set
   it (its flags and mask), and whether it set one (else the kernel's: no flags, no mask). */
static struct sigaction fhs_told[NSIG];
static int fhs_told_set[NSIG];

/* The kernel's flag for a restorer, which the C library gives every action and reads back. */
#define FHS_SA_RESTORER 0x04000000

/* Tells the program the default action where the handler stands in for it; `current` is the
   handler's action, as the kernel has it. */
static void fhs_as_default(int signal, struct sigaction *action, const struct sigaction *current) {
    memset(action, 0, sizeof *action);
    action->sa_handler = SIG_DFL;
    sigemptyset(&action->sa_mask);
    if (!fhs_told_set[signal]) return;
    action->sa_flags = fhs_told[signal].sa_flags & ~FHS_SA_RESTORER;
    action->sa_mask = fhs_told[signal].sa_mask;
    if (current->sa_flags & FHS_SA_RESTORER) {
        action->sa_flags |= FHS_SA_RESTORER;
        action->sa_restorer = current->sa_restorer;
    }
}

/* Whether `action` is the default one. */
static int fhs_is_default(const struct sigaction *action) {
    return !(action->sa_flags & SA_SIGINFO) && action->sa_handler == SIG_DFL;
}

/* Whether the handler stands in for the default action of `signal`: a deadly signal, in a
   process whose report thread waits. */
static int fhs_stands_in_for_signal(int signal) {
    if (fhs_wake_descriptor() < 0 && !fhs_light_active()) return 0;
    for (size_t index = 0; index < FHS_DEADLY_SIGNALS; index++) {
        if (fhs_deadly_signals[index] == signal) return 1;
    }
    return 0;
}

/* Whether the handler stands in for `action` on `signal`: the default action of a deadly
   signal, in a process whose report thread waits. */
static int fhs_stands_in(int signal, const struct sigaction *action) {
    return action && fhs_is_default(action) && fhs_stands_in_for_signal(signal);
}

/* The handler's action. */
static void fhs_handler_action(struct sigaction *action) {
    memset(action, 0, sizeof *action);
    action->sa_sigaction = fhs_deadly;
    /* Entered again by the same signal (a second Ctrl-C), and on the program's alternate stack
       if it has one (a stack overflow). */
    action->sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK | SA_RESTART;
    sigemptyset(&action->sa_mask);
}

/* A handler the program set with SA_RESETHAND on a deadly signal, which the kernel would put
   back to the default action at its first delivery: the tracer's handler could not stand in
   for that default, and a second signal would end the process without a report. The action
   installed instead runs fhs_one_shot, without SA_RESETHAND (the same mask and other flags),
   which makes the reset itself: the default, stood in for, then the program's handler. The
   program reads back the action it set until then (fhs_one_shot_armed), the default after
   (with the flags and mask it set, as the kernel leaves them). Programs compiled for strict
   ISO C (`-std=c99`) have `signal` call __sysv_signal, which sets such handlers. */
static struct sigaction fhs_one_shot_set[NSIG];
static int fhs_one_shot_armed[NSIG];

static int fhs_is_armed(int signal) {
    return signal > 0 && signal < NSIG && __atomic_load_n(&fhs_one_shot_armed[signal], __ATOMIC_ACQUIRE);
}

static void fhs_one_shot(int signal, siginfo_t *info, void *context) {
    int armed = 1;
    if (!__atomic_compare_exchange_n(&fhs_one_shot_armed[signal], &armed, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        /* A second delivery before the stand-in was installed: it is the default's. */
        fhs_deadly(signal, info, context);
        return;
    }
    int saved = errno;
    struct sigaction set = fhs_one_shot_set[signal];
    fhs_told[signal] = set;
    fhs_told[signal].sa_handler = SIG_DFL;
    fhs_told_set[signal] = 1;
    struct sigaction stand_in;
    fhs_handler_action(&stand_in);
    __atomic_store_n(&fhs_owned[signal], 1, __ATOMIC_RELEASE);
    fhs_sigaction_function real = fhs_real_sigaction();
    if (real(signal, &stand_in, NULL) != 0) {
        /* (Cannot fail for a signal the action was set for.) The kernel's reset, then. */
        __atomic_store_n(&fhs_owned[signal], 0, __ATOMIC_RELEASE);
        struct sigaction fallback = set;
        fallback.sa_handler = SIG_DFL;
        real(signal, &fallback, NULL);
    }
    errno = saved;
    if (set.sa_flags & SA_SIGINFO) {
        set.sa_sigaction(signal, info, context);
    } else {
        set.sa_handler(signal);
    }
}

/* Whether `action` is a handler with SA_RESETHAND for a deadly signal, in a process whose report
   thread waits: one that fhs_one_shot runs. */
static int fhs_takes_one_shot(int signal, const struct sigaction *action) {
    if (!action || !(action->sa_flags & SA_RESETHAND) || fhs_is_default(action)) return 0;
    if (!(action->sa_flags & SA_SIGINFO) && action->sa_handler == SIG_IGN) return 0;
    return fhs_stands_in_for_signal(signal);
}

/* The action that runs fhs_one_shot for `action`. */
static void fhs_one_shot_action(struct sigaction *replacement, const struct sigaction *action) {
    *replacement = *action;
    replacement->sa_sigaction = fhs_one_shot;
    replacement->sa_flags = (action->sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
}

/* The program's action as it set it, read back with the restorer the kernel has. */
static void fhs_as_set(struct sigaction *old, const struct sigaction *set, const struct sigaction *current) {
    *old = *set;
    old->sa_flags = (set->sa_flags & ~FHS_SA_RESTORER) | (current->sa_flags & FHS_SA_RESTORER);
    old->sa_restorer = (current->sa_flags & FHS_SA_RESTORER) ? current->sa_restorer : NULL;
}

/* The program's sigaction: the handler stands in for the default action it sets (a program
   that puts the default back to die of the signal, as Python does after KeyboardInterrupt,
   still has the report), and reads as the default; a handler it sets with SA_RESETHAND runs
   through fhs_one_shot. */
int sigaction(int signal, const struct sigaction *action, struct sigaction *old) {
    fhs_sigaction_function real = fhs_real_sigaction();
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    int owned = fhs_is_owned(signal);
    int armed = fhs_is_armed(signal);
    struct sigaction replacement;
    int standing_in = fhs_stands_in(signal, action);
    int one_shot = !standing_in && fhs_takes_one_shot(signal, action);
    if (standing_in) fhs_handler_action(&replacement);
    if (one_shot) fhs_one_shot_action(&replacement, action);
    if (!owned && !armed && !standing_in && !one_shot) return real(signal, action, old);
    struct sigaction previous;
    int result = real(signal, standing_in || one_shot ? &replacement : action, &previous);
    if (result == 0) {
        if (old) {
            if (owned) {
                fhs_as_default(signal, old, &previous);
            } else if (armed) {
                fhs_as_set(old, &fhs_one_shot_set[signal], &previous);
            } else {
                *old = previous;
            }
        }
        if (standing_in) {
            fhs_told[signal] = *action;
            fhs_told_set[signal] = 1;
        }
        if (one_shot) fhs_one_shot_set[signal] = *action;
        if (action) {
            __atomic_store_n(&fhs_owned[signal], standing_in, __ATOMIC_RELEASE);
            __atomic_store_n(&fhs_one_shot_armed[signal], one_shot, __ATOMIC_RELEASE);
        }
    }
    return result;
}

/* A `signal` with these flags, by the rules of the program's sigaction. */
static fhs_signal_handler fhs_signal_with(int number, fhs_signal_handler handler, int flags) {
    struct sigaction action, old;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = flags;
    if (handler == SIG_ERR || number <= 0 || number >= NSIG) {
        errno = EINVAL;
        return SIG_ERR;
    }
    /* BSD semantics block the signal while its handler runs, and say so in the mask. */
    if (!(flags & SA_RESETHAND)) sigaddset(&action.sa_mask, number);
    if (sigaction(number, &action, &old) != 0) return SIG_ERR;
    return old.sa_handler;
}

/* The signals siginterrupt made interrupt system calls, which the C library's signal does not
   set to restart them (its own record of those is private): kept here as well. */
static uint64_t fhs_interrupting;

static int fhs_restart_flag(int number) {
    if (number <= 0 || number > 64) return SA_RESTART;
    return (__atomic_load_n(&fhs_interrupting, __ATOMIC_ACQUIRE) >> (number - 1)) & 1 ? 0 : SA_RESTART;
}

/* The C library's siginterrupt and abort, which this library's own shadow: found in the
   constructor (abort is often called from a signal handler, where dlsym may not run), or at
   the call when one comes before it (another object's constructor). */
static int (*fhs_real_siginterrupt)(int, int);
static void (*fhs_real_abort)(void);

/* The program's siginterrupt: the C library's, recorded for signal. */
int siginterrupt(int number, int interrupt) {
    int (*real)(int, int) = fhs_real_siginterrupt;
    if (!real) real = (int (*)(int, int))dlsym(RTLD_NEXT, "siginterrupt");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    int result = real(number, interrupt);
    if (result == 0 && number > 0 && number <= 64) {
        uint64_t bit = (uint64_t)1 << (number - 1);
        if (interrupt) {
            __atomic_or_fetch(&fhs_interrupting, bit, __ATOMIC_ACQ_REL);
        } else {
            __atomic_and_fetch(&fhs_interrupting, ~bit, __ATOMIC_ACQ_REL);
        }
    }
    return result;
}

/* The program's signal: what the C library's asks for, BSD semantics (the signal itself in the
   mask, calls restarted unless siginterrupt said otherwise for the signal). */
fhs_signal_handler signal(int number, fhs_signal_handler handler) {
    return fhs_signal_with(number, handler, fhs_restart_flag(number));
}

/* The same under its other name. */
fhs_signal_handler bsd_signal(int number, fhs_signal_handler handler) {
    return fhs_signal_with(number, handler, fhs_restart_flag(number));
}

/* System V semantics: the handler runs once, and the signal is not blocked while it does. */
fhs_signal_handler __sysv_signal(int number, fhs_signal_handler handler) {
    return fhs_signal_with(number, handler, SA_RESETHAND | SA_NODEFER);
}

/* The same under its other name. */
fhs_signal_handler sysv_signal(int number, fhs_signal_handler handler) {
    return fhs_signal_with(number, handler, SA_RESETHAND | SA_NODEFER);
}

// MARK: - Loading the tracer

extern char **environ;

/* The tracer's settings (the FFI_HOOK_TRACER_ variables) as the process started with them: the
   tracer reads them from the environment as it starts, which may be long after the program has
   changed its own (a daemon's clearenv before it loads its plugins). NULL-terminated; NULL when
   memory ran out. */
static char **fhs_settings;
static const char fhs_settings_prefix[] = "FFI_HOOK_TRACER_";

static void fhs_keep_settings(void) {
    size_t count = 0;
    for (char **entry = environ; entry && *entry; entry++) {
        if (strncmp(*entry, fhs_settings_prefix, sizeof fhs_settings_prefix - 1) == 0) count++;
    }
    char **kept = malloc((count + 1) * sizeof *kept);
    if (!kept) return;
    size_t index = 0;
    for (char **entry = environ; entry && *entry && index < count; entry++) {
        if (strncmp(*entry, fhs_settings_prefix, sizeof fhs_settings_prefix - 1) != 0) continue;
        kept[index] = strdup(*entry);
        if (kept[index]) index++;
    }
    kept[index] = NULL;
    fhs_settings = kept;
}

const char *fhs_libraries(void) {
    static const char name[] = "FFI_HOOK_TRACER_LIBRARIES=";
    if (!fhs_settings) return getenv("FFI_HOOK_TRACER_LIBRARIES");
    for (char **entry = fhs_settings; *entry; entry++) {
        if (strncmp(*entry, name, sizeof name - 1) == 0) return *entry + sizeof name - 1;
    }
    return NULL;
}

/* Whether `environment` holds the tracer's settings as the process started with them, and (where
   `hide_backtrace`) no SWIFT_BACKTRACE. */
static int fhs_environment_is_tracers(char **environment, int hide_backtrace) {
    static const char backtrace[] = "SWIFT_BACKTRACE=";
    size_t settings = 0, kept = 0;
    for (char **entry = fhs_settings; *entry; entry++) kept++;
    for (char **entry = environment; entry && *entry; entry++) {
        if (hide_backtrace && strncmp(*entry, backtrace, sizeof backtrace - 1) == 0) return 0;
        if (strncmp(*entry, fhs_settings_prefix, sizeof fhs_settings_prefix - 1) != 0) continue;
        int found = 0;
        for (char **setting = fhs_settings; *setting && !found; setting++) found = strcmp(*entry, *setting) == 0;
        if (!found) return 0;
        settings++;
    }
    return settings == kept;
}

/* A copy of the list of `environment`'s entries with the tracer's settings as the process
   started with them, and without SWIFT_BACKTRACE where `hide_backtrace`; NULL when the
   environment is so already (the common case), or memory runs out (or the settings were not
   kept). */
static char **fhs_environment_for_tracer(char **environment, int hide_backtrace) {
    static const char backtrace[] = "SWIFT_BACKTRACE=";
    if (!fhs_settings || fhs_environment_is_tracers(environment, hide_backtrace)) return NULL;
    size_t count = 0;
    for (char **entry = environment; entry && *entry; entry++) count++;
    for (char **entry = fhs_settings; *entry; entry++) count++;
    char **copy = malloc((count + 1) * sizeof *copy);
    if (!copy) return NULL;
    size_t kept = 0;
    for (char **entry = environment; entry && *entry; entry++) {
        if (strncmp(*entry, fhs_settings_prefix, sizeof fhs_settings_prefix - 1) == 0) continue;
        if (hide_backtrace && strncmp(*entry, backtrace, sizeof backtrace - 1) == 0) continue;
        copy[kept++] = *entry;
    }
    for (char **entry = fhs_settings; *entry; entry++) copy[kept++] = *entry;
    copy[kept] = NULL;
    return copy;
}

/* Has the process run `environment` until fhs_end_environment gives back `original`. */
static char **fhs_begin_environment(char **environment) {
    char **original = environ;
    if (environment) environ = environment;
    return original;
}

/* Gives back the environment fhs_begin_environment replaced with `environment`, unless another
   thread has set a variable meanwhile (in a copy of the environment made from it, which stays).
   `environment` is not freed: a getenv on another thread may still be reading it (an array of
   pointers, once or twice in a process). */
static void fhs_end_environment(char **environment, char **original) {
    if (environment && environ == environment) environ = original;
}

/* The tracer's walk after a load (0) or an unload (1), once it has started. This library is
   preloaded: its dlopen and dlclose come first for every object that calls them, so they tell
   the tracer, which otherwise (joined to a process, or preloaded itself) hooks both functions
   in every object's import table to learn of loads (about a fifth of its start in a small
   program: a walk of every object's imports and two hooks with signatures). */
static void (*fhs_loads_changed)(int);

/* The tracer's report at exit (it runs once), once it is loaded: see fhs_end. */
static void (*fhs_tracer_finish)(void);
/* Its silence in a child forked while it loaded or started (see fhs_forked_loading). */
static void (*fhs_tracer_forked_starting)(void);

/* Tells the tracer, once it has started, that the loader loaded (0) or unloaded (1) objects. */
static void fhs_tell_tracer(int unloading) {
    void (*changed)(int) = __atomic_load_n(&fhs_loads_changed, __ATOMIC_ACQUIRE);
    if (changed) changed(unloading);
}

/* Loads the tracer from this library's directory and starts it (its constructor starts it only
   when LD_PRELOAD names it). */
static void fhs_load_tracer(void) {
    Dl_info info;
    if (!dladdr(&ffi_hook_tracer_preloaded, &info) || !info.dli_fname) return;
    const char *slash = strrchr(info.dli_fname, '/');
    size_t directory = slash ? (size_t)(slash - info.dli_fname) : 0;
    static const char file[] = "libFFIHookTracer.so";
    char path[4096];
    if (directory + 1 + sizeof file > sizeof path) return;
    memcpy(path, info.dli_fname, directory);
    path[directory] = '/';
    memcpy(path + directory + 1, file, sizeof file);
    /* The tracer carries its own Swift runtime and C++ library, linked in and hidden, which
       install no signal handler and no alternate stack: the program's signal actions stay as
       they are across the load. Unless SWIFT_BACKTRACE asks the runtime for its crash handler:
       set for a Swift program, it would make the tracer's runtime say on standard error that it
       cannot find its backtracer, or, given the backtracer's path, take over the crashes of
       any program. The runtime reads it as it loads: it sees an environment without it. */
    char **for_load = fhs_environment_for_tracer(environ, 1);
    char **original = fhs_begin_environment(for_load);
    void *tracer = fhs_real_dlopen(slash ? path : file, RTLD_NOW | RTLD_GLOBAL);
    fhs_end_environment(for_load, original);
    void (*start)(void) = tracer ? (void (*)(void))dlsym(tracer, "ffi_hook_tracer_start") : NULL;
    if (!start) {
        static const char message[] = "ffi-hook-tracer: cannot load libFFIHookTracer.so beside libFFIHookTracerStart.so\n";
        (void)!write(2, message, sizeof message - 1);
        return;
    }
    /* Looked up before the start, whose end zeroes the counts. */
    int (*begin)(void) = (int (*)(void))dlsym(tracer, "ffi_hook_tracer_begin_own_work");
    void (*end)(int) = (void (*)(int))dlsym(tracer, "ffi_hook_tracer_end_own_work");
    if (begin && end) {
        fhs_begin_own_work = begin;
        fhs_end_own_work = end;
    }
    /* This library's dlopen and dlclose tell the tracer of loads: it hooks neither. */
    void (*follow)(void) = (void (*)(void))dlsym(tracer, "ffi_hook_tracer_loads_told");
    void (*changed)(int) = (void (*)(int))dlsym(tracer, "ffi_hook_tracer_loads_changed");
    if (follow && changed) follow();
    __atomic_store_n(&fhs_tracer_forked_starting,
                     (void (*)(void))dlsym(tracer, "ffi_hook_tracer_forked_while_starting"), __ATOMIC_RELEASE);
    fhs_tracer_finish = (void (*)(void))dlsym(tracer, "ffi_hook_tracer_finish");
    /* Before the start: the library's fault guard, which goes in then, covers the handler. */
    fhs_report_on_signals(tracer);
    __atomic_store_n(&fhs_tracer_starting, 1, __ATOMIC_RELEASE);
    /* The settings the process started with, which the start reads (SWIFT_BACKTRACE kept). */
    char **for_start = fhs_environment_for_tracer(environ, 0);
    original = fhs_begin_environment(for_start);
    start();
    fhs_end_environment(for_start, original);
    /* The tracer reports from now on: until its start had counted anything, a signal had the
       light report made (where one stood in). */
    fhs_light_end();
    __atomic_store_n(&fhs_tracer_starting, 0, __ATOMIC_RELEASE);
    /* The tracer's work after its start, not the program's: its calls (dl_iterate_phdr, dlsym,
       pthread_create) are not counted. */
    int was = begin && end ? begin() : 0;
    fhs_start_reporter();
    if (begin && end) end(was);
    /* (The end is made here, in this frame, never as a tail call: see begin's.) */
    __asm__ volatile("" ::: "memory");
    if (follow && changed) {
        __atomic_store_n(&fhs_loads_changed, changed, __ATOMIC_RELEASE);
        /* A load another thread made after the start's walk, before this. */
        changed(0);
    }
}

/* 1 while a thread loads the tracer (under fhs_lock). */
static int fhs_load_under_way;

/* Loads the tracer if it is not yet and `now` or a traced library is loaded. */
static void fhs_check(int now) {
    if (fhs_loading || __atomic_load_n(&fhs_loaded, __ATOMIC_ACQUIRE)) return;
    const char *list = fhs_libraries();
    fhs_walk walk = {list, NULL};
    if (!now && (!list || !*list || !dl_iterate_phdr(fhs_visit, &walk))) return;
    pthread_mutex_lock(&fhs_lock);
    if (!fhs_loaded) {
        fhs_loading = 1;
        __atomic_store_n(&fhs_load_under_way, 1, __ATOMIC_RELEASE);
        fhs_load_tracer();
        __atomic_store_n(&fhs_load_under_way, 0, __ATOMIC_RELEASE);
        fhs_loading = 0;
        __atomic_store_n(&fhs_loaded, 1, __ATOMIC_RELEASE);
    }
    /* The tracer's hooks are in by now, the C library's pthread_mutex_unlock perhaps among
       them (--inline): the unlock is the tracer's own work, as the lock was (made before the
       hooks: a program that never locked a mutex was reported with one unlock). Ended in this
       frame, never as a tail call (see begin's). */
    int was = fhs_begin_own_work ? fhs_begin_own_work() : 0;
    pthread_mutex_unlock(&fhs_lock);
    if (fhs_end_own_work) fhs_end_own_work(was);
    __asm__ volatile("" ::: "memory");
}

/* In a forked child: a thread of the parent that was loading the tracer held the lock, which
   the child (without that thread) would wait for for ever at its next dlopen (its exit's
   finalizers pin objects with one). The lock is made afresh, and a load the parent had under
   way counts as done in the child: its tracer is what the fork copied, part started. */
static void fhs_forked_loading(void) {
    pthread_mutex_init(&fhs_lock, NULL);
    if (__atomic_load_n(&fhs_load_under_way, __ATOMIC_ACQUIRE) && !fhs_loading) {
        __atomic_store_n(&fhs_load_under_way, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&fhs_loaded, 1, __ATOMIC_RELEASE);
        void (*forked)(void) = __atomic_load_n(&fhs_tracer_forked_starting, __ATOMIC_ACQUIRE);
        if (forked) forked();
    }
}

/* Takes a signal that found the thread inside a loader call, once the outermost has returned
   (the loader's lock is free) and outside the tracer's own work: the report, then the end. */
static void fhs_take_pending(void) {
    int signal = fhs_pending_signal;
    if (!signal || fhs_loader_depth > 0) return;
    fhs_pending_signal = 0;
    if (fhs_in_own_work()) {
        /* (Not found: the outermost call began outside the tracer's work.) */
        if (fhs_send_again(signal) != 0) fhs_report_and_end(signal, 0);
        return;
    }
    fhs_report_and_end(signal, 1);
}

/* The loader learns which object called dlopen or dlmopen from the call's return address: a
   bare name (no slash) is looked for in that object's DT_RPATH or DT_RUNPATH (with $ORIGIN its
   directory) and loaded into its namespace. Called by these wrappers, the loader would see this
   library (no such paths, the base namespace): a program whose own RUNPATH leads to a plugin it
   opens by name could not open it under the tracer. The wrappers call the loader through a `ret`
   in the caller's object instead (ffh_return_site.h); where none is found, as before. */
void *dlopen(const char *file, int mode) {
    fhs_dlopen_function real = __atomic_load_n(&fhs_real_dlopen, __ATOMIC_ACQUIRE);
    if (!real) {
        real = (fhs_dlopen_function)dlsym(RTLD_NEXT, "dlopen");
        if (!real) return NULL;
        __atomic_store_n(&fhs_real_dlopen, real, __ATOMIC_RELEASE);
    }
#if defined(__x86_64__)
    const void *through = ffh_return_site((uintptr_t)__builtin_return_address(0));
#endif
    fhs_loader_depth++;
#if defined(__x86_64__)
    void *handle = through ? (void *)ffh_call_through((const void *)real, through, (uintptr_t)file, (uintptr_t)mode, 0, 0)
                           : real(file, mode);
#else
    void *handle = real(file, mode);
#endif
    fhs_loader_depth--;
    if (handle) fhs_check(0);
    /* A signal taken while the loader ran is taken before the tracer's walk, which calls the
       loader itself (taken there, inside the tracer's own work, it would wait for the walk). */
    if (fhs_pending_signal) fhs_take_pending();
    if (handle) fhs_tell_tracer(0);
    return handle;
}

void *dlmopen(Lmid_t namespace, const char *file, int mode) {
    fhs_dlmopen_function real = __atomic_load_n(&fhs_real_dlmopen, __ATOMIC_ACQUIRE);
    if (!real) {
        real = (fhs_dlmopen_function)dlsym(RTLD_NEXT, "dlmopen");
        if (!real) return NULL;
        __atomic_store_n(&fhs_real_dlmopen, real, __ATOMIC_RELEASE);
    }
#if defined(__x86_64__)
    const void *through = ffh_return_site((uintptr_t)__builtin_return_address(0));
#endif
    fhs_loader_depth++;
#if defined(__x86_64__)
    void *handle = through ? (void *)ffh_call_through((const void *)real, through, (uintptr_t)namespace,
                                                      (uintptr_t)file, (uintptr_t)mode, 0)
                           : real(namespace, file, mode);
#else
    void *handle = real(namespace, file, mode);
#endif
    fhs_loader_depth--;
    /* (Objects in a namespace of their own are told of too: the tracer leaves them out, and
       says so when they alone answer to a --library name.) */
    if (handle) fhs_check(0);
    /* The walks see the caller's namespace alone: where the light report stands in and a
       --library name answers to an object of another, the tracer is loaded to say so. */
    if (handle && fhs_light_active() && fhs_names_in_namespace(handle)) fhs_check(1);
    if (fhs_pending_signal) fhs_take_pending();
    if (handle) fhs_tell_tracer(0);
    return handle;
}

int dlclose(void *handle) {
    fhs_dlclose_function real = __atomic_load_n(&fhs_real_dlclose, __ATOMIC_ACQUIRE);
    if (!real) {
        real = (fhs_dlclose_function)dlsym(RTLD_NEXT, "dlclose");
        if (!real) return -1;
        __atomic_store_n(&fhs_real_dlclose, real, __ATOMIC_RELEASE);
    }
    fhs_loader_depth++;
    int result = real(handle);
    fhs_loader_depth--;
    if (fhs_pending_signal) fhs_take_pending();
    if (result == 0) fhs_tell_tracer(1);
    return result;
}

/* The C library's abort raises SIGABRT, and when the program's handler returns (or the signal
   is ignored) puts the default action back through its own sigaction, past this library's, and
   raises it again: the process ended without a report. This abort takes the same steps, with
   the report before the last. A handler that does not return (longjmp) leaves the process
   running, untouched. (The C library's own calls of abort, assert's and the allocator's, do
   not come here: a handler of the program's that returns from those still ends the process
   without a report.) */
__attribute__((noreturn)) void abort(void) {
    void (*real)(void) = fhs_real_abort;
    if (!real) real = (void (*)(void))dlsym(RTLD_NEXT, "abort");
    /* No tracer yet, or its handler stands in for the default action: the C library's. */
    if (real && ((!fhs_finish_signalled && !fhs_light_active()) || fhs_is_owned(SIGABRT))) real();
    sigset_t abort_only;
    sigemptyset(&abort_only);
    sigaddset(&abort_only, SIGABRT);
    sigprocmask(SIG_UNBLOCK, &abort_only, NULL);
    raise(SIGABRT);
    /* The program's handler returned, or SIGABRT is ignored: the process ends of it now. */
    int first = 0;
    __atomic_compare_exchange_n(&fhs_ending_signal, &first, SIGABRT, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    fhs_report_and_end(SIGABRT, fhs_loader_depth == 0 && !fhs_in_own_work());
    if (real) real();
    _exit(127);
}

// MARK: - Barriers

/* Registers the process for the memory barriers the tracer's hooks use, while it has one thread
   (a preloaded library's constructor runs before the program's): the kernel then registers it at
   once, where with a second thread running it waits for an RCU grace period (10 to 15 ms), which
   the dlopen that loads the tracer in a process with threads paid. Registration survives fork
   and ends at exec; a process in which no traced library is loaded pays two system calls (four
   with --inline, whose patches serialise every processor). */
static void fhs_register_barriers(void) {
    const char *list = getenv("FFI_HOOK_TRACER_LIBRARIES");
    if (!list || !*list) return;
    ffh_syscall3(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0);
    const char *inline_code = getenv("FFI_HOOK_TRACER_INLINE");
    if (!inline_code || strcmp(inline_code, "1") != 0) return;
    long commands = ffh_syscall3(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (commands > 0 && (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE)) {
        ffh_syscall3(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
    }
}

// MARK: - _exit

/* The process ID this memory belongs to: set at load and in a forked child. A vfork child (or
   a clone sharing the memory without the fork handlers) runs on its parent's memory with
   another ID. */
static pid_t fhs_process_id;
/* 1 in a child forked from the process this image started in (see fhs_quick_exit). */
static int fhs_forked_child;

static void fhs_forked_id(void) {
    fhs_process_id = (pid_t)ffh_syscall0(SYS_getpid);
    fhs_forked_child = 1;
}

/* Where _exit and _Exit lead: the report, as exit makes it (the process ends without its atexit
   handlers and finalizers, where exit makes it: the Debian shell, dash, always ends so), then
   the end of the process as the C library's _exit ends it. Not in a vfork child, which runs on
   its parent's memory (its report would be the parent's, and end it), nor before the tracer is
   loaded, nor in a forked child (as exit does there): a thread of its parent's may have held a
   lock the report needs (the loader's, in a dlopen) as it forked, which the child then never
   sees released, and _exit is what a forked child calls not to meet such locks. Made as a deadly signal's is: by the report thread while this one waits (3 s at most
   without progress: _exit may be called from a signal handler that interrupted a lock the
   report needs), or here without one. */
static void fhs_report_at_quick_end(void) {
    if ((fhs_finish_signalled || fhs_light_active()) && !fhs_forked_child &&
        (pid_t)ffh_syscall0(SYS_getpid) == fhs_process_id &&
        !fhs_on_reporter) {
        int saved = errno;
        fhs_report_and_wait(0, fhs_loader_depth == 0 && !fhs_in_own_work());
        errno = saved;
    }
}

static __attribute__((noreturn)) void fhs_quick_exit(int status) {
    fhs_report_at_quick_end();
    for (;;) ffh_syscall3(SYS_exit_group, status, 0, 0);
}

/* Before the process executes `path`: the table of the calls this image made (they were lost,
   the new image counting from zero), when it made any, by the report thread while this one
   waits (3 s at most without progress, as for _exit), or here where there is none. Not in a
   vfork child (its exec is the child's start: the calls so far are its parent's), nor in a
   forked child (the shell's child that runs a command: its few calls are the shell's, and a
   lock held by a thread of its parent as it forked would never be released), nor once a
   signal's report is under way. Waits with system calls of its own: the thread goes on as the
   program's should the exec fail. */
static void fhs_before_exec(const char *path) {
    if (!fhs_report_before_exec || fhs_forked_child || (pid_t)ffh_syscall0(SYS_getpid) != fhs_process_id ||
        fhs_on_reporter) {
        return;
    }
    if (__atomic_load_n(&fhs_report_state, __ATOMIC_ACQUIRE) != 0) return;
    int saved = errno;
    int wake = fhs_wake_descriptor();
    if (wake < 0) {
        if (fhs_loader_depth == 0 && !fhs_in_own_work()) fhs_report_before_exec(path ? path : "?");
        errno = saved;
        return;
    }
    __atomic_store_n(&fhs_exec_reported, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&fhs_exec_path, path ? path : "?", __ATOMIC_RELEASE);
    uint64_t one = 1;
    if (ffh_syscall3(SYS_write, wake, (long)&one, sizeof one) == (long)sizeof one) {
        fhs_wait_for(&fhs_exec_reported, 1);
    }
    /* (Asked and not taken: not to be taken later.) */
    __atomic_store_n(&fhs_exec_path, NULL, __ATOMIC_RELEASE);
    errno = saved;
}

/* The C library's function `name` (the next definition after this library's). */
static void *fhs_next(const char *name) {
    void *found = dlsym(RTLD_NEXT, name);
    if (!found) errno = ENOSYS;
    return found;
}

/* The exec functions a program calls (the C library's own calls of execve, from execvp or
   posix_spawn, do not come here). The variadic ones pass their arguments on as an array. */
__attribute__((visibility("default"))) int execve(const char *path, char *const argv[], char *const envp[]) {
    static int (*real)(const char *, char *const[], char *const[]);
    if (!real) real = (int (*)(const char *, char *const[], char *const[]))fhs_next("execve");
    if (!real) return -1;
    fhs_before_exec(path);
    return real(path, argv, envp);
}

__attribute__((visibility("default"))) int execv(const char *path, char *const argv[]) {
    static int (*real)(const char *, char *const[]);
    if (!real) real = (int (*)(const char *, char *const[]))fhs_next("execv");
    if (!real) return -1;
    fhs_before_exec(path);
    return real(path, argv);
}

__attribute__((visibility("default"))) int execvp(const char *file, char *const argv[]) {
    static int (*real)(const char *, char *const[]);
    if (!real) real = (int (*)(const char *, char *const[]))fhs_next("execvp");
    if (!real) return -1;
    fhs_before_exec(file);
    return real(file, argv);
}

__attribute__((visibility("default"))) int execvpe(const char *file, char *const argv[], char *const envp[]) {
    static int (*real)(const char *, char *const[], char *const[]);
    if (!real) real = (int (*)(const char *, char *const[], char *const[]))fhs_next("execvpe");
    if (!real) return -1;
    fhs_before_exec(file);
    return real(file, argv, envp);
}

/* The file at `descriptor` by its path (/proc/self/fd's link), for a report's heading. */
static void fhs_descriptor_path(int descriptor, char *path, size_t size) {
    char link[32] = "/proc/self/fd/", digits[12];
    size_t used = strlen(link), count = 0;
    for (unsigned value = (unsigned)descriptor; count == 0 || value > 0; value /= 10) digits[count++] = (char)('0' + value % 10);
    while (count > 0) link[used++] = digits[--count];
    link[used] = 0;
    long length = ffh_syscall3(SYS_readlink, (long)link, (long)path, (long)size - 1);
    if (length <= 0) {
        /* The link's own name says which descriptor. */
        length = (long)(used < size ? used : size - 1);
        memcpy(path, link, (size_t)length);
    }
    path[length] = 0;
}

/* Appends `text` to the string in `buffer` (`size` bytes in all), cut to fit. */
static void fhs_append(char *buffer, size_t size, const char *text) {
    size_t used = strlen(buffer), length = strlen(text);
    if (used + length >= size) length = size - used - 1;
    memcpy(buffer + used, text, length);
    buffer[used + length] = 0;
}

__attribute__((visibility("default"))) int fexecve(int descriptor, char *const argv[], char *const envp[]) {
    static int (*real)(int, char *const[], char *const[]);
    if (!real) real = (int (*)(int, char *const[], char *const[]))fhs_next("fexecve");
    if (!real) return -1;
    char path[PATH_MAX];
    fhs_descriptor_path(descriptor, path, sizeof path);
    fhs_before_exec(path);
    return real(descriptor, argv, envp);
}

__attribute__((visibility("default"))) int execveat(int directory, const char *path, char *const argv[],
                                                    char *const envp[], int flags) {
    static int (*real)(int, const char *, char *const[], char *const[], int);
    if (!real) real = (int (*)(int, const char *, char *const[], char *const[], int))fhs_next("execveat");
    if (!real) return -1;
    char named[PATH_MAX] = "";
    if (path[0] && path[0] != '/' && directory != AT_FDCWD) {
        /* Relative to a directory's descriptor: named by that directory's path. */
        fhs_descriptor_path(directory, named, sizeof named);
        fhs_append(named, sizeof named, "/");
        fhs_append(named, sizeof named, path);
    } else if (path[0]) {
        fhs_append(named, sizeof named, path);
    } else {
        fhs_descriptor_path(directory, named, sizeof named);
    }
    fhs_before_exec(named);
    return real(directory, path, argv, envp, flags);
}

/* quick_exit runs the at_quick_exit handlers, then the C library's own _exit (not this one):
   the report is made first, as for _exit. */
__attribute__((noreturn, visibility("default"))) void quick_exit(int status) {
    static void (*real)(int);
    if (!real) real = (void (*)(int))dlsym(RTLD_NEXT, "quick_exit");
    fhs_report_at_quick_end();
    if (real) real(status);
    for (;;) ffh_syscall3(SYS_exit_group, status, 0, 0);
}

/* The arguments of a variadic exec, `first` then those after `last_named` up to the NULL, as
   an array ending with the NULL (as the C library's execl counts them). */
#define FHS_LIST_ARGUMENTS(first, last_named)                                                   \
    size_t count = 1;                                                                          \
    {                                                                                          \
        va_list counting;                                                                      \
        va_start(counting, last_named);                                                        \
        while (va_arg(counting, char *)) count++;                                              \
        va_end(counting);                                                                      \
    }                                                                                          \
    char *arguments[count + 1];                                                                \
    arguments[0] = (char *)(first);                                                            \
    {                                                                                          \
        va_list listing;                                                                       \
        va_start(listing, last_named);                                                         \
        for (size_t place = 1; place < count; place++) arguments[place] = va_arg(listing, char *); \
        va_end(listing);                                                                       \
    }                                                                                          \
    arguments[count] = NULL

__attribute__((visibility("default"))) int execl(const char *path, const char *argument, ...) {
    FHS_LIST_ARGUMENTS(argument, argument);
    return execv(path, arguments);
}

__attribute__((visibility("default"))) int execlp(const char *file, const char *argument, ...) {
    FHS_LIST_ARGUMENTS(argument, argument);
    return execvp(file, arguments);
}

__attribute__((visibility("default"))) int execle(const char *path, const char *argument, ...) {
    FHS_LIST_ARGUMENTS(argument, argument);
    /* The environment follows the NULL. */
    va_list after;
    va_start(after, argument);
    for (size_t place = 1; place <= count; place++) (void)va_arg(after, char *);
    char *const *environment = va_arg(after, char *const *);
    va_end(after);
    return execve(path, arguments, environment);
}

/* The program's _exit and _Exit (this library is preloaded: its definitions come first). */
__attribute__((noreturn, visibility("default"))) void _exit(int status) { fhs_quick_exit(status); }
__attribute__((noreturn, visibility("default"))) void _Exit(int status) { fhs_quick_exit(status); }

__attribute__((constructor)) static void fhs_start(void) {
    fhs_process_id = (pid_t)ffh_syscall0(SYS_getpid);
    pthread_atfork(NULL, NULL, fhs_forked_id);
    pthread_atfork(NULL, NULL, fhs_forked_loading);
    fhs_keep_settings();
    fhs_register_barriers();
    /* Found now, not at the program's first sigaction, which a signal handler may make (where
       dlsym may not run). */
    (void)fhs_real_sigaction();
    fhs_real_dlopen = (fhs_dlopen_function)dlsym(RTLD_NEXT, "dlopen");
    fhs_real_dlclose = (fhs_dlclose_function)dlsym(RTLD_NEXT, "dlclose");
    fhs_real_dlmopen = (fhs_dlmopen_function)dlsym(RTLD_NEXT, "dlmopen");
    fhs_real_siginterrupt = (int (*)(int, int))dlsym(RTLD_NEXT, "siginterrupt");
    fhs_real_abort = (void (*)(void))dlsym(RTLD_NEXT, "abort");
    if (!fhs_real_dlopen) return;
    /* The program the wrapper started always reports, traced libraries or not: with the tracer,
       or without it while no traced library is loaded (light_report.c), when only the table is
       asked for. */
    const char *started = getenv("FFI_HOOK_TRACER_PID");
    int isStarted = started && atol(started) == (long)getpid();
    if (!isStarted || !fhs_light_applies()) {
        fhs_check(isStarted);
        return;
    }
    Dl_info own;
    void *own_map = NULL;
    if (dladdr1(&ffi_hook_tracer_preloaded, &own, &own_map, RTLD_DL_LINKMAP)) fhs_own_map = own_map;
    fhs_light_begin();
    fhs_check(0);
    /* A report when a signal ends the process, as the tracer's start would have it. */
    if (fhs_light_active()) fhs_stand_in_for_defaults();
}

/* At exit, when the loader runs this library's finalizer (after the program's exit handlers and
   finalizers, and the tracer's, as the tracer's own report at exit): the light report where it
   stands in (not while the tracer starts: its finalizer reported); else the tracer's report,
   which its own finalizer made already (it runs once) unless the tracer was loaded after the
   exit began (by a finalizer's dlopen), when the loader runs no finalizer of it. */
__attribute__((destructor)) static void fhs_end(void) {
    if (__atomic_load_n(&fhs_tracer_starting, __ATOMIC_ACQUIRE)) return;
    if (fhs_light_active()) {
        fhs_light_finish(0);
        return;
    }
    void (*finish)(void) = __atomic_load_n(&fhs_tracer_finish, __ATOMIC_ACQUIRE);
    if (finish && __atomic_load_n(&fhs_loaded, __ATOMIC_ACQUIRE)) finish();
}
