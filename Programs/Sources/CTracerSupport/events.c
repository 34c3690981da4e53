#define _GNU_SOURCE
#include "CTracerEvents.h"
#include "CTracerLog.h"

#include "../../../Sources/CFFIHookSupport/include/ffh_thread.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

// MARK: - Buffers

static uint64_t fht_event_capacity;
static fht_event_buffer *fht_buffers;
static uint64_t fht_unbuffered;

/* The most threads that get a buffer: a program that starts thread after thread keeps a
   bounded amount of memory (buffers outlive their threads, for the report); the calls of later
   threads are counted as dropped. */
enum { FHT_MOST_BUFFERS = 4096 };
static uint32_t fht_buffer_count;

__thread fht_event_buffer *fht_my_events __attribute__((tls_model("initial-exec")));

void fht_set_event_capacity(uint64_t capacity) {
    __atomic_store_n(&fht_event_capacity, capacity, __ATOMIC_RELEASE);
    if (capacity > 0) ffh_thread_set_exit_hook(fht_thread_ends);
    /* Buffers an earlier join of this process made with another limit are retired: their
       threads make buffers of this one at their next recorded call. The owner never writes
       `capacity`, and a buffer whose capacity is 0 takes no event; its pages are given back
       (the header's first page stays, for the owner's words). */
    for (fht_event_buffer *buffer = fht_event_buffers(); buffer; buffer = buffer->next) {
        uint64_t held = __atomic_load_n(&buffer->capacity, __ATOMIC_RELAXED);
        if (held == 0 || held == capacity) continue;
        __atomic_store_n(&buffer->capacity, 0, __ATOMIC_RELEASE);
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        uintptr_t from = ((uintptr_t)buffer + FHT_EVENTS_OFFSET + page - 1) & ~(uintptr_t)(page - 1);
        uintptr_t end = ((uintptr_t)buffer + FHT_EVENTS_OFFSET + held * sizeof(fht_event)) & ~(uintptr_t)(page - 1);
        if (end > from) madvise((void *)from, end - from, MADV_DONTNEED);
    }
}

void fht_events_thread_ends(void) {
    fht_event_buffer *buffer = fht_my_events;
    if (buffer) __atomic_store_n(&buffer->ended, fht_ticks(), __ATOMIC_RELEASE);
}

fht_event_buffer *fht_events_renew(void) {
    fht_my_events = NULL;
    return fht_events_slow();
}

/* A system call by instruction: the tracer's own calls stay off the import tables a user may
   trace (libc's syscall or gettid could be among the traced functions). */
static long fht_syscall(long number, long first, long second) {
    long result;
    __asm__ volatile("syscall" : "=a"(result) : "a"(number), "D"(first), "S"(second) : "rcx", "r11", "memory");
    return result;
}

/* A thread's first event: its buffer, zero-filled (pages are touched only as events are
   written), linked in without a lock. A signal handler that records on this thread while the
   buffer is being made may make its own; the one it made is then used and this one given back. */
/* 1 while the thread makes its buffer: a signal handler that interrupts that and records a
   call of its own (the tracer's blocks allow re-entry) does not make a second buffer for the
   same thread; its events go uncounted among those without a buffer. */
static __thread int fht_events_making __attribute__((tls_model("initial-exec")));

/* Makes the thread's buffer; a failure counts the call's two events among those without a
   buffer when `counts`. */
static fht_event_buffer *fht_events_make(int counts);

fht_event_buffer *fht_events_slow(void) {
    if (fht_first_call_is_own()) return NULL;
    if (fht_events_making) {
        __atomic_fetch_add(&fht_unbuffered, 2, __ATOMIC_RELAXED);
        return NULL;
    }
    fht_events_making = 1;
    fht_event_buffer *buffer = fht_events_make(1);
    fht_events_making = 0;
    return buffer;
}

void fht_events_prepare(void) {
    if ((fht_my_events && fht_my_events->capacity) || fht_events_making || fht_first_call_is_own()) return;
    fht_my_events = NULL;
    fht_events_making = 1;
    (void)fht_events_make(0);
    fht_events_making = 0;
}

static fht_event_buffer *fht_events_make(int counts) {
    uint64_t capacity = __atomic_load_n(&fht_event_capacity, __ATOMIC_ACQUIRE);
    if (capacity == 0) return NULL;
    if (__atomic_load_n(&fht_buffer_count, __ATOMIC_RELAXED) >= FHT_MOST_BUFFERS) {
        if (counts) __atomic_fetch_add(&fht_unbuffered, 2, __ATOMIC_RELAXED);
        return NULL;
    }
    size_t size = FHT_EVENTS_OFFSET + capacity * sizeof(fht_event);
    void *memory = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) {
        if (counts) __atomic_fetch_add(&fht_unbuffered, 2, __ATOMIC_RELAXED);
        return NULL;
    }
    if (fht_my_events) {
        munmap(memory, size);
        return fht_my_events;
    }
    __atomic_fetch_add(&fht_buffer_count, 1, __ATOMIC_RELAXED);
    /* Past its first 2 MB (131,000 events), a busy thread's buffer takes huge pages where the
       kernel offers them: a page fault per 2 MB of events, not per 4 KB (about a third of the
       cost of recording a call otherwise). A quiet thread's small pages cost less memory. */
    size_t huge = (size_t)2 << 20;
    uintptr_t from = ((uintptr_t)memory + 2 * huge - 1) & ~(uintptr_t)(huge - 1);
    if (from < (uintptr_t)memory + size) madvise((void *)from, (uintptr_t)memory + size - from, MADV_HUGEPAGE);
    fht_event_buffer *buffer = memory;
    buffer->capacity = capacity;
    buffer->thread = (int32_t)fht_syscall(SYS_gettid, 0, 0);
    fht_syscall(SYS_prctl, PR_GET_NAME, (long)buffer->name);
    buffer->name[sizeof buffer->name - 1] = 0;
    buffer->next = __atomic_load_n(&fht_buffers, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&fht_buffers, &buffer->next, buffer, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
    fht_my_events = buffer;
    return buffer;
}

uint32_t fht_counter_index(const fht_counter *counter) { return (uint32_t)(counter - fht_arena); }

// MARK: - Reading

fht_event_buffer *fht_event_buffers(void) { return __atomic_load_n(&fht_buffers, __ATOMIC_ACQUIRE); }

uint64_t fht_unbuffered_events(void) { return __atomic_load_n(&fht_unbuffered, __ATOMIC_RELAXED); }

/* No lock: it runs in a forked child. The forking thread's buffer stays its buffer (its
   thread ID is the child's now); the others belonged to threads the child does not have. */
void fht_reset_events(void) {
    int32_t thread = (int32_t)fht_syscall(SYS_gettid, 0, 0);
    for (fht_event_buffer *buffer = fht_event_buffers(); buffer; buffer = buffer->next) {
        __atomic_store_n(&buffer->reserved, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&buffer->written, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&buffer->dropped, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&buffer->ended, 0, __ATOMIC_RELAXED);
        if (buffer == fht_my_events) buffer->thread = thread;
    }
    __atomic_store_n(&fht_unbuffered, 0, __ATOMIC_RELAXED);
}

int fht_thread_name(int32_t thread, char *buffer, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)thread);
    int descriptor = open(path, O_RDONLY | O_CLOEXEC);
    if (descriptor < 0 || size == 0) return 0;
    ssize_t length = read(descriptor, buffer, size - 1);
    close(descriptor);
    if (length <= 0) return 0;
    while (length > 0 && buffer[length - 1] == '\n') length--;
    buffer[length] = 0;
    return 1;
}
