#include "CSoakSupport.h"

// The inline soak's callers: direct calls (`call rel32`) of soak_inline_add, whose body this
// file cannot see (inline_target.c).

int64_t soak_inline_loop(int64_t count, int64_t base, int64_t *hooked) {
    int64_t seen = 0;
    for (int64_t index = 0; index < count; index++) {
        int64_t result = soak_inline_add(base + index, 1);
        if (result == base + index + 1 + SOAK_INLINE_MARK) {
            seen++;
        } else if (result != base + index + 1) {
            return -1 - index;
        }
    }
    *hooked = seen;
    return count;
}
