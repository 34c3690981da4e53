#ifndef CMALLOCCOUNTER_H
#define CMALLOCCOUNTER_H

#include <stdint.h>

/// The number of allocations made so far by any thread of the process: calls to `malloc`,
/// `calloc`, `realloc`, `posix_memalign`, `aligned_alloc` and `memalign`.
///
/// The counter works because this target defines those functions: a symbol defined in the
/// executable takes precedence over libc's for every shared library the process loads
/// (the Swift runtime, libffi, GNUstep), and each definition counts, then hands the request
/// to glibc's own allocator through its `__libc_*` entry points.
uint64_t hb_malloc_count(void);

#endif
