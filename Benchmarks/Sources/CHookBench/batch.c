#include "hb_batch.h"

#include <pthread.h>
#include <sched.h>

// The thousand functions, their table and a round of direct calls of all of them, spelled out
// by the preprocessor: hb_batch_XYZ for the digits X, Y, Z. Each is out of line and aligned
// as a compiler emits an ordinary function (here `lea eax, [rdi + rsi + 1XYZ]; ret`).

#define HB_TENS(m, x, y) m(x, y, 0) m(x, y, 1) m(x, y, 2) m(x, y, 3) m(x, y, 4) m(x, y, 5) m(x, y, 6) m(x, y, 7) m(x, y, 8) m(x, y, 9)
#define HB_HUNDREDS(m, x)                                                                                        \
    HB_TENS(m, x, 0) HB_TENS(m, x, 1) HB_TENS(m, x, 2) HB_TENS(m, x, 3) HB_TENS(m, x, 4) HB_TENS(m, x, 5)     \
    HB_TENS(m, x, 6) HB_TENS(m, x, 7) HB_TENS(m, x, 8) HB_TENS(m, x, 9)
#define HB_THOUSAND(m)                                                                                           \
    HB_HUNDREDS(m, 0) HB_HUNDREDS(m, 1) HB_HUNDREDS(m, 2) HB_HUNDREDS(m, 3) HB_HUNDREDS(m, 4) HB_HUNDREDS(m, 5) \
    HB_HUNDREDS(m, 6) HB_HUNDREDS(m, 7) HB_HUNDREDS(m, 8) HB_HUNDREDS(m, 9)
#define HB_VALUE(x, y, z) (1000 + 100 * (x) + 10 * (y) + (z))

#define HB_DEFINE(x, y, z) \
    __attribute__((noinline, aligned(16))) int hb_batch_##x##y##z(int a, int b) { return a + b + HB_VALUE(x, y, z); }
HB_THOUSAND(HB_DEFINE)

#define HB_ENTRY(x, y, z) (void *)hb_batch_##x##y##z,
static void *const hb_batch_table[HB_BATCH_COUNT] = {HB_THOUSAND(HB_ENTRY)};

void *hb_batch_function(int index) { return index >= 0 && index < HB_BATCH_COUNT ? hb_batch_table[index] : 0; }

/* Every function called directly with (round, 1); the number of wrong results. */
#define HB_CALL(x, y, z) wrong += hb_batch_##x##y##z(round, 1) != round + 1 + HB_VALUE(x, y, z);
static int64_t hb_batch_round(int round) {
    int64_t wrong = 0;
    HB_THOUSAND(HB_CALL)
    return wrong;
}

int64_t hb_batch_check(void) { return hb_batch_round(7); }

// MARK: - Callers

typedef struct {
    pthread_t handle;
    int64_t calls;
    int64_t wrong;
} hb_batch_caller;

static hb_batch_caller hb_batch_callers[16];
static int hb_batch_caller_count;
static int hb_batch_stop;
static int hb_batch_ready;

static void *hb_batch_caller_main(void *argument) {
    hb_batch_caller *caller = argument;
    __atomic_add_fetch(&hb_batch_ready, 1, __ATOMIC_ACQ_REL);
    int64_t calls = 0, wrong = 0;
    for (int round = 0; !__atomic_load_n(&hb_batch_stop, __ATOMIC_ACQUIRE); round++) {
        wrong += hb_batch_round(round & 0xffff);
        calls += HB_BATCH_COUNT;
    }
    caller->calls = calls;
    caller->wrong = wrong;
    return 0;
}

int hb_batch_callers_start(int threads) {
    if (threads < 1 || threads > 16 || hb_batch_caller_count != 0) return -1;
    __atomic_store_n(&hb_batch_ready, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&hb_batch_stop, 0, __ATOMIC_RELEASE);
    for (int i = 0; i < threads; i++) {
        hb_batch_callers[i] = (hb_batch_caller){0};
        if (pthread_create(&hb_batch_callers[i].handle, 0, hb_batch_caller_main, &hb_batch_callers[i]) != 0) {
            hb_batch_caller_count = i;
            int64_t ignored;
            hb_batch_callers_stop(&ignored);
            return -1;
        }
    }
    hb_batch_caller_count = threads;
    while (__atomic_load_n(&hb_batch_ready, __ATOMIC_ACQUIRE) < threads) sched_yield();
    return 0;
}

int64_t hb_batch_callers_stop(int64_t *wrong) {
    __atomic_store_n(&hb_batch_stop, 1, __ATOMIC_RELEASE);
    int64_t calls = 0;
    *wrong = 0;
    for (int i = 0; i < hb_batch_caller_count; i++) {
        pthread_join(hb_batch_callers[i].handle, 0);
        calls += hb_batch_callers[i].calls;
        *wrong += hb_batch_callers[i].wrong;
    }
    hb_batch_caller_count = 0;
    return calls;
}
