// Exceptions through traced calls (libthrows.so, throws.c): each round's call of throws_outer
// tail-calls throws_inner, whose callback throws, and main catches it; then a call of
// throws_plain that returns, and one of throws_wrapper, whose callback throws too. Then
// throws_split, whose split-off part runs for negative values. Last, qsort with a comparator that throws (glibc's qsort is a
// jump to qsort_r: a tail call inside the C library). Prints what it caught and summed. (And a
// function with a long name, called once.)
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

extern "C" {
typedef int (*throws_callback)(int);
int throws_outer(throws_callback callback, int value);
int throws_wrapper(throws_callback callback, int value);
int throws_split(int value);
int throws_plain(int value);
int throws_a_function_whose_name_runs_longer_than_a_table_column_should_grow_for(int value);
}

static int thrower(int value) {
    if (value > 0) throw std::runtime_error("thrown");
    return value;
}

static int comparer(const void *, const void *) { throw 7; }

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 1000;
    int caught = 0;
    long sum = 0;
    for (int round = 0; round < rounds; round++) {
        try {
            sum += throws_outer(thrower, round);
        } catch (const std::runtime_error &) {
            caught++;
        }
        sum += throws_plain(round);
        try {
            sum += throws_wrapper(thrower, round + 1);
        } catch (const std::runtime_error &) {
            caught++;
        }
    }
    for (int value = -3; value < 3; value++) sum += throws_split(value);
    sum += throws_a_function_whose_name_runs_longer_than_a_table_column_should_grow_for(1);
    int values[] = {3, 1, 2};
    int sorts = 0;
    try {
        qsort(values, 3, sizeof values[0], comparer);
    } catch (int code) {
        sorts = code;
    }
    printf("caught %d of %d, sum %ld, qsort threw %d\n", caught, 2 * rounds, sum, sorts);
    return 0;
}
