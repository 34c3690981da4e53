// Starts a program and leaves it stopped before its first instruction, in the dynamic loader,
// before the loader has mapped the C library: a process a join may meet as it starts.
//
//     stopped-at-exec PROGRAM [ARGUMENT...]
//
// Prints the process ID, then waits for a signal to end it: the program stays stopped
// (SIGSTOP) until SIGCONT. (Were this process to exit first, the program's process group,
// orphaned with a stopped member, would get SIGHUP, which ends it.)
#include <signal.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: stopped-at-exec PROGRAM [ARGUMENT...]\n");
        return 64;
    }
    pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
        /* Traced by the parent: the exec stops the program at its first instruction. */
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) _exit(126);
        execv(argv[1], argv + 1);
        _exit(127);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFSTOPPED(status)) return 1;
    /* Let go with SIGSTOP: it stays stopped where it is, untraced. */
    if (ptrace(PTRACE_DETACH, child, NULL, (void *)(long)SIGSTOP) != 0) return 1;
    printf("%d\n", (int)child);
    fflush(stdout);
    for (;;) pause();
}
