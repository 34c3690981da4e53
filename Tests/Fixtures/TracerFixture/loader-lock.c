// A program whose main thread stands where a thread letting go of the dynamic loader's lock
// stands for a few instructions: the lock's word taken, no owner recorded (pthread_mutex_unlock
// clears the owner before it frees the word). A dlopen made on that thread would wait for the
// word forever. It finds the lock as the tracer does (the recursive mutex of `_rtld_global`
// that dl_iterate_phdr's lock follows), prints its process ID and "held", takes the word, and
// waits in pause; at SIGUSR1 it frees the word and prints "released", then waits in pause
// until a signal ends it. Prints "no lock" and exits 2 when it cannot find the lock.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static unsigned char *global;
static size_t global_size;
static pthread_mutex_t *load_lock;
static volatile sig_atomic_t release_asked;

static int find(struct dl_phdr_info *information, size_t size, void *context) {
    (void)information;
    (void)size;
    (void)context;
    pid_t self = (pid_t)syscall(SYS_gettid);
    for (size_t offset = sizeof(pthread_mutex_t); offset + sizeof(pthread_mutex_t) <= global_size;
         offset += sizeof(int)) {
        pthread_mutex_t *lock = (pthread_mutex_t *)(void *)(global + offset);
        if (lock->__data.__owner == self && lock->__data.__kind == PTHREAD_MUTEX_RECURSIVE_NP) {
            load_lock = lock - 1;
            break;
        }
    }
    return 1;
}

static void on_usr1(int signal) {
    (void)signal;
    release_asked = 1;
}

int main(void) {
    global = dlsym(RTLD_DEFAULT, "_rtld_global");
    Dl_info information;
    const ElfW(Sym) *symbol = NULL;
    if (global && dladdr1(global, &information, (void **)&symbol, RTLD_DL_SYMENT) && symbol) {
        global_size = symbol->st_size;
        dl_iterate_phdr(find, NULL);
    }
    if (!load_lock || load_lock->__data.__kind != PTHREAD_MUTEX_RECURSIVE_NP || load_lock->__data.__lock != 0) {
        printf("no lock\n");
        return 2;
    }
    signal(SIGUSR1, on_usr1);
    printf("%d\nheld\n", (int)getpid());
    fflush(stdout);
    __atomic_store_n(&load_lock->__data.__lock, 1, __ATOMIC_SEQ_CST);
    while (!release_asked) pause();
    __atomic_store_n(&load_lock->__data.__lock, 0, __ATOMIC_SEQ_CST);
    printf("released\n");
    fflush(stdout);
    for (;;) pause();
}
