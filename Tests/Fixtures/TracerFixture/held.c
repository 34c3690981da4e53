// A process whose joiner is killed while its call runs in the process (slow-join.c's entry
// sleeps): it must go on as if it had never been stopped. Its main thread checks, round after
// round, what a lost register or a changed signal setting would break:
//
//     held sleeps SECONDS  sleeps 5 ms at a time in a system call made by hand, with known
//                          values in the callee-saved registers and in xmm0 to xmm15 (and
//                          MXCSR's rounding mode changed), every other round in ymm0 to ymm15
//                          where the processor has AVX, which must come back from it whole
//     held sorts SECONDS   sorts in the C library's qsort (a join stops it there and lets it
//                          run towards its return into the program); each result must be
//                          sorted and qsort must return into the program with its registers
//     held handler SECONDS spends most of its time in a SIGALRM handler that sleeps on a small
//                          alternate signal stack (16 KiB), where a join stops it: the bytes
//                          around that stack must stay as they were (a join's calls, dlopen
//                          and the tracer's start, need far more stack than it has left)
//
// Both keep SIGUSR2 blocked and an alternate signal stack, which must stay so. Prints "rounds
// N" and exits 0 after SECONDS; prints what broke and exits 1 at the first fault. With
// HELD_CATCHES set (not empty), it catches SIGURG, SIGWINCH and SIGCHLD (as a Go program
// catches every signal) and ignores none, so that none of the signals a join would stop the
// thread with is free, and prints how many it caught.
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static int broken(const char *what) {
    printf("broken: %s\n", what);
    fflush(stdout);
    return 1;
}

/* What a sleep round loads into registers and stores from them, at fixed offsets for the
   assembly below. */
typedef struct {
    uint64_t want[6], got[6];               /* 0, 48 (five of each used) */
    unsigned char vectors_in[256], vectors_out[256]; /* 96, 352 */
    uint32_t mxcsr_in, mxcsr_out, mxcsr_saved; /* 608, 612, 616 */
} sleep_state;
_Static_assert(__builtin_offsetof(sleep_state, vectors_out) == 352 && __builtin_offsetof(sleep_state, mxcsr_saved) == 616,
               "the offsets the assembly uses");

/* One sleep of 5 ms by hand, its registers checked; 0 when they came back whole. */
static int sleep_round(void) {
    sleep_state state = {.want = {0x1111111111111111, 0x2222222222222222, 0x3333333333333333,
                                  0x4444444444444444, 0x5555555555555555}};
    for (int index = 0; index < 256; index++) state.vectors_in[index] = (unsigned char)(index * 7 + 3);
    /* Round towards zero (bits 13-14) with every exception masked. */
    state.mxcsr_in = 0x7f80;
    struct timespec pause = {0, 5000000};
    long result = 35; /* SYS_nanosleep */
    __asm__ volatile(
        "stmxcsr 616(%[s])\n\t"
        "ldmxcsr 608(%[s])\n\t"
        "movq 0(%[s]), %%rbx\n\tmovq 8(%[s]), %%r12\n\tmovq 16(%[s]), %%r13\n\t"
        "movq 24(%[s]), %%r14\n\tmovq 32(%[s]), %%r15\n\t"
        "movdqu 96(%[s]), %%xmm0\n\tmovdqu 112(%[s]), %%xmm1\n\tmovdqu 128(%[s]), %%xmm2\n\t"
        "movdqu 144(%[s]), %%xmm3\n\tmovdqu 160(%[s]), %%xmm4\n\tmovdqu 176(%[s]), %%xmm5\n\t"
        "movdqu 192(%[s]), %%xmm6\n\tmovdqu 208(%[s]), %%xmm7\n\tmovdqu 224(%[s]), %%xmm8\n\t"
        "movdqu 240(%[s]), %%xmm9\n\tmovdqu 256(%[s]), %%xmm10\n\tmovdqu 272(%[s]), %%xmm11\n\t"
        "movdqu 288(%[s]), %%xmm12\n\tmovdqu 304(%[s]), %%xmm13\n\tmovdqu 320(%[s]), %%xmm14\n\t"
        "movdqu 336(%[s]), %%xmm15\n\t"
        "syscall\n\t"
        "movq %%rbx, 48(%[s])\n\tmovq %%r12, 56(%[s])\n\tmovq %%r13, 64(%[s])\n\t"
        "movq %%r14, 72(%[s])\n\tmovq %%r15, 80(%[s])\n\t"
        "movdqu %%xmm0, 352(%[s])\n\tmovdqu %%xmm1, 368(%[s])\n\tmovdqu %%xmm2, 384(%[s])\n\t"
        "movdqu %%xmm3, 400(%[s])\n\tmovdqu %%xmm4, 416(%[s])\n\tmovdqu %%xmm5, 432(%[s])\n\t"
        "movdqu %%xmm6, 448(%[s])\n\tmovdqu %%xmm7, 464(%[s])\n\tmovdqu %%xmm8, 480(%[s])\n\t"
        "movdqu %%xmm9, 496(%[s])\n\tmovdqu %%xmm10, 512(%[s])\n\tmovdqu %%xmm11, 528(%[s])\n\t"
        "movdqu %%xmm12, 544(%[s])\n\tmovdqu %%xmm13, 560(%[s])\n\tmovdqu %%xmm14, 576(%[s])\n\t"
        "movdqu %%xmm15, 592(%[s])\n\t"
        "stmxcsr 612(%[s])\n\t"
        "ldmxcsr 616(%[s])\n\t"
        : "+a"(result)
        : "D"(&pause), "S"(0), [s] "r"(&state)
        : "rbx", "r12", "r13", "r14", "r15", "rcx", "r11", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4",
          "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
    /* 0, or EINTR: a sleep that a joiner's call interrupted and whose tracer died. */
    if (result != 0 && result != -4) return broken("the sleep's result");
    if (memcmp(state.want, state.got, sizeof state.want) != 0) return broken("a callee-saved register");
    if (memcmp(state.vectors_in, state.vectors_out, sizeof state.vectors_in) != 0) return broken("a vector register");
    if (state.mxcsr_out != state.mxcsr_in) return broken("MXCSR");
    return 0;
}

/* The same with the upper halves of ymm0 to ymm15 (AVX), which only the extended state of a
   signal frame carries: a frame with the legacy state alone would bring them back as zeros. */
static int sleep_round_avx(void) {
    unsigned char in[512], out[512];
    for (int index = 0; index < 512; index++) in[index] = (unsigned char)(index * 13 + 5);
    struct timespec pause = {0, 5000000};
    long result = 35; /* SYS_nanosleep */
    __asm__ volatile(
        "vmovdqu 0(%[i]), %%ymm0\n\tvmovdqu 32(%[i]), %%ymm1\n\tvmovdqu 64(%[i]), %%ymm2\n\t"
        "vmovdqu 96(%[i]), %%ymm3\n\tvmovdqu 128(%[i]), %%ymm4\n\tvmovdqu 160(%[i]), %%ymm5\n\t"
        "vmovdqu 192(%[i]), %%ymm6\n\tvmovdqu 224(%[i]), %%ymm7\n\tvmovdqu 256(%[i]), %%ymm8\n\t"
        "vmovdqu 288(%[i]), %%ymm9\n\tvmovdqu 320(%[i]), %%ymm10\n\tvmovdqu 352(%[i]), %%ymm11\n\t"
        "vmovdqu 384(%[i]), %%ymm12\n\tvmovdqu 416(%[i]), %%ymm13\n\tvmovdqu 448(%[i]), %%ymm14\n\t"
        "vmovdqu 480(%[i]), %%ymm15\n\t"
        "syscall\n\t"
        "vmovdqu %%ymm0, 0(%[o])\n\tvmovdqu %%ymm1, 32(%[o])\n\tvmovdqu %%ymm2, 64(%[o])\n\t"
        "vmovdqu %%ymm3, 96(%[o])\n\tvmovdqu %%ymm4, 128(%[o])\n\tvmovdqu %%ymm5, 160(%[o])\n\t"
        "vmovdqu %%ymm6, 192(%[o])\n\tvmovdqu %%ymm7, 224(%[o])\n\tvmovdqu %%ymm8, 256(%[o])\n\t"
        "vmovdqu %%ymm9, 288(%[o])\n\tvmovdqu %%ymm10, 320(%[o])\n\tvmovdqu %%ymm11, 352(%[o])\n\t"
        "vmovdqu %%ymm12, 384(%[o])\n\tvmovdqu %%ymm13, 416(%[o])\n\tvmovdqu %%ymm14, 448(%[o])\n\t"
        "vmovdqu %%ymm15, 480(%[o])\n\t"
        "vzeroupper\n\t"
        : "+a"(result)
        : "D"(&pause), "S"(0), [i] "r"(in), [o] "r"(out)
        : "rcx", "r11", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
    if (result != 0 && result != -4) return broken("the sleep's result");
    if (memcmp(in, out, sizeof in) != 0) return broken("an AVX register");
    return 0;
}

/* The alternate stack of "handler", between two stretches of bytes that must not change. */
enum { GUARD = 256 * 1024, SMALL_STACK = 16 * 1024 };
static unsigned char *guarded;

static void sleep_in_handler(int signal) {
    (void)signal;
    int saved = errno;
    struct timespec pause = {0, 3000000};
    nanosleep(&pause, NULL);
    errno = saved;
}

/* Sets up "handler": the alternate stack inside its guards, and SIGALRM every 4 ms. */
static int start_handler(void) {
    guarded = malloc(GUARD + SMALL_STACK + GUARD);
    if (!guarded) return broken("malloc");
    memset(guarded, 0xA5, GUARD + SMALL_STACK + GUARD);
    stack_t small = {.ss_sp = guarded + GUARD, .ss_size = SMALL_STACK, .ss_flags = 0};
    if (sigaltstack(&small, NULL) != 0) return broken("sigaltstack");
    struct sigaction action = {.sa_handler = sleep_in_handler, .sa_flags = SA_ONSTACK | SA_RESTART};
    sigemptyset(&action.sa_mask);
    struct itimerval every = {{0, 4000}, {0, 4000}};
    if (sigaction(SIGALRM, &action, NULL) != 0 || setitimer(ITIMER_REAL, &every, NULL) != 0) {
        return broken("SIGALRM");
    }
    return 0;
}

/* One round of "handler": the guards checked, then a pause the timer interrupts. */
static int handler_round(void) {
    for (size_t index = 0; index < GUARD; index++) {
        if (guarded[index] != 0xA5 || guarded[GUARD + SMALL_STACK + index] != 0xA5) {
            return broken("the bytes around the alternate signal stack");
        }
    }
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
    return 0;
}

static int compare(const void *left, const void *right) {
    int first = *(const int *)left, second = *(const int *)right;
    return (first > second) - (first < second);
}

/* One sort of 200,000 numbers in the C library; 0 when the result is sorted. */
static int sort_round(int *numbers, size_t count, unsigned *state) {
    for (size_t index = 0; index < count; index++) {
        *state ^= *state << 13;
        *state ^= *state >> 17;
        *state ^= *state << 5;
        numbers[index] = (int)*state;
    }
    qsort(numbers, count, sizeof *numbers, compare);
    for (size_t index = 1; index < count; index++) {
        if (numbers[index - 1] > numbers[index]) return broken("a sort's result");
    }
    return 0;
}

static volatile sig_atomic_t caught_signals;

static void signal_default(int signal) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    sigaction(signal, &action, NULL);
}

static void on_caught(int signal) {
    (void)signal;
    caught_signals++;
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "sleeps") != 0 && strcmp(argv[1], "sorts") != 0 &&
                      strcmp(argv[1], "handler") != 0)) {
        fprintf(stderr, "usage: held sleeps|sorts|handler SECONDS\n");
        return 64;
    }
    int sorts = strcmp(argv[1], "sorts") == 0, handler = strcmp(argv[1], "handler") == 0;
    __builtin_cpu_init();
    int avx = __builtin_cpu_supports("avx");
    double end = seconds() + atof(argv[2]);
    sigset_t blocked, now;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGUSR2);
    sigprocmask(SIG_BLOCK, &blocked, NULL);
    static char alternate[65536];
    stack_t stack = {.ss_sp = alternate, .ss_size = sizeof alternate, .ss_flags = 0}, seen;
    if (handler) {
        if (start_handler()) return 1;
        stack.ss_sp = guarded + GUARD;
        stack.ss_size = SMALL_STACK;
    } else if (sigaltstack(&stack, NULL) != 0) {
        return broken("sigaltstack");
    }
    const char *catching = getenv("HELD_CATCHES");
    int catches = catching && *catching;
    if (catches) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = on_caught;
        action.sa_flags = SA_RESTART;
        sigemptyset(&action.sa_mask);
        const int caught[] = {SIGURG, SIGWINCH, SIGCHLD};
        for (size_t index = 0; index < sizeof caught / sizeof caught[0]; index++) {
            if (sigaction(caught[index], &action, NULL) != 0) return broken("sigaction");
        }
        /* And it ignores no signal (a shell's background job ignores SIGINT and SIGQUIT), which
           the join could stop the thread with instead. */
        for (int signal = 1; signal < 32; signal++) {
            struct sigaction now;
            if (sigaction(signal, NULL, &now) == 0 && !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_IGN) {
                signal_default(signal);
            }
        }
    }
    size_t count = 200000;
    int *numbers = malloc(count * sizeof *numbers);
    unsigned state = 1;
    long rounds = 0;
    printf("ready\n");
    fflush(stdout);
    while (seconds() < end) {
        int failed = handler ? handler_round()
                     : sorts ? sort_round(numbers, count, &state)
                             : (avx && rounds % 2 ? sleep_round_avx() : sleep_round());
        if (failed) return 1;
        sigprocmask(SIG_BLOCK, NULL, &now);
        if (!sigismember(&now, SIGUSR2) || sigismember(&now, SIGURG)) return broken("the signal mask");
        if (sigaltstack(NULL, &seen) != 0 || seen.ss_sp != stack.ss_sp || seen.ss_size != stack.ss_size ||
            seen.ss_flags != 0) {
            return broken("the alternate signal stack");
        }
        rounds++;
    }
    if (catches) printf("caught %d\n", (int)caught_signals);
    printf("rounds %ld\n", rounds);
    return 0;
}
