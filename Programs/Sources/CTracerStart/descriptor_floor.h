/* Where the tracer keeps a descriptor open in a program: shared by the start library (start.c,
   its report thread's eventfd) and the tracer library (tracer.c, its duplicate of standard
   error). */
#ifndef FHT_DESCRIPTOR_FLOOR_H
#define FHT_DESCRIPTOR_FLOOR_H

#include <sys/resource.h>

/* The lowest number for such a descriptor: halfway to the process's limit of descriptors, 256
   at least, out of the way of the numbers a program opens first or sets up on purpose (3 and
   up) and of those shell scripts name (`exec 200>lock; flock 200`; bash keeps its own up to
   255). At most 2^30 (fcntl takes an int). */
static inline int fht_descriptor_floor(void) {
    struct rlimit limit;
    long floor = 256;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && (long)(limit.rlim_cur / 2) > floor) {
        floor = (long)(limit.rlim_cur / 2);
    }
    return floor > 1L << 30 ? 1 << 30 : (int)floor;
}

#endif
