// A program that allocates and frees blocks too large for the thread's cache until a signal
// ends it: a signal sent from outside most often finds it inside the allocator, holding its
// lock. It imports nothing else, so that a tracer told to trace write hooks nothing in it.
#include <stdlib.h>

int main(void) {
    void *volatile kept[64] = {0};
    for (unsigned step = 0;; step++) {
        unsigned index = (step * 7) % 64;
        free(kept[index]);
        kept[index] = malloc(2000 + (step % 50) * 300);
    }
}
