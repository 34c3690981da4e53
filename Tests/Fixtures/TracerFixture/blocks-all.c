// A program whose threads block every signal, as a server that leaves its signals to one
// sigwait does: three threads allocate and free in a loop (keeping both processors busy, so
// that a thread the tracer starts in the process is slow to begin), and the main thread waits
// for SIGTERM or SIGINT in sigwait. A tracer that joins it must run its calls with the faults'
// signals unblocked (a fault under the fault guard on a thread that blocks SIGSEGV makes the
// kernel put SIGSEGV's action back to the default) and give every thread its mask back.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static void *volatile kept;
/* The threads running their body: each has its mask by then (a new thread starts with every
   signal blocked and takes the mask it was created with as it begins), so "ready" waits for all
   three, and the masks read after it are the ones they keep. */
static volatile int started;

static void *churn(void *argument) {
    (void)argument;
    __atomic_add_fetch(&started, 1, __ATOMIC_RELEASE);
    for (;;) {
        kept = malloc(64);
        free(kept);
    }
}

int main(void) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, NULL);
    for (int index = 0; index < 3; index++) {
        pthread_t thread;
        pthread_create(&thread, NULL, churn, NULL);
    }
    while (__atomic_load_n(&started, __ATOMIC_ACQUIRE) < 3) sched_yield();
    printf("ready\n");
    fflush(stdout);
    sigset_t ending;
    sigemptyset(&ending);
    sigaddset(&ending, SIGTERM);
    sigaddset(&ending, SIGINT);
    int signal = 0;
    sigwait(&ending, &signal);
    printf("ended by %d\n", signal);
    return 0;
}
