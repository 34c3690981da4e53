#ifndef CTRACERSUPPORT_H
#define CTRACERSUPPORT_H

#include <stddef.h>
#include <stdint.h>

#pragma clang assume_nonnull begin

// The C side of the tracer library (prefix fht_): the constructor that starts it when the
// library is preloaded, the exit and fork handlers, a walk over the loaded objects' dynamic
// sections (Swift cannot import <link.h> or <elf.h>), and the per-function counters, which
// each thread keeps its own copy of (no atomic read-modify-write on the call path).

// MARK: - Clock

/// The time-stamp counter: the call path's clock, read without a libc call or a system call
/// (converted to nanoseconds at exit, against CLOCK_MONOTONIC).
static inline uint64_t fht_ticks(void) {
    uint32_t low, high;
    __asm__ volatile("rdtsc" : "=a"(low), "=d"(high));
    return ((uint64_t)high << 32) | low;
}

/// CLOCK_MONOTONIC in nanoseconds.
uint64_t fht_monotonic_nanoseconds(void);

/// The lowest number for a descriptor the tracer keeps open in a program: halfway to the
/// process's limit of descriptors, 256 at least (out of the way of those a program or a shell
/// script names).
int fht_high_descriptor_floor(void);

// MARK: - Counters

/// What the tracer keeps for one function; one cache line each, so that threads calling
/// different functions do not share lines.
typedef struct {
    /// Calls that entered the function.
    uint64_t calls;
    /// Calls that returned (a call left by longjmp, or running at exit, never does).
    uint64_t completed;
    /// Ticks spent in the calls that returned, counted once for recursive calls: a call's time
    /// is added when it is not inside another call of the same function on its thread.
    uint64_t total;
    /// The shortest call that returned, in ticks (UINT64_MAX before the first).
    uint64_t shortest;
    /// The longest call that returned, in ticks.
    uint64_t longest;
    /// Ticks spent in the function itself: its calls' time less that of the traced calls made
    /// inside them.
    uint64_t own;
    union {
        /// A thread's copy: how many calls of the function are in flight on the thread
        /// (recursion).
        uint64_t active;
        /// The copy that names the function (see ``fht_counters``), never counted into: what
        /// the function does (FHT_KIND_PLAIN and the rest, see ``fht_set_kind``).
        uint64_t kind;
    };
    /// Ticks of every call that returned, nested recursive calls each on their own (for the
    /// mean call).
    uint64_t every;
} fht_counter;

/// The counters of `count` functions, in memory that is never freed or moved; NULL when
/// the memory cannot be had. Counters made earlier stay where they are. A counter names its
/// function: each thread counts into its own copy of it (see ``fht_local``), and
/// ``fht_read`` sums the copies.
fht_counter *_Nullable fht_counters(size_t count);

/// The counter of the function named by the `length` bytes at `name` (see
/// ``fht_counter_naming``), NULL when it has none. Callers hold the tracer's state lock.
fht_counter *_Nullable fht_counter_named(const char *name, size_t length);

/// The counter of the function named by the `length` bytes at `name`, made with
/// ``fht_counters`` (and the name copied) when it has none, which sets `*made` to 1 (else 0);
/// NULL when no counter or memory is left. Callers hold the tracer's state lock.
fht_counter *_Nullable fht_counter_naming(const char *name, size_t length, int *made);

/// A new trace of the process starts (a join after an earlier one left): the names given so
/// far are this trace's no more. ``fht_counter_named`` does not find them and
/// ``fht_named_at`` gives them no counter until ``fht_counter_naming`` names them again (which
/// says it made the counter).
void fht_names_forget(void);

/// How many functions have counters by name, in the order they were named.
size_t fht_named_count(void);

/// The `index`th named function (``fht_named_count``): its name (`*length` bytes, not
/// NUL-terminated) and counter (NULL for a name of an earlier trace, see ``fht_names_forget``).
const char *fht_named_at(size_t index, size_t *length, fht_counter *_Nullable *_Nonnull counter);

/// The calling thread's copy of `counter`, mapped on the thread's first call (NULL when the
/// memory cannot be had: the call is not counted).
fht_counter *_Nullable fht_local_slow(const fht_counter *counter);
/// The calling thread's counters (NULL before its first call), and the first counter of all.
extern __thread fht_counter *_Nullable fht_mine __attribute__((tls_model("initial-exec")));
extern fht_counter *_Nullable fht_arena;

/// The calling thread's copy of `counter`.
static inline fht_counter *_Nullable fht_local(const fht_counter *counter) {
    fht_counter *mine = fht_mine;
    if (__builtin_expect(mine != NULL, 1)) return mine + (counter - fht_arena);
    return fht_local_slow(counter);
}

/// Adds `amount` to a word of the calling thread's own with one instruction: no other thread
/// writes it, and a signal handler that counts on this thread cannot split the addition.
static inline void fht_add(uint64_t *word, uint64_t amount) {
    __asm__ volatile("addq %1, %0" : "+m"(*word) : "r"(amount));
}

// MARK: - Calls in flight

/// One traced call in flight on a thread: its function's counter (the thread's copy), when it
/// began, the time of the traced calls made inside it so far, and its stack pointer at entry.
typedef struct {
    fht_counter *_Nullable counter;
    uint64_t start;
    uint64_t children;
    uint64_t sp;
} fht_frame;

/// How deep a thread's calls in flight are kept; deeper calls are counted, not timed.
#define FHT_FRAMES 1024

/// A thread's calls in flight (mapped with its counters).
typedef struct {
    uint64_t depth;
    fht_frame frames[FHT_FRAMES];
} fht_calls;

/// The calling thread's calls in flight (NULL before its first call).
extern __thread fht_calls *_Nullable fht_in_flight __attribute__((tls_model("initial-exec")));

/// What the calling thread is doing that the counting must know, in bits: 0 on almost every
/// call, so that one test serves them all.
extern __thread int fht_thread_marks __attribute__((tls_model("initial-exec")));

enum {
    /// The tracer's own work runs on the thread (the walk after a `dlopen`, the report): traced
    /// calls it makes are not counted.
    FHT_MARK_OWN_WORK = 1,
    /// A call that may run a child on the thread's memory is in progress (see
    /// ``fht_spawning``).
    FHT_MARK_SPAWNING = 2,
};

/// Where the calling thread's stack pointer stood as its outermost stretch of the tracer's own
/// work begun by ``fht_begin_own_work`` began (0 for work marked otherwise, such as a thread
/// of the tracer's own): a traced call that a signal handler makes while it interrupts that
/// work is the program's, and is counted (see ``fht_marked_ignores``).
extern __thread uintptr_t fht_own_work_sp __attribute__((tls_model("initial-exec")));

/// Gives the process back the environment that the library hid SWIFT_BACKTRACE from while it
/// loaded (a join's dlopen, see tracer.c); nothing when nothing was hidden. Called once the
/// library's constructors have run.
void fht_environment_restore(void);

/// Whether the tracer's own work is marked on the calling thread (1) or not (0): what a
/// nested stretch of it gives back at its end.
static inline int fht_own_work(void) { return (fht_thread_marks & FHT_MARK_OWN_WORK) != 0; }

/// Marks the tracer's own work on the calling thread (1) or its end (0). Work marked so where
/// none was (a thread of the tracer's own, the report) has no stack pointer noted: every
/// traced call made on the thread meanwhile is left alone.
static inline void fht_set_own_work(int on) {
    if (on && !fht_own_work()) fht_own_work_sp = 0;
    fht_thread_marks = (fht_thread_marks & ~FHT_MARK_OWN_WORK) | (on ? FHT_MARK_OWN_WORK : 0);
}

/// Marks a stretch of the tracer's own work on the calling thread, which may be nested in
/// another: returns what ``fht_set_own_work`` gives back at its end. Notes where the stack
/// pointer stands as an outermost stretch begins (``fht_own_work_sp``): always inlined, so the
/// frame whose address it notes is its caller's, which the whole stretch, its end included,
/// must lie below. For C: Swift's compiler calls such a function out of line (the frame noted
/// is then its own, which the caller's stack pointer lies above) and may end the stretch in a
/// tail call after its own frame is gone, where a signal handler's call would be left alone
/// rather than counted; Swift runs a stretch with ``fht_as_own_work``.
__attribute__((availability(swift, unavailable, message="use fht_as_own_work")))
static inline __attribute__((always_inline)) int fht_begin_own_work(void) {
    int was = fht_own_work();
    if (!was) {
        /* The frame's address, plus its saved frame pointer and the return address; noted
           before the mark, which a signal handler may find at any instruction. */
        fht_own_work_sp = (uintptr_t)__builtin_frame_address(0) + 16;
        __asm__ volatile("" ::: "memory");
        fht_thread_marks |= FHT_MARK_OWN_WORK;
    }
    return was;
}

/// Runs `body(context)` as a stretch of the tracer's own work (``fht_begin_own_work``), begun and
/// ended in this function's frame, which the whole stretch lies below.
void fht_as_own_work(void (*_Nonnull body)(void *_Nullable), void *_Nullable context);

// MARK: - Children on the caller's memory

/// What a traced function does to the process, by counter (see ``fht_set_kind``).
enum {
    /// Nothing the tracer needs to know.
    FHT_KIND_PLAIN = 0,
    /// `vfork`: its child runs on the caller's memory until it execs or exits, then the caller
    /// returns from it (a second time, without a leave).
    FHT_KIND_VFORK = 1,
    /// `posix_spawn`, `posix_spawnp`, `system`, `popen`: the C library runs the child on the
    /// caller's memory (a clone with CLONE_VM) before the call returns.
    FHT_KIND_SPAWN = 2,
    /// `setjmp` and the other functions that return twice but `vfork`: an attach runs only
    /// their enter, so a call is counted as made and returned at once, with no time, and kept
    /// in flight by no frame (which would hold the caller's later calls inside it).
    FHT_KIND_ONCE = 3,
};

/// The calling thread's kernel ID while a call of an FHT_KIND_VFORK or FHT_KIND_SPAWN function
/// is in progress on it (with FHT_MARK_SPAWNING); 0 otherwise. A child such a call runs shares
/// the caller's memory, its thread-local storage included: its calls would be counted, kept in
/// flight and recorded as the caller's (an exec that never returns would hold the caller's
/// later calls inside it).
extern __thread int32_t fht_spawning __attribute__((tls_model("initial-exec")));

/// Whether a traced call is left alone on a thread with `marks`: the tracer's own work (not a
/// signal handler's call that interrupted a stretch of it, see ``fht_own_work_sp``), or a
/// child that runs on the memory of the thread that set ``fht_spawning`` (its kernel ID
/// differs); for the thread itself back from a vfork, ends the mark.
int fht_marked_ignores(int marks);

/// Whether a traced call on the calling thread is left alone (see ``fht_marked_ignores``).
static inline int fht_ignored(void) {
    int marks = fht_thread_marks;
    return __builtin_expect(marks != 0, 0) && fht_marked_ignores(marks);
}

/// Whether the calling thread is one of the tracer's own, started by ``ffi_hook_tracer_thread``
/// (it runs on a stack the tracer mapped).
int fht_on_own_thread(void);

/// At a thread's first traced call: whether the thread is one of the tracer's own, started by
/// ``ffi_hook_tracer_thread`` and not yet marked (the C library's calls that start a thread run
/// before its body); marks it as the tracer's when it is.
int fht_first_call_is_own(void);

/// Sets the kind of `counter`'s function (FHT_KIND_VFORK, FHT_KIND_SPAWN, FHT_KIND_ONCE).
void fht_set_kind(fht_counter *counter, uint8_t kind);

/// A call of a function of `kind` begins on the calling thread (see ``fht_spawning``); returns
/// 1 when the call has no leave (FHT_KIND_VFORK, FHT_KIND_ONCE).
int fht_kind_enters(const fht_counter *counter, uint8_t kind);

/// A call of `counter`'s function returns on the calling thread: ends the mark of a spawning
/// call of it.
void fht_spawn_ends(const fht_counter *counter);

/// Whether the call entering at stack pointer `sp` (the address of its return address) was
/// tail-called from a traced function, or otherwise shares the stack pointer of a traced call
/// still running: its return address is a return thunk of the hooking library's (see
/// ffh_attach_is_return_thunk). Otherwise a traced call at that stack pointer was left.
int fht_tail_called(uint64_t sp);

/// Drops the calls in flight that a longjmp or an exception left without returning: those
/// deeper on the stack than a call at `sp`, and, for a call entering (`entering`), those at
/// `sp` itself unless the call was tail-called (a call made by a tail jump has the stack
/// pointer of the call it replaced, and that call stays; a call made afresh where a call was
/// means that call is gone). A call returning keeps those at its own stack pointer: itself,
/// and the calls that tail-called it (its entry dropped any other), with no look at its
/// return address on every return.
static inline void fht_drop_abandoned(fht_calls *calls, uint64_t sp, int entering) {
    uint64_t depth = calls->depth;
    while (depth > 0 && calls->frames[depth - 1].sp <= sp) {
        if (calls->frames[depth - 1].sp == sp && (!entering || fht_tail_called(sp))) break;
        fht_counter *counter = calls->frames[depth - 1].counter;
        if (counter && counter->active > 0) fht_add(&counter->active, (uint64_t)-1);
        depth--;
    }
    calls->depth = depth;
}

/// Counts a call entering at stack pointer `sp`, and keeps it in flight. A signal handler that
/// interrupts this and makes traced calls of its own pushes and pops them above the frame
/// being written (the depth is taken before the frame is written; a handler that interrupts
/// before that uses the slot and gives it back).
static inline int fht_enter_at(fht_counter *counter, uint64_t sp, uint64_t ticks);

/// Counts a call entering at stack pointer `sp` (see fht_enter_at), now.
static inline void fht_enter(fht_counter *counter, uint64_t sp) { (void)fht_enter_at(counter, sp, 0); }

/// Counts a call entering at stack pointer `sp` at time `ticks` (0: read the clock last), and
/// keeps it in flight; returns 0 when it was not counted (the tracer's own work, a call made by
/// a child on a traced thread's memory, or the thread's counters cannot be had), 2 when it was
/// counted as returned at once (a function that returns twice: no leave comes), 1 otherwise.
static inline int fht_enter_at(fht_counter *counter, uint64_t sp, uint64_t ticks) {
    if (fht_ignored()) return 0;
    fht_counter *mine = fht_local(counter);
    if (!mine) return 0;
    fht_add(&mine->calls, 1);
    uint8_t kind = (uint8_t)counter->kind;
    if (__builtin_expect(kind != FHT_KIND_PLAIN, 0) && fht_kind_enters(counter, kind)) {
        fht_add(&mine->completed, 1);
        return 2;
    }
    fht_calls *calls = fht_in_flight;
    if (!calls) return 1;
    fht_drop_abandoned(calls, sp, 1);
    uint64_t depth = calls->depth;
    if (depth >= FHT_FRAMES) return 1;
    fht_frame *frame = &calls->frames[depth];
    frame->sp = UINT64_MAX; /* never dropped while it is written */
    __asm__ volatile("" ::: "memory");
    calls->depth = depth + 1;
    __asm__ volatile("" ::: "memory");
    frame->sp = UINT64_MAX;
    frame->counter = mine;
    frame->children = 0;
    fht_add(&mine->active, 1);
    frame->start = ticks ? ticks : fht_ticks();
    __asm__ volatile("" ::: "memory");
    frame->sp = sp;
    return 1;
}

/// Counts a call returning at stack pointer `sp`: its time, its own time (less the traced calls
/// inside it), and its time in its caller's frame. A call with no frame (deeper than
/// FHT_FRAMES, or entered before the thread's calls could be kept) is counted as returned,
/// without times.
static inline void fht_leave_at(fht_counter *counter, uint64_t sp, uint64_t now);

/// Counts a call returning at stack pointer `sp` (see fht_leave_at), now.
static inline void fht_leave(fht_counter *counter, uint64_t sp) { fht_leave_at(counter, sp, fht_ticks()); }

/// Counts a call returning at stack pointer `sp` at time `now`.
static inline void fht_leave_at(fht_counter *counter, uint64_t sp, uint64_t now) {
    int marks = fht_thread_marks;
    if (__builtin_expect(marks != 0, 0)) {
        if (fht_marked_ignores(marks)) return;
        if (marks & FHT_MARK_SPAWNING) fht_spawn_ends(counter);
    }
    fht_counter *mine = fht_local(counter);
    if (!mine) return;
    fht_calls *calls = fht_in_flight;
    if (!calls) {
        fht_add(&mine->completed, 1);
        return;
    }
    fht_drop_abandoned(calls, sp, 0);
    uint64_t depth = calls->depth;
    if (depth == 0 || calls->frames[depth - 1].counter != mine || calls->frames[depth - 1].sp != sp) {
        if (depth > 0 && calls->frames[depth - 1].counter == NULL && calls->frames[depth - 1].sp == sp) {
            /* A call made before the counters were zeroed (the fork a forked child returns from):
               counted where it began, not here. */
            calls->depth = depth - 1;
            return;
        }
        fht_add(&mine->completed, 1);
        return;
    }
    fht_add(&mine->completed, 1);
    fht_frame *frame = &calls->frames[depth - 1];
    uint64_t ticks = now - frame->start;
    uint64_t children = frame->children;
    __asm__ volatile("" ::: "memory");
    calls->depth = depth - 1;
    __asm__ volatile("" ::: "memory");
    /* (0 already when the counters were zeroed while this call was in flight.) */
    if (mine->active != 0) fht_add(&mine->active, (uint64_t)-1);
    if (mine->active == 0) fht_add(&mine->total, ticks);
    fht_add(&mine->every, ticks);
    fht_add(&mine->own, ticks > children ? ticks - children : 0);
    if (depth >= 2) fht_add(&calls->frames[depth - 2].children, ticks);
    if (mine->shortest == 0 || ticks < mine->shortest) mine->shortest = ticks; /* 0: none yet */
    if (ticks > mine->longest) mine->longest = ticks;
}

/// The counting blocks as an attach's C functions (FFIHook's AttachFunctions): `counter` (an
/// fht_counter) is the context, `frame` the attach's enter or leave frame, whose stack pointer
/// at entry they count the call by (fht_enter, fht_leave). No Swift closure runs on the call.
void fht_enter_function(void *_Nullable counter, void *_Nullable frame);
/// (See fht_enter_function.)
void fht_leave_function(void *_Nullable counter, void *_Nullable frame);

/// The sum of every thread's copy of a counter (shortest and longest: the least and the
/// greatest), read field by field with atomic loads.
fht_counter fht_read(const fht_counter *counter);
/// Zeroes every counter made so far (at the end of the start, and in a forked child), the
/// calls in flight on each thread included: a call left in flight by an earlier join's leave
/// (the hook removed before it returned) would otherwise keep every later call of its function
/// on that thread inside it, and out of its total.
void fht_reset_counters(void);

// MARK: - Loaded objects

/// What fht_walk reports about a loaded object.
typedef enum {
    /// A new object starts: its path ("" for the main program), then its load bias.
    FHT_OBJECT = 1,
    /// Its DT_SONAME.
    FHT_SONAME = 2,
    /// A DT_NEEDED name.
    FHT_NEEDED = 3,
    /// A function it defines and exports: STT_FUNC or STT_GNU_IFUNC, global, weak or
    /// unique, of its default version or unversioned.
    FHT_EXPORT = 4,
    /// A symbol named by one of its JUMP_SLOT or GLOB_DAT relocations (an import-table entry).
    FHT_IMPORT = 5,
    /// Its names are all reported: the visitor's result says what else to report
    /// (FHT_WANTS_EXPORTS, FHT_WANTS_IMPORTS); `text` is empty.
    FHT_NAMED = 6,
} fht_item;

/// What the visitor asks of an object when it receives FHT_NAMED.
enum {
    /// Report its exported functions.
    FHT_WANTS_EXPORTS = 1,
    /// Report its import-table entries' symbols.
    FHT_WANTS_IMPORTS = 2,
};

/// What the visitor may answer to FHT_OBJECT: the object is one it knows already (from an
/// earlier walk), and the walk reports nothing more of it.
enum { FHT_KNOWN_OBJECT = 1 };

/// Receives one item of the walk: `text` is valid only during the call; `base` is the
/// object's load bias. The result counts for FHT_OBJECT (FHT_KNOWN_OBJECT) and FHT_NAMED only.
typedef int (*fht_visitor)(void *_Nullable context, fht_item item, const char *text, uintptr_t base);

/// Reports every loaded object, in the loader's order (the main program first): its path,
/// soname and needed names, then, as the visitor asks at FHT_NAMED, its exports and
/// imports. Runs with the loader's list locked: the visitor must not load or unload objects.
/// Visits nothing in a fork's child whose loader's list a thread of the parent held as it
/// forked (locked there for good: no load or unload can happen in it either).
void fht_walk(fht_visitor visit, void *_Nullable context);

/// Marks in `found` (`count` bytes, zeroed by the caller) which of `names` (`count` C strings)
/// the object loaded at `path` with load bias `base` exports as functions, as fht_walk's
/// FHT_EXPORT would report them, each looked up in its symbol hash table (a program imports a
/// few dozen of the thousands of functions the C library exports). Returns 1 when the object
/// is loaded, 0 when it is not (nothing is marked). Runs with the loader's list locked.
int fht_find_exports(
    const char *path, uintptr_t base, const char *const _Nonnull *_Nonnull names, size_t count, uint8_t *found);

/// The loader's counts of objects loaded and unloaded since the process began (`dlpi_adds`,
/// `dlpi_subs`): a `dlopen` that loaded nothing (of an object loaded already, or with
/// RTLD_NOLOAD) leaves the first as it was, a `dlclose` that unloaded nothing the second.
/// Both are 0 where the loader does not count (it counts the main program as a load).
void fht_load_counts(uint64_t *adds, uint64_t *subs);

/// The path of the object that holds `address` (this library's file for one of its own
/// functions), copied into `buffer`; 0 when unknown.
int fht_object_path(const void *address, char *buffer, size_t size);

/// The addresses the loaded object with load bias `base` maps, from the lowest of its loadable
/// segments to the end of the highest (the loader reserves the whole span for it); 0 when no
/// loaded object has that bias.
int fht_object_span(uintptr_t base, uintptr_t *low, uintptr_t *high);

/// Reports the path of each object loaded in a link-map namespace other than the default one
/// (by dlmopen: the loader's extended debugger interface, r_version 2), which the walks, which
/// see their own namespace only, do not; read with the loader's list locked.
void fht_other_namespaces(void (*visit)(void *_Nullable context, const char *path), void *_Nullable context);

/// The path of the start library (libFFIHookTracerStart.so, which loaded this one), copied
/// into `buffer`; 0 when it is not loaded.
int fht_start_library_path(char *buffer, size_t size);
// MARK: - Lazy import entries

/// Receives one lazily bound import entry: its symbol (valid during the call only), the
/// entry's address and the value it holds (an address in its object's PLT).
typedef void (*fht_lazy_visitor)(void *_Nullable context, const char *symbol, uintptr_t slot, uintptr_t value);

/// Reports every JUMP_SLOT entry of the loaded objects that is not bound yet (it leads into
/// its own object's code), in writable memory outside RELRO. Runs with the loader's list
/// locked: the visitor must not load or unload objects.
void fht_lazy_entries(fht_lazy_visitor visit, void *_Nullable context);

/// Puts lazy values back: for each JUMP_SLOT entry at `slots[i]` (sorted ascending) that holds
/// another value leading into a loaded object's code (bound to a function; not a hook's
/// closure), writes `values[i]` there when that value still leads into the code of the object
/// that holds the entry (the object was not replaced since). Returns how many were written.
size_t fht_restore_lazy_entries(const uintptr_t *slots, const uintptr_t *values, size_t count);

// MARK: - Process

/// Arms the report at exit (the library's finalizer calls the Swift side's) and registers the
/// fork handler (which zeroes the counters in the child); once, later calls do nothing.
void fht_install_process_handlers(void);

/// Marks the calling thread as the tracer's for good: its calls are never counted (the start
/// library's report thread, which looks this up).
void ffi_hook_tracer_own_thread(void);

/// Marks what the calling thread does from now on as the tracer's, until
/// ``ffi_hook_tracer_end_own_work`` is given what this returns: the start library's own work
/// after the tracer's start (its report thread, the lists its handler reads), which the
/// program did not call. The stretch is taken to lie below the caller's stack pointer at this
/// call: the caller ends it in its own frame (not in a tail call).
int ffi_hook_tracer_begin_own_work(void);

/// In a child forked while a thread of its parent loaded or started the tracer (the start
/// library's fork handler calls it): the tracer the fork copied is part started, its locks
/// perhaps held by that thread, which the child does not have; the child, which traced
/// nothing, makes no report at exit (as a process in which no traced library was loaded).
void ffi_hook_tracer_forked_while_starting(void);

/// Ends a stretch begun by ``ffi_hook_tracer_begin_own_work``.
void ffi_hook_tracer_end_own_work(int was);

/// Whether the calling thread is doing the tracer's own work before the report is written, or
/// the hooking library's own work (then it may hold their locks, whatever code it is in: the C
/// library's `mprotect`, say): the start library's handler, which looks this up, does not have
/// the report made from there.
int ffi_hook_tracer_busy(void);

/// Records that the report is written (``ffi_hook_tracer_busy`` is false from then on).
void fht_report_written(void);

/// A join starts: its report is not written yet.
void fht_report_begins(void);

/// Registers the process for the memory barriers the hooking library's removals make
/// (`membarrier`), as its first hook would: in a process of one thread this takes
/// microseconds, once a second thread runs it waits for an RCU grace period (about 10 ms), so
/// the tracer does it as it starts, before its report thread, not at its first attach (which,
/// in a program that loads a traced library later, comes with the `dlopen`).
void fht_register_barriers(void);

/// 1 once the start library has said that its `dlopen` and `dlclose`, which come first for
/// every object of the process, tell the tracer of loads (``ffi_hook_tracer_loads_changed``):
/// the tracer then hooks neither function (it does where it was joined to the process, or
/// preloaded itself).
int fht_loads_are_told(void);

/// Called by the start library before the tracer starts: ``fht_loads_are_told`` is 1 from then.
void ffi_hook_tracer_loads_told(void);

/// Whether a load the start library tells of is the program's to follow now: not while the
/// calling thread does the tracer's own work or the hooking library's (their walks pin objects
/// with `dlopen` and `dlclose`, holding locks the walk that follows would take).
int fht_may_follow_loads(void);

/// Whether the calling thread is doing the tracer's or the hooking library's own work, whose
/// locks it may hold, or is parked by the library's stop of the threads (in a signal handler,
/// every signal blocked): a join or a leave that `ffi-hook-tracer --pid` made run there is
/// refused, and made again once the thread has moved on.
int fht_thread_busy(void);

/// Counts a step of the report (a write, say): the start library's handler, waiting for a
/// report that a signal asked for, gives up on one that stops counting for 3 seconds (it waits
/// for a lock the interrupted thread holds).
void fht_report_progress(void);

/// The signal's name as the kernel's headers spell it ("SIGINT"), or "signal N" for one
/// without; in storage of the calling thread's, until its next call.
const char *fht_signal_name(int signal);

/// Starts a thread of the tracer's named `name` that runs `body(argument)`, with every signal
/// blocked but those of faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS), on a stack
/// the tracer mapped (used again for a later thread once this one has ended; up to 16 threads
/// alive at once): the joiner's watch, and the start library's report thread, which looks this
/// up. The caller does not join it. 0 when it runs.
int ffi_hook_tracer_thread(void *_Nullable (*_Nonnull body)(void *_Nullable), void *_Nullable argument, const char *_Nonnull name);

/// Watches the `ffi-hook-tracer` process `joiner` that joined this process: a thread (every
/// signal but those of faults blocked, so that none of the process's is delivered to it) waits for that process to
/// end and calls `gone` if it ends before ``fht_stop_watching()`` is called; a joiner killed
/// with SIGKILL cannot leave by itself. Returns 0 when the thread runs.
///
/// It also stands in for the default action of the signals that ask a process to end (SIGTERM,
/// SIGINT, SIGHUP and the like; not faults): the first that comes wakes the thread, which calls
/// `signalled` with it (the report of the window) and then ends the process of it, with the
/// default action back. ``fht_join_release_signals()`` puts the default actions back.
int fht_watch_joiner(int joiner, void (*gone)(void), void (*signalled)(int));

/// Puts back the default action of the signals the watch stood in for, where the program has
/// not set another since; a signal from now on takes the default action.
void fht_join_release_signals(void);

/// Ends the watch, if one runs (its thread exits by itself).
void fht_stop_watching(void);

#pragma clang assume_nonnull end

#include "CTracerEvents.h"
#include "CTracerLog.h"

#endif
