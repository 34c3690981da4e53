// The tracer test's program: calls the traced functions an exact number of times, checks
// every result (the tracer must not change one), and prints its process ID and its forked
// child's. Built with -fno-builtin, so that strlen is a call.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int tracee_add(int a, int b);
void tracee_nothing(void);
double tracee_sum(int count, ...);
long tracee_depth(long depth);
int tracee_tail(int value);
int tracee_inner(int value);

enum { ADDS = 1000, NOTHINGS = 777, SUMS = 300, DEPTH = 100, DEPTHS = 5, THREADS = 4, THREAD_ADDS = 2500,
    PLUGIN_RUNS = 250, CHILD_ADDS = 42, STRLENS = 123, TAILS = 64, INNERS = 200 };

static void check(int good, const char *what) {
    if (!good) {
        fprintf(stderr, "program: wrong result: %s\n", what);
        exit(3);
    }
}

static void *thread_main(void *argument) {
    (void)argument;
    for (int index = 0; index < THREAD_ADDS; index++) check(tracee_add(index, 2) == index + 2, "thread add");
    return NULL;
}

int main(int argc, char **argv) {
    (void)argc;
    for (int index = 0; index < ADDS; index++) check(tracee_add(index, index) == 2 * index, "add");
    for (int index = 0; index < NOTHINGS; index++) tracee_nothing();
    for (int index = 0; index < SUMS; index++) check(tracee_sum(3, 0.5, 1.5, (double)index) == 2.0 + index, "sum");
    for (int index = 0; index < DEPTHS; index++) check(tracee_depth(DEPTH) == DEPTH, "depth");
    for (int index = 0; index < STRLENS; index++) check(strlen(argv[0]) > 0, "strlen");
    for (int index = 0; index < TAILS; index++) check(tracee_tail(index) == index + 1, "tail");
    for (int index = 0; index < INNERS; index++) check(tracee_inner(index) == 2 * index * index + 1, "inner");

    pthread_t threads[THREADS];
    for (int index = 0; index < THREADS; index++) pthread_create(&threads[index], NULL, thread_main, NULL);
    for (int index = 0; index < THREADS; index++) pthread_join(threads[index], NULL);

    // A library loaded now, and through it one not loaded before (liblate.so).
    void *plugin = dlopen(getenv("TRACEE_PLUGIN"), RTLD_NOW);
    check(plugin != NULL, dlerror());
    int (*plugin_run)(int) = (int (*)(int))dlsym(plugin, "plugin_run");
    check(plugin_run != NULL, "plugin_run");
    check(plugin_run(PLUGIN_RUNS) > 0, "plugin");

    // The child counts its own calls only.
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        for (int index = 0; index < CHILD_ADDS; index++) check(tracee_add(index, 3) == index + 3, "child add");
        exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child");
    printf("%d %d\n", (int)getpid(), (int)child);
    return 0;
}
