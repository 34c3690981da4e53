// The tracer test's program for the moment the tracer is loaded into a process that was started
// without a traced library (the start library reports for it until then):
//
//     takeover forks PLUGIN N     a second thread forks in a loop (each child ends with exit,
//                                 which runs the finalizers) while this one loads PLUGIN
//                                 (plugin.so) and calls its plugin_run(N)
//     takeover clears PLUGIN N    empties its environment (clearenv, as a daemon may before it
//                                 loads its plugins), then loads PLUGIN and calls plugin_run(N)
//     takeover finalizer PLUGIN N loads PLUGIN and calls plugin_run(N) in a finalizer, as the
//                                 process exits
//     takeover loads LIBRARY      loads LIBRARY (whose constructor may end the process)
//     takeover altstack           a SIGUSR1 handler on an 8 KiB alternate stack ends the process
//                                 with _exit(42)
//
// Prints plugin_run's result. Exits 0 (42 for altstack), 3 when a library cannot be loaded.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int stop;

static void *forker(void *unused) {
    (void)unused;
    while (!stop) {
        pid_t child = fork();
        if (child == 0) exit(0);
        if (child > 0) waitpid(child, NULL, 0);
    }
    return NULL;
}

static int calls(const char *plugin, int count) {
    void *handle = dlopen(plugin, RTLD_NOW);
    int (*run)(int) = handle ? (int (*)(int))dlsym(handle, "plugin_run") : NULL;
    if (!run) return 3;
    printf("%d\n", run(count));
    return 0;
}

static const char *finalizer_plugin;
static int finalizer_count;

__attribute__((destructor)) static void finalizer(void) {
    if (finalizer_plugin) (void)calls(finalizer_plugin, finalizer_count);
}

static void on_user(int signal) {
    (void)signal;
    _exit(42);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "forks") == 0) {
        pthread_t thread;
        pthread_create(&thread, NULL, forker, NULL);
        usleep(1000);
        int status = calls(argv[2], atoi(argv[3]));
        usleep(2000);
        stop = 1;
        pthread_join(thread, NULL);
        return status;
    }
    if (argc == 4 && strcmp(argv[1], "clears") == 0) {
        clearenv();
        return calls(argv[2], atoi(argv[3]));
    }
    if (argc == 4 && strcmp(argv[1], "finalizer") == 0) {
        finalizer_plugin = argv[2];
        finalizer_count = atoi(argv[3]);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "loads") == 0) return dlopen(argv[2], RTLD_NOW) ? 0 : 3;
    if (argc == 2 && strcmp(argv[1], "altstack") == 0) {
        static char alternate[8192];
        stack_t stack = {.ss_sp = alternate, .ss_size = sizeof alternate, .ss_flags = 0};
        sigaltstack(&stack, NULL);
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = on_user;
        action.sa_flags = SA_ONSTACK;
        sigemptyset(&action.sa_mask);
        sigaction(SIGUSR1, &action, NULL);
        raise(SIGUSR1);
        return 1;
    }
    fprintf(stderr, "usage: takeover forks|clears|finalizer PLUGIN N | loads LIBRARY | altstack\n");
    return 64;
}
