// A program whose own import of late_square is weak: liblate.so is not loaded at the start;
// the program loads it with dlopen (RTLD_GLOBAL), and its own PLT entry then leads there.
// Prints how many calls it made through that entry.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

extern int late_square(int value) __attribute__((weak));

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    /* Not loaded yet (the test is about a library loaded later). Its address is not taken:
       the call then goes through the PLT, bound at the first call. */
    if (dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD)) return 3;
    if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    int calls = 7, total = 0;
    for (int index = 0; index < calls; index++) total += late_square(index);
    if (total != 91) return 4;
    printf("%d\n", calls);
    return 0;
}
