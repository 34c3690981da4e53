// A program whose children run on its own memory before they exec: with "vfork" the child of
// vfork calls tracee_add 5 times and then execs /bin/true; with "spawn" posix_spawn runs
// /bin/true with a dup2 in its file actions (the C library's child calls dup2 and execve on the
// caller's memory). Then the parent calls tracee_add 100 times and tracee_nothing once.
// The tracer counts the parent's calls only, none inside the vfork or the exec.
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int tracee_add(int a, int b);
void tracee_nothing(void);

extern char **environ;

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    pid_t child;
    if (strcmp(argv[1], "vfork") == 0) {
        child = vfork();
        if (child == 0) {
            int sum = 0;
            for (int call = 0; call < 5; call++) sum = tracee_add(sum, 1);
            execl("/bin/true", "true", (char *)NULL);
            _exit(sum);
        }
    } else {
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, 2, 1);
        char *arguments[] = {"true", NULL};
        if (posix_spawn(&child, "/bin/true", &actions, NULL, arguments, environ) != 0) return 3;
        posix_spawn_file_actions_destroy(&actions);
    }
    int status = 0;
    waitpid(child, &status, 0);
    int sum = 0;
    for (int call = 0; call < 100; call++) sum = tracee_add(sum, 1);
    tracee_nothing();
    printf("%d %d\n", sum, WEXITSTATUS(status));
    return 0;
}
