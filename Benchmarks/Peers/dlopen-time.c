/* Times one dlopen of a library: what a tracer that follows loads adds to it is its attach to
 * the library's functions.
 *
 *     cc -O2 -o dlopen-time dlopen-time.c -ldl
 *     ./dlopen-time LIBRARY
 *
 * Prints the microseconds dlopen(LIBRARY, RTLD_NOW) took, from just before the call to just
 * after it returned (CLOCK_MONOTONIC). */
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

static double microseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e6 + (double)now.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
        return 2;
    }
    double before = microseconds();
    void *library = dlopen(argv[1], RTLD_NOW);
    double after = microseconds();
    if (library == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    printf("%.1f\n", after - before);
    return 0;
}
