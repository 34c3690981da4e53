#ifndef FFH_CALL_INTERNAL_H
#define FFH_CALL_INTERNAL_H

// What the call plans and the System V closure entry share inside the C shim.

#include "ffh_call.h"

#include <string.h>


/* The value at `address` as its register holds it; memcpy because libffi's argument list
   promises no alignment (it compiles to one load). */
static inline uint64_t plan_load(ffh_value_kind kind, const void *address) {
    switch (kind) {
    case FFH_VALUE_SIGNED_8: {
        int8_t value;
        memcpy(&value, address, sizeof value);
        return (uint64_t)(int64_t)value;
    }
    case FFH_VALUE_SIGNED_16: {
        int16_t value;
        memcpy(&value, address, sizeof value);
        return (uint64_t)(int64_t)value;
    }
    case FFH_VALUE_SIGNED_32: {
        int32_t value;
        memcpy(&value, address, sizeof value);
        return (uint64_t)(int64_t)value;
    }
    case FFH_VALUE_UNSIGNED_8: {
        uint8_t value;
        memcpy(&value, address, sizeof value);
        return value;
    }
    case FFH_VALUE_UNSIGNED_16: {
        uint16_t value;
        memcpy(&value, address, sizeof value);
        return value;
    }
    case FFH_VALUE_UNSIGNED_32:
    case FFH_VALUE_FLOAT: {
        uint32_t value;
        memcpy(&value, address, sizeof value);
        return value;
    }
    default: {
        uint64_t value;
        memcpy(&value, address, sizeof value);
        return value;
    }
    }
}

/* An integer result as `ffi_call` stores it: widened to 64 bits by its kind. */
static inline __attribute__((always_inline)) void store_integer_result(ffh_value_kind kind, uint64_t bits,
                                                                       void *returnValue) {
    uint64_t widened;
    switch (kind) {
    case FFH_VALUE_SIGNED_8: widened = (uint64_t)(int64_t)(int8_t)bits; break;
    case FFH_VALUE_SIGNED_16: widened = (uint64_t)(int64_t)(int16_t)bits; break;
    case FFH_VALUE_SIGNED_32: widened = (uint64_t)(int64_t)(int32_t)bits; break;
    case FFH_VALUE_UNSIGNED_8: widened = (uint8_t)bits; break;
    case FFH_VALUE_UNSIGNED_16: widened = (uint16_t)bits; break;
    case FFH_VALUE_UNSIGNED_32: widened = (uint32_t)bits; break;
    default: widened = bits; break;
    }
    memcpy(returnValue, &widened, sizeof widened);
}

#if defined(__x86_64__)

/* The frame `ffh_sysv_invoke` (call_x86_64.S) reads and writes; the offsets are fixed there. */
typedef struct {
    uint64_t words[FFH_SYSV_FIRST_STACK_WORD]; /* 0: rdi..r9, then xmm0..xmm7 */
    const uint64_t *stack;                     /* 112 */
    uint64_t stackBytes;                       /* 120 */
    uint64_t sseCount;                         /* 128 */
    uint64_t x87Count;                         /* 136 */
    uint64_t rax, rdx, xmm0, xmm1;             /* 144, 152, 160, 168 */
    unsigned char x87[2][16];                  /* 176, 192 */
} sysv_frame;

_Static_assert(__builtin_offsetof(sysv_frame, stack) == 112, "frame layout");
_Static_assert(__builtin_offsetof(sysv_frame, rax) == 144, "frame layout");
_Static_assert(__builtin_offsetof(sysv_frame, x87) == 176, "frame layout");

/* Loads the argument registers from `frame`, copies the stack area below the stack
   pointer, calls `function`, and stores the result registers (and as many x87 values as
   `frame->x87Count` says) back into `frame`. */
void ffh_sysv_invoke(sysv_frame *frame, const void *function);

/* Stores a call's result from `frame` in `returnValue` as `plan` says. */
static inline void sysv_store_result(const ffh_sysv_plan *plan, const sysv_frame *frame, void *returnValue) {
    for (uint32_t index = 0; index < plan->resultCount; index++) {
        const ffh_sysv_result_piece piece = plan->result[index];
        const void *source;
        switch (piece.source) {
        case FFH_SYSV_RAX: source = &frame->rax; break;
        case FFH_SYSV_RDX: source = &frame->rdx; break;
        case FFH_SYSV_XMM0: source = &frame->xmm0; break;
        case FFH_SYSV_XMM1: source = &frame->xmm1; break;
        case FFH_SYSV_ST0: source = frame->x87[0]; break;
        default: source = frame->x87[1]; break;
        }
        unsigned char *target = (unsigned char *)returnValue + piece.offset;
        switch (piece.kind) {
        case FFH_VALUE_BYTES: ffh_copy(target, source, piece.size); break;
        case FFH_VALUE_FLOAT: memcpy(target, source, sizeof(float)); break;
        default: {
            uint64_t bits;
            memcpy(&bits, source, sizeof bits);
            store_integer_result(piece.kind, bits, target);
            break;
        }
        }
    }
}

/* The frame of a call that entered through ffh_closure_entry: a call frame (its argument
   registers as they arrived, the rest free for a forwarded call), the result buffer the
   handler writes (32 bytes, 16-aligned; x87 results at its bytes 0 and 16), the scratch
   area, and what the entry's landing pad needs when an exception unwinds through the call
   (see ffh_closure_unwound). The entry's saved rbp and the caller's return address follow;
   then the caller's stack arguments. */
typedef struct {
    sysv_frame call;
    uint64_t buffer[4];
    uint64_t scratch[FFH_ENTRY_SCRATCH_BYTES / 8];
    /* 0: the thread's cleanup list as it was before the call's own buffer; 1: the argument
       of ffh_abandoned shifted left by one, with bit 0 set once both are stored. */
    uint64_t unwind[2];
} entry_frame_t;

_Static_assert(__builtin_offsetof(entry_frame_t, scratch) == FFH_ENTRY_SCRATCH_OFFSET, "entry frame layout");
_Static_assert(sizeof(entry_frame_t) + 16 == FFH_ENTRY_STACK_OFFSET, "entry frame layout");

/* What ffh_closure_entry_preserving keeps right below its entry frame: every register a
   call may write, as the caller left them (r10 and r11 the caller's, not the trampoline's),
   the vector registers whole. Its dispatch stores the call's result over the registers the
   result takes; the entry loads them all as it returns. */
typedef struct {
    uint64_t rax, rdx, rdi, rsi, rcx, r8, r9, r10, r11, unused;
    unsigned char xmm[16][16];
} preserved_t;

_Static_assert(sizeof(preserved_t) == 336, "call_x86_64.S: FFH_PRESERVED_BYTES");
_Static_assert(__builtin_offsetof(preserved_t, r10) == 56 && __builtin_offsetof(preserved_t, xmm) == 80,
               "call_x86_64.S stores the registers at these offsets");

static inline preserved_t *entry_preserved(entry_frame_t *frame) {
    return (preserved_t *)(void *)((unsigned char *)frame - sizeof(preserved_t));
}

/* The entry stores its frame's address in the word right before the argument list it hands
   the handler: a forwarded call finds the frame from the list. */
static inline entry_frame_t *entry_frame(void *const *arguments) { return (entry_frame_t *)arguments[-1]; }
static inline uint64_t *entry_stack(entry_frame_t *frame) {
    return (uint64_t *)(void *)((unsigned char *)frame + FFH_ENTRY_STACK_OFFSET);
}

#endif

// MARK: - A call marked inside, for reclamation

#include "ffh_thread.h"

/* Whether readers need a fence of their own (set by ffh_handler_setup: no membarrier). */
extern int ffh_readers_fence __attribute__((visibility("hidden")));

/* Marks `thread` inside a call, the thread's outermost (its generation, read before as
   `generation`, is even): the generation becomes odd, ordered before the reads of what
   reclamation frees. A signal handler that runs between that read and this store makes and
   ends its own outermost call; storing from the stale value then only repeats an odd value,
   which makes reclamation wait longer, never shorter. */
static inline __attribute__((always_inline)) void ffh_call_enter(ffh_thread *thread, uintptr_t generation) {
    __atomic_store_n(&thread->generation, generation + 1, __ATOMIC_RELAXED);
    if (ffh_readers_fence) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    } else {
        __asm__ __volatile__("" ::: "memory");
    }
}

/* A window of the library's own work on a thread (its busy flag set, perhaps its call
   marked): a glibc cleanup buffer that ends it if a longjmp (a signal handler's siglongjmp
   included), a thread's exit or its cancellation leaves it without closing it. */
#include <pthread.h>
typedef struct {
    struct _pthread_cleanup_buffer buffer;
    /* The thread's cleanup list before the buffer; the buffer's own address when it was not
       registered. */
    struct _pthread_cleanup_buffer *previous;
} ffh_window;

/* What ffh_abandoned needs to know of a call that may leave without returning. */
static inline __attribute__((always_inline)) uintptr_t ffh_abandoned_argument(const ffh_thread *thread,
                                                                               int outermost) {
    return thread->mark_count << 2 | (uintptr_t)(thread->attach_block != 0) << 1 | (uintptr_t)(outermost != 0);
}

/* Registers `window` for `thread`, whose marks it keeps and whose call it ends if left, when
   `outermost` (see ffh_call_enter). */
void ffh_window_open(ffh_window *window, ffh_thread *thread, int outermost) __attribute__((visibility("hidden")));
/* Takes `window` off the thread's list, running nothing. */
void ffh_window_close(ffh_window *window) __attribute__((visibility("hidden")));

#if defined(__x86_64__) && defined(__GLIBC__)
/* Where glibc keeps a thread's list of cleanup buffers, as an offset from the thread pointer
   (%fs); 0 when it was not found (thread.c). */
extern long ffh_cleanup_offset __attribute__((visibility("hidden")));
/* The routine of every window's buffer (thread.c). */
void ffh_abandoned(void *packed) __attribute__((visibility("hidden")));

/* ffh_window_open and ffh_window_close inlined where the list's place is known: glibc's three
   stores and one, without a call (the attach path opens and closes a window twice a call). */
static inline __attribute__((always_inline)) void ffh_window_open_inline(ffh_window *window, ffh_thread *thread,
                                                                         int outermost) {
    const long offset = __atomic_load_n(&ffh_cleanup_offset, __ATOMIC_RELAXED);
    if (__builtin_expect(offset == 0, 0)) {
        ffh_window_open(window, thread, outermost);
        return;
    }
    uintptr_t head;
    __asm__ __volatile__("movq %%fs:(%1), %0" : "=r"(head) : "r"(offset));
    window->buffer.__routine = ffh_abandoned;
    window->buffer.__arg = (void *)ffh_abandoned_argument(thread, outermost);
    window->previous = (struct _pthread_cleanup_buffer *)head;
    window->buffer.__prev = window->previous;
    __asm__ __volatile__("movq %0, %%fs:(%1)" : : "r"((uintptr_t)&window->buffer), "r"(offset) : "memory");
}

static inline __attribute__((always_inline)) void ffh_window_close_inline(ffh_window *window) {
    const long offset = __atomic_load_n(&ffh_cleanup_offset, __ATOMIC_RELAXED);
    if (__builtin_expect(offset == 0, 0)) {
        ffh_window_close(window);
        return;
    }
    if (window->previous == &window->buffer) return;
    __asm__ __volatile__("movq %0, %%fs:(%1)" : : "r"((uintptr_t)window->buffer.__prev), "r"(offset) : "memory");
}
#else
#define ffh_window_open_inline ffh_window_open
#define ffh_window_close_inline ffh_window_close
#endif

/* Ends what ffh_call_enter marked (unless something ended it meanwhile). */
static inline __attribute__((always_inline)) void ffh_call_leave(ffh_thread *thread) {
    /* Atomic: reclamation may end a vanished thread's call with a compare-and-swap meanwhile. */
    uintptr_t inside = __atomic_load_n(&thread->generation, __ATOMIC_RELAXED);
    if (inside & 1) __atomic_store_n(&thread->generation, inside + 1, __ATOMIC_RELEASE);
}

// MARK: - Calls with the argument registers as they are

#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
#define GENERAL_PARAMETERS uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t
#define GENERAL_ARGUMENTS(r) r->general[0], r->general[1], r->general[2], r->general[3], r->general[4], r->general[5]
#else
#define GENERAL_PARAMETERS uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t
#define GENERAL_ARGUMENTS(r)                                                                                    \
    r->general[0], r->general[1], r->general[2], r->general[3], r->general[4], r->general[5], r->general[6], \
        r->general[7]
#endif

#define FLOATING_PARAMETERS double, double, double, double, double, double, double, double

static inline double as_double(uint64_t bits) {
    double value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

#define FLOATING_ARGUMENTS(r)                                                                                  \
    as_double(r->floating[0]), as_double(r->floating[1]), as_double(r->floating[2]), as_double(r->floating[3]), \
        as_double(r->floating[4]), as_double(r->floating[5]), as_double(r->floating[6]), as_double(r->floating[7])

typedef uint64_t (*integer_function)(GENERAL_PARAMETERS, FLOATING_PARAMETERS);
typedef double (*floating_function)(GENERAL_PARAMETERS, FLOATING_PARAMETERS);
typedef void (*void_function)(GENERAL_PARAMETERS, FLOATING_PARAMETERS);
typedef uint64_t (*general_integer_function)(GENERAL_PARAMETERS);
typedef double (*general_floating_function)(GENERAL_PARAMETERS);
typedef void (*general_void_function)(GENERAL_PARAMETERS);

/* Calls `function` with the registers `r` holds (the floating-point bank only when
   `floating`), and stores a result of kind `result` as ffi_call does. */
static inline __attribute__((always_inline)) void call_registers(const ffh_registers *r, int floating,
                                                                 ffh_value_kind result, const void *function,
                                                                 void *returnValue) {
    uint64_t bits;
    switch (result) {
    case FFH_VALUE_VOID:
        if (floating) {
            ((void_function)function)(GENERAL_ARGUMENTS(r), FLOATING_ARGUMENTS(r));
        } else {
            ((general_void_function)function)(GENERAL_ARGUMENTS(r));
        }
        return;
    case FFH_VALUE_FLOAT:
    case FFH_VALUE_DOUBLE: {
        double value = floating ? ((floating_function)function)(GENERAL_ARGUMENTS(r), FLOATING_ARGUMENTS(r))
                                : ((general_floating_function)function)(GENERAL_ARGUMENTS(r));
        if (returnValue == NULL) return;
        if (result == FFH_VALUE_FLOAT) {
            memcpy(returnValue, &value, sizeof(float));
        } else {
            memcpy(returnValue, &value, sizeof value);
        }
        return;
    }
    default:
        bits = floating ? ((integer_function)function)(GENERAL_ARGUMENTS(r), FLOATING_ARGUMENTS(r))
                        : ((general_integer_function)function)(GENERAL_ARGUMENTS(r));
        break;
    }
    if (returnValue == NULL) return;
    store_integer_result(result, bits, returnValue);
}

#if defined(__x86_64__)
/* Redoes a plan's fixups in a forwarded call's frame (see ffh_sysv_plan.fixups). */
void ffh_forward_fixups(const ffh_sysv_plan *plan, entry_frame_t *frame) __attribute__((visibility("hidden")));
/* A forwarded call that needs the assembly routine: stack arguments, an aggregate or x87
   result, a hidden result pointer, or a variadic callee. */
void ffh_forward_through_frame(const ffh_sysv_plan *plan, const void *function, entry_frame_t *frame,
                               void *returnValue) __attribute__((visibility("hidden")));

/* A forwarded call (ffh_forward_sysv), inlined where the closure entry's dispatch calls the
   original; `thread`, when not NULL, is marked running the
   library's own code, and is not for the length of the original alone. */
static inline __attribute__((always_inline)) void ffh_forward_sysv_inline(ffh_thread *thread, const void *opaquePlan,
                                                               const void *function, void *const *arguments,
                                                               void *returnValue) {
    const ffh_sysv_plan *plan = opaquePlan;
    entry_frame_t *frame = entry_frame(arguments);
    const ffh_value_kind kind = plan->registerResult;
    if (__builtin_expect(plan->integerCall != 0, 1)) {
        /* The commonest shape, tested first: integers and pointers in general registers only,
           an integer or pointer result, nothing to redo. */
        const uint64_t *words = frame->call.words;
        if (thread) ffh_thread_set_busy(thread, 0);
        uint64_t bits = ((general_integer_function)function)(words[0], words[1], words[2], words[3], words[4], words[5]);
        if (thread) ffh_thread_set_busy(thread, 1);
        if (returnValue) store_integer_result(kind, bits, returnValue);
        return;
    }
    if (plan->fixupCount > 0) ffh_forward_fixups(plan, frame);
    if (thread) ffh_thread_set_busy(thread, 0);
    if (plan->registerResult == FFH_VALUE_BYTES) {
        ffh_forward_through_frame(plan, function, frame, returnValue);
    } else {
        /* Registers only and a scalar or no result: a plain C call with the frame's words. */
        call_registers((const ffh_registers *)(const void *)frame->call.words, plan->sseCount > 0,
                       plan->registerResult, function, returnValue);
    }
    if (thread) ffh_thread_set_busy(thread, 1);
}
#endif
#endif

#endif
