#define _GNU_SOURCE
#include "ffh_thread.h"
#include "ffh_call.h"
#include "call_internal.h"
#include "ffh_syscall.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

__thread ffh_thread *ffh_current_thread __attribute__((tls_model("initial-exec")));
/* 1 on a thread the library made for its own work (ffh_thread_become_library_own): every
   record the thread claims is marked as doing the library's work, to its very end. A thread's
   end frees its C library's buffers after the pthread key destructors (and so this library's)
   have run: those calls of free claim a record again, and run no program's blocks. */
static __thread char ffh_library_own __attribute__((tls_model("initial-exec")));
__thread char ffh_thread_here __attribute__((tls_model("initial-exec")));

/* Whether the call path marks its own code (ffh_handler_setup). */
static int ffh_marks_call_path;

/* Every record ever mapped; new ones are pushed at the head, none is ever removed. */
static ffh_thread *ffh_records;

/* Frees the record of an exiting thread. Created when the library loads, so the key is one of
   the first of the process: glibc keeps the values of the first 32 keys inside the thread's
   descriptor, so setting it allocates nothing. */
static pthread_key_t ffh_exit_key;
static int ffh_exit_key_made;

/* What runs on an ending thread first (ffh_thread_set_exit_hook). */
static void (*ffh_exit_hook)(void);

void ffh_thread_set_exit_hook(void (*hook)(void)) { __atomic_store_n(&ffh_exit_hook, hook, __ATOMIC_RELEASE); }

static void ffh_thread_exited(void *record) {
    void (*hook)(void) = __atomic_load_n(&ffh_exit_hook, __ATOMIC_ACQUIRE);
    if (hook) hook();
    ffh_thread_release(record);
}

__attribute__((constructor)) static void ffh_thread_setup(void) {
    ffh_exit_key_made = pthread_key_create(&ffh_exit_key, ffh_thread_exited) == 0;
}

/* Thread and process ids from the kernel, not through libc's gettid, getpid or syscall, which
   a program may have hooked or replaced in the import table this library's calls go through. */
static int32_t ffh_gettid(void) { return (int32_t)ffh_syscall0(SYS_gettid); }
int32_t ffh_getpid(void) { return (int32_t)ffh_syscall0(SYS_getpid); }

/* Takes a free record, or NULL when none is free. */
static ffh_thread *ffh_take_free(void) {
    for (ffh_thread *record = __atomic_load_n(&ffh_records, __ATOMIC_ACQUIRE); record;
         record = record->next) {
        uintptr_t expected = 0;
        if (__atomic_load_n(&record->claimed, __ATOMIC_RELAXED) == 0
            && __atomic_compare_exchange_n(&record->claimed, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            return record;
        }
    }
    return NULL;
}

/* The distance between records in a block (which the kernel maps page-aligned): a record's
   size rounded up to FFH_THREAD_ALIGNMENT, so that no two records share a cache line. Packed
   at their size (568 bytes), one record's `busy` shared a line with the next one's
   `generation` and marks, and two threads calling hooks at once made each other miss in the
   cache on every call. */
#define FFH_RECORD_STRIDE \
    ((sizeof(ffh_thread) + FFH_THREAD_ALIGNMENT - 1) / FFH_THREAD_ALIGNMENT * FFH_THREAD_ALIGNMENT)

/* Record `index` of a block. */
static inline ffh_thread *ffh_block_record(long memory, size_t index) {
    return (ffh_thread *)(uintptr_t)(memory + (long)(index * FFH_RECORD_STRIDE));
}

/* Maps a block's worth of records, claims the first and publishes them all. The size is a
   multiple of every page size the kernel uses, so no call asks for the page size; the
   mapping is a system call by instruction (a program may hook mmap in the library's own
   import table, and this runs before the thread has a record to mark such a call with). */
static ffh_thread *ffh_map_records(void) {
    size_t size = 16 * 1024;
    size_t count = size / FFH_RECORD_STRIDE;
    long memory = ffh_syscall6(SYS_mmap, 0, (long)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory < 0 && memory > -4096) return NULL;
    /* Zero-filled: free, generation 0. */
    for (size_t index = 0; index + 1 < count; index++) {
        ffh_block_record(memory, index)->next = ffh_block_record(memory, index + 1);
    }
    ffh_thread *first = ffh_block_record(memory, 0);
    ffh_thread *last = ffh_block_record(memory, count - 1);
    first->claimed = 1;
    ffh_thread *head = __atomic_load_n(&ffh_records, __ATOMIC_RELAXED);
    do {
        last->next = head;
    } while (!__atomic_compare_exchange_n(&ffh_records, &head, first, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    return first;
}

ffh_thread *ffh_thread_claim(void) {
    ffh_thread *record = ffh_take_free();
    if (!record) record = ffh_map_records();
    if (!record) return NULL;
    /* Atomic: reclamation reads it from another thread, with no order to this write. */
    __atomic_store_n(&record->tid, ffh_gettid(), __ATOMIC_RELAXED);
    record->entry_busy = __atomic_load_n(&ffh_marks_call_path, __ATOMIC_ACQUIRE) ? 1 : 0;
    /* A signal handler that interrupted this claim and made a hooked call of its own claimed
       a record for the thread already: that one stays (its call may still be in progress
       below this frame), this one goes back. One instruction, which no handler splits. */
    ffh_thread *none = NULL;
    if (!__atomic_compare_exchange_n(&ffh_current_thread, &none, record, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        __atomic_store_n(&record->claimed, 0, __ATOMIC_RELEASE);
        return none;
    }
    /* The record is the thread's now: a hooked pthread_setspecific that this call reaches
       finds the thread busy and goes straight to libc's. */
    int32_t was = ffh_thread_begin_work(record);
    if (ffh_exit_key_made) pthread_setspecific(ffh_exit_key, record);
    /* (On a thread of the library's own, its work began as the claim began: the calls after
       it, from frames above, are the work's.) */
    if (!ffh_library_own) record->busy = was;
    return record;
}

void ffh_thread_become_library_own(void) {
    ffh_library_own = 1;
    ffh_thread *thread = ffh_thread_current();
    if (thread) ffh_thread_begin_work(thread);
}

#if defined(__linux__) && defined(__x86_64__)

/* What the x86-64 kernel writes in the software-reserved bytes of the XSAVE area of every
   signal frame it builds (struct _fpx_sw_bytes, at byte 464: FP_XSTATE_MAGIC1), and the least
   size of that area (the legacy 512 bytes and the XSAVE header). */
enum { FFH_XSAVE_MAGIC_AT = 464, FFH_XSAVE_LEAST = 576 };
static const uint32_t ffh_xsave_magic = 0x46505853u;
/* The frame's words read below: the restorer's address, then the ucontext up to its pointer
   to the XSAVE area. */
_Static_assert(8 + __builtin_offsetof(ucontext_t, uc_mcontext.fpregs) + 8 <= 256, "signal frame words");

/* These read the stack, their own and their callers' frames, which are not their objects: no
   sanitizer may check these reads. */
#if defined(__clang__) && __has_attribute(disable_sanitizer_instrumentation)
#define FFH_READS_STACK __attribute__((disable_sanitizer_instrumentation))
#else
#define FFH_READS_STACK __attribute__((no_sanitize("address", "thread")))
#endif

/* Whether the signal frame at `frame` is a handler's that runs now, not one left in stack
   memory by a handler that has returned (a frame a function's locals leave unwritten keeps
   its bytes: the fault guard's frames, a stop's, anyone's). While a handler runs, the kernel
   blocks its signal and its mask on top of the mask the frame saved: the thread's mask now
   holds the saved one and more. A handler installed with SA_NODEFER and an empty mask blocks
   nothing more, and is not told from a frame left behind; nor is a frame left behind while the
   thread blocks more signals now than when it was made. (The frame's siginfo would name the
   signal, but the kernel fills it in for SA_SIGINFO handlers alone.) */
FFH_READS_STACK static int ffh_frame_is_running(uintptr_t frame) {
    uint64_t saved;
    __builtin_memcpy(&saved, (const void *)(frame + 8 + __builtin_offsetof(ucontext_t, uc_sigmask)), sizeof saved);
    uint64_t blocked = 0;
    if (ffh_syscall6(SYS_rt_sigprocmask, SIG_BLOCK, 0, (long)&blocked, 8, 0, 0) != 0) return 1;
    return (blocked & saved) == saved && blocked != saved;
}

FFH_READS_STACK int ffh_interrupted_below(uintptr_t sp, uintptr_t top) {
    if (top == 0) return 0;
    /* Running on the signal stack while the work runs on another: a handler's. */
    stack_t alternate;
    if (ffh_syscall6(SYS_sigaltstack, 0, (long)&alternate, 0, 0, 0, 0) == 0 && (alternate.ss_flags & SS_ONSTACK)) {
        uintptr_t low = (uintptr_t)alternate.ss_sp, high = low + alternate.ss_size;
        if (top <= low || top > high) return 1;
    }
    /* Above the work's first frame (the frame that began it makes calls of its own), or too
       far below it to be the same stack: the work's, as far as can be told. */
    if (sp >= top || top - sp > ((uintptr_t)1 << 22)) return 0;
    /* A handler is entered with its stack pointer at the frame's first word (the restorer's
       address, 8 bytes off a multiple of 16), and the handler's frames and its call lie below
       that: the frame is between `sp` and `top`. Its registers give the interrupted stack
       pointer (inside the work, so at most `top`) and the XSAVE area, which the kernel places
       between the frame and that stack pointer, 64-byte aligned, and marks. */
    for (uintptr_t frame = ((sp + 7) & ~(uintptr_t)15) + 8; frame + 256 <= top; frame += 16) {
        const ucontext_t *context = (const ucontext_t *)(frame + 8);
        uintptr_t area = (uintptr_t)context->uc_mcontext.fpregs;
        uintptr_t interrupted = (uintptr_t)context->uc_mcontext.gregs[REG_RSP];
        if ((area & 63) != 0 || area <= frame || area - frame > 4096) continue;
        if (interrupted > top || interrupted < area + FFH_XSAVE_LEAST) continue;
        uint32_t magic;
        __builtin_memcpy(&magic, (const void *)(area + FFH_XSAVE_MAGIC_AT), sizeof magic);
        if (magic == ffh_xsave_magic && ffh_frame_is_running(frame)) return 1;
    }
    return 0;
}

#else

int ffh_interrupted_below(uintptr_t sp, uintptr_t top) {
    (void)sp;
    (void)top;
    return 0;
}

#endif

int ffh_work_interrupted(const ffh_thread *thread, uintptr_t sp) { return ffh_interrupted_below(sp, thread->work_sp); }

ffh_thread *ffh_thread_first(void) {
    return __atomic_load_n(&ffh_records, __ATOMIC_ACQUIRE);
}

int ffh_thread_is_alive(const ffh_thread *thread) {
    int32_t tid = __atomic_load_n(&thread->tid, __ATOMIC_RELAXED);
    return ffh_syscall3(SYS_tgkill, ffh_getpid(), tid, 0) != -ESRCH;
}

/* What else a record holds that must start afresh for its next thread (attach.c's side
   stack), set by ffh_thread_set_release_hook; NULL until then. */
static void (*ffh_release_hook)(ffh_thread *thread);

void ffh_thread_set_release_hook(void (*hook)(ffh_thread *thread)) {
    __atomic_store_n(&ffh_release_hook, hook, __ATOMIC_RELEASE);
}

static void ffh_thread_run_release_hook(ffh_thread *thread) {
    void (*hook)(ffh_thread *) = __atomic_load_n(&ffh_release_hook, __ATOMIC_ACQUIRE);
    if (hook != NULL) hook(thread);
}

void ffh_thread_release(ffh_thread *thread) {
    ffh_thread_run_release_hook(thread);
    for (uintptr_t index = 0; index < FFH_MARKS; index++) thread->marks[index] = 0;
    thread->mark_count = 0;
    thread->busy = 0;
    thread->attach_block = 0;
    thread->work_interrupted = 0;
    thread->making_side = 0;
    uintptr_t generation = __atomic_load_n(&thread->generation, __ATOMIC_RELAXED);
    if (generation & 1) __atomic_store_n(&thread->generation, generation + 1, __ATOMIC_RELEASE);
    if (ffh_current_thread == thread) ffh_current_thread = NULL;
    __atomic_store_n(&thread->claimed, 0, __ATOMIC_RELEASE);
}

int ffh_thread_release_vanished(ffh_thread *thread, uintptr_t generation) {
    uintptr_t expected = generation;
    if (!__atomic_compare_exchange_n(
            &thread->generation, &expected, generation + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        return 0;
    }
    ffh_thread_run_release_hook(thread);
    for (uintptr_t index = 0; index < FFH_MARKS; index++) thread->marks[index] = 0;
    thread->mark_count = 0;
    thread->busy = 0;
    thread->attach_block = 0;
    thread->work_interrupted = 0;
    thread->making_side = 0;
    __atomic_store_n(&thread->claimed, 0, __ATOMIC_RELEASE);
    return 1;
}

void ffh_thread_forget_others(void) {
    /* The calling thread has a new kernel id in the child. */
    if (ffh_current_thread) __atomic_store_n(&ffh_current_thread->tid, ffh_gettid(), __ATOMIC_RELAXED);
    for (ffh_thread *record = ffh_thread_first(); record; record = record->next) {
        if (record != ffh_current_thread && ffh_thread_is_claimed(record)) {
            ffh_thread_release(record);
        }
    }
}

// MARK: - fork

enum { FFH_FORK_LOCKS = 16 };

/* What is taken across fork: a pthread mutex, or a lock another library implements, taken
   and given back through its functions. */
typedef struct {
    void (*take)(void *);
    void (*give)(void *);
    void *lock;
} ffh_fork_lock;

/* The locks taken across fork. An entry is written, then published by setting `ready`;
   entries are never removed. */
static struct {
    ffh_fork_lock lock;
    int rank;
    int ready;
} ffh_fork_locks[FFH_FORK_LOCKS];
static unsigned ffh_fork_lock_count;

/* The published locks' indices in the table, in the order they are taken (by rank, then by
   addition). */
static unsigned ffh_fork_order(unsigned char *order) {
    unsigned count = __atomic_load_n(&ffh_fork_lock_count, __ATOMIC_ACQUIRE);
    if (count > FFH_FORK_LOCKS) count = FFH_FORK_LOCKS;
    unsigned taken = 0;
    for (unsigned index = 0; index < count; index++) {
        if (!__atomic_load_n(&ffh_fork_locks[index].ready, __ATOMIC_ACQUIRE)) continue;
        void *lock = ffh_fork_locks[index].lock.lock;
        int rank = ffh_fork_locks[index].rank;
        int seen = 0;
        for (unsigned other = 0; other < taken; other++) seen |= ffh_fork_locks[order[other]].lock.lock == lock;
        if (seen) continue; /* added twice by racing threads: taken once */
        unsigned at = taken;
        while (at > 0 && ffh_fork_locks[order[at - 1]].rank > rank) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = (unsigned char)index;
        taken++;
    }
    return taken;
}

/* What the prepare handler took, for the handlers after the fork: kept per thread, since two
   threads may fork at once (the second one's prepare runs as soon as the first one's parent
   handler has given the locks back, and must not overwrite what that handler reads). The
   child, a copy of the forking thread, finds its copy. */
static __thread unsigned char ffh_fork_held[FFH_FORK_LOCKS] __attribute__((tls_model("initial-exec")));
static __thread unsigned char ffh_fork_held_count __attribute__((tls_model("initial-exec")));

/* Whether the forking thread ran the library's own code before the fork's handlers, which
   mark it so (a hooked pthread_mutex_lock that they reach goes straight to libc's). */
static __thread int32_t ffh_fork_busy __attribute__((tls_model("initial-exec")));

static void ffh_fork_prepare(void) {
    ffh_fork_busy = ffh_library_enter(FFH_BUSY_WORK);
    unsigned char order[FFH_FORK_LOCKS];
    unsigned count = ffh_fork_order(order);
    for (unsigned index = 0; index < count; index++) {
        const ffh_fork_lock *lock = &ffh_fork_locks[order[index]].lock;
        lock->take(lock->lock);
        ffh_fork_held[index] = order[index];
    }
    ffh_fork_held_count = (unsigned char)count;
    /* Until the parent's or the child's handler: the C library's fork and other libraries'
       handlers, whose attached calls (and a signal handler's) are not the library's. */
    ffh_library_enter(FFH_BUSY_FORK);
}

static void ffh_fork_release(void) {
    for (unsigned index = ffh_fork_held_count; index > 0; index--) {
        const ffh_fork_lock *lock = &ffh_fork_locks[ffh_fork_held[index - 1]].lock;
        lock->give(lock->lock);
    }
    ffh_fork_held_count = 0;
}

static void ffh_fork_parent(void) {
    ffh_library_enter(FFH_BUSY_WORK);
    ffh_fork_release();
    ffh_library_enter(ffh_fork_busy);
}

static void ffh_fork_child(void) {
    ffh_library_enter(FFH_BUSY_WORK);
    /* The child's only thread: every other record belongs to a thread that is gone. */
    ffh_thread_forget_others();
    ffh_fork_release();
    ffh_library_enter(ffh_fork_busy);
}

/* The size of a helper's stack, its guard page included: the C library's default. */
#define FFH_HELPER_STACK (8L << 20)

int ffh_thread_start_helper(pthread_t *thread, void *(*start)(void *), void *context, void **stack) {
    sigset_t all, previous;
    /* (Every bit: sigfillset's set, without one more import of the C library's.) */
    memset(&all, 0xFF, sizeof all);
    /* The new thread starts with the mask of the thread that makes it. */
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pthread_attr_t attributes;
    int placed = 0, made = pthread_attr_init(&attributes) == 0;
    unsigned here = 0;
    cpu_set_t allowed;
    memset(&allowed, 0, sizeof allowed);
    /* The processor it runs on and those it may run on, by system call (sched_getaffinity
       gives the number of bytes of the mask it wrote). */
    if (made && ffh_syscall3(__NR_getcpu, (long)&here, 0, 0) == 0 && here < CPU_SETSIZE &&
        ffh_syscall3(__NR_sched_getaffinity, 0, sizeof allowed, (long)&allowed) > 0 && CPU_ISSET(here, &allowed)) {
        CPU_CLR(here, &allowed);
        int others = 0;
        for (size_t word = 0; word < sizeof allowed.__bits / sizeof allowed.__bits[0]; word++) {
            others += __builtin_popcountl(allowed.__bits[word]);
        }
        placed = others > 0 && pthread_attr_setaffinity_np(&attributes, sizeof allowed, &allowed) == 0;
    }
    /* A stack of its own (see the header), by system call; the C library's otherwise. */
    *stack = NULL;
    long mapped = made ? ffh_syscall6(__NR_mmap, 0, FFH_HELPER_STACK, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0)
                       : -ENOMEM;
    if (mapped < 0 && mapped > -4096) {
        mapped = 0;
    } else if (ffh_syscall3(__NR_mprotect, mapped, 4096, PROT_NONE) != 0 ||
               pthread_attr_setstack(&attributes, (void *)(mapped + 4096), FFH_HELPER_STACK - 4096) != 0) {
        ffh_syscall3(__NR_munmap, mapped, FFH_HELPER_STACK, 0);
        mapped = 0;
    }
    int status = pthread_create(thread, placed || mapped ? &attributes : NULL, start, context);
    /* (A processor the mask names that a cpuset took away since: anywhere, on the same stack.) */
    if (status != 0 && placed) {
        pthread_attr_t plain;
        if (mapped && pthread_attr_init(&plain) == 0) {
            if (pthread_attr_setstack(&plain, (void *)(mapped + 4096), FFH_HELPER_STACK - 4096) == 0) {
                status = pthread_create(thread, &plain, start, context);
            }
            pthread_attr_destroy(&plain);
        } else {
            status = pthread_create(thread, NULL, start, context);
        }
    }
    if (status == 0) {
        *stack = (void *)mapped;
    } else if (mapped) {
        ffh_syscall3(__NR_munmap, mapped, FFH_HELPER_STACK, 0);
    }
    if (made) pthread_attr_destroy(&attributes);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    return status;
}

void ffh_thread_unmap_helper_stack(void *stack) {
    if (stack) ffh_syscall3(__NR_munmap, (long)stack, FFH_HELPER_STACK, 0);
}

int ffh_fork_protect_with(void (*take)(void *), void (*give)(void *), void *lock, int rank) {
    static int registered;
    unsigned count = __atomic_load_n(&ffh_fork_lock_count, __ATOMIC_ACQUIRE);
    for (unsigned index = 0; index < count && index < FFH_FORK_LOCKS; index++) {
        if (__atomic_load_n(&ffh_fork_locks[index].ready, __ATOMIC_ACQUIRE) && ffh_fork_locks[index].lock.lock == lock) {
            return 0;
        }
    }
    unsigned slot = __atomic_fetch_add(&ffh_fork_lock_count, 1, __ATOMIC_ACQ_REL);
    if (slot >= FFH_FORK_LOCKS) return -1;
    ffh_fork_locks[slot].lock = (ffh_fork_lock){take, give, lock};
    ffh_fork_locks[slot].rank = rank;
    __atomic_store_n(&ffh_fork_locks[slot].ready, 1, __ATOMIC_RELEASE);
    if (__atomic_exchange_n(&registered, 1, __ATOMIC_ACQ_REL)) return 0;
    return pthread_atfork(ffh_fork_prepare, ffh_fork_parent, ffh_fork_child);
}

static void ffh_fork_take_mutex(void *mutex) { pthread_mutex_lock(mutex); }
static void ffh_fork_give_mutex(void *mutex) { pthread_mutex_unlock(mutex); }

int ffh_fork_protect(pthread_mutex_t *lock, int rank) {
    return ffh_fork_protect_with(ffh_fork_take_mutex, ffh_fork_give_mutex, lock, rank);
}

// MARK: - The closure handler

void ffh_nothing(void) {}

int ffh_identity(int value) { return value; }

static ffh_dispatch ffh_dispatch_function;

uintptr_t ffh_recordless_readers;
int ffh_readers_fence;

void ffh_handler_setup(ffh_dispatch dispatch, int readersFence, int marksCallPath) {
    ffh_readers_fence = readersFence;
    __atomic_store_n(&ffh_marks_call_path, marksCallPath, __ATOMIC_RELEASE);
    /* Records claimed before (no closure exists yet, so no call reads them). */
    for (ffh_thread *record = ffh_thread_first(); record; record = record->next) {
        __atomic_store_n(&record->entry_busy, marksCallPath ? 1 : 0, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&ffh_dispatch_function, dispatch, __ATOMIC_RELEASE);
}

/* Ends the marks of a hooked call whose frame is gone without returning. The argument packs
   the mark count at the call's entry, whether an attach block was running then (the thread's
   `attach_block`, given back) and whether the call was the thread's outermost. */
void ffh_abandoned(void *packed) {
    ffh_thread *thread = ffh_current_thread;
    if (!thread) return;
    uintptr_t value = (uintptr_t)packed;
    uintptr_t marks = value >> 2;
    thread->attach_block = (int32_t)((value >> 1) & 1);
    /* The call began in the program's code (a call made from the library's own passes
       through without a frame like this). */
    thread->busy = 0;
    while (thread->mark_count > marks && thread->mark_count > 0) {
        uintptr_t count = thread->mark_count - 1;
        if (count < FFH_MARKS) thread->marks[count] = 0;
        thread->mark_count = count;
    }
    if (value & 1) {
        uintptr_t generation = __atomic_load_n(&thread->generation, __ATOMIC_RELAXED);
        if (generation & 1) __atomic_store_n(&thread->generation, generation + 1, __ATOMIC_RELEASE);
    }
}

#if defined(__GLIBC__)
/* glibc runs these buffers' routines for the frames a longjmp jumps over and the frames a
   thread's exit or cancellation unwinds (the pthread_cleanup_push of C without exceptions).
   Reached through pointers taken when the library loads, before any hook can exist: the
   library's own import entries for them are a door a program can rewrite, and every hooked
   call would then run the program's hook to register its own cleanup. */
#define FFH_CLEANUP 1
#include <dlfcn.h>
typedef void (*ffh_cleanup_push_function)(struct _pthread_cleanup_buffer *, void (*)(void *), void *);
typedef void (*ffh_cleanup_pop_function)(struct _pthread_cleanup_buffer *, int);
static ffh_cleanup_push_function ffh_cleanup_push;
static ffh_cleanup_pop_function ffh_cleanup_pop;

#if defined(__x86_64__)
/* Where glibc keeps a thread's list of cleanup buffers, as an offset from the thread
   pointer (%fs), found when the library loads; 0 when it was not found, and the calls go
   through ffh_cleanup_push and ffh_cleanup_pop. With it, registering a hooked call's buffer
   is the three stores glibc's function makes, without the call. */
long ffh_cleanup_offset;

static inline uintptr_t ffh_fs_load(long offset) {
    uintptr_t value;
    __asm__ __volatile__("movq %%fs:(%1), %0" : "=r"(value) : "r"(offset));
    return value;
}

static inline void ffh_fs_store(long offset, uintptr_t value) {
    __asm__ __volatile__("movq %0, %%fs:(%1)" : : "r"(value), "r"(offset) : "memory");
}

static void ffh_cleanup_probe_routine(void *unused) { (void)unused; }

/* Pushes a buffer through glibc and looks for the one word of the thread's descriptor that
   then holds its address (and holds the previous head again after the pop). */
static void ffh_cleanup_find_offset(void) {
    struct _pthread_cleanup_buffer probe;
    uintptr_t self = ffh_fs_load(16); /* the descriptor's own address (tcbhead_t.self) */
    if (!self) return;
    ffh_cleanup_push(&probe, ffh_cleanup_probe_routine, NULL);
    long found = 0;
    int matches = 0;
    for (long offset = 24; offset < 2048; offset += 8) {
        if (*(const uintptr_t *)(self + (uintptr_t)offset) == (uintptr_t)&probe) {
            found = offset;
            matches++;
        }
    }
    ffh_cleanup_pop(&probe, 0);
    if (matches == 1 && ffh_fs_load(found) == (uintptr_t)probe.__prev) ffh_cleanup_offset = found;
}
#else
/* No inline registration elsewhere: the offset stays 0 and these are never reached. */
static inline uintptr_t ffh_fs_load(long offset) {
    (void)offset;
    return 0;
}
static inline void ffh_fs_store(long offset, uintptr_t value) {
    (void)offset;
    (void)value;
}
#endif

int ffh_cleanup_set_inline(int on) {
#if defined(__x86_64__)
    static long found;
    long offset = __atomic_load_n(&ffh_cleanup_offset, __ATOMIC_RELAXED);
    if (offset) __atomic_store_n(&found, offset, __ATOMIC_RELAXED);
    long known = __atomic_load_n(&found, __ATOMIC_RELAXED);
    if (on >= 0) __atomic_store_n(&ffh_cleanup_offset, on ? known : 0, __ATOMIC_RELAXED);
    return known != 0;
#else
    (void)on;
    return 0;
#endif
}

__attribute__((constructor)) static void ffh_cleanup_setup(void) {
    ffh_cleanup_push_function push = (ffh_cleanup_push_function)dlsym(RTLD_DEFAULT, "_pthread_cleanup_push");
    ffh_cleanup_pop_function pop = (ffh_cleanup_pop_function)dlsym(RTLD_DEFAULT, "_pthread_cleanup_pop");
    if (push && pop) {
        ffh_cleanup_push = push;
        ffh_cleanup_pop = pop;
#if defined(__x86_64__)
        ffh_cleanup_find_offset();
#endif
    }
}

/* Registers `buffer` through glibc's _pthread_cleanup_push, where the list's place is not
   known (ffh_run registers inline where it is); returns whether it did. */
static inline __attribute__((always_inline)) int ffh_cleanup_register(struct _pthread_cleanup_buffer *buffer,
                                                                      void *argument) {
    ffh_cleanup_push_function push = ffh_cleanup_push;
    if (!push) return 0;
    push(buffer, ffh_abandoned, argument);
    return 1;
}

/* Takes `buffer` off the list again, running nothing, as _pthread_cleanup_pop(buffer, 0). */
static inline __attribute__((always_inline)) void ffh_cleanup_unregister(struct _pthread_cleanup_buffer *buffer) {
#if defined(__x86_64__)
    long offset = __atomic_load_n(&ffh_cleanup_offset, __ATOMIC_RELAXED);
    if (__builtin_expect(offset != 0, 1)) {
        ffh_fs_store(offset, (uintptr_t)buffer->__prev);
        return;
    }
#else
int ffh_cleanup_set_inline(int on) {
    (void)on;
    return 0;
}
#endif
    ffh_cleanup_pop(buffer, 0);
}
#endif

#if FFH_CLEANUP
/* Registers `window`'s buffer as glibc's _pthread_cleanup_push does, with ffh_abandoned and
   `argument`: inline where the list's place in the thread's descriptor is known, else
   through glibc; keeps the list's previous head (or the buffer's own address, when nothing
   was registered). */
static inline __attribute__((always_inline)) void ffh_window_register(ffh_window *window, uintptr_t argument) {
#if defined(__x86_64__)
    const long offset = __atomic_load_n(&ffh_cleanup_offset, __ATOMIC_RELAXED);
#else
    const long offset = 0;
#endif
    if (__builtin_expect(offset != 0, 1)) {
        window->buffer.__routine = ffh_abandoned;
        window->buffer.__arg = (void *)argument;
        window->previous = (struct _pthread_cleanup_buffer *)ffh_fs_load(offset);
        window->buffer.__prev = window->previous;
        ffh_fs_store(offset, (uintptr_t)&window->buffer);
    } else if (ffh_cleanup_register(&window->buffer, (void *)argument)) {
        window->previous = window->buffer.__prev;
    } else {
        window->previous = &window->buffer;
    }
}

/* Takes `window`'s buffer off the list again, running nothing. */
static inline __attribute__((always_inline)) void ffh_window_unregister(ffh_window *window) {
    if (window->previous != &window->buffer) ffh_cleanup_unregister(&window->buffer);
}

void ffh_window_open(ffh_window *window, ffh_thread *thread, int outermost) {
    ffh_window_register(window, ffh_abandoned_argument(thread, outermost));
}

void ffh_window_close(ffh_window *window) { ffh_window_unregister(window); }
#else
void ffh_window_open(ffh_window *window, ffh_thread *thread, int outermost) {
    (void)window;
    (void)thread;
    (void)outermost;
}

void ffh_window_close(ffh_window *window) { (void)window; }
#endif

static int ffh_interrupts_work(const ffh_thread *thread);
static inline void ffh_run(void *returnValue, void **arguments, void *userData, uint64_t *unwind);
static inline __attribute__((always_inline)) uintptr_t ffh_fast_function(const ffh_slot *slot, uintptr_t original,
                                                                         void *const *arguments);

/* A call that finds its thread marked as running the library's own code (out of line: a cold
   path). One the library made itself, through a function the program hooked: straight to the
   function the slot's hooks wrap, in C, where the closure entered through the library's own
   entry (no Swift, whose runtime calls may be the hooked function); otherwise through the
   dispatch's path for calls without a record, which runs no block. A signal handler's that
   interrupted the library's work that calls other libraries (see ffh_interrupts_work) is the
   program's, run as any other, with the thread's mark lifted for it and set again for the work
   to go on: as a call through libffi's entry (through the dispatch, without the entry's
   unwind words), so that the call path holds no copy of the C path's. */
static __attribute__((noinline)) void ffh_pass_through(ffh_dispatch dispatch, void *returnValue, void **arguments,
                                                       ffh_slot *slot) {
    ffh_thread *thread = ffh_current_thread;
    if (ffh_interrupts_work(thread)) {
        int32_t work = thread->busy;
        thread->busy = 0;
        ffh_run(returnValue, arguments, slot, NULL);
        /* (FFH_BUSY_WORK or FFH_BUSY_FORK, set as a choice of the two: storing `work` itself
           changed the register allocation of the call path that calls this function, one
           instruction more on every hooked call.) */
        thread->busy = work == FFH_BUSY_FORK ? FFH_BUSY_FORK : FFH_BUSY_WORK;
        return;
    }
#if defined(__x86_64__) && defined(__ELF__)
    if (slot->plan) {
        uintptr_t state = ffh_slot_state(slot);
        uintptr_t function = state & FFH_SLOT_HOOKED ? __atomic_load_n(&slot->original, __ATOMIC_ACQUIRE) : state;
        if (function) {
            /* (Through the original's resolver: a function that reads its return address is
               called as from the caller, see as_caller.c.) */
            ffh_forward_sysv(slot->plan, (const void *)ffh_fast_function(slot, function, arguments), arguments,
                             returnValue);
            return;
        }
    }
#endif
    dispatch(returnValue, arguments, slot, NULL);
}

/* Whether a hooked call that finds the thread marked is a signal handler's that interrupted
   the library's work that calls other libraries (FFH_BUSY_WORK; see ffh_work_interrupted, to
   which this frame's address is a stack pointer below the handler's signal frame), or any call
   inside fork between its handlers (FFH_BUSY_FORK): it is the program's call, and runs its
   blocks. Out of line: a cold path. */
static __attribute__((noinline)) int ffh_interrupts_work(const ffh_thread *thread) {
    return thread->busy == FFH_BUSY_FORK ||
           (thread->busy == FFH_BUSY_WORK && ffh_work_interrupted(thread, (uintptr_t)__builtin_frame_address(0)));
}

/* The functions that run blocks for the C path (ffh_fast_setup): one block, several. */
static ffh_fast_block_one ffh_fast_one;
static ffh_fast_block ffh_fast_many;

void ffh_fast_setup(ffh_fast_block_one one, ffh_fast_block many) {
    __atomic_store_n(&ffh_fast_many, many, __ATOMIC_RELEASE);
    __atomic_store_n(&ffh_fast_one, one, __ATOMIC_RELEASE);
}

/* The record of every invocation the C path makes for blocks it calls itself: such a call
   never re-entered its slot from a block, and runs no instead block, which alone reads the
   record's other fields. */
static const ffh_fast_call ffh_plain_call;

/* A Swift closure's function: the invocation by address, the closure's context in the context
   register. */
typedef void (*ffh_swift_block_function)(const ffh_invocation *invocation,
                                         const void *context __attribute__((swift_context)))
    __attribute__((swiftcall));

/* A typed block's functions: every argument by address (a generic function's values), the
   context last; with the address of the result to fill first, for one that returns it (as
   Swift returns a value indirectly). Up to seven addresses, the most a typed block of six
   arguments and its result take. */
#define FFH_TYPED_CONTEXT const void *context __attribute__((swift_context))
#define FFH_TYPED_RESULT void *out __attribute__((swift_indirect_result))
typedef const void *ffh_p;
typedef void (*ffh_typed_2)(ffh_p, ffh_p, FFH_TYPED_CONTEXT) __attribute__((swiftcall));
typedef void (*ffh_typed_3)(ffh_p, ffh_p, ffh_p, FFH_TYPED_CONTEXT) __attribute__((swiftcall));
typedef void (*ffh_typed_4)(ffh_p, ffh_p, ffh_p, ffh_p, FFH_TYPED_CONTEXT) __attribute__((swiftcall));
typedef void (*ffh_typed_5)(ffh_p, ffh_p, ffh_p, ffh_p, ffh_p, FFH_TYPED_CONTEXT) __attribute__((swiftcall));
typedef void (*ffh_typed_6)(ffh_p, ffh_p, ffh_p, ffh_p, ffh_p, ffh_p, FFH_TYPED_CONTEXT) __attribute__((swiftcall));
typedef void (*ffh_typed_result_3)(FFH_TYPED_RESULT, ffh_p, ffh_p, ffh_p, FFH_TYPED_CONTEXT) __attribute__((swiftcall));
typedef void (*ffh_typed_result_4)(FFH_TYPED_RESULT, ffh_p, ffh_p, ffh_p, ffh_p, FFH_TYPED_CONTEXT)
    __attribute__((swiftcall));
typedef void (*ffh_typed_result_5)(FFH_TYPED_RESULT, ffh_p, ffh_p, ffh_p, ffh_p, ffh_p, FFH_TYPED_CONTEXT)
    __attribute__((swiftcall));
typedef void (*ffh_typed_result_6)(FFH_TYPED_RESULT, ffh_p, ffh_p, ffh_p, ffh_p, ffh_p, ffh_p, FFH_TYPED_CONTEXT)
    __attribute__((swiftcall));
typedef void (*ffh_typed_result_7)(FFH_TYPED_RESULT, ffh_p, ffh_p, ffh_p, ffh_p, ffh_p, ffh_p, ffh_p,
                                   FFH_TYPED_CONTEXT) __attribute__((swiftcall));

/* Calls a typed block's function: with the arguments' addresses, or, for one that returns the
   result, with the address of the result to fill (`out`), the result's as it stands, then the
   arguments'. */
static inline __attribute__((always_inline)) void ffh_typed_call(const ffh_swift_block *block, void *const *v,
                                                                 void *result, void *out) {
    const void *function = block->function;
    const void *context = block->context;
    if (out) {
        switch (block->arity) {
        case 2: ((ffh_typed_result_3)function)(out, result, v[0], v[1], context); break;
        case 3: ((ffh_typed_result_4)function)(out, result, v[0], v[1], v[2], context); break;
        case 4: ((ffh_typed_result_5)function)(out, result, v[0], v[1], v[2], v[3], context); break;
        case 5: ((ffh_typed_result_6)function)(out, result, v[0], v[1], v[2], v[3], v[4], context); break;
        default: ((ffh_typed_result_7)function)(out, result, v[0], v[1], v[2], v[3], v[4], v[5], context); break;
        }
        return;
    }
    switch (block->arity) {
    case 2: ((ffh_typed_2)function)(v[0], v[1], context); break;
    case 3: ((ffh_typed_3)function)(v[0], v[1], v[2], context); break;
    case 4: ((ffh_typed_4)function)(v[0], v[1], v[2], v[3], context); break;
    case 5: ((ffh_typed_5)function)(v[0], v[1], v[2], v[3], v[4], context); break;
    default: ((ffh_typed_6)function)(v[0], v[1], v[2], v[3], v[4], v[5], context); break;
    }
}

/* Runs a typed block (FFH_SWIFT_BLOCK_READING or _RESULT) with the call's arguments, and for
   one that returns the result, the result as it stands, storing what it returns as the typed
   blocks' Swift code does (ReturnCursor.store). */
static inline __attribute__((always_inline)) void ffh_typed_block_run(const ffh_swift_block *block,
                                                                      const ffh_invocation *invocation) {
    if (block->kind == FFH_SWIFT_BLOCK_READING) {
        ffh_typed_call(block, invocation->arguments, NULL, NULL);
        return;
    }
    uint64_t result[FFH_SWIFT_BLOCK_MAX_RESULT / 8];
    result[0] = 0;
    ffh_typed_call(block, invocation->arguments, invocation->returnValue, result);
    const uint32_t size = block->resultSize;
    if (size < 8 && block->resultWidth > 0) {
        const unsigned shift = 64 - block->resultWidth;
        const uint64_t bits = result[0] << shift;
        const uint64_t widened = block->resultSigned ? (uint64_t)((int64_t)bits >> shift) : bits >> shift;
        memcpy(invocation->returnValue, &widened, sizeof widened);
    } else if (size == 8) {
        memcpy(invocation->returnValue, result, 8);
    } else {
        /* Not memcpy: a copy of a size known only now would call the C library's, which a
           program may have hooked. */
        ffh_copy(invocation->returnValue, result, size);
    }
}

static inline __attribute__((always_inline)) void ffh_swift_block_run(const ffh_swift_block *block,
                                                                      const ffh_invocation *invocation) {
    if (__builtin_expect(block->kind == FFH_SWIFT_BLOCK_INVOCATION, 1)) {
        ((ffh_swift_block_function)block->function)(invocation, block->context);
    } else {
        ffh_typed_block_run(block, invocation);
    }
}

void ffh_swift_block_call(const ffh_swift_block *block, const ffh_invocation *invocation) {
    ffh_swift_block_run(block, invocation);
}

/* Runs `count` blocks (none, one or more) for the C path: itself, from `blocks`, with
   `invocation` (its position set here), or through the Swift functions, from `records`. The
   functions were set before any slot's hooks were published for this path. Where the call
   path marks its own code (`busy`), the mark is lifted for each block, as the Swift dispatch
   does. */
static inline __attribute__((always_inline)) void ffh_fast_blocks(const ffh_swift_block *blocks,
                                                                  void *const *records, uint32_t count,
                                                                  const ffh_fast_call *call,
                                                                  ffh_invocation *invocation, int32_t after,
                                                                  ffh_thread *busy) {
    if (count == 0) return;
    if (__builtin_expect(blocks != NULL, 1)) {
        invocation->position = after ? FFH_POSITION_AFTER : FFH_POSITION_BEFORE;
        if (__builtin_expect(busy != NULL, 0)) {
            for (uint32_t index = 0; index < count; index++) {
                busy->busy = 0;
                ffh_swift_block_run(&blocks[index], invocation);
                busy->busy = 1;
            }
        } else if (count == 1) {
            ffh_swift_block_run(blocks, invocation);
        } else {
            for (uint32_t index = 0; index < count; index++) ffh_swift_block_run(&blocks[index], invocation);
        }
        return;
    }
    if (count == 1) {
        __atomic_load_n(&ffh_fast_one, __ATOMIC_RELAXED)(records[0], call, after);
    } else {
        __atomic_load_n(&ffh_fast_many, __ATOMIC_RELAXED)(records, count, call, after);
    }
}

#if defined(__x86_64__) && defined(__ELF__)
/* Runs a call that entered the library's own entry, whose slot's hooks are all before and after
   blocks that run on every call (ffh_fast_hooks), as the Swift dispatch (SlotEntry.run) would:
   the call marked for re-entry by the slot (or the original), the before blocks, the original
   by the slot's register plan with the mark lifted, the after blocks. Returns 0, having done
   nothing, where the Swift dispatch decides: no such hooks, a NULL original, or a call that
   re-enters the slot from inside one of its blocks (which runs only the blocks that allow it).
   `thread` is marked inside a call, so the hooks it reads stay until it returns. */
/* Under AddressSanitizer, a function of its own that is not instrumented: inlined, its locals
   grow ffh_closure_dispatch's frame past the size where the sanitizer poisons and unpoisons a
   frame's shadow through calls that end in libc's memset, which a program may hook (a test
   hooks memset inline), and a hooked memset's call through that frame recursed without end. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FFH_FAST_RUN_ATTRIBUTES __attribute__((noinline, no_sanitize("address")))
#endif
#endif
#ifndef FFH_FAST_RUN_ATTRIBUTES
#define FFH_FAST_RUN_ATTRIBUTES __attribute__((always_inline))
#endif

/* The function a call on the C path reaches for `original`: what the original's resolver
   returns for the call's arguments when the slot has one for it (a per-instance method's
   forwarder to the superclass, whose lookup the call makes itself instead of entering it). */
static inline __attribute__((always_inline)) uintptr_t ffh_fast_function(const ffh_slot *slot, uintptr_t original,
                                                                         void *const *arguments) {
    const ffh_original_resolver *resolver = __atomic_load_n(&slot->resolver, __ATOMIC_ACQUIRE);
    if (__builtin_expect(resolver != NULL, 0) && resolver->code == original) {
        if (resolver->lookupSuper) {
            /* The receiver and selector, the first two arguments, and the superclass. */
            const void *target[2] = {NULL, resolver->superClass};
            const void *selector;
            memcpy(&target[0], arguments[0], sizeof target[0]);
            memcpy(&selector, arguments[1], sizeof selector);
            return (uintptr_t)resolver->lookupSuper(target, selector);
        }
        return resolver->resolve(resolver->context, arguments);
    }
    return original;
}

uintptr_t ffh_slot_function(const ffh_slot *slot, uintptr_t original, void *const *arguments) {
    return ffh_fast_function(slot, original, arguments);
}

static inline __attribute__((always_inline)) int ffh_fast_run_marking(void *returnValue, void **arguments,
                                                                      ffh_slot *slot, ffh_thread *thread,
                                                                      ffh_thread *const busy) {
    uintptr_t state = ffh_slot_state(slot);
    const ffh_fast_hooks *fast = __atomic_load_n(&slot->fast, __ATOMIC_ACQUIRE);
    /* The table is the published entry's: the slot's state names that entry (one comparison,
       the table keeping the state word it belongs to). */
    if (fast == NULL || fast->state != state) return 0;
    uintptr_t original = __atomic_load_n(&slot->original, __ATOMIC_ACQUIRE);
    if (original == 0) return 0;
    uintptr_t mark;
    if (__builtin_expect(fast->byReceiver != 0, 0)) {
        /* A method hooked for one object: its first argument is the receiver. A message to
           another object runs no block, as if the hooks were not there. */
        uintptr_t receiver;
        memcpy(&receiver, arguments[0], sizeof receiver);
        if (fast->receivers != NULL) {
            /* Hooks for several receivers: the receiver's own (with those for every receiver),
               found by a probe of the table rather than a look at every hook. */
            const ffh_fast_receivers *table = fast->receivers;
            const ffh_fast_receiver *place = ffh_fast_receiver_find(table, receiver);
            if (place) {
                fast = place->hooks;
            } else if (table->othersPassThrough) {
                ffh_forward_sysv_inline(busy, slot->plan, (const void *)ffh_fast_function(slot, original, arguments),
                                        arguments, returnValue);
                return 1;
            } else {
                fast = table->others;
            }
            if (fast == NULL) return 0;
        }
        if (fast->receiver != 0 && receiver != fast->receiver) {
            ffh_forward_sysv_inline(busy, slot->plan, (const void *)ffh_fast_function(slot, original, arguments),
                                    arguments, returnValue);
            return 1;
        }
        mark = fast->marksByReceiver ? (uintptr_t)slot ^ receiver : fast->marksByFunction ? original : (uintptr_t)slot;
    } else {
        mark = fast->marksByFunction ? original : (uintptr_t)slot;
    }
    if (ffh_thread_is_marked(thread, mark)) return 0;
    /* The mark's place: the blocks leave the marks as they found them (a block that never
       returns, by longjmp or an exception, ends this call too). */
    const uintptr_t place = thread->mark_count;
    const int marked = ffh_thread_mark(thread, mark);
    /* The call's record, for the Swift functions that run blocks (ffh_fast_block); blocks
       this path calls itself read only whether the call re-entered (never, here) of it. */
    ffh_fast_call call;
    const int direct = fast->beforeBlocks != NULL;
    if (!direct) {
        call = (ffh_fast_call){fast->entry, fast->snapshot, original, mark, returnValue, arguments, thread, marked, 0};
    }
    /* What each block receives, made once for all of them (the Swift blocks take it by
       address and only read it). */
    ffh_invocation invocation = {direct ? &ffh_plain_call : &call, fast->entry, returnValue, arguments, thread, 0, -1};
    ffh_fast_blocks(fast->beforeBlocks, fast->before, fast->beforeCount, &call, &invocation, 0, busy);
    /* The original runs with the mark lifted (its calls back through the slot run the blocks
       again): its place is cleared rather than given back, and written again after, so the
       marks the original's own hooked calls add go above it and its place is still this
       call's when they are gone. */
    if (marked) ffh_thread_lift(thread, place, 0);
    /* Inline: the original by the register plan (or what its resolver chooses for the
       arguments as the before blocks left them). Where the call path marks its own code, the
       mark is lifted for the original alone. */
    ffh_forward_sysv_inline(busy, slot->plan, (const void *)ffh_fast_function(slot, original, arguments), arguments,
                            returnValue);
    if (marked) ffh_thread_lift(thread, place, mark);
    ffh_fast_blocks(fast->afterBlocks, fast->after, fast->afterCount, &call, &invocation, 1, busy);
    if (marked) ffh_thread_unmark(thread);
    return 1;
}

/* ffh_fast_run_marking, made twice: for a build whose call path marks its own code (`busy`,
   the thread, whose mark is lifted for each block and the original), and for one that does
   not, where none of those tests is left. */
static inline FFH_FAST_RUN_ATTRIBUTES int ffh_fast_run(void *returnValue, void **arguments, ffh_slot *slot,
                                                       ffh_thread *thread) {
    if (__builtin_expect(thread->entry_busy != 0, 0)) {
        return ffh_fast_run_marking(returnValue, arguments, slot, thread, thread);
    }
    return ffh_fast_run_marking(returnValue, arguments, slot, thread, NULL);
}
#endif

/* The handler's work, shared by libffi's entry (ffh_handler) and the library's own
   (ffh_closure_dispatch), inlined into each; `unwind` is NULL for libffi's. */
static inline __attribute__((always_inline)) void ffh_run(void *returnValue, void **arguments, void *userData,
                                                          uint64_t *unwind) {
    ffh_dispatch dispatch = __atomic_load_n(&ffh_dispatch_function, __ATOMIC_ACQUIRE);
    ffh_thread *thread = ffh_thread_current();
    if (!thread) {
        dispatch(returnValue, arguments, userData, NULL);
        return;
    }
    if (__builtin_expect(thread->busy != 0, 0)) {
        ffh_pass_through(dispatch, returnValue, arguments, userData);
        return;
    }
    thread->busy = thread->entry_busy;
    uintptr_t generation = __atomic_load_n(&thread->generation, __ATOMIC_RELAXED);
    int outermost = !(generation & 1);
    uintptr_t abandonedArgument = ffh_abandoned_argument(thread, outermost);
#if FFH_CLEANUP
    ffh_window window;
    ffh_window_register(&window, abandonedArgument);
    if (unwind && window.previous != &window.buffer) unwind[0] = (uint64_t)(uintptr_t)window.previous;
#endif
    if (unwind) unwind[1] = (uint64_t)abandonedArgument << 1 | 1;
    if (outermost) ffh_call_enter(thread, generation);
#if defined(__x86_64__) && defined(__ELF__)
    if (unwind == NULL || !ffh_fast_run(returnValue, arguments, userData, thread))
#endif
        dispatch(returnValue, arguments, userData, thread);
    if (outermost) ffh_call_leave(thread);
#if FFH_CLEANUP
    ffh_window_unregister(&window);
#endif
    thread->busy = 0;
}

void ffh_handler(void *cif, void *returnValue, void **arguments, void *userData) {
    (void)cif;
    ffh_run(returnValue, arguments, userData, NULL);
}

// MARK: - The System V closure entry

/* The offsets ffh_closure_entry reads (call_x86_64.S). */
_Static_assert(offsetof(ffh_slot, state) == 0, "call_x86_64.S reads the slot's state at 0");
_Static_assert(offsetof(ffh_slot, resolver) == 48, "call_x86_64.S reads the slot's resolver at 48");

#if defined(__x86_64__) && defined(__ELF__)

/* ffh_closure_entry (call_x86_64.S) passes an entry frame (call_internal.h): the argument
   registers as they arrived, and room for the result registers it returns. */
void ffh_closure_entry(void);
void ffh_closure_entry_general(void);
void ffh_closure_entry_preserving(void);

/* How many arguments the entry lists on its own stack without a variable-length array. */
enum { ENTRY_INLINE_ARGUMENTS = 16 };

/* Builds the argument list of a call that entered `record`'s closure after the frame's
   address in `list`, runs the handler, and puts the result where the entry loads it from;
   returns how many x87 values the entry pushes (from the result buffer). */
static inline __attribute__((always_inline)) unsigned ffh_enter(ffh_slot *record, const ffh_sysv_plan *plan,
                                                               entry_frame_t *frame, void **list) {
    unsigned char *const base = (unsigned char *)frame;
    for (uint32_t index = 0; index < plan->gatherCount; index++) {
        const ffh_sysv_move *gather = &plan->gathers[index];
        memcpy(base + gather->offset, &frame->call.words[gather->word], 8);
    }
    list[0] = frame;
    void **arguments = list + 1;
    const uint32_t count = plan->argumentCount;
    const uint32_t *locations = plan->locations;
    /* A plain loop: most calls have a few arguments, for which an unrolled loop's set-up
       costs more than it saves. */
#pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
    for (uint32_t index = 0; index < count; index++) arguments[index] = base + locations[index];
    if (plan->returnsInMemory) {
        /* The caller's buffer, which rax returns. */
        uint64_t hidden = frame->call.words[0];
        ffh_run((void *)(uintptr_t)hidden, arguments, record, frame->unwind);
        frame->call.rax = hidden;
        return 0;
    }
    ffh_run(frame->buffer, arguments, record, frame->unwind);
    if (plan->registerResult != FFH_VALUE_BYTES) {
        /* A scalar result or none: its word goes to both registers a scalar can come back in
           (the caller reads the one its type uses; for none, neither). */
        const uint64_t word = frame->buffer[0];
        frame->call.rax = word;
        frame->call.xmm0 = word;
        return 0;
    }
    /* Read once: the stores below may alias the plan as far as the compiler knows. */
    const uint32_t results = plan->resultCount;
    const unsigned x87 = plan->x87Count;
#pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
    for (uint32_t index = 0; index < results; index++) {
        const ffh_sysv_result_piece piece = plan->result[index];
        /* Whole words: the buffer holds 32 bytes, a register result at most 16. */
        if (piece.source <= FFH_SYSV_XMM1) {
            memcpy(&frame->call.rax + piece.source, (unsigned char *)frame->buffer + piece.offset, 8);
        }
    }
    return x87;
}

/* A call with more arguments than the entry lists inline. */
static __attribute__((noinline)) unsigned ffh_enter_many(ffh_slot *record, const ffh_sysv_plan *plan,
                                                         entry_frame_t *frame) {
    void *list[1 + plan->argumentCount];
    return ffh_enter(record, plan, frame, list);
}

/* Called by ffh_closure_entry with the slot record and the entry frame. */
__attribute__((visibility("hidden"))) unsigned ffh_closure_dispatch(ffh_slot *record, entry_frame_t *frame) {
    const ffh_sysv_plan *plan = record->plan;
    if (__builtin_expect(plan->argumentCount > ENTRY_INLINE_ARGUMENTS, 0)) {
        return ffh_enter_many(record, plan, frame);
    }
    void *list[1 + ENTRY_INLINE_ARGUMENTS];
    return ffh_enter(record, plan, frame, list);
}

/* Called by ffh_closure_entry_preserving: the same, then the result goes over the caller's
   registers it kept (preserved_t), into those the result takes alone; every other register
   returns as the caller left it. */
__attribute__((visibility("hidden"))) unsigned ffh_closure_dispatch_preserving(ffh_slot *record,
                                                                              entry_frame_t *frame) {
    const unsigned x87 = ffh_closure_dispatch(record, frame);
    const ffh_sysv_plan *plan = record->plan;
    preserved_t *kept = entry_preserved(frame);
    if (plan->returnsInMemory) {
        kept->rax = frame->call.rax;
        return x87;
    }
    switch (plan->registerResult) {
    case FFH_VALUE_VOID: break;
    case FFH_VALUE_FLOAT:
    case FFH_VALUE_DOUBLE: memcpy(kept->xmm[0], &frame->call.xmm0, 8); break;
    case FFH_VALUE_BYTES:
        for (uint32_t index = 0; index < plan->resultCount; index++) {
            switch (plan->result[index].source) {
            case FFH_SYSV_RAX: kept->rax = frame->call.rax; break;
            case FFH_SYSV_RDX: kept->rdx = frame->call.rdx; break;
            case FFH_SYSV_XMM0: memcpy(kept->xmm[0], &frame->call.xmm0, 8); break;
            case FFH_SYSV_XMM1: memcpy(kept->xmm[1], &frame->call.xmm1, 8); break;
            default: break; /* x87: the entry pushes it */
            }
        }
        break;
    default: kept->rax = frame->call.rax; break;
    }
    return x87;
}

/* Called by ffh_closure_entry's landing pad when an exception (Objective-C, C++) unwinds
   through a call that entered there: the frames of the call are gone without returning, so
   the thread's cleanup list loses the buffer the call pushed (which a later longjmp or thread
   exit would otherwise run from dead stack) and the call's marks end, as for a longjmp. */
__attribute__((visibility("hidden"))) void ffh_closure_unwound(entry_frame_t *frame) {
    uint64_t armed = frame->unwind[1];
    if (!(armed & 1)) return;
    frame->unwind[1] = 0;
#if FFH_CLEANUP
    if (ffh_cleanup_pop) {
        struct _pthread_cleanup_buffer restore;
        restore.__prev = (struct _pthread_cleanup_buffer *)(uintptr_t)frame->unwind[0];
        ffh_cleanup_unregister(&restore);
    }
#endif
    ffh_abandoned((void *)(uintptr_t)(armed >> 1));
}

void ffh_write_trampoline(void *trampoline, const void *data, const void *target) {
    unsigned char code[FFH_ENTRY_TRAMPOLINE_SIZE];
    uint64_t dataAddress = (uint64_t)(uintptr_t)data;
    uint64_t targetAddress = (uint64_t)(uintptr_t)target;
    static const unsigned char endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
    memset(code, 0xcc, sizeof code); /* int3 after the jump */
    memcpy(code, endbr64, 4);
    code[4] = 0x49; /* movabs $data, %r10 */
    code[5] = 0xba;
    memcpy(code + 6, &dataAddress, 8);
    code[14] = 0x49; /* movabs $target, %r11 */
    code[15] = 0xbb;
    memcpy(code + 16, &targetAddress, 8);
    code[24] = 0x41; /* jmp *%r11 */
    code[25] = 0xff;
    code[26] = 0xe3;
    memcpy(trampoline, code, sizeof code);
}

void ffh_install_entry(void *trampoline, const void *record) {
    const ffh_sysv_plan *plan = ((const ffh_slot *)record)->plan;
    /* Nothing in a vector register: the entry that leaves their words unwritten. */
    const void *entry = plan->sseCount == 0 ? (const void *)&ffh_closure_entry_general : (const void *)&ffh_closure_entry;
    ffh_write_trampoline(trampoline, record, entry);
}

void ffh_install_entry_preserving(void *trampoline, const void *record) {
    unsigned char code[FFH_ENTRY_TRAMPOLINE_SIZE];
    static const unsigned char head[] = {
        0xf3, 0x0f, 0x1e, 0xfa,             /* endbr64 */
        0xff, 0x35, 0x06, 0x00, 0x00, 0x00, /* push 6(%rip): the record, at 16 */
        0xff, 0x25, 0x08, 0x00, 0x00, 0x00, /* jmp *8(%rip): the entry, at 24 */
    };
    _Static_assert(sizeof head == 16, "the words follow the code");
    uint64_t words[2] = {(uint64_t)(uintptr_t)record, (uint64_t)(uintptr_t)&ffh_closure_entry_preserving};
    memcpy(code, head, sizeof head);
    memcpy(code + 16, words, sizeof words);
    memcpy(trampoline, code, sizeof code);
}

int ffh_entry_is_preserving(const void *trampoline) {
    const unsigned char *code = trampoline;
    return code[4] == 0xff && code[5] == 0x35;
}

#else

void ffh_install_entry_preserving(void *trampoline, const void *record) {
    (void)trampoline;
    (void)record;
}

int ffh_entry_is_preserving(const void *trampoline) {
    (void)trampoline;
    return 0;
}

void ffh_write_trampoline(void *trampoline, const void *data, const void *target) {
    (void)trampoline;
    (void)data;
    (void)target;
}

void ffh_install_entry(void *trampoline, const void *record) {
    (void)trampoline;
    (void)record;
}

#endif
