// A program that makes traced calls and then dies of SIGSEGV: at once, or (with "wait") once
// SIGUSR1 arrives, so that a tracer can join and leave it first. Traced or not, its crash is
// its own: it dies of the signal, with nothing printed for it but the tracer's report. With
// "count" it writes a line after each call until a signal ends it, with SIGTERM's action left
// at the default.
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int tracee_add(int a, int b);

static volatile sig_atomic_t crash;

static void on_usr1(int signal) {
    (void)signal;
    crash = 1;
}

int main(int argc, char **argv) {
    int sum = tracee_add(0, 1);
    if (argc > 1 && strcmp(argv[1], "count") == 0) {
        for (;;) {
            sum = tracee_add(sum, 1);
            (void)!write(1, "call\n", 5);
            usleep(1000);
        }
    }
    if (argc > 1 && strcmp(argv[1], "wait") == 0) {
        signal(SIGUSR1, on_usr1);
        while (!crash) {
            sum = tracee_add(sum, 1);
            usleep(1000);
        }
    }
    *(volatile int *)(long)(sum - sum) = sum;
    return 0;
}
