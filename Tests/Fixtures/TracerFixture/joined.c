// The --pid test's process: calls tracee_add in a loop and counts its calls in a shared file
// the test reads, so that the calls of a traced window are known exactly.
//
//     joined FILE [traced]
//
// FILE (created, 4 KB) holds a `struct shared`. The test pauses the loop by writing 1 to
// `request` (the loop stops between two calls, publishes `calls` and sets `paused`), lets it
// go on with 0, and makes the process exit with 2. A SIGALRM timer ticks every millisecond
// meanwhile, so that signals arrive while the tracer stops a thread (they must reach the
// handler, not kill the process); the SIGRTMIN signals the test sends are counted. With `traced`, a child process traces this one (PTRACE_SEIZE)
// and sleeps, for the test of a process traced already (and there is no timer).
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/time.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

int tracee_add(int a, int b);

/// What the process and the test share.
struct shared {
    /// Calls of tracee_add made (each counted after it returned).
    volatile uint64_t calls;
    /// The timer's ticks handled.
    volatile uint64_t ticks;
    /// The test's request: 0 run, 1 pause, 2 exit.
    volatile uint32_t request;
    /// 1 while the loop is paused.
    volatile uint32_t paused;
    /// The process ID, 0 until the loop runs.
    volatile uint32_t pid;
    uint32_t padding;
    /// The real-time signals (SIGRTMIN) handled: each one sent must arrive, the kernel queues them.
    volatile uint64_t realtime;
};

static struct shared *shared;

static void tick(int signal) {
    (void)signal;
    shared->ticks++;
}

static void count_realtime(int signal) {
    (void)signal;
    shared->realtime++;
}

static void nap(long nanoseconds) {
    struct timespec time = {0, nanoseconds};
    nanosleep(&time, NULL);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: joined FILE [traced]\n");
        return 64;
    }
    // Any process of this user may trace this one, even where Yama's ptrace_scope is 1.
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    int descriptor = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (descriptor < 0 || ftruncate(descriptor, 4096) != 0) {
        perror("joined: shared file");
        return 1;
    }
    shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0);
    if (shared == MAP_FAILED) {
        perror("joined: mmap");
        return 1;
    }
    if (argc > 2 && strcmp(argv[2], "traced") == 0) {
        pid_t parent = getpid();
        if (fork() == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0); /* ends with the process it traces */
            if (ptrace(PTRACE_SEIZE, parent, NULL, NULL) != 0) {
                perror("joined: PTRACE_SEIZE");
                _exit(1);
            }
            for (;;) pause();
        }
    }
    // A process traced by a tracer that never resumes it would stop at the first signal.
    int traced = argc > 2 && strcmp(argv[2], "traced") == 0;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = tick;
    action.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &action, NULL);
    action.sa_handler = count_realtime;
    sigaction(SIGRTMIN, &action, NULL);
    struct itimerval timer = {{0, 1000}, {0, 1000}};
    if (!traced) setitimer(ITIMER_REAL, &timer, NULL);

    shared->pid = (uint32_t)getpid();
    for (uint64_t index = 0;; index++) {
        if (shared->request == 2) break;
        if (shared->request == 1) {
            shared->paused = 1;
            while (shared->request == 1) nap(1000000);
            shared->paused = 0;
            continue;
        }
        if (tracee_add((int)index, 1) != (int)index + 1) {
            fprintf(stderr, "joined: wrong result\n");
            return 3;
        }
        shared->calls++;
        if (index % 16 == 0) nap(50000);
    }
    return 0;
}
