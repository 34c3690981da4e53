// A program that makes traced calls and then dies of SIGSEGV: at once, or (with "wait") once
// SIGUSR1 arrives, so that a tracer can join and leave it first. Traced or not, its crash is
// its own: it dies of the signal, with nothing printed for it but the tracer's report. With
// "count" it writes a line after each call until a signal ends it, with SIGTERM's action left
// at the default; with "child", a forked child makes 50 calls and raises SIGTERM, and the
// parent prints how the child ended; with "double-free", it frees a block twice (the C library
// aborts, its allocator's lock held).
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        pid_t child = fork();
        if (child == 0) {
            for (int call = 0; call < 50; call++) sum = tracee_add(sum, 1);
            raise(SIGTERM);
            _exit(0);
        }
        int status = 0;
        waitpid(child, &status, 0);
        printf("%d %d\n", (int)child, WIFSIGNALED(status) ? WTERMSIG(status) : -1);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "double-free") == 0) {
        /* Larger than the thread's cache holds: the second free reaches the arena, locked. */
        void *block = malloc(2000);
        void *volatile guard = malloc(100);
        (void)guard;
        free(block);
        free(block);
        return 0;
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
