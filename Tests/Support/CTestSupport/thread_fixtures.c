#define _GNU_SOURCE
#include "CTestThreadFixtures.h"

#include "CTestHookFixtures.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

struct ct_threads_job {
    int (**slot)(int, int);
    long long calls;
    long long sum;
};

static void *ct_threads_run(void *raw) {
    struct ct_threads_job *job = raw;
    job->sum = ct_fix_call_add_through(job->slot, job->calls);
    return NULL;
}

long long ct_threads_call_add(int (**slot)(int, int), int threads, long long calls) {
    if (threads > 64) threads = 64;
    struct ct_threads_job jobs[64];
    pthread_t ids[64];
    int started = 0;
    for (int index = 0; index < threads; index++) {
        jobs[index] = (struct ct_threads_job){slot, calls, 0};
        if (pthread_create(&ids[index], NULL, ct_threads_run, &jobs[index]) != 0) break;
        started++;
    }
    long long sum = 0;
    for (int index = 0; index < started; index++) {
        pthread_join(ids[index], NULL);
        sum += jobs[index].sum;
    }
    return started == threads ? sum : -1;
}

static void *ct_fsync_run(void *raw) {
    int *fd = raw;
    *fd = fsync(*fd);
    return NULL;
}

int ct_fsync_on_new_thread(int fd) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, ct_fsync_run, &fd) != 0) return -2;
    pthread_join(thread, NULL);
    return fd;
}

#if defined(__x86_64__)
/* The system call instruction of ct_blocked_read (a label in its inline assembly). */
extern const char ct_blocked_read_syscall[];

uintptr_t ct_blocked_read_syscall_address(void) { return (uintptr_t)ct_blocked_read_syscall; }
#else
uintptr_t ct_blocked_read_syscall_address(void) { return 0; }
#endif

__attribute__((noinline)) long ct_blocked_read(int fd, volatile int *thread) {
    sigset_t blocked;
    sigfillset(&blocked);
    sigdelset(&blocked, SIGSEGV);
    sigdelset(&blocked, SIGBUS);
    pthread_sigmask(SIG_SETMASK, &blocked, NULL);
    __atomic_store_n(thread, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
    unsigned char byte = 0;
    long result = SYS_read;
#if defined(__x86_64__)
    __asm__ __volatile__(".globl ct_blocked_read_syscall\n"
                         "ct_blocked_read_syscall:\n\t"
                         "syscall"
                         : "+a"(result)
                         : "D"((long)fd), "S"(&byte), "d"(1L)
                         : "rcx", "r11", "memory");
#else
    result = read(fd, &byte, 1);
#endif
    return result;
}

int ct_load_thread_id(volatile int *thread) { return __atomic_load_n(thread, __ATOMIC_ACQUIRE); }

struct ct_deaf_spinner {
    pthread_t thread;
    volatile int stop;
    volatile int id;
};

static void *ct_deaf_spin(void *raw) {
    struct ct_deaf_spinner *spinner = raw;
    sigset_t every;
    sigfillset(&every);
    pthread_sigmask(SIG_SETMASK, &every, NULL);
    pthread_setname_np(pthread_self(), "ct-deaf-spin");
    __atomic_store_n(&spinner->id, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
    while (!__atomic_load_n(&spinner->stop, __ATOMIC_ACQUIRE)) {
    }
    return NULL;
}

void *ct_deaf_spinner_start(void) {
    static struct ct_deaf_spinner spinner;
    spinner.stop = 0;
    spinner.id = 0;
    if (pthread_create(&spinner.thread, NULL, ct_deaf_spin, &spinner) != 0) return NULL;
    while (__atomic_load_n(&spinner.id, __ATOMIC_ACQUIRE) == 0) sched_yield();
    return &spinner;
}

int ct_deaf_spinner_thread(void *raw) {
    struct ct_deaf_spinner *spinner = raw;
    return __atomic_load_n(&spinner->id, __ATOMIC_ACQUIRE);
}

void ct_deaf_spinner_stop(void *raw) {
    struct ct_deaf_spinner *spinner = raw;
    __atomic_store_n(&spinner->stop, 1, __ATOMIC_RELEASE);
    pthread_join(spinner->thread, NULL);
}

int ct_threads_cannot_start(void) {
    pthread_attr_t attributes;
    if (pthread_attr_init(&attributes) != 0) return -1;
    int status = pthread_attr_setstacksize(&attributes, (size_t)64 << 30);
    if (status == 0) status = pthread_setattr_default_np(&attributes);
    pthread_attr_destroy(&attributes);
    if (status != 0) return -1;
    /* The address space mapped now (VmSize, in KiB), from the kernel's account. */
    FILE *file = fopen("/proc/self/status", "r");
    if (!file) return -1;
    char line[256];
    unsigned long long kilobytes = 0;
    while (fgets(line, sizeof line, file)) {
        if (sscanf(line, "VmSize: %llu kB", &kilobytes) == 1) break;
    }
    fclose(file);
    if (kilobytes == 0) return -1;
    struct rlimit limit = {(rlim_t)(kilobytes * 1024 + (1ULL << 30)), RLIM_INFINITY};
    return setrlimit(RLIMIT_AS, &limit);
}
