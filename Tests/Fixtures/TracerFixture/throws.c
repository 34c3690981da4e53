/* A library whose calls a C++ program's exceptions leave (throws.cpp): throws_outer's call of
   throws_inner is a tail call at -O2 (a jump), so with both traced, their calls share one
   return address slot; throws_wrapper's first instructions hold its call of throws_inner
   (`sub $8, %rsp; call`), which a patch in its first bytes moves; throws_plain returns
   normally; throws_split has a part gcc splits off (throws_split.cold, reached by a jump).
   Built with -fexceptions: an exception unwinds through these frames. */
#include <stdio.h>

typedef int (*throws_callback)(int);

__attribute__((noinline)) int throws_inner(throws_callback callback, int value) { return callback(value) + 1; }

int throws_outer(throws_callback callback, int value) { return throws_inner(callback, value + 1); }

int throws_wrapper(throws_callback callback, int value) { return throws_inner(callback, value) * 3; }

__attribute__((cold, noinline)) void throws_complain(const char *what, int value) { fprintf(stderr, "%s %d\n", what, value); }

int throws_split(int value) {
    if (__builtin_expect(value < 0, 0)) {
        throws_complain("negative", value);
        value = -value * 3 + 7;
        throws_complain("made", value);
    }
    return value * 2 + 1;
}

/* A name longer than the tracer's table makes its first column wide for. */
__attribute__((noinline)) int throws_a_function_whose_name_runs_longer_than_a_table_column_should_grow_for(int value) {
    volatile int copy = value;
    return copy + 1;
}

__attribute__((noinline)) int throws_plain(int value) {
    volatile int copy = value;
    return copy * 2;
}
