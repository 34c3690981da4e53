/* A library whose calls a C++ program's exceptions leave (throws.cpp): throws_outer's call of
   throws_inner is a tail call at -O2 (a jump), so with both traced, their calls share one
   return address slot; throws_plain returns normally. Built with -fexceptions: an exception
   unwinds through these frames. */

typedef int (*throws_callback)(int);

__attribute__((noinline)) int throws_inner(throws_callback callback, int value) { return callback(value) + 1; }

int throws_outer(throws_callback callback, int value) { return throws_inner(callback, value + 1); }

/* A name longer than the tracer's table makes its first column wide for. */
__attribute__((noinline)) int throws_a_function_whose_name_runs_longer_than_a_table_column_should_grow_for(int value) {
    volatile int copy = value;
    return copy + 1;
}

__attribute__((noinline)) int throws_plain(int value) {
    volatile int copy = value;
    return copy * 2;
}
