#define _GNU_SOURCE
#include "CTestThreadFixtures.h"

#include "CTestHookFixtures.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
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

long ct_blocked_read_saying(int fd, volatile int *thread, void (*says)(int)) {
    says(1);
    long result = ct_blocked_read(fd, thread);
    says(0);
    return result;
}

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
#if defined(__x86_64__)
    const unsigned arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
    const unsigned arch = AUDIT_ARCH_AARCH64;
#else
    return -1;
#endif
    /* clone3 is not there (the C library falls back to clone), and a clone that makes a thread
       finds no resources. Other clones go on: the leak checker's, which stops the process's
       threads from a task of its own (not a thread) at exit. The flags are clone's first
       argument, their low word the first of its eight bytes. */
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAGAIN),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {(unsigned short)(sizeof filter / sizeof filter[0]), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0);
}
