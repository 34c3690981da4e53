#include "CMallocCounter.h"

#include <errno.h>
#include <stddef.h>

// glibc's allocator under its own names, which stay reachable when malloc is interposed.
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static uint64_t hb_allocations;

static inline void hb_count(void) { __atomic_fetch_add(&hb_allocations, 1, __ATOMIC_RELAXED); }

uint64_t hb_malloc_count(void) { return __atomic_load_n(&hb_allocations, __ATOMIC_RELAXED); }

void *malloc(size_t size) {
    hb_count();
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    hb_count();
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    hb_count();
    return __libc_realloc(pointer, size);
}

void *memalign(size_t alignment, size_t size) {
    hb_count();
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    hb_count();
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    hb_count();
    void *memory = __libc_memalign(alignment, size);
    if (memory == NULL) return ENOMEM;
    *result = memory;
    return 0;
}
