#include "CSoakSupport.h"

// The function the inline soak patches, alone in its file: the callers in inline_caller.c
// cannot see its body, so the compiler neither inlines it nor folds its result, and each call
// is a direct `call rel32` that only an inline hook can intercept. Its first instruction in an
// optimised build is the RIP-relative `lock add` of the counter (relocated with a new
// displacement); unoptimised, a prologue of short instructions that a stopped thread can be
// inside.

static uint64_t inline_runs;

__attribute__((noinline)) int64_t soak_inline_add(int64_t a, int64_t b) {
    __atomic_add_fetch(&inline_runs, 1, __ATOMIC_RELAXED);
    return a + b;
}

uint64_t soak_inline_runs(void) { return __atomic_load_n(&inline_runs, __ATOMIC_ACQUIRE); }
