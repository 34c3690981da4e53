#define _GNU_SOURCE
#include "ffh_guard.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FFH_GUARD_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define FFH_GUARD_TSAN 1
#endif

#ifdef FFH_GUARD_TSAN
/* The guarded accesses are instructions ThreadSanitizer does not see: say what they order
   (an exchange that wrote publishes, like a release; a read or an exchange acquires). */
void __tsan_acquire(void *address);
void __tsan_release(void *address);
#define FFH_GUARD_RELEASE(address) __tsan_release(address)
#define FFH_GUARD_ACQUIRE(address) __tsan_acquire(address)
#else
#define FFH_GUARD_RELEASE(address) ((void)0)
#define FFH_GUARD_ACQUIRE(address) ((void)0)
#endif

#if defined(__linux__) && defined(__x86_64__)

#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include "ffh_syscall.h"

// MARK: - The guarded instructions (guard_x86_64.S)

int ffh_guard_cas(void *address, uintptr_t expected, uintptr_t desired);
int ffh_guard_load(const void *address, uintptr_t *value);
extern const char ffh_guard_cas_access[];
extern const char ffh_guard_load_access[];
extern const char ffh_guard_recover[];

// MARK: - The kernel's signal actions

/* struct sigaction as the x86-64 kernel takes it (glibc's has a 128-byte mask, and the
   kernel wants a restorer that glibc supplies itself). */
typedef struct {
    void *handler;
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
} ffh_kernel_action;

#define FFH_SA_RESTORER 0x04000000UL
#define FFH_SIGSET_SIZE 8
#define FFH_SIGNAL_BIT(signal) (1ULL << ((signal) - 1))

static long ffh_rt_sigaction(int signal, const ffh_kernel_action *action, ffh_kernel_action *previous) {
    return ffh_syscall6(SYS_rt_sigaction, signal, (long)action, (long)previous, FFH_SIGSET_SIZE, 0, 0);
}

static void ffh_rt_sigprocmask(int how, uint64_t set) {
    ffh_syscall6(SYS_rt_sigprocmask, how, (long)&set, 0, FFH_SIGSET_SIZE, 0, 0);
}

// MARK: - The handlers the guard covers

/* The actions the guard replaced, for one signal, oldest first: [0] is what was installed
   when the guard first went in, each later one a handler found installed over the guard and
   covered again. `count` is published after the action it counts is stored. */
#define FFH_GUARD_COVERED 8
typedef struct {
    ffh_kernel_action covered[FFH_GUARD_COVERED];
    int count;
} ffh_guard_chain;

static ffh_guard_chain ffh_guard_segv, ffh_guard_bus;

__attribute__((no_sanitize("address", "thread"))) static ffh_guard_chain *ffh_guard_chain_for(int signal) {
    return signal == SIGSEGV ? &ffh_guard_segv : signal == SIGBUS ? &ffh_guard_bus : NULL;
}

/* The call of a covered handler this thread is inside, if any: a handler the guard covered
   that passes the fault on to what it replaced calls the guard again with the same siginfo,
   and gets the handler below itself rather than itself. A handler that leaves by siglongjmp
   leaves this behind; it is ignored from then on, because a fault the kernel delivers (the
   guard returns into its own restorer) always starts again from the top. */
typedef struct {
    const void *info;
    int level;
} ffh_guard_passing;

static __thread ffh_guard_passing ffh_guard_passed __attribute__((tls_model("initial-exec")));

/* The default action, restored where the covered action was SIG_DFL or SIG_IGN: a fault then
   repeats as the handler returns and ends the process with its signal; a signal sent by a
   process is sent again, and arrives once the handler has returned. */
static void ffh_guard_default(int signal, const siginfo_t *info) {
    ffh_kernel_action fallback = {SIG_DFL, 0, NULL, 0};
    ffh_rt_sigaction(signal, &fallback, NULL);
    if (info->si_code <= 0) {
        long pid = ffh_syscall0(SYS_getpid);
        ffh_syscall3(SYS_tgkill, pid, ffh_syscall0(SYS_gettid), signal);
    }
}

/* The code writer's stop requests, sent as SIGSEGV to a thread that blocks its real-time
   signal: the function that takes them (see ffh_guard_set_claimer), NULL until one is set. */
static ffh_guard_claimer ffh_guard_claim;

void ffh_guard_set_claimer(ffh_guard_claimer claimer) { __atomic_store_n(&ffh_guard_claim, claimer, __ATOMIC_RELEASE); }

/* The handler runs at any instruction of any thread (the code writer's stop requests come
   asynchronously): no sanitizer hook may run in it, not even at its entry. */
#if defined(__clang__) && __has_attribute(disable_sanitizer_instrumentation)
#define FFH_GUARD_UNINSTRUMENTED __attribute__((disable_sanitizer_instrumentation))
#else
#define FFH_GUARD_UNINSTRUMENTED __attribute__((no_sanitize("address", "thread")))
#endif

/* How many faults the guarded instructions took (ffh_guard_faults_taken). */
static uint64_t ffh_guard_taken;

uint64_t ffh_guard_faults_taken(void) { return __atomic_load_n(&ffh_guard_taken, __ATOMIC_RELAXED); }

FFH_GUARD_UNINSTRUMENTED static void ffh_guard_handler(int signal, siginfo_t *info, void *context) {
    if (info->si_code == SI_QUEUE) {
        ffh_guard_claimer claim = __atomic_load_n(&ffh_guard_claim, __ATOMIC_ACQUIRE);
        if (claim != NULL && claim(info, context)) return;
    }
    ucontext_t *interrupted = context;
    uintptr_t ip = (uintptr_t)interrupted->uc_mcontext.gregs[REG_RIP];
    /* A fault the kernel raised (si_code > 0: not a signal sent by kill or tgkill) at one of
       the guarded instructions: the guarded function returns -1. */
    if (info->si_code > 0 && (ip == (uintptr_t)ffh_guard_cas_access || ip == (uintptr_t)ffh_guard_load_access)) {
        interrupted->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)ffh_guard_recover;
        __atomic_add_fetch(&ffh_guard_taken, 1, __ATOMIC_RELAXED);
        return;
    }
    ffh_guard_chain *chain = ffh_guard_chain_for(signal);
    if (chain == NULL) return;
    ffh_guard_passing outer = ffh_guard_passed;
    int delivered = __builtin_return_address(0) == (void *)ffh_guard_restorer;
    int level = !delivered && outer.info == info ? outer.level + 1 : 0;
    int index = __atomic_load_n(&chain->count, __ATOMIC_ACQUIRE) - 1 - level;
    ffh_kernel_action previous = {SIG_DFL, 0, NULL, 0};
    if (index >= 0) {
        previous.handler = __atomic_load_n(&chain->covered[index].handler, __ATOMIC_ACQUIRE);
        previous.flags = chain->covered[index].flags;
        previous.mask = chain->covered[index].mask;
    }
    if (previous.handler == SIG_IGN && info->si_code <= 0) return;
    if (previous.handler == SIG_DFL || previous.handler == SIG_IGN) {
        ffh_guard_default(signal, info);
        return;
    }
    /* What the kernel would have done for the covered handler: reset the action after one
       signal, block its mask and (unless SA_NODEFER) the signal while it runs. */
    if (previous.flags & SA_RESETHAND) {
        __atomic_store_n(&chain->covered[index].handler, SIG_DFL, __ATOMIC_RELEASE);
    }
    uint64_t blocked = previous.mask;
    if (!(previous.flags & SA_NODEFER)) blocked |= FFH_SIGNAL_BIT(signal);
    ffh_rt_sigprocmask(SIG_BLOCK, blocked);
    if (previous.flags & SA_NODEFER) ffh_rt_sigprocmask(SIG_UNBLOCK, FFH_SIGNAL_BIT(signal));
    ffh_guard_passed = (ffh_guard_passing){info, level};
    /* The kernel passes all three arguments to every handler on x86-64, plain ones included. */
    ((void (*)(int, siginfo_t *, void *))previous.handler)(signal, info, context);
    ffh_guard_passed = outer;
}

// MARK: - Installing

/* Held by the thread that installs or covers; a thread that finds it taken waits a little,
   then goes on (a signal handler that interrupted the holder on its own thread must not
   wait for it). */
static int ffh_guard_busy;

/* Signals blocked while the guard's handler runs: the code writer's stop signal (see
   ffh_guard_block_during), which must not interrupt a thread parked through SIGSEGV. */
static uint64_t ffh_guard_mask;

void ffh_guard_block_during(int signal) {
    uint64_t mask = FFH_SIGNAL_BIT(signal);
    if ((__atomic_load_n(&ffh_guard_mask, __ATOMIC_ACQUIRE) & mask) == mask) return;
    __atomic_or_fetch(&ffh_guard_mask, mask, __ATOMIC_ACQ_REL);
    /* Where the guard is installed already, install it again with the mask. */
    int signals[2] = {SIGSEGV, SIGBUS};
    for (int index = 0; index < 2; index++) {
        ffh_kernel_action current;
        if (ffh_rt_sigaction(signals[index], NULL, &current) != 0) continue;
        if (current.handler != (void *)ffh_guard_handler) continue;
        current.mask |= mask;
        ffh_rt_sigaction(signals[index], &current, NULL);
    }
}

/* Puts the guard on top of the action installed for `signal`; 0 when it is there.
   Uninstrumented, as ffh_guard_install (see there). */
FFH_GUARD_UNINSTRUMENTED static int ffh_guard_cover(int signal) {
    ffh_guard_chain *chain = ffh_guard_chain_for(signal);
    ffh_kernel_action current;
    if (ffh_rt_sigaction(signal, NULL, &current) != 0) return -1;
    if (current.handler == (void *)ffh_guard_handler) return 0;
    int count = __atomic_load_n(&chain->count, __ATOMIC_RELAXED);
    if (count == FFH_GUARD_COVERED) return -1;
    /* Counted before the guard replaces it, so that a fault that reaches the guard at once
       finds it; the action actually replaced is stored again below if it changed meanwhile. */
    chain->covered[count] = current;
    __atomic_store_n(&chain->count, count + 1, __ATOMIC_RELEASE);
    /* SA_RESTART: a stop request sent as SIGSEGV to a thread asleep in a system call (see
       stop.c) must not make the call fail with EINTR. */
    ffh_kernel_action guard = {
        (void *)ffh_guard_handler, SA_SIGINFO | SA_ONSTACK | SA_RESTART | FFH_SA_RESTORER, ffh_guard_restorer,
        __atomic_load_n(&ffh_guard_mask, __ATOMIC_ACQUIRE)};
    ffh_kernel_action replaced;
    if (ffh_rt_sigaction(signal, &guard, &replaced) != 0) {
        __atomic_store_n(&chain->count, count, __ATOMIC_RELEASE);
        return -1;
    }
    if (replaced.handler != current.handler || replaced.flags != current.flags || replaced.mask != current.mask) {
        chain->covered[count].flags = replaced.flags;
        chain->covered[count].mask = replaced.mask;
        chain->covered[count].restorer = replaced.restorer;
        __atomic_store_n(&chain->covered[count].handler, replaced.handler, __ATOMIC_RELEASE);
    }
    return 0;
}

/* Uninstrumented: the code writer's stop calls it while the other threads are parked, one of
   which may hold a lock of ThreadSanitizer's runtime that an instrumented atomic takes (a run
   of the tests under it hung there). */
FFH_GUARD_UNINSTRUMENTED int ffh_guard_install(void) {
    ffh_kernel_action current;
    /* The usual case, one system call: the guard is still the SIGSEGV handler (a program
       that installs its own handlers installs both signals' together). */
    if (ffh_rt_sigaction(SIGSEGV, NULL, &current) == 0 && current.handler == (void *)ffh_guard_handler &&
        __atomic_load_n(&ffh_guard_bus.count, __ATOMIC_ACQUIRE) > 0) {
        return 0;
    }
    for (int attempt = 0; __atomic_exchange_n(&ffh_guard_busy, 1, __ATOMIC_ACQUIRE); attempt++) {
        if (attempt == 1000) return ffh_guard_is_installed() ? 0 : -1;
        ffh_syscall0(SYS_sched_yield);
    }
    int result = ffh_guard_cover(SIGSEGV) == 0 && ffh_guard_cover(SIGBUS) == 0 ? 0 : -1;
    __atomic_store_n(&ffh_guard_busy, 0, __ATOMIC_RELEASE);
    return result;
}

FFH_GUARD_UNINSTRUMENTED int ffh_guard_is_installed(void) {
    ffh_kernel_action segv, bus;
    return ffh_rt_sigaction(SIGSEGV, NULL, &segv) == 0 && ffh_rt_sigaction(SIGBUS, NULL, &bus) == 0 &&
           segv.handler == (void *)ffh_guard_handler && bus.handler == (void *)ffh_guard_handler;
}

// MARK: - Guarded accesses

/* This thread's sessions (nested), and whether the guard was found in place in the
   outermost one: its later accesses do not ask again. */
static __thread int ffh_guard_sessions __attribute__((tls_model("initial-exec")));
static __thread int ffh_guard_checked __attribute__((tls_model("initial-exec")));

void ffh_guard_session_begin(void) { ffh_guard_sessions++; }

void ffh_guard_session_end(void) {
    if (ffh_guard_sessions > 0 && --ffh_guard_sessions == 0) ffh_guard_checked = 0;
}

/* Whether the guard is in place for an access now: asked of the kernel once per session,
   or at every access outside one. */
static int ffh_guard_ready(void) {
    if (ffh_guard_checked) return 1;
    if (ffh_guard_install() != 0) return 0;
    if (ffh_guard_sessions > 0) ffh_guard_checked = 1;
    return 1;
}

int ffh_guarded_exchange(void *address, uintptr_t expected, uintptr_t desired) {
    if (!ffh_guard_ready()) return FFH_GUARD_UNAVAILABLE;
    int result = ffh_guard_cas(address, expected, desired);
    /* Annotated only where the access worked: ThreadSanitizer's bookkeeping for an address
       that faulted (a non-canonical one) does not return. */
    if (result >= 0) FFH_GUARD_ACQUIRE(address);
    if (result > 0) FFH_GUARD_RELEASE(address);
    return result;
}

int ffh_guarded_load(const void *address, uintptr_t *value) {
    if (!ffh_guard_ready()) return FFH_GUARD_UNAVAILABLE;
    int result = ffh_guard_load(address, value);
    if (result == 0) FFH_GUARD_ACQUIRE((void *)address);
    return result;
}

#else

int ffh_guarded_exchange(void *address, uintptr_t expected, uintptr_t desired) {
    (void)address;
    (void)expected;
    (void)desired;
    return FFH_GUARD_UNAVAILABLE;
}

int ffh_guarded_load(const void *address, uintptr_t *value) {
    (void)address;
    (void)value;
    return FFH_GUARD_UNAVAILABLE;
}

int ffh_guard_install(void) { return -1; }

uint64_t ffh_guard_faults_taken(void) { return 0; }

void ffh_guard_block_during(int signal) { (void)signal; }

int ffh_guard_is_installed(void) { return 0; }

void ffh_guard_set_claimer(ffh_guard_claimer claimer) { (void)claimer; }

void ffh_guard_session_begin(void) {}

void ffh_guard_session_end(void) {}

#endif
