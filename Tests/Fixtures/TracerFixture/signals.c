// The tracer test's program for signal handlers: a timer interrupts a loop every 100 µs, and
// its handler makes a traced call of its own. The loop makes traced calls, or, given a
// library's path, loads and unloads it (after each dlopen and dlclose the tracer walks the
// loaded objects, its own work). Prints the loop's rounds and the handler's calls; the tracer
// must count every one of them, or report a handler's call that interrupted its own code for
// another call as not counted.
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

int tracee_add(int a, int b);
void tracee_nothing(void);

static volatile sig_atomic_t handler_calls;

static void on_alarm(int signal) {
    (void)signal;
    tracee_nothing();
    handler_calls++;
}

/* One round of the loop: a traced call, or a load and an unload of `library`; 0 on a wrong
   result. */
static int round_of(long round, const char *library) {
    if (!library) return tracee_add((int)round, 1) == (int)round + 1;
    void *handle = dlopen(library, RTLD_NOW);
    if (!handle) return 0;
    int (*square)(int) = (int (*)(int))dlsym(handle, "late_square");
    int right = square && square(7) == 49;
    dlclose(handle);
    return right;
}

int main(int argc, char **argv) {
    const char *library = argc > 1 ? argv[1] : NULL;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_alarm;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGALRM, &action, NULL);
    struct itimerval every = {{0, 100}, {0, 100}};
    setitimer(ITIMER_REAL, &every, NULL);
    long calls = 0;
    while (handler_calls < 400) {
        if (!round_of(calls, library)) return 3;
        calls++;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("%ld %d\n", calls, (int)handler_calls);
    return 0;
}
