#define _GNU_SOURCE
#include "CTestFaultFixtures.h"
#include "ffh_thread.h"

#include <alloca.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FF_PAGE 4096

void *ff_map_page(int protection) {
    void *page = mmap(NULL, FF_PAGE, protection, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return page == MAP_FAILED ? NULL : page;
}

int ff_protect_page(void *page, int protection) { return mprotect(page, FF_PAGE, protection); }

int ff_unmap_page(void *page) { return munmap(page, FF_PAGE); }

void ff_write_through_null(void) {
    int *volatile pointer = NULL;
    *pointer = 1;
}

// MARK: - A handler of the program's own

static sigjmp_buf ff_touch_return;
static volatile sig_atomic_t ff_touching;
static void *volatile ff_fault_address;
static volatile int ff_handler_calls;

static void ff_user_handler(int signal, siginfo_t *info, void *context) {
    (void)signal;
    (void)context;
    ff_handler_calls++;
    ff_fault_address = info->si_addr;
    if (ff_touching) siglongjmp(ff_touch_return, 1);
    /* Not from ff_touch: let the fault happen again under the default action. */
    struct sigaction fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigaction(SIGSEGV, &fallback, NULL);
}

static int ff_install_user_handler_with(int flags) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = ff_user_handler;
    action.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGSEGV, &action, NULL);
}

int ff_install_user_handler(void) { return ff_install_user_handler_with(0); }

int ff_install_resetting_user_handler(void) { return ff_install_user_handler_with(SA_RESETHAND); }

int ff_ignore_faults(void) { return signal(SIGSEGV, SIG_IGN) == SIG_ERR ? -1 : 0; }

int ff_touch(const void *address) {
    ff_fault_address = NULL;
    if (sigsetjmp(ff_touch_return, 1) != 0) {
        ff_touching = 0;
        return ff_fault_address == address ? 1 : -1;
    }
    ff_touching = 1;
    (void)*(const volatile uintptr_t *)address;
    ff_touching = 0;
    return 0;
}

int ff_user_handler_calls(void) { return ff_handler_calls; }

// MARK: - A handler that passes faults on

static struct sigaction ff_replaced;
static int ff_chaining_calls;

static void ff_chaining_handler(int signal, siginfo_t *info, void *context) {
    int calls = __atomic_add_fetch(&ff_chaining_calls, 1, __ATOMIC_RELAXED);
    char message[] = "the chaining handler ran: call 0\n";
    message[sizeof message - 3] = (char)('0' + (calls < 9 ? calls : 9));
    (void)!write(2, message, sizeof message - 1);
    if (calls > 3) _exit(3); /* passed back and forth: stop the loop */
    if (ff_replaced.sa_flags & SA_SIGINFO) {
        ff_replaced.sa_sigaction(signal, info, context);
    } else if (ff_replaced.sa_handler == SIG_DFL || ff_replaced.sa_handler == SIG_IGN) {
        sigaction(signal, &ff_replaced, NULL);
    } else {
        ff_replaced.sa_handler(signal);
    }
}

int ff_install_chaining_handler(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = ff_chaining_handler;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGSEGV, &action, &ff_replaced);
}

// MARK: - The unmap race

int ff_original(int value) { return value + 1; }

void **ff_table_map(int count) {
    if (count <= 0 || count > FF_PAGE / (int)sizeof(void *)) return NULL;
    void **table = ff_map_page(PROT_READ | PROT_WRITE);
    if (table == NULL) return NULL;
    for (int index = 0; index < count; index++) table[index] = (void *)ff_original;
    return table;
}

typedef struct {
    void **table;
    int count;
    int callers;
    int read;
    long sum;
} ff_race;

typedef struct {
    ff_race *race;
    int first;
} ff_race_caller_start;

/* Reads the slots first, first + callers, …, then calls what it read: each slot is called
   once, by one caller (a second call through a closure whose slot was unmapped and whose
   hooks are gone would be a call through memory nothing may call through any more). */
static void *ff_race_caller(void *argument) {
    ff_race_caller_start *start = argument;
    ff_race *race = start->race;
    int (*functions[FF_PAGE / sizeof(void *)])(int);
    int taken = 0;
    for (int index = start->first; index < race->count; index += race->callers) {
        functions[taken++] = __atomic_load_n((int (**)(int)) & race->table[index], __ATOMIC_ACQUIRE);
    }
    __atomic_add_fetch(&race->read, 1, __ATOMIC_ACQ_REL);
    long sum = 0;
    for (int call = 0; call < taken; call++) sum += functions[call](start->first + call * race->callers);
    __atomic_add_fetch(&race->sum, sum, __ATOMIC_ACQ_REL);
    return NULL;
}

long ff_race_round(void **table, int count, int callers, int delay) {
    if (callers > 16) callers = 16;
    ff_race race = {table, count, callers, 0, 0};
    ff_race_caller_start starts[16];
    pthread_t threads[16];
    int started = 0;
    for (; started < callers; started++) {
        starts[started] = (ff_race_caller_start){&race, started};
        if (pthread_create(&threads[started], NULL, ff_race_caller, &starts[started]) != 0) break;
    }
    while (__atomic_load_n(&race.read, __ATOMIC_ACQUIRE) < started) sched_yield();
    for (volatile int spin = 0; spin < delay; spin++) {
    }
    int unmapped = ff_unmap_page(table);
    for (int index = 0; index < started; index++) pthread_join(threads[index], NULL);
    if (started < callers || unmapped != 0) return -1;
    return __atomic_load_n(&race.sum, __ATOMIC_ACQUIRE);
}

// MARK: - Signal frames left in the stack

static uintptr_t ff_frames_top;
static volatile int ff_frames_seen;

static void ff_frames_handler(int signal) {
    (void)signal;
    if (ff_frames_top) {
        ff_frames_seen = ffh_interrupted_below((uintptr_t)__builtin_frame_address(0), ff_frames_top);
    }
}

/* Raises SIGUSR2 8 KB below its caller's frame: the kernel's frame for the handler is written
   there, and stays in that memory once the handler has returned. */
__attribute__((noinline)) static void ff_frames_raise_deep(void) {
    volatile char room[8192];
    room[0] = 1;
    raise(SIGUSR2);
    room[1] = room[0];
}

/* Asks from 32 KB below the caller's frame, over memory this frame takes without writing it
   (where the frame ff_frames_raise_deep left lies). */
__attribute__((noinline)) static int ff_frames_ask(uintptr_t top) {
    char *volatile room = alloca(32768);
    return ffh_interrupted_below((uintptr_t)room, top);
}

static void ff_frames_install(struct sigaction *previous) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = ff_frames_handler;
    sigemptyset(&action.sa_mask);
    sigaction(SIGUSR2, &action, previous);
}

int ff_interrupted_below_left_frame(void) {
    struct sigaction previous;
    ff_frames_install(&previous);
    ff_frames_top = 0;
    uintptr_t top = (uintptr_t)__builtin_frame_address(0);
    ff_frames_raise_deep();
    int seen = ff_frames_ask(top);
    sigaction(SIGUSR2, &previous, NULL);
    return seen;
}

int ff_interrupted_below_running_handler(void) {
    struct sigaction previous;
    ff_frames_install(&previous);
    ff_frames_seen = -1;
    ff_frames_top = (uintptr_t)__builtin_frame_address(0);
    raise(SIGUSR2);
    ff_frames_top = 0;
    sigaction(SIGUSR2, &previous, NULL);
    return ff_frames_seen;
}
