#ifndef CTRACEREVENTS_H
#define CTRACEREVENTS_H

#include "CTracerSupport.h"

#include <stddef.h>
#include <stdint.h>

#pragma clang assume_nonnull begin

// The tracer's events (prefix fht_): each call's begin and end, with the time-stamp counter,
// in a buffer of the calling thread's own. A buffer is mapped on the thread's first event and
// holds a fixed number of events; when it is full, further calls are not recorded and are
// counted instead. Recording takes no lock and allocates nothing after the thread's first
// event, and a signal handler that records on the same thread cannot tear an event: each
// index is taken with one instruction.

// MARK: - Events

/// What an event records.
enum {
    /// A call began.
    FHT_BEGIN = 1,
    /// A call ended (returned to its caller).
    FHT_END = 2,
    /// A call began at the stack pointer of a traced call still running, which tail-called it
    /// (``fht_tail_called``): that call stays open around it. (A call of FHT_BEGIN at an open
    /// call's stack pointer closes that call: it was left.)
    FHT_TAIL_BEGIN = 3,
};

/// One event: 16 bytes.
typedef struct {
    /// The time-stamp counter when it happened.
    uint64_t ticks;
    /// The low 32 bits of the stack pointer as the function was entered (the address of its
    /// return address): a call's begin and end carry the same value.
    uint32_t stack;
    /// The function's counter index (``fht_counter_index``) shifted left by 2, or'ed with
    /// FHT_BEGIN, FHT_TAIL_BEGIN or FHT_END; 0 while the event is not written yet.
    uint32_t word;
} fht_event;

/// One thread's events. Never unmapped: a thread that ended keeps its events for the report.
typedef struct fht_event_buffer {
    /// The buffer made before this one (of another thread), or NULL.
    struct fht_event_buffer *_Nullable next;
    /// How many events it holds; 0 once retired (a later join of the process asked for
    /// another number: the thread makes a buffer of that one at its next recorded call, and the
    /// report skips this one).
    uint64_t capacity;
    /// Slots promised: one per recorded begin and one for its end, which is recorded even
    /// when the buffer has no room for new calls any more.
    uint64_t reserved;
    /// Slots taken (may pass ``capacity`` when ends arrive that no begin promised a slot to,
    /// as in a forked child; those ends are dropped).
    uint64_t written;
    /// Events not recorded: two per call that found the buffer full (its begin and its end),
    /// one per end that found no slot.
    uint64_t dropped;
    /// The thread's kernel ID.
    int32_t thread;
    /// The thread's name at its first event (the kernel's 16 bytes, NUL-terminated).
    char name[16];
    /// When the thread ended (its clock's ticks), or 0 while it runs: its calls still open
    /// then never returned (one was pthread_exit), and end there.
    uint64_t ended;
} fht_event_buffer;

/// Marks the calling thread's buffer ended (see ``fht_event_buffer/ended``): run on each
/// thread as it ends, by the hooking library's exit hook (``fht_thread_ends``).
void fht_events_thread_ends(void);

/// The capacity of the buffers of threads that record their first event from now on; 0
/// (the default) records nothing. Set it before attaching, at each join: buffers an earlier
/// join made with another capacity are retired (see ``fht_event_buffer/capacity``).
void fht_set_event_capacity(uint64_t capacity);

/// Makes the calling thread a buffer in place of its retired one (see fht_events_slow).
fht_event_buffer *_Nullable fht_events_renew(void);

/// The calling thread's buffer (NULL before its first event).
extern __thread fht_event_buffer *_Nullable fht_my_events __attribute__((tls_model("initial-exec")));

/// The calling thread's buffer, mapped on its first event; NULL when the capacity is 0, when
/// 4,096 threads have buffers already, or when the memory cannot be had (in the last two cases
/// the call is counted in ``fht_unbuffered_events``).
fht_event_buffer *_Nullable fht_events_slow(void);

/// Makes the calling thread's buffer ahead of its first recorded call, when it has none and is
/// not making one (a signal handler's call interrupted that), counting nothing when it cannot:
/// the call's own recording counts it then.
void fht_events_prepare(void);

/// The bytes before a buffer's first event: its header, rounded up to a cache line.
#define FHT_EVENTS_OFFSET ((sizeof(fht_event_buffer) + 63) & ~(size_t)63)

/// The events of `buffer`, which follow its header.
static inline fht_event *fht_buffer_events(const fht_event_buffer *buffer) {
    return (fht_event *)(void *)((char *)(uintptr_t)buffer + FHT_EVENTS_OFFSET);
}

/// Adds `amount` to a word of the calling thread's own with one instruction and returns the
/// word's value before (a signal handler on this thread cannot split it).
static inline uint64_t fht_take(uint64_t *word, uint64_t amount) {
    __asm__ volatile("xaddq %0, %1" : "+r"(amount), "+m"(*word));
    return amount;
}

/// Writes an event; its word last, so that a reader never sees a half-written one.
static inline void fht_store_event(fht_event *event, uint64_t ticks, uintptr_t stack, uint32_t function, uint32_t kind) {
    event->ticks = ticks;
    event->stack = (uint32_t)stack;
    __atomic_store_n(&event->word, (function << 2) | kind, __ATOMIC_RELEASE);
}

/// The mark that ``fht_record_begin`` sets in the ticks it returns when the begin was
/// recorded (so its end must be): bit 63, which the time-stamp counter does not reach.
#define FHT_RECORDED (UINT64_C(1) << 63)

/// Records a call of function `function` beginning at `ticks`, with the stack pointer at its
/// entry; returns the ticks to keep for its end, with FHT_RECORDED set when it was recorded.
static inline uint64_t fht_record_begin_at(uint32_t function, uintptr_t stack, uint64_t ticks) {
    fht_event_buffer *buffer = fht_my_events;
    if (__builtin_expect(buffer == NULL, 0)) buffer = fht_events_slow();
    if (buffer == NULL) return ticks;
    if (fht_take(&buffer->reserved, 2) + 2 > buffer->capacity) {
        fht_take(&buffer->reserved, (uint64_t)-2);
        if (__builtin_expect(buffer->capacity == 0, 0)) {
            /* Retired by a later join: the thread's next buffer has its capacity. */
            buffer = fht_events_renew();
            if (buffer == NULL || fht_take(&buffer->reserved, 2) + 2 > buffer->capacity) {
                if (buffer) {
                    fht_take(&buffer->reserved, (uint64_t)-2);
                    fht_take(&buffer->dropped, 2);
                }
                return ticks;
            }
        } else {
            fht_take(&buffer->dropped, 2);
            return ticks;
        }
    }
    uint64_t index = fht_take(&buffer->written, 1);
    if (index >= buffer->capacity) {
        fht_take(&buffer->dropped, 2);
        return ticks;
    }
    fht_store_event(
        &fht_buffer_events(buffer)[index], ticks, stack, function, fht_tail_called(stack) ? FHT_TAIL_BEGIN : FHT_BEGIN);
    return ticks | FHT_RECORDED;
}

/// Records a call of function `function` beginning now (see fht_record_begin_at).
static inline uint64_t fht_record_begin(uint32_t function, uintptr_t stack) {
    return fht_record_begin_at(function, stack, fht_ticks());
}

/// Records the end at `ticks` of a call whose begin returned `begin`, and returns the call's
/// ticks.
static inline uint64_t fht_record_end_at(uint32_t function, uintptr_t stack, uint64_t begin, uint64_t ticks) {
    if (begin & FHT_RECORDED) {
        fht_event_buffer *buffer = fht_my_events;
        if (buffer != NULL) {
            uint64_t index = fht_take(&buffer->written, 1);
            if (index < buffer->capacity) {
                fht_store_event(&fht_buffer_events(buffer)[index], ticks, stack, function, FHT_END);
            } else {
                fht_take(&buffer->dropped, 1);
            }
        }
    }
    return ticks - (begin & ~FHT_RECORDED);
}

/// Records the end, now, of a call whose begin returned `begin`, and returns the call's ticks.
static inline uint64_t fht_record_end(uint32_t function, uintptr_t stack, uint64_t begin) {
    return fht_record_end_at(function, stack, begin, fht_ticks());
}

/// The index of `counter` among the counters: the function's number in events.
uint32_t fht_counter_index(const fht_counter *counter);

/// Counts a call entering and records its begin; returns what its end needs. The tracer's own
/// work is neither counted nor recorded.
static inline uint64_t fht_enter_recording(fht_counter *counter, uint32_t function, uintptr_t stack) {
    /* A thread's first recorded call maps its buffer before its time is taken: the mapping
       (tens of microseconds) is the tracer's, not the call's. */
    if (__builtin_expect(fht_my_events == NULL || fht_my_events->capacity == 0, 0) && !fht_ignored()) {
        fht_events_prepare();
    }
    uint64_t ticks = fht_ticks();
    int counted = fht_enter_at(counter, stack, ticks);
    if (!counted) return 0; /* a call not counted is not recorded */
    uint64_t begin = fht_record_begin_at(function, stack, ticks);
    if (__builtin_expect(counted == 2, 0)) {
        /* No leave comes (a function that returns twice): the call ends where it begins. */
        fht_record_end_at(function, stack, begin, ticks);
        return 0;
    }
    return begin;
}

/// Records a call's end and counts it returning, at the same time.
static inline void fht_leave_recording(fht_counter *counter, uint32_t function, uintptr_t stack, uint64_t begin) {
    uint64_t ticks = fht_record_end(function, stack, begin);
    fht_leave_at(counter, stack, (begin & ~FHT_RECORDED) + ticks);
}

// MARK: - Reading

/// The newest buffer; the others follow through `next`.
fht_event_buffer *_Nullable fht_event_buffers(void);

/// Events that could not be recorded because a thread's buffer could not be mapped.
uint64_t fht_unbuffered_events(void);

/// The number of events `buffer` holds (its thread may still be adding to them).
static inline uint64_t fht_buffer_recorded(const fht_event_buffer *buffer) {
    uint64_t written = __atomic_load_n(&buffer->written, __ATOMIC_ACQUIRE);
    return written < buffer->capacity ? written : buffer->capacity;
}

/// The number of events `buffer`'s thread could not record.
static inline uint64_t fht_buffer_dropped(const fht_event_buffer *buffer) {
    return __atomic_load_n(&buffer->dropped, __ATOMIC_RELAXED);
}

/// When `buffer`'s thread ended, in ticks (0 while it runs).
static inline uint64_t fht_buffer_ended(const fht_event_buffer *buffer) {
    return __atomic_load_n(&buffer->ended, __ATOMIC_ACQUIRE);
}

/// Reads an event's word (0: not written yet).
static inline uint32_t fht_event_word(const fht_event *event) { return __atomic_load_n(&event->word, __ATOMIC_ACQUIRE); }

/// Forgets every buffer's events (in a forked child, which starts from zero).
void fht_reset_events(void);

/// The name the kernel has for thread `thread` of this process now (its `comm`), copied
/// into `buffer`; 0 when it has none (a thread that ended).
int fht_thread_name(int32_t thread, char *buffer, size_t size);

#pragma clang assume_nonnull end

#endif
