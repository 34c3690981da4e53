// A program that makes a known number of traced calls and, at exit, does to its descriptors
// what some programs do there:
//   close   closes standard output and standard error (as coreutils' close_stdout does);
//   reuse   closes every descriptor above 2 and opens a file of its own under each number
//           from 100 to 127, leaving standard error as it was.
// The tracer's report must still reach the standard error the program started with, and
// never the program's own file.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tracee_add(int a, int b);

static const char *mode;
static const char *file;

static void at_exit(void) {
    if (strcmp(mode, "close") == 0) {
        fclose(stdout);
        close(2);
    } else {
        for (int descriptor = 3; descriptor < 1024; descriptor++) close(descriptor);
        int own = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (own < 0) _exit(3);
        for (int descriptor = 100; descriptor < 128; descriptor++) dup2(own, descriptor);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    mode = argv[1];
    file = argc > 2 ? argv[2] : "/dev/null";
    int sum = 0;
    for (int call = 0; call < 321; call++) sum = tracee_add(sum, 1);
    printf("%d\n", sum);
    atexit(at_exit);
    return 0;
}
