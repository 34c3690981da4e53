// The tracer test's program for signal handlers: a timer interrupts a loop of traced calls
// every 100 µs, and its handler makes a traced call of its own. Prints the loop's calls and
// the handler's; the tracer must count every one of them, or report a handler's call that
// interrupted its own code for another call as not counted.
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

int main(void) {
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
        if (tracee_add((int)calls, 1) != (int)calls + 1) return 3;
        calls++;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("%ld %d\n", calls, (int)handler_calls);
    return 0;
}
