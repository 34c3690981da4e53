#include "CTestInlineFixtures.h"

// Direct calls (call rel32 within the test executable, no pointer, no import entry) of the
// inline fixtures: what only an inline hook can intercept.

int64_t ct_inline_direct(int32_t which, int64_t a, int64_t b) {
    switch (which) {
    case 0: return ct_inline_plain(a, b);
    case 1: return ct_inline_rip(a);
    case 2: return ct_inline_jmp8(a);
    case 3: return ct_inline_jcc8(a);
    case 4: return ct_inline_call(a);
    case 5: return ct_inline_loop(a);
    case 6: return ct_inline_jrcxz(a);
    case 7: return ct_inline_endbr(a);
    case 8: return ct_inline_backward(a);
    case 9: return ct_inline_tiny((int32_t)a);
    default: return -1;
    }
}

int64_t ct_inline_plain_loop(int64_t count, int64_t *hooked) {
    int64_t seen = 0;
    for (int64_t index = 0; index < count; index++) {
        int64_t result = ct_inline_plain(index, 1);
        if (result == index + 2 + 1000) {
            seen++;
        } else if (result != index + 2) {
            return -1 - index;
        }
    }
    *hooked = seen;
    return count;
}

int ct_cpu_has_avx2(void) { return __builtin_cpu_supports("avx2"); }

int ct_cpu_has_avx512vl(void) { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"); }

extern int64_t ct_inline_cell;

int64_t ct_inline_cell_value(void) { return ct_inline_cell; }
