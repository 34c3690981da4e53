#ifndef FFH_THREAD_H
#define FFH_THREAD_H

// The per-thread record of the hook call path, and the libffi handler of every slot closure.
//
// A hooked call may run anywhere a C function may: in a signal handler, inside malloc (when
// malloc itself is hooked), in a thread's first moments, in a child after fork. So the
// record a call needs comes from memory this module maps itself and is claimed without a
// lock; a thread finds its own through an initial-exec thread-local pointer (no allocation
// on first access, unlike pthread keys beyond the first block or dynamic TLS).

#include <pthread.h>
#include <stdint.h>

/// How many slots one thread tracks as "its blocks are running here" (for re-entry).
#define FFH_MARKS 64

/// Where records start: at multiples of this many bytes, each in lines of its own. Every
/// hooked call writes its thread's record (`generation`, the marks, `busy`), so records that
/// shared a cache line (or the pair of lines the processor fetches together) would make
/// threads that call hooks at once miss in the cache on every call.
#define FFH_THREAD_ALIGNMENT 128

/// One thread's record. Only its thread writes `generation` and the marks (besides release,
/// below); reclamation reads `generation` from other threads. Records share no cache line
/// (``FFH_THREAD_ALIGNMENT``).
typedef struct ffh_thread {
    /// Odd while the thread is inside a hooked call (outermost one counted), even outside.
    /// Only grows, across owners too, so a reader that saw an odd value sees a change once
    /// that call has left, whoever owns the record by then.
    uintptr_t generation;
    /// How many entries of `marks` are in use.
    uintptr_t mark_count;
    /// The slots whose blocks are running on this thread, innermost last; entries at and
    /// beyond `mark_count` are zero.
    uintptr_t marks[FFH_MARKS];
    /// 1 while a thread owns the record, 0 when it is free (accessed atomically).
    uintptr_t claimed;
    /// The owning thread's kernel id.
    int32_t tid;
    /// 1 while the thread runs the library's own code where the call path is marked (see
    /// ``ffh_handler_setup``: the call path outside blocks and originals), FFH_BUSY_WORK while
    /// it does work that calls other libraries (a thread's first call as it claims its record,
    /// a side stack's set-up, fork's handlers, the walk after a `dlopen`), FFH_BUSY_FORK
    /// between fork's handlers, 0 otherwise. A
    /// hooked call that arrives while it is not 0 is one the library made itself, through a
    /// function the program hooked: it goes straight to the original (see ``ffh_handler``),
    /// but for a signal handler's call that interrupted FFH_BUSY_WORK (see
    /// ``ffh_work_interrupted``), which runs its blocks. Only the thread touches it.
    int32_t busy;
    /// What the call path sets `busy` to as a call enters: 1 where the call path marks its
    /// own code (see ``ffh_handler_setup``), 0 where it does not.
    int32_t entry_busy;
    /// 1 while an attach block runs on the thread (see ffh_attach.h): attached calls then go
    /// straight to their functions. Only the thread touches it.
    int32_t attach_block;
    /// 1 while the attach path runs the blocks of a signal handler's call that interrupted the
    /// thread's FFH_BUSY_WORK (see attach.c): the side stack is then not made, if the work
    /// was making it. Only the thread touches it.
    int32_t work_interrupted;
    /// 1 while the thread makes its side stack (attach.c): a signal handler's call that
    /// interrupts that may make one itself. Only the thread touches it.
    int32_t making_side;
    /// The next record of the process (the list only grows; records are reused, never freed).
    struct ffh_thread *next;
    /// The side stack of attached calls (see ffh_attach.h), mapped on the thread's first
    /// attached call and kept with the record.
    struct ffh_side *side;
    /// Where the thread's stack pointer stood as its outermost stretch of FFH_BUSY_WORK began
    /// (at or above every frame of that work): what ``ffh_work_interrupted`` looks below.
    uintptr_t work_sp;
    /// The `ret` through which the next call of a function that reads its return address goes
    /// (set by its resolver, ``ffh_as_caller_resolver``, taken by the call: see as_caller.c).
    uintptr_t as_caller_through;
} ffh_thread;

/// A byte of every thread's own, whose address names the thread without a call (locks
/// remember their owner by it; `pthread_self` may be hooked).
extern __thread char ffh_thread_here __attribute__((tls_model("initial-exec")));

/// The calling thread's name for lock ownership (see ``ffh_thread_here``); never 0.
static inline uintptr_t ffh_this_thread(void) { return (uintptr_t)&ffh_thread_here; }

/// The calling thread's record, if it has one.
extern __thread ffh_thread *ffh_current_thread __attribute__((tls_model("initial-exec")));

/// The calling thread's record, claiming a free one (or mapping more) on the thread's first
/// hooked call. Lock-free and allocation-free (it may `mmap`); NULL only when the kernel
/// refuses memory.
ffh_thread *ffh_thread_claim(void);

/// The calling thread's record, claimed on first use; see ffh_thread_claim.
static inline ffh_thread *ffh_thread_current(void) {
    ffh_thread *thread = ffh_current_thread;
    return thread ? thread : ffh_thread_claim();
}

/// The first record of the process (follow `next`); records are never unmapped.
ffh_thread *ffh_thread_first(void);

/// Reads a record's generation with acquire ordering.
static inline uintptr_t ffh_thread_generation(const ffh_thread *thread) {
    return __atomic_load_n(&thread->generation, __ATOMIC_ACQUIRE);
}

/// Whether a record is owned by a thread.
static inline int ffh_thread_is_claimed(const ffh_thread *thread) {
    return __atomic_load_n(&thread->claimed, __ATOMIC_ACQUIRE) != 0;
}

/// Whether the calling thread is inside a hooked call.
static inline int ffh_thread_is_inside(void) {
    ffh_thread *thread = ffh_current_thread;
    return thread && (thread->generation & 1);
}

/// Whether the thread that owns `thread` still exists in this process (a thread that exited
/// where no destructor could run, such as inside a hooked call in a pthread key destructor).
int ffh_thread_is_alive(const ffh_thread *thread);

/// Frees a record whose thread is gone, ending any call it was inside.
void ffh_thread_release(ffh_thread *thread);

/// Sets what else must start afresh when a record is freed, for its next thread (the attach
/// engine's side stack): `hook` runs with the record each time one is freed, from the thread
/// that frees it (possibly in a destructor at thread exit), so it must not allocate or lock.
void ffh_thread_set_release_hook(void (*hook)(ffh_thread *thread));

/// Sets what runs on a thread as it ends (pthread_exit, or a return from its start routine),
/// before its record is freed: `hook` runs on the ending thread, in the destructor of the
/// library's thread key, for every thread that had a record (it made a hooked or attached
/// call). The tracer writes the calls still in flight there. NULL for none.
void ffh_thread_set_exit_hook(void (*hook)(void));

/// Frees the record of a thread that is gone while it still holds `generation`, the odd
/// value it had when reclamation began waiting for it; returns whether it did. A thread that
/// freed its own record as it exited has changed its generation since, so a reclamation
/// that read the old value before the exit and found the thread gone after it frees
/// nothing (the record may already serve another thread).
int ffh_thread_release_vanished(ffh_thread *thread, uintptr_t generation);

/// In a child after fork: frees the records of every thread but the calling one, ending
/// whatever call those threads were inside (they do not exist in the child), and records the
/// calling thread's new kernel id.
void ffh_thread_forget_others(void);

/// Adds `lock` to the locks that no thread may hold across `fork`: `pthread_atfork` handlers
/// (registered on the first call) take every added lock before a fork, in increasing `rank`
/// (locks added with equal ranks in the order they were added), and release them all on
/// each side after it; the child's handler first frees the other threads' records. A lock
/// that code takes while it holds another must have the higher rank. The handlers are C and
/// reach the locks through pointers kept here, so they touch nothing a fork could have left
/// half initialised. Adding takes no lock (a fork that races the very first addition of a
/// lock may not take that lock). At most 16 locks; a lock added twice is kept once.
/// Returns 0, -1 when the table is full, or the error of `pthread_atfork`.
int ffh_fork_protect(pthread_mutex_t *lock, int rank);

/// Adds a lock that is not a pthread mutex (another library's) to the locks taken across
/// `fork`, as ``ffh_fork_protect`` does: `take(lock)` before the fork, `give(lock)` on
/// both sides after it.
int ffh_fork_protect_with(void (*take)(void *), void (*give)(void *), void *lock, int rank);

/// Marks the calling thread, which the library made for its own work, as doing the library's
/// work (FFH_BUSY_WORK) for the rest of its life, its end included: the calls of hooked
/// functions that the C library's clean-up of an ending thread makes (free, after the pthread
/// key destructors have released the thread's record) go straight to them too. Called first on
/// such a thread (``ffh_thread_start_helper``'s start routines).
void ffh_thread_become_library_own(void);

/// Starts `start(context)` on a new thread that runs with every signal blocked (the process's
/// handlers run on its own threads), placed on a processor other than the calling thread's
/// where the thread may run on more than one: a thread made beside a busy one is otherwise
/// queued behind it on its processor until the scheduler moves it, which it is slow to do
/// with a thread just made (milliseconds, measured: the whole of a batch's sweep). Returns
/// pthread_create's status (0: started; `thread` is to be joined).
///
/// The thread runs on a stack mapped here (8 MiB, a guard page below), set in `stack` (NULL
/// where none could be mapped and the C library's was used): the joiner unmaps it after the
/// join (``ffh_thread_unmap_helper_stack``). A stack the C library made would stay in its cache
/// of stacks, and the program's next `pthread_create` would take it and free the helper's
/// thread-local blocks there: calls of `free` (17 with the tracer's libraries loaded) that the
/// program makes only because the library ran a thread, seen by a hook on `free` in the C library.
int ffh_thread_start_helper(pthread_t *thread, void *(*start)(void *), void *context, void **stack);

/// Unmaps a helper's stack (``ffh_thread_start_helper``) once its thread was joined; NULL does
/// nothing.
void ffh_thread_unmap_helper_stack(void *stack);

// MARK: - The library's own code

/// ``ffh_thread/busy`` while the library does work that calls other libraries: the attached
/// calls that pass through then are counted as the library's (ffh_attach_passed_library_calls).
/// A signal handler's call that interrupts the work runs its blocks (see
/// ``ffh_work_interrupted``).
#define FFH_BUSY_WORK 2

/// ``ffh_thread/busy`` from the end of fork's prepare handler to the start of its parent or
/// child handler: the thread runs the C library's fork and other libraries' fork handlers,
/// not the library's code, with the library's locks held. A call that arrives then (a signal
/// handler's, another library's fork handler's) is the program's: it runs its blocks as a
/// signal handler's call that interrupted the library's work does (no side stack is made, no
/// lock taken), where the stack scan of ``ffh_work_interrupted`` could miss it (the work's
/// start was noted in the prepare handler's frame, which fork's own frames lie above).
#define FFH_BUSY_FORK 3

/// Marks the calling thread's record as doing the library's work that calls other libraries
/// (FFH_BUSY_WORK), noting where its stack pointer stands (`work_sp`: the caller's frame and
/// everything it calls lie below), unless it is marked so already; returns what `busy` was.
/// Always inlined: the frame whose address it notes is its caller's.
static inline __attribute__((always_inline)) int32_t ffh_thread_begin_work(ffh_thread *thread) {
    int32_t was = thread->busy;
    /* The frame's address, plus its saved frame pointer and the return address: the stack
       pointer of the call into the function that begins the work, which stays below it. */
    if (was != FFH_BUSY_WORK) thread->work_sp = (uintptr_t)__builtin_frame_address(0) + 16;
    __asm__ __volatile__("" ::: "memory");
    thread->busy = FFH_BUSY_WORK;
    __asm__ __volatile__("" ::: "memory");
    return was;
}

/// Whether code running on the calling thread at stack pointer `sp` is a signal handler's
/// that interrupted code whose frames all lie at or below `top` (the stack pointer where that
/// code began; 0: none): a signal frame of the kernel's lies between `sp` and `top` (the XSAVE
/// area it points to marked as the kernel marks it, the interrupted stack pointer at most
/// `top`), or the thread runs on its signal stack while `top` lies on another. Code at `sp`
/// above `top` is taken as not interrupting. Reads the stack, and makes a system call: for
/// rare paths only. x86-64; elsewhere 0.
int ffh_interrupted_below(uintptr_t sp, uintptr_t top);

/// Whether an attached call whose stack pointer is `sp`, arriving while `thread` (the calling
/// thread's record) does the library's work (FFH_BUSY_WORK), was made by a signal handler that
/// interrupted that work rather than by the work itself (see ``ffh_interrupted_below``; the
/// work began at `work_sp`). Only for calls that find the thread marked, never on the call
/// path.
int ffh_work_interrupted(const ffh_thread *thread, uintptr_t sp);

/// Marks the calling thread as running the library's own code (or not, with 0) and returns
/// what it was before, for ``ffh_thread_set_busy`` to restore; 0 when the thread has no
/// record and none can be had. See ``ffh_thread/busy``.
static inline __attribute__((always_inline)) int32_t ffh_library_enter(int32_t busy) {
    ffh_thread *thread = ffh_thread_current();
    if (!thread) return 0;
    if (busy == FFH_BUSY_WORK) return ffh_thread_begin_work(thread);
    int32_t was = thread->busy;
    thread->busy = busy;
    __asm__ __volatile__("" ::: "memory");
    return was;
}

/// Sets whether the thread that owns `thread` runs the library's own code (its own record
/// only): 1 as the call path leaves a block or an original, 0 as it enters one. Called right
/// before or after a call the compiler cannot see into, which keeps the store in place.
static inline void ffh_thread_set_busy(ffh_thread *thread, int32_t busy) { thread->busy = busy; }

/// Calls an original with the arguments of a call that entered through the library's own
/// System V entry (as ``ffh_forward_sysv``), with `thread` (the caller's record, marked
/// running the library's own code, or NULL) unmarked for exactly the length of the original: no code of
/// the library runs between the mark and the call, so a function the program hooked that
/// the library calls around it is never taken for the program's. x86-64 only.
void ffh_forward_original(ffh_thread *thread, const void *plan, const void *function, void *const *arguments,
                          void *returnValue);

// MARK: - Re-entry marks

/// Whether blocks of the slot `entry` are running on this thread.
static inline int ffh_thread_is_marked(const ffh_thread *thread, uintptr_t entry) {
    uintptr_t count = thread->mark_count;
    if (count > FFH_MARKS) count = FFH_MARKS;
    for (uintptr_t index = 0; index < count; index++) {
        if (thread->marks[index] == entry) return 1;
    }
    return 0;
}

/// Marks `entry` as running; returns 0 when the marks are full (the mark is not recorded).
/// The count is raised before the mark is written and a mark is cleared before the count
/// drops, so a signal handler that interrupts either sees a consistent list.
static inline int ffh_thread_mark(ffh_thread *thread, uintptr_t entry) {
    uintptr_t count = thread->mark_count;
    if (count >= FFH_MARKS) return 0;
    thread->mark_count = count + 1;
    __asm__ __volatile__("" ::: "memory");
    thread->marks[count] = entry;
    return 1;
}

/// Writes `entry` at a mark's place (0: the mark is lifted, and matches no slot) without
/// changing the count: a call lifts its own mark for the length of its original, whose own
/// marks go above it and are gone when it returns.
static inline void ffh_thread_lift(ffh_thread *thread, uintptr_t place, uintptr_t entry) {
    __asm__ __volatile__("" ::: "memory");
    thread->marks[place] = entry;
    __asm__ __volatile__("" ::: "memory");
}

/// Removes the most recent mark made by a successful ffh_thread_mark.
static inline void ffh_thread_unmark(ffh_thread *thread) {
    uintptr_t count = thread->mark_count - 1;
    thread->marks[count] = 0;
    __asm__ __volatile__("" ::: "memory");
    thread->mark_count = count;
}

// MARK: - Slot closures

/// What a slot closure's user data points at: the part of a hooked slot that must live as long
/// as its closure, since a caller may have read the closure's address from the slot and call
/// it at any later time. Everything else of the slot is freed when its last hook goes.
typedef struct ffh_slot {
    /// While the slot has hooks, its hook state (an unretained `SlotEntry`, which holds the
    /// original) with ``FFH_SLOT_HOOKED`` set; otherwise the function the closure
    /// passes calls through to (0 for a NULL slot an instead hook filled). One word, so a
    /// call reads what it needs with one load: the library's own entry jumps to such a
    /// function when it has no ``resolver`` (call_x86_64.S, which reads this word and that
    /// one at fixed offsets).
    uintptr_t state;
    /// The slot's address (0 for a closure that is free for reuse).
    uintptr_t address;
    /// The call interface the closure was prepared with (an unretained `CallInterface`, which
    /// the library keeps for the life of the process, as the closure's cif must live): a
    /// call that passes through reaches the original the way hooked calls do, through its
    /// register plan, with no entry to read. Set before the closure can be reached.
    const void *interface;
    /// While the slot has hooks, the function they wrap (the entry's original, kept in step
    /// by the entry): what a call the library makes itself through the slot reaches
    /// without reading the entry (see ``ffh_thread/busy``).
    uintptr_t original;
    /// Where the arguments of a call arrive (an `ffh_sysv_plan` of the interface) when the
    /// closure enters through the library's own entry rather than libffi's; NULL otherwise.
    const void *plan;
    /// While the slot's hooks are all before and after blocks that run on every call (see
    /// ``ffh_fast_hooks``), what the C call path needs to run them itself; NULL otherwise.
    /// Set before the state names a new entry, and changed before a snapshot it belongs to is
    /// retired, so a call that starts later never reads one reclamation may free.
    const struct ffh_fast_hooks *fast;
    /// The resolver registered for ``original`` (an ``ffh_original_resolver``), or NULL: set
    /// before the original, and read after it by a call, which uses it only when its `code`
    /// is the original it read (any other pair is from different moments, and the original
    /// alone is right).
    const void *resolver;
} ffh_slot;

/// Where a receiver starts its probe in an ``ffh_fast_receivers`` table (objects are 16-byte
/// aligned: their low bits say nothing).
static inline uintptr_t ffh_fast_receiver_hash(uintptr_t receiver) {
    return (uintptr_t)(((uint64_t)receiver >> 4) * 0x9E3779B97F4A7C15ull >> 32);
}

struct ffh_fast_receivers;

/// The hooks of a slot when every one is a before or after block that runs on every call, or
/// every one on the calls of one receiver (no `once`, caller limit, hooks for different
/// receivers, or instead block): the C call path
/// (ffh_closure_dispatch) then marks the call, runs the blocks (calling each Swift block
/// itself, ``beforeBlocks``, or through ``ffh_fast_block``),
/// calls the original by the slot's register plan and runs the after blocks, without the
/// Swift dispatch. Made with the snapshot it describes and freed with it.
typedef struct ffh_fast_hooks {
    /// The slot's entry and the snapshot (unretained: the snapshot keeps both).
    const void *entry;
    const void *snapshot;
    /// The hook records (unretained `HookRecord`s), in the order they run.
    void *const *before;
    void *const *after;
    uint32_t beforeCount;
    uint32_t afterCount;
    /// Whether calls are marked by the original function rather than by the slot record
    /// (the entry's `reentryByFunction`).
    uint32_t marksByFunction;
    /// Whether calls are marked by the slot record and the receiver together, the first
    /// argument's word (the entry's `reentryByReceiver`: a method whose hooks are each for
    /// one object).
    uint32_t marksByReceiver;
    /// The one receiver (the first argument's word) every hook is for, or 0 when they run
    /// for every call: a message to another object runs no block and calls the original.
    uintptr_t receiver;
    /// Whether either of the two above is set: the call path's one test for both.
    uint32_t byReceiver;
    /// The slot state that names `entry` (its address with ``FFH_SLOT_HOOKED``): a call uses
    /// the table only while the slot's state is this word.
    uintptr_t state;
    /// The records' blocks as Swift calls them (``ffh_swift_block``), in the same order, for
    /// the C path to call itself; NULL where it calls them through ``ffh_fast_block``
    /// (``ffh_fast_setup`` found the direct call unsafe in this build).
    const struct ffh_swift_block *beforeBlocks;
    const struct ffh_swift_block *afterBlocks;
    /// For hooks of several receivers (methods hooked for many objects): the hooks each
    /// receiver's calls run, found by the receiver; NULL otherwise. `byReceiver` is set with
    /// it (the path looks only there), and the other fields but `entry`, `snapshot` and
    /// `state` are unused then.
    const struct ffh_fast_receivers *receivers;
} ffh_fast_hooks;

/// One receiver's place in an ``ffh_fast_receivers`` table: the receiver (0 for a free place),
/// the C path's hooks for its calls (NULL where the Swift dispatch runs them: a `once`, limited
/// or instead hook among them), and the snapshot they belong to (unretained; the snapshot the
/// table belongs to keeps it).
typedef struct ffh_fast_receiver {
    uintptr_t receiver;
    const ffh_fast_hooks *hooks;
    const void *snapshot;
} ffh_fast_receiver;

/// The hooks of a slot whose hooks are for several receivers, by receiver: an open-addressed
/// table (``ffh_fast_receiver_find``), and what the calls of any other receiver run: `others`
/// (the hooks for every receiver alone; `othersSnapshot` is their snapshot, empty where there
/// are none), or, where there are none (`othersPassThrough`), the original straight away. A call then costs a probe or two however many objects have hooks.
typedef struct ffh_fast_receivers {
    const ffh_fast_receiver *places;
    /// The table's size less one: a power of two less one.
    uintptr_t mask;
    const ffh_fast_hooks *others;
    const void *othersSnapshot;
    uint32_t othersPassThrough;
} ffh_fast_receivers;

/// The place of `table` that holds `receiver`, or NULL.
static inline const ffh_fast_receiver *ffh_fast_receiver_find(const ffh_fast_receivers *table, uintptr_t receiver) {
    if (receiver == 0) return NULL;
    uintptr_t index = ffh_fast_receiver_hash(receiver) & table->mask;
    for (;;) {
        const ffh_fast_receiver *place = &table->places[index];
        if (place->receiver == receiver) return place;
        if (place->receiver == 0) return NULL;
        index = (index + 1) & table->mask;
    }
}

/// A Swift block (`(borrowing Invocation) -> Void`) as its two words: the function and its
/// context. Swift passes an invocation, which is larger than four words, by address, and the
/// context in the context register (`swiftcall` with `swift_context`): the C path calls the
/// function so, with an ``ffh_invocation`` it made, where ``ffh_fast_setup`` found that a
/// probe block called this way reads back every field it was given.
typedef struct ffh_swift_block {
    const void *function;
    const void *context;
    /// What the function takes (``ffh_swift_block_kind``): an invocation, or, for a typed block
    /// of `arity` arguments, their addresses as a generic Swift function takes its values
    /// (after the result's, and with the address of a result to fill, for an after block
    /// that returns the result).
    uint8_t kind;
    uint8_t arity;
    /// A typed after block's result: its size in bytes, and, for an integer narrower than a
    /// word, its width in bits and whether it is signed (widened to a word as a libffi
    /// closure returns it); a width of 0 stores the bytes as they are.
    uint8_t resultSize;
    uint8_t resultWidth;
    uint8_t resultSigned;
} ffh_swift_block;

/// The kinds of ``ffh_swift_block``.
enum ffh_swift_block_kind {
    /// `(borrowing Invocation) -> Void`.
    FFH_SWIFT_BLOCK_INVOCATION = 0,
    /// `(A0, ..., An) -> Void` at a generic function's abstraction: each argument by address.
    FFH_SWIFT_BLOCK_READING = 1,
    /// `(Result, A0, ..., An) -> Result` likewise: the result returned indirectly.
    FFH_SWIFT_BLOCK_RESULT = 2,
};

/// The most arguments of a typed block the C path calls itself (the typed forms of fixed
/// arity go up to six).
enum { FFH_SWIFT_BLOCK_MAX_ARITY = 6, FFH_SWIFT_BLOCK_MAX_RESULT = 64 };

/// One call as its blocks see it: made by the C path for ``ffh_fast_block`` (blocks it calls
/// itself get ``ffh_invocation``s whose record is one of zeros: such a call never re-entered
/// its slot and runs no instead block, which alone reads the rest), or by the Swift
/// dispatch on its stack.
typedef struct ffh_fast_call {
    const void *entry;
    const void *snapshot;
    uintptr_t original;
    uintptr_t mark;
    void *returnValue;
    void **arguments;
    ffh_thread *thread;
    int32_t marked;
    /// Whether the call came from inside a block of the same slot on this thread (never on
    /// the C path, which leaves such calls to the Swift dispatch).
    int32_t reentered;
} ffh_fast_call;

/// The words of the Swift `Invocation` a block receives (a frame of five words, the position
/// and the instead index), as the C path makes it to call a block itself. Its layout is
/// Swift's: ``ffh_fast_setup`` checks it with a probe block before the C path relies on it.
typedef struct ffh_invocation {
    const ffh_fast_call *record;
    const void *entry;
    void *returnValue;
    void **arguments;
    ffh_thread *thread;
    uint8_t position;
    intptr_t insteadIndex;
} ffh_invocation;

/// Calls `block` as Swift calls a closure `(borrowing Invocation) -> Void`, with `invocation`:
/// the probe ``ffh_fast_setup``'s caller makes before it lets the C path call blocks itself.
void ffh_swift_block_call(const ffh_swift_block *block, const ffh_invocation *invocation);

/// Runs the blocks of `count` hook records, in order, for a call on the C path: after blocks
/// when `after`.
typedef void (*ffh_fast_block)(void *const *records, uint32_t count, const ffh_fast_call *call, int32_t after);

/// Runs the block of one hook record for a call on the C path: an after block when `after`.
typedef void (*ffh_fast_block_one)(void *record, const ffh_fast_call *call, int32_t after);

/// Publishes a slot's hooks for the C path (NULL: the Swift dispatch runs them), with release
/// ordering.
static inline void ffh_slot_set_fast(ffh_slot *slot, const ffh_fast_hooks *fast) {
    __atomic_store_n(&slot->fast, fast, __ATOMIC_RELEASE);
}

/// A function that another function stands for on the call path: a hook whose original is
/// `code` (a trampoline that looks its target up for each call and jumps there, such as the
/// forwarder FFIHookObjC adds to a subclass for an inherited method) calls what `resolve`
/// returns for the call's argument list instead, skipping the trampoline's second entry. Made
/// once for `code` and never freed.
typedef struct ffh_original_resolver {
    uintptr_t code;
    uintptr_t (*resolve)(const void *context, void *const *arguments);
    const void *context;
    /// Where `resolve` is a superclass lookup (a method's forwarder), the runtime's lookup
    /// (`objc_msg_lookup_super`) and the superclass, which the C call path calls with the
    /// call's receiver and selector itself; NULL otherwise.
    void *(*lookupSuper)(const void *target, const void *selector);
    const void *superClass;
} ffh_original_resolver;

/// The function a call of `slot` whose original is `original` reaches: what the slot's
/// resolver (see ``ffh_slot/resolver``) returns for the call's argument list when its code is
/// `original`, else `original`. For calls that pass straight through.
uintptr_t ffh_slot_function(const ffh_slot *slot, uintptr_t original, void *const *arguments);

/// Writes at `writable` (FFH_ENTRY_TRAMPOLINE_SIZE bytes of code memory, executed at its code
/// address) the shim of `function`, a hook's original that reads its own return address (the
/// loader's dlopen, dlmopen, dlsym, dlvsym: see ffh_call_through): it calls `function` through
/// the `ret` its resolver found for the call (as_caller.c), or jumps to it when there is none.
void ffh_as_caller_write(void *writable, uintptr_t function);

/// A resolver (never freed; NULL without memory) for `function`, whose shim ffh_as_caller_write
/// wrote at `shim`: each call goes to the shim, which calls `function` through a `ret` in the
/// object of the hooked call's caller (found above the closure entry's frame, which only a slot
/// whose closure enters by its register plan has), not from the library's code.
const ffh_original_resolver *ffh_as_caller_resolver(uintptr_t function, const void *shim);

/// The bit of ``ffh_slot/state`` that says it holds an entry: no user-space
/// address has it set, function or object.
static const uintptr_t FFH_SLOT_HOOKED = (uintptr_t)1 << (sizeof(uintptr_t) * 8 - 1);

/// Reads a slot's state with acquire ordering.
static inline uintptr_t ffh_slot_state(const ffh_slot *slot) {
    return __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE);
}

/// Publishes a slot's state with release ordering.
static inline void ffh_slot_set_state(ffh_slot *slot, uintptr_t state) {
    __atomic_store_n(&slot->state, state, __ATOMIC_RELEASE);
}

/// Sets the function a slot's hooks wrap (``ffh_slot/original``) and the resolver registered
/// for it (NULL for none), the resolver first, with release ordering.
static inline void ffh_slot_set_original(ffh_slot *slot, uintptr_t function, const void *resolver) {
    __atomic_store_n(&slot->resolver, resolver, __ATOMIC_RELEASE);
    __atomic_store_n(&slot->original, function, __ATOMIC_RELEASE);
}

/// How many calls that got no thread record are reading an entry's original right now;
/// reclamation waits for a moment when there are none.
extern uintptr_t ffh_recordless_readers;

/// Begins a record-less call's read of the slot's state and, when it holds an entry, of the
/// entry's original: the state is loaded after the count is raised, sequentially consistent.
static inline uintptr_t ffh_recordless_begin(const ffh_slot *slot) {
    __atomic_fetch_add(&ffh_recordless_readers, 1, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&slot->state, __ATOMIC_SEQ_CST);
}

/// Ends what ``ffh_recordless_begin`` began.
static inline void ffh_recordless_end(void) {
    __atomic_fetch_sub(&ffh_recordless_readers, 1, __ATOMIC_RELEASE);
}

/// How many record-less calls are reading an entry's original (see above).
static inline uintptr_t ffh_recordless_reader_count(void) {
    return __atomic_load_n(&ffh_recordless_readers, __ATOMIC_SEQ_CST);
}

// MARK: - The closure handler

/// What the handler calls for each hooked call: `slot` is the closure's user data,
/// `thread` the caller's record, marked inside a call, or NULL when no record could be had
/// (then the call must go straight to the original, reading nothing reclamation may free).
/// It needs no cif: the slot record holds the call interface that reaches the original.
typedef void (*ffh_dispatch)(void *returnValue, void **arguments, ffh_slot *slot, ffh_thread *thread);

/// Sets the function every closure's handler calls, once, before any closure exists; whether
/// calls fence after entering (where writers cannot issue membarrier for them); and whether
/// the call path marks its own code (``ffh_thread/busy``): `dispatch` may call functions a
/// program can hook (an unoptimised build's Swift calls its runtime), and lifts the mark
/// around blocks and originals. Without it the mark is set only by the thread's first call
/// and by fork's handlers.
void ffh_handler_setup(ffh_dispatch dispatch, int readersFence, int marksCallPath);

/// Sets the functions that run blocks for the C call path (see ``ffh_fast_hooks``): `one` for
/// a position with one block (a function that calls one block needs no loop's frame), `many`
/// for more; once, before any slot's hooks are published for it.
void ffh_fast_setup(ffh_fast_block_one one, ffh_fast_block many);

/// The bytes of the Swift positions (`HookPosition`) that the invocations the C path makes
/// carry: the C path calls blocks itself only where Swift's are these (checked with the probe).
enum { FFH_POSITION_BEFORE = 0, FFH_POSITION_AFTER = 2 };

/// Does nothing: called with any signature's arguments (which a C callee may ignore), it lets
/// the library run each call path once before a hook can reach it.
void ffh_nothing(void);

/// Returns its argument: the original of the slot the library warms its call path with.
int ffh_identity(int value);

/// The libffi closure handler (`void (*)(ffi_cif *, void *, void **, void *)`): marks the
/// thread inside a call for the length of the dispatch, and, where the C library runs
/// cleanup handlers for frames that `longjmp` jumps over or a thread's exit unwinds (glibc),
/// ends the call's marks when that happens. A call that arrives while the thread runs the
/// library's own code (``ffh_thread/busy``) goes straight to the original, in C where the
/// closure entered through the library's own entry.
void ffh_handler(void *cif, void *returnValue, void **arguments, void *userData);

/// For tests: whether hooked calls register their cleanup inline (1, where the place of
/// glibc's cleanup list in the thread's descriptor was found when the library loaded) or
/// through glibc's functions (0), or neither changed (-1); returns whether inline
/// registration is available. Change it only while no hooked call is running.
int ffh_cleanup_set_inline(int on);

/// The process id, straight from the kernel: libc's getpid may be hooked or replaced in the
/// import table the library's own calls go through.
int32_t ffh_getpid(void);

#endif
