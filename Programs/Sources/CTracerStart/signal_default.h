/* Putting a signal's default action back: shared by the start library (start.c), which must
   reach the C library's own sigaction past its wrapper, and the tracer library (tracer.c). */
#ifndef FHT_SIGNAL_DEFAULT_H
#define FHT_SIGNAL_DEFAULT_H

#include <signal.h>
#include <string.h>

/* Sets the action of `signal` to the default (no flags, an empty mask) through `set`, the C
   library's sigaction or the function that reaches it; its result, -1 without one. */
static inline int fht_signal_default(int signal, int (*set)(int, const struct sigaction *, struct sigaction *)) {
    struct sigaction fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    return set ? set(signal, &fallback, NULL) : -1;
}

#endif
