#define _GNU_SOURCE
#include "CTestAttachFixtures.h"
#include "ffh_thread.h"

#include <execinfo.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <ucontext.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unwind.h>

static long at_add(long a, long b) { return a + b; }

static double at_mix(long a, double b, long c, double d, long e, double f, long g, double h, long i, double j, float k,
                     long l, double m) {
    return (double)a + b * 2 + (double)c * 3 + d * 4 + (double)e * 5 + f * 6 + (double)g * 7 + h * 8 + (double)i * 9 +
           j * 10 + (double)k * 11 + (double)l * 12 + m * 13;
}

static long at_many(long a, long b, long c, long d, long e, long f, long g, long h, double x1, double x2, double x3,
                    double x4, double x5, double x6, double x7, double x8, double x9, double x10, at_triple t) {
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h +
           (long)(x1 + 2 * x2 + 3 * x3 + 4 * x4 + 5 * x5 + 6 * x6 + 7 * x7 + 8 * x8 + 9 * x9 + 10 * x10) +
           100 * t.a + 1000 * t.b + 10000 * t.c;
}

static double at_vsum(int count, ...) {
    va_list list;
    va_start(list, count);
    double sum = 0;
    for (int index = 0; index < count; index++) {
        if (index % 2) {
            sum += va_arg(list, double) * (index + 1);
        } else {
            sum += (double)va_arg(list, long) * (index + 1);
        }
    }
    va_end(list);
    return sum;
}

static at_pair at_pair_of(long a, long b) { return (at_pair){a * 3, b * 5}; }
static at_point at_point_of(double x, double y) { return (at_point){x * 3, y * 5}; }
static at_triple at_triple_of(long a, long b, long c) { return (at_triple){a + 1, b + 2, c + 3}; }
static long double at_extended(long double a, long double b) { return a * b + 0.25L; }

static long at_tail(long a, long b) {
    __attribute__((musttail)) return at_table.add(a, b);
}

static void at_tail_throw(long value) {
    __attribute__((musttail)) return at_table.thrower(value);
}

static long at_recurse(long depth) {
    if (depth <= 0) return 0;
    return at_table.recurse(depth - 1) + 1;
}

static jmp_buf at_jump;
static long at_jumper(long value) {
    if (value & 1) longjmp(at_jump, 1);
    return value * 10;
}

static int at_unwind_frames, at_backtrace_frames, at_unwind_found, at_backtrace_found;
int at_tracer_report(int which) {
    switch (which) {
    case 0: return at_unwind_frames;
    case 1: return at_backtrace_frames;
    case 2: return at_unwind_found;
    default: return at_backtrace_found;
    }
}
static uintptr_t at_caller_start, at_caller_end;

static _Unwind_Reason_Code at_count_frame(struct _Unwind_Context *context, void *unused) {
    (void)unused;
    uintptr_t pc = _Unwind_GetIP(context);
    at_unwind_frames++;
    if (pc > at_caller_start && pc <= at_caller_end) at_unwind_found = 1;
    return _URC_NO_REASON;
}

static __attribute__((noinline)) long at_tracer(long value) {
    at_unwind_frames = 0;
    at_unwind_found = 0;
    _Unwind_Backtrace(at_count_frame, NULL);
    void *frames[128];
    at_backtrace_frames = backtrace(frames, 128);
    at_backtrace_found = 0;
    for (int index = 0; index < at_backtrace_frames; index++) {
        uintptr_t pc = (uintptr_t)frames[index];
        if (pc > at_caller_start && pc <= at_caller_end) at_backtrace_found = 1;
    }
    return value + 1;
}

static void at_exception_cleanup(_Unwind_Reason_Code code, struct _Unwind_Exception *exception) {
    (void)code;
    (void)exception;
}

static __attribute__((noinline)) long at_unwinder(long value) {
    static struct _Unwind_Exception exception;
    memset(&exception, 0, sizeof exception);
    exception.exception_class = 0x4154544348000000ull; /* "ATTCH" */
    exception.exception_cleanup = at_exception_cleanup;
    return (long)_Unwind_RaiseException(&exception) + value;
}

static volatile int at_block_hold, at_block_inside;
void at_block_set_hold(int hold) { __atomic_store_n(&at_block_hold, hold, __ATOMIC_RELEASE); }
int at_block_inside_count(void) { return __atomic_load_n(&at_block_inside, __ATOMIC_ACQUIRE); }
static long at_block(long value) {
    __atomic_add_fetch(&at_block_inside, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&at_block_hold, __ATOMIC_ACQUIRE)) sched_yield();
    __atomic_sub_fetch(&at_block_inside, 1, __ATOMIC_SEQ_CST);
    return value * 2;
}

static long at_exiter(long value) {
    pthread_exit((void *)(value + 1));
    return 0;
}

static volatile long at_signal_value;
long at_signal_result(void) { return at_signal_value; }
int at_gettid(void) { return (int)gettid(); }
static void at_signal_handler(int signal) {
    (void)signal;
    at_signal_value = at_table.add(20, 22);
}

static long at_signaller(long value) {
    raise(SIGUSR1);
    return value;
}

static __attribute__((noinline)) long at_trapper(long value) {
    raise(SIGTRAP);
    return value + 1;
}

at_slots at_table;
at_slots *at_slots_get(void) { return &at_table; }

void at_reset(void) {
    at_table.add = at_add;
    at_table.mix = at_mix;
    at_table.many = at_many;
    at_table.vsum = at_vsum;
    at_table.pair = at_pair_of;
    at_table.point = at_point_of;
    at_table.triple = at_triple_of;
    at_table.extended = at_extended;
    at_table.recurse = at_recurse;
    at_table.jumper = at_jumper;
    at_table.tracer = at_tracer;
    at_table.block = at_block;
    at_table.exiter = at_exiter;
    at_table.unwinder = at_unwinder;
    at_table.signaller = at_signaller;
    at_table.tail = at_tail;
    at_table.thrower = at_throw;
    at_table.tail_thrower = at_tail_throw;
    at_table.trapper = at_trapper;
    at_table.setjmper = (int (*)(void *))_setjmp;
}

long at_call_add(long a, long b) { return at_table.add(a, b); }

/* Fork handlers that call at_add through its slot. Registered before the library registers its
   own (at the process's first attach), the prepare handler runs after the library's and the
   parent's before the library's: both inside fork, between the library's handlers. */
static void at_fork_call(void) { (void)at_call_add(40, 2); }
int at_fork_register(void) { return pthread_atfork(at_fork_call, at_fork_call, NULL); }

double at_call_mix(void) { return at_table.mix(1, 2.5, 3, 4.5, 5, 6.5, 7, 8.5, 9, 10.5, 11.5f, 12, 13.5); }
double at_call_mix_direct(void) { return at_mix(1, 2.5, 3, 4.5, 5, 6.5, 7, 8.5, 9, 10.5, 11.5f, 12, 13.5); }

long at_call_many(void) {
    return at_table.many(1, 2, 3, 4, 5, 6, 7, 8, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5,
                         (at_triple){11, 12, 13});
}
long at_call_many_direct(void) {
    return at_many(1, 2, 3, 4, 5, 6, 7, 8, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, (at_triple){11, 12, 13});
}

double at_call_vsum(void) { return at_table.vsum(6, 1L, 2.5, 3L, 4.5, 5L, 6.5); }

at_pair at_call_pair(long a, long b) { return at_table.pair(a, b); }
at_point at_call_point(double x, double y) { return at_table.point(x, y); }
at_triple at_call_triple(long a, long b, long c) { return at_table.triple(a, b, c); }
long double at_call_extended(long double a, long double b) { return at_table.extended(a, b); }
long at_call_recurse(long depth) { return at_table.recurse(depth); }
long at_call_tail(long a, long b) {
    long result = at_table.tail(a, b);
    __asm__ __volatile__("" ::: "memory");
    return result;
}

long at_call_jumper(long value) {
    if (setjmp(at_jump)) return -1;
    return at_table.jumper(value);
}

static jmp_buf at_twice;
__attribute__((noinline)) int at_call_setjmp_twice(void) {
    volatile int returns = 0;
    int (*volatile setjmper)(void *) = at_table.setjmper;
    int value = setjmper(at_twice);
    returns = returns + 1;
    if (value == 0) longjmp(at_twice, 7);
    return returns * 100 + value;
}

__attribute__((noinline)) int at_call_setjmp_twice_direct(void) {
    volatile int returns = 0;
    int value = _setjmp(at_twice);
    returns = returns + 1;
    if (value == 0) longjmp(at_twice, 7);
    return returns * 100 + value;
}

void *at_setjmp_address(void) { return (void *)_setjmp; }

void *at_setjmp_plt_target = (void *)_setjmp;
__asm__(".text\n"
        ".globl at_setjmp_plt\n"
        ".type at_setjmp_plt, @function\n"
        "at_setjmp_plt:\n"
        "    endbr64\n"
        "    .byte 0xf2\n" /* bnd */
        "    jmp *at_setjmp_plt_target(%rip)\n"
        ".size at_setjmp_plt, . - at_setjmp_plt\n");

static sigjmp_buf at_escape;
__attribute__((noinline)) long at_call_escaping(long value) {
    if (sigsetjmp(at_escape, 1)) return -1;
    return at_table.add(value, 1);
}
void at_escape_now(void) { siglongjmp(at_escape, 1); }

__attribute__((noinline)) long at_call_tracer(void) {
    at_caller_start = (uintptr_t)&at_call_tracer;
    at_caller_end = at_caller_start + 256;
    long result = at_table.tracer(0);
    __asm__ __volatile__("" ::: "memory");
    return at_unwind_found && at_backtrace_found ? result : 0;
}

__attribute__((noinline)) long at_call_unwinder(void) {
    long result = at_table.unwinder(0);
    __asm__ __volatile__("" ::: "memory");
    return result;
}

long at_call_block(long value) { return at_table.block(value); }

static volatile int at_cleanup_ran;
static void at_cleanup(void *unused) {
    (void)unused;
    at_cleanup_ran = 1;
}

static void *at_exit_thread(void *argument) {
    long value = (long)(intptr_t)argument;
    long result = 0;
    pthread_cleanup_push(at_cleanup, NULL);
    result = at_table.exiter(value);
    pthread_cleanup_pop(0);
    return (void *)(intptr_t)result;
}

int at_exit_in_thread(long value) {
    at_cleanup_ran = 0;
    pthread_t thread;
    if (pthread_create(&thread, NULL, at_exit_thread, (void *)(intptr_t)value) != 0) return 0;
    void *result = NULL;
    if (pthread_join(thread, &result) != 0) return 0;
    return at_cleanup_ran && (long)(intptr_t)result == value + 1;
}

void at_install_signal_handler(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = at_signal_handler;
    sigaction(SIGUSR1, &action, NULL);
}

long at_call_signaller(long value) {
    /* The test may run on a thread that blocks the signal (a dispatch worker). */
    sigset_t unblock, previous;
    sigemptyset(&unblock);
    sigaddset(&unblock, SIGUSR1);
    pthread_sigmask(SIG_UNBLOCK, &unblock, &previous);
    long result = at_table.signaller(value);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    return result;
}

__attribute__((noinline)) long at_call_trapper(long value) {
    long result = at_table.trapper(value);
    __asm__ __volatile__("" ::: "memory");
    return result;
}

// MARK: - Every instruction of an attached call interrupted

/* The bounds of the attach path's C code (attach.c puts it in this section). */
extern const char __start_ffh_attach_text[] __attribute__((weak));
extern const char __stop_ffh_attach_text[] __attribute__((weak));

static volatile int at_step_on;
static int at_step_reentry;
static volatile int at_step_in_handler;
static at_step_tally at_step_counts;

void at_step_block(int leaving) {
    if (at_step_in_handler) {
        if (leaving) {
            at_step_counts.handler_leaves++;
        } else {
            at_step_counts.handler_enters++;
        }
    } else if (leaving) {
        at_step_counts.main_leaves++;
    } else {
        at_step_counts.main_enters++;
    }
}

/* Runs after each instruction the main thread executes while its trap flag is set: calls
   through the attached slot and notes whether the blocks ran, against what the thread was
   doing (an attach block or the library's own work, by its record; the attach path's C code,
   by the interrupted instruction's address). */
static void at_step_handler(int signal, siginfo_t *info, void *context) {
    (void)signal;
    (void)info;
    if (!at_step_on) return;
    const ucontext_t *interrupted = context;
    uintptr_t rip = (uintptr_t)interrupted->uc_mcontext.gregs[REG_RIP];
    int in_code = rip >= (uintptr_t)__start_ffh_attach_text && rip < (uintptr_t)__stop_ffh_attach_text;
    ffh_thread *thread = ffh_current_thread;
    int in_block = thread && ((thread->attach_block && !at_step_reentry) || thread->busy);
    uint64_t enters = at_step_counts.handler_enters, leaves = at_step_counts.handler_leaves;
    at_step_in_handler = 1;
    long result = at_table.add(40, 2);
    at_step_in_handler = 0;
    int ran = at_step_counts.handler_enters == enters + 1 && at_step_counts.handler_leaves == leaves + 1;
    int skipped = at_step_counts.handler_enters == enters && at_step_counts.handler_leaves == leaves;
    at_step_counts.handler_calls++;
    if (result != 42 || !(in_block ? skipped : ran)) at_step_counts.wrong++;
    if (in_block) {
        at_step_counts.in_block++;
        if (in_code) at_step_counts.in_block_in_code++;
    } else if (in_code) {
        at_step_counts.in_code++;
    }
}

int at_step_available(void) {
#if defined(__SANITIZE_THREAD__)
    return 0; /* ThreadSanitizer delivers signals at points of its own choosing */
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    return 0;
#endif
#endif
    return __start_ffh_attach_text != NULL && __stop_ffh_attach_text != NULL;
}

at_step_tally at_step_calls(long count, int reentry) {
    memset(&at_step_counts, 0, sizeof at_step_counts);
    at_step_reentry = reentry;
    struct sigaction action = {0}, previous;
    action.sa_sigaction = at_step_handler;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTRAP, &action, &previous);
    for (long index = 0; index < count; index++) {
        at_step_on = 1;
        /* The trap flag: a SIGTRAP after every instruction until it is cleared (the kernel
           clears it for the handler and restores it after). */
        __asm__ __volatile__("pushfq\n\torq $0x100, (%%rsp)\n\tpopfq" ::: "memory", "cc");
        long result = at_table.add(index, 1);
        __asm__ __volatile__("pushfq\n\tandq $~0x100, (%%rsp)\n\tpopfq" ::: "memory", "cc");
        at_step_on = 0;
        if (result != index + 1) at_step_counts.wrong++;
    }
    sigaction(SIGTRAP, &previous, NULL);
    return at_step_counts;
}

// MARK: - A handler on a signal stack above the thread's

/* Memory of `size` bytes mapped above `here` (a multiple of 16 MB above it, where nothing is
   mapped yet), NULL when none is found. */
static char *at_map_above(uintptr_t here, size_t size) {
    for (uintptr_t step = 1; step <= 256; step++) {
        uintptr_t hint = (here + step * ((uintptr_t)16 << 20)) & ~(uintptr_t)0xffff;
        void *got = mmap((void *)hint, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                         -1, 0);
        if (got == MAP_FAILED) continue;
        if ((uintptr_t)got == hint) return got;
        munmap(got, size); /* (a kernel that took the flag for a hint) */
    }
    return NULL;
}

/* What at_step_calls_above's thread makes. */
typedef struct {
    long count;
} at_above_request;

static void *at_above_thread(void *argument) {
    at_above_request *request = argument;
    /* (The frame's address: a local variable may live elsewhere under AddressSanitizer.) */
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    enum { SIZE = 1 << 16 };
    char *alternate = at_map_above(here, SIZE);
    if (!alternate) {
        at_step_counts.wrong++;
        return NULL;
    }
    stack_t stack = {.ss_sp = alternate, .ss_size = SIZE};
    if (sigaltstack(&stack, NULL) != 0) at_step_counts.wrong++;
    at_step_counts.above = (uintptr_t)alternate > here;
    /* The thread's set-up first, not stepped. */
    if (at_table.add(1, 2) != 3) at_step_counts.wrong++;
    for (long index = 0; index < request->count; index++) {
        at_step_on = 1;
        __asm__ __volatile__("pushfq\n\torq $0x100, (%%rsp)\n\tpopfq" ::: "memory", "cc");
        long result = at_table.add(index, 1);
        __asm__ __volatile__("pushfq\n\tandq $~0x100, (%%rsp)\n\tpopfq" ::: "memory", "cc");
        at_step_on = 0;
        if (result != index + 1) at_step_counts.wrong++;
    }
    stack_t none = {.ss_flags = SS_DISABLE};
    sigaltstack(&none, NULL);
    munmap(alternate, SIZE);
    return NULL;
}

int at_step_above_available(void) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
    return 0; /* its shadow memory and fake stacks leave no room found above a thread's stack */
#endif
#endif
    return at_step_available();
}

at_step_tally at_step_calls_above(long count) {
    memset(&at_step_counts, 0, sizeof at_step_counts);
    at_step_reentry = 0;
    at_above_request request = {count};
    struct sigaction action = {0}, previous;
    action.sa_sigaction = at_step_handler;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTRAP, &action, &previous);
    pthread_t thread;
    if (pthread_create(&thread, NULL, at_above_thread, &request) == 0) {
        pthread_join(thread, NULL);
    } else {
        at_step_counts.wrong++;
    }
    sigaction(SIGTRAP, &previous, NULL);
    return at_step_counts;
}

// MARK: - A thread's first attached call interrupted

/* What at_step_first_call's handler does: 1 calls `add` while the thread's record marks the
   library's own work, 2 calls it once as the thread starts to claim its record. */
static volatile int at_first_mode;
static volatile int at_first_attached;
static volatile int at_first_alternate;
/* Steps of the making of the side stack let go by before the handler calls (mode 1). */
static volatile long at_first_skip;
static volatile int at_first_called;

static void at_first_handler(int signal, siginfo_t *info, void *context) {
    (void)signal;
    (void)info;
    if (!at_step_on) return;
    const ucontext_t *interrupted = context;
    uintptr_t rip = (uintptr_t)interrupted->uc_mcontext.gregs[REG_RIP];
    ffh_thread *thread = ffh_current_thread;
    int sideless = 0;
    if (at_first_mode == 1) {
        if (!thread || thread->busy != FFH_BUSY_WORK) return;
        if (thread->making_side && at_first_skip > 0) {
            at_first_skip--;
            return;
        }
        at_step_counts.in_block++;
        /* (While the thread makes its side stack, the handler's call makes one.) */
        sideless = at_first_attached && thread->side == NULL && !thread->making_side;
        if (sideless) at_step_counts.sideless++;
    } else {
        if (at_first_called || thread != NULL || rip != (uintptr_t)&ffh_thread_claim) return;
        at_first_called = 1;
    }
    uint64_t enters = at_step_counts.handler_enters, leaves = at_step_counts.handler_leaves;
    at_step_in_handler = 1;
    long result = at_table.add(40, 2);
    at_step_in_handler = 0;
    at_step_counts.handler_calls++;
    /* Both blocks ran, or, for an attached call made while the thread had no side stack yet,
       neither. */
    int ran = !sideless;
    if (result != 42 || at_step_counts.handler_enters != enters + ran || at_step_counts.handler_leaves != leaves + ran) {
        at_step_counts.wrong++;
    }
}

static void *at_first_thread(void *unused) {
    (void)unused;
    /* The handler on a signal stack of this thread's: no signal frame lies between its calls
       and the work it interrupts. */
    static char alternate[1 << 16];
    stack_t stack = {.ss_sp = alternate, .ss_size = sizeof alternate}, previous = {0};
    if (at_first_alternate && sigaltstack(&stack, &previous) != 0) at_step_counts.wrong++;
    /* Free records keep the side stack of the thread that had them: those are held out of the
       way (claimed, as by a thread) while this thread claims its record, so that its first
       attached call makes a side stack of its own; given back after. */
    enum { HELD = 1024 };
    static ffh_thread *held[HELD];
    size_t heldCount = 0;
    for (ffh_thread *record = ffh_thread_first(); at_first_attached && record && heldCount < HELD;
         record = record->next) {
        uintptr_t free = 0;
        if (record->side &&
            __atomic_compare_exchange_n(&record->claimed, &free, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            held[heldCount++] = record;
        }
    }
    at_step_on = 1;
    __asm__ __volatile__("pushfq\n\torq $0x100, (%%rsp)\n\tpopfq" ::: "memory", "cc");
    long result = at_table.add(20, 1);
    __asm__ __volatile__("pushfq\n\tandq $~0x100, (%%rsp)\n\tpopfq" ::: "memory", "cc");
    at_step_on = 0;
    if (result != 21) at_step_counts.wrong++;
    if (at_first_alternate) {
        stack_t none = {.ss_flags = SS_DISABLE};
        sigaltstack(&none, NULL);
    }
    for (size_t index = 0; index < heldCount; index++) __atomic_store_n(&held[index]->claimed, 0, __ATOMIC_RELEASE);
    /* The records the process holds for this thread. */
    int32_t tid = (int32_t)syscall(SYS_gettid);
    for (ffh_thread *record = ffh_thread_first(); record; record = record->next) {
        if (ffh_thread_is_claimed(record) && __atomic_load_n(&record->tid, __ATOMIC_RELAXED) == tid) {
            at_step_counts.records++;
        }
    }
    return NULL;
}

at_step_tally at_step_first_call(int mode, int attached, int alternate, long skip) {
    memset(&at_step_counts, 0, sizeof at_step_counts);
    at_step_reentry = 0;
    at_first_skip = skip;
    at_first_mode = mode;
    at_first_attached = attached;
    at_first_alternate = alternate;
    at_first_called = 0;
    struct sigaction action = {0}, previous;
    action.sa_sigaction = at_first_handler;
    action.sa_flags = SA_SIGINFO | (alternate ? SA_ONSTACK : 0);
    sigemptyset(&action.sa_mask);
    sigaction(SIGTRAP, &action, &previous);
    pthread_t thread;
    if (pthread_create(&thread, NULL, at_first_thread, NULL) == 0) {
        pthread_join(thread, NULL);
    } else {
        at_step_counts.wrong++;
    }
    sigaction(SIGTRAP, &previous, NULL);
    return at_step_counts;
}

/* The frame's word at byte `offset`. */
static uint64_t at_word(void *frame, unsigned offset) {
    uint64_t value;
    memcpy(&value, (char *)frame + offset, sizeof value);
    return value;
}

void at_functions_enter(void *context, void *frame) {
    at_functions_seen *seen = context;
    seen->enters++;
    seen->rdi = at_word(frame, 0);
    seen->rsi = at_word(frame, 8);
    seen->rax_count = at_word(frame, 48) & 0xff;
    seen->enter_sp = at_word(frame, 56);
    memcpy(&seen->enter_return, (const void *)(uintptr_t)seen->enter_sp, sizeof seen->enter_return);
    memcpy(&seen->xmm0, (char *)frame + 64, sizeof seen->xmm0);
    seen->enter_function = at_word(frame, 200);
    seen->enter_thread = at_word(frame, 208);
    uint64_t changed = seen->rsi + 100, scratch = 77;
    memcpy((char *)frame + 8, &changed, sizeof changed);
    memcpy((char *)frame + 192, &scratch, sizeof scratch);
}

void at_functions_leave(void *context, void *frame) {
    at_functions_seen *seen = context;
    seen->leaves++;
    seen->result = at_word(frame, 0);
    seen->leave_return = at_word(frame, 56);
    seen->leave_sp = at_word(frame, 64);
    seen->leave_scratch = at_word(frame, 72);
    seen->leave_function = at_word(frame, 80);
    seen->leave_thread = at_word(frame, 88);
    uint64_t doubled = seen->result * 2;
    memcpy(frame, &doubled, sizeof doubled);
}
