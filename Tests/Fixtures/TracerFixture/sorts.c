// A program that spends nearly all its time inside the C library's qsort, which calls the
// program's comparator all the while: eight million numbers, made in the program's own code,
// sorted again and again. A join stops it in the C library most times; run towards its return
// into the program, it needs about a second to get there.
#include <stdio.h>
#include <stdlib.h>

static int compare(const void *left, const void *right) {
    int first = *(const int *)left, second = *(const int *)right;
    return (first > second) - (first < second);
}

int main(void) {
    size_t count = (size_t)1 << 23;
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
