#include "CHookBench.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

uint64_t hb_now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

void hb_sleep_ns(uint64_t nanoseconds) {
    struct timespec duration = { (time_t)(nanoseconds / 1000000000u), (long)(nanoseconds % 1000000000u) };
    while (nanosleep(&duration, &duration) != 0 && errno == EINTR) {}
}

// Read anew for every call (a hook may be installed from another thread), so the compiler
// can neither inline nor hoist the callee.
#define HB_LOAD(signature, type) ((type)__atomic_load_n(hb_slot(signature), __ATOMIC_ACQUIRE))

// Results are summed into a volatile sink so that no call can be dropped.
static volatile uint64_t hb_sink;

static void hb_loop_int_int(int64_t iterations) {
    unsigned sum = 0;
    for (int64_t i = 0; i < iterations; i++) {
        sum += (unsigned)HB_LOAD(HB_INT_INT, int (*)(int, int))((int)i, 7);
    }
    hb_sink += sum;
}

static void hb_loop_void(int64_t iterations) {
    for (int64_t i = 0; i < iterations; i++) {
        HB_LOAD(HB_VOID, void (*)(void))();
    }
}

static void hb_loop_double(int64_t iterations) {
    double sum = 0;
    for (int64_t i = 0; i < iterations; i++) {
        sum += HB_LOAD(HB_DOUBLE, double (*)(double, double))((double)i, 0.25);
    }
    hb_sink += (uint64_t)sum;
}

static void hb_loop_six_ints(int64_t iterations) {
    unsigned sum = 0;
    for (int64_t i = 0; i < iterations; i++) {
        int x = (int)i;
        sum += (unsigned)HB_LOAD(HB_SIX_INTS, int (*)(int, int, int, int, int, int))(x, 1, 2, 3, 4, x);
    }
    hb_sink += sum;
}

static void hb_loop_struct16(int64_t iterations) {
    double sum = 0;
    for (int64_t i = 0; i < iterations; i++) {
        hb_point point = { (double)i, 1.5 };
        sum += HB_LOAD(HB_STRUCT16, double (*)(hb_point))(point);
    }
    hb_sink += (uint64_t)sum;
}

static void hb_loop_struct40(int64_t iterations) {
    hb_record record = { 1, 2, 3, 4, 5 };
    for (int64_t i = 0; i < iterations; i++) {
        record = HB_LOAD(HB_STRUCT40, hb_record (*)(hb_record))(record);
    }
    hb_sink += (uint64_t)(record.a + record.e);
}

void hb_slot_loop(hb_signature signature, int64_t iterations) {
    switch (signature) {
    case HB_INT_INT: hb_loop_int_int(iterations); break;
    case HB_VOID: hb_loop_void(iterations); break;
    case HB_DOUBLE: hb_loop_double(iterations); break;
    case HB_SIX_INTS: hb_loop_six_ints(iterations); break;
    case HB_STRUCT16: hb_loop_struct16(iterations); break;
    case HB_STRUCT40: hb_loop_struct40(iterations); break;
    default: break;
    }
}

uint64_t hb_time_slot_calls(hb_signature signature, int64_t iterations) {
    uint64_t start = hb_now_ns();
    hb_slot_loop(signature, iterations);
    return hb_now_ns() - start;
}

int hb_check_slot(hb_signature signature) {
    switch (signature) {
    case HB_INT_INT: return HB_LOAD(HB_INT_INT, int (*)(int, int))(40, 2) == 42;
    case HB_VOID: {
        unsigned before = hb_tick_calls();
        HB_LOAD(HB_VOID, void (*)(void))();
        return hb_tick_calls() == before + 1;
    }
    case HB_DOUBLE: return HB_LOAD(HB_DOUBLE, double (*)(double, double))(3.0, 0.5) == 2.0;
    case HB_SIX_INTS: return HB_LOAD(HB_SIX_INTS, int (*)(int, int, int, int, int, int))(1, 2, 3, 4, 5, 6) == 21;
    case HB_STRUCT16: {
        hb_point point = { 1.25, 2.5 };
        return HB_LOAD(HB_STRUCT16, double (*)(hb_point))(point) == 3.75;
    }
    case HB_STRUCT40: {
        hb_record record = { 1, 2, 3, 4, 5 };
        hb_record next = HB_LOAD(HB_STRUCT40, hb_record (*)(hb_record))(record);
        return next.a == 2 && next.b == 3 && next.c == 4 && next.d == 5 && next.e == 2;
    }
    default: return 0;
    }
}

// MARK: - Threads

typedef struct hb_thread_work {
    hb_call_loop loop;
    hb_signature signature;
    int64_t iterations;
    int threads;
    int *ready;
    const int *go;
    int *running;
    uint64_t start;
    uint64_t end;
} hb_thread_work;

static void *hb_thread_main(void *argument) {
    hb_thread_work *work = argument;
    // Spin rather than block, so that all threads start calling within a few nanoseconds.
    __atomic_fetch_add(work->ready, 1, __ATOMIC_ACQ_REL);
    while (!__atomic_load_n(work->go, __ATOMIC_ACQUIRE)) {}
    // Then wait until every thread runs: on a machine with as many cores as threads, the
    // thread that released them still holds a core until it blocks in pthread_join, and a
    // thread that only gets one then would start late.
    __atomic_fetch_add(work->running, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(work->running, __ATOMIC_ACQUIRE) < work->threads) {}
    work->start = hb_now_ns();
    work->loop(work->signature, work->iterations);
    work->end = hb_now_ns();
    return NULL;
}

uint64_t hb_time_threaded_calls(hb_call_loop loop, hb_signature signature, int threads, int64_t iterations) {
    enum { hb_max_threads = 64 };
    if (loop == NULL || threads < 1 || threads > hb_max_threads) return 0;
    pthread_t handles[hb_max_threads];
    hb_thread_work work[hb_max_threads];
    int ready = 0;
    int go = 0;
    int running = 0;
    int started = 0;
    for (; started < threads; started++) {
        work[started] = (hb_thread_work){ loop, signature, iterations, threads, &ready, &go, &running, 0, 0 };
        if (pthread_create(&handles[started], NULL, hb_thread_main, &work[started]) != 0) break;
    }
    while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) < started) sched_yield();
    // A thread that failed to start never runs: the others are released without waiting for it.
    if (started < threads) __atomic_store_n(&running, threads - started, __ATOMIC_RELAXED);
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < started; i++) pthread_join(handles[i], NULL);
    if (started < threads) return 0;
    // From the first thread's first call to the last thread's last: thread creation and
    // joining stay out, and the threads start calling together.
    uint64_t first = work[0].start;
    uint64_t last = work[0].end;
    for (int i = 1; i < threads; i++) {
        if (work[i].start < first) first = work[i].start;
        if (work[i].end > last) last = work[i].end;
    }
    return last - first;
}

// MARK: - Arithmetic

// Eight independent chains of adds and exclusive ors, no memory and no calls: enough
// independent work in each round to fill a core's issue width, as the many short
// instructions of a hooked call do. Two threads make twice the rounds of one when each has a
// core of its own, and little more than one when the host runs both on the two halves of one
// core, which a chain of calls and returns (the direct call) hardly shows.
void hb_alu_loop(hb_signature signature, int64_t iterations) {
    (void)signature;
    uint64_t a = 1, b = 2, c = 3, d = 4, e = 5, f = 6, g = 7, h = 8;
    for (int64_t i = 0; i < iterations; i++) {
        for (int round = 0; round < 8; round++) {
            a += b ^ 0x9e37;
            b ^= c + 0x7f4a;
            c += d ^ 0x3c6e;
            d ^= e + 0x1b87;
            e += f ^ 0x5a41;
            f ^= g + 0x2d3b;
            g += h ^ 0x6c05;
            h ^= a + 0x4f1d;
        }
        __asm__ volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(e), "+r"(f), "+r"(g), "+r"(h));
    }
    hb_sink += (unsigned)(a + b + c + d + e + f + g + h);
}

// MARK: - Direct calls

// hb_add_padded lives in another file and is not inlined: each iteration is a `call rel32`
// to its first byte, which only a patch of the function itself can redirect.
void hb_direct_loop(hb_signature signature, int64_t iterations) {
    (void)signature;
    unsigned sum = 0;
    for (int64_t i = 0; i < iterations; i++) {
        sum += (unsigned)hb_add_padded((int)i, 7);
    }
    hb_sink += sum;
}

uint64_t hb_time_direct_calls(int64_t iterations) {
    uint64_t start = hb_now_ns();
    hb_direct_loop(HB_INT_INT, iterations);
    return hb_now_ns() - start;
}

int hb_check_direct(void) { return hb_add_padded(40, 2) == 42; }

enum { hb_max_callers = 16 };

/// One background caller: its thread and what it counted.
typedef struct hb_caller {
    pthread_t handle;
    int64_t calls;
    int64_t wrong;
} hb_caller;

static hb_caller hb_callers[hb_max_callers];
static int hb_caller_count;
static int hb_callers_ready;
static int hb_callers_stop;

static void *hb_caller_main(void *argument) {
    hb_caller *caller = argument;
    int64_t calls = 0;
    int64_t wrong = 0;
    __atomic_fetch_add(&hb_callers_ready, 1, __ATOMIC_ACQ_REL);
    // The stop flag is read every 64 calls so that the loop is almost only calls; a result
    // is checked on every call, since a thread caught mid-patch must still get the sum.
    while (!__atomic_load_n(&hb_callers_stop, __ATOMIC_ACQUIRE)) {
        for (int i = 0; i < 64; i++) {
            int a = (int)(calls & 0xffff);
            if (hb_add_padded(a, i) != a + i) wrong++;
            calls++;
        }
    }
    caller->calls = calls;
    caller->wrong = wrong;
    return NULL;
}

int hb_direct_callers_start(int threads) {
    if (threads < 1 || threads > hb_max_callers || hb_caller_count != 0) return -1;
    __atomic_store_n(&hb_callers_ready, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&hb_callers_stop, 0, __ATOMIC_RELEASE);
    for (int i = 0; i < threads; i++) {
        hb_callers[i] = (hb_caller){ 0 };
        if (pthread_create(&hb_callers[i].handle, NULL, hb_caller_main, &hb_callers[i]) != 0) {
            hb_caller_count = i;
            int64_t ignored;
            hb_direct_callers_stop(&ignored);
            return -1;
        }
    }
    hb_caller_count = threads;
    while (__atomic_load_n(&hb_callers_ready, __ATOMIC_ACQUIRE) < threads) sched_yield();
    return 0;
}

int64_t hb_direct_callers_stop(int64_t *wrong) {
    __atomic_store_n(&hb_callers_stop, 1, __ATOMIC_RELEASE);
    int64_t calls = 0;
    *wrong = 0;
    for (int i = 0; i < hb_caller_count; i++) {
        pthread_join(hb_callers[i].handle, NULL);
        calls += hb_callers[i].calls;
        *wrong += hb_callers[i].wrong;
    }
    hb_caller_count = 0;
    return calls;
}
