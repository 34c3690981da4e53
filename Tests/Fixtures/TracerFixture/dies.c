// libdies.so: a library that needs libtracee and whose constructor ends the process with
// SIGTERM, while the dlopen that loads it (and libtracee) has not returned.
#include <signal.h>

int tracee_add(int a, int b);

__attribute__((constructor)) static void dies(void) {
    if (tracee_add(1, 1) == 2) raise(SIGTERM);
}
