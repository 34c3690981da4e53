// A program that spends nearly all its time inside the C library's qsort, which calls the
// program's comparator all the while: a million numbers, made in the program's own code, sorted
// again and again (a quarter of a second a sort here). A join stops it in the C library most
// times, and lets it run towards its return into the program.
#include <stdio.h>
#include <stdlib.h>

static int compare(const void *left, const void *right) {
    int first = *(const int *)left, second = *(const int *)right;
    return (first > second) - (first < second);
}

int main(void) {
    size_t count = (size_t)1 << 20;
    int *numbers = malloc(count * sizeof *numbers);
    if (!numbers) return 1;
    unsigned state = 1;
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        for (size_t index = 0; index < count; index++) {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            numbers[index] = (int)state;
        }
        qsort(numbers, count, sizeof *numbers, compare);
    }
}
