// The event outputs' signal test: the main thread calls tracee_nothing in a loop while SIGALRM,
// every 50 µs, interrupts it (in the traced function, in the tracer's blocks recording its
// begin or end, or between calls) with a handler that calls tracee_add. Prints the loop's
// calls and the handler's.
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

int tracee_add(int a, int b);
void tracee_nothing(void);

enum { CALLS = 200000 };

static volatile sig_atomic_t handled;

static void on_alarm(int signal) {
    (void)signal;
    if (tracee_add(1, 2) == 3) handled = handled + 1;
}

int main(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_alarm;
    sigaction(SIGALRM, &action, NULL);
    struct itimerval every = {{0, 50}, {0, 50}};
    setitimer(ITIMER_REAL, &every, NULL);
    for (int index = 0; index < CALLS; index++) tracee_nothing();
    struct itimerval stop = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &stop, NULL);
    printf("%d %d\n", CALLS, (int)handled);
    return 0;
}
