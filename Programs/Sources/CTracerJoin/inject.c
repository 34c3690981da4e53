#define _GNU_SOURCE
#include "join.h"

#include <cpuid.h>
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/ucontext.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// A call made in another process, as a debugger makes one: the thread's registers are set as
// the ABI wants them at a function's entry, and the tracer waits for the call's return.
//
// The return must not need the tracer: a tracer killed during a call (SIGKILL cannot be
// caught) leaves the thread running it on its own. So the call returns into a few
// instructions the join writes into spare bytes of the process's code (the padding after an
// object's executable segment, which no code of the object's reaches): they keep the result
// below the stack pointer, send the thread a signal the process does not catch (with the
// tracer there a signal-delivery-stop, where the tracer reads the result and takes over; with
// none the kernel drops it, as it drops any signal that nothing catches and the default
// ignores), then return through rt_sigreturn over a signal frame the join built on the stack
// beforehand from the thread's saved registers, signal mask and vector state: a thread whose
// tracer died goes back to where it was stopped. A run towards a return address (a thread
// stopped in a runtime library, let go until it returns into the program) uses the same
// signal: the stack slots holding that address lead to a second piece of code instead, in the
// padding of the object the address is in, which signals and jumps on (``fhj_run_to``). The
// bytes written are put back at the end: after the leave the code is the file's.
//
// The calls themselves run on a stack mapped for them by a first call (mmap, then munmap at
// the end), made with nothing but its frame on the thread's own stack: the thread may be
// stopped in a signal handler on a small alternate stack, which dlopen and the tracer's start
// would overflow.
//
// Where there is no spare place, or every candidate signal is caught, the old way remains: a
// return address of 0, whose fault the tracer sees (a signal-delivery-stop for SIGSEGV at
// address 0), and a hardware breakpoint for the runs; a tracer killed then leaves the process
// to fault.

/* The return address of a call made the old way: returning there faults, deterministically. */
enum { FHJ_RETURN = 0 };
/* The bytes below the stack pointer the ABI lets a function use without moving it. */
enum { FHJ_RED_ZONE = 128 };
/* The largest XSAVE area asked for (AVX-512 needs about 2.7 KB, AMX about 11 KB). */
enum { FHJ_XSTATE = 16384 };
/* The join's code in the process (see above), the call's and the run's, each of
   FHJ_CODE_SIZE bytes: where each stops (the instruction after its signal's system call), and
   where the run's code keeps the address it jumps on to; where the call's code has a function
   of its own that unmaps memory by the system call (``fhj_call_code_bytes``). At most
   FHJ_PATCHES stack slots hold the address a run goes to. */
enum {
    FHJ_CODE_SIZE = 64,
    FHJ_CALL_STOP = 27,
    FHJ_CALL_UNMAP = 56,
    FHJ_RUN_STOP = 28,
    FHJ_RUN_TARGET = 36,
    FHJ_PATCHES = 16
};
/* What rt_sigreturn reads in a frame's extended-state area (the kernel's fpu/sigcontext.h):
   the first magic word in the legacy area's software-reserved bytes, the second after the
   state; and ucontext's flags (the state is extended; the frame's ss is used, exactly). */
enum { FHJ_XSTATE_MAGIC1 = 0x46505853, FHJ_XSTATE_MAGIC2 = 0x46505845, FHJ_SW_BYTES = 464 };
enum { FHJ_UC_FP_XSTATE = 1, FHJ_UC_SIGCONTEXT_SS = 2, FHJ_UC_STRICT_RESTORE_SS = 4 };
/* The kernel's restart codes of an interrupted system call (include/linux/errno.h). */
enum { FHJ_ERESTARTSYS = 512, FHJ_ERESTARTNOINTR = 513, FHJ_ERESTARTNOHAND = 514, FHJ_ERESTART_RESTARTBLOCK = 516 };

/* One call session: the stopped thread and everything that must be put back. */
typedef struct {
    /* The process, and the thread that runs the calls. */
    pid_t pid, tid;
    /* Whether the thread is seized, and whether its registers are saved. */
    int seized, stopped;
    /* /proc/PID/mem, to read and write the process's memory. */
    int memory;
    /* The thread's registers when it was stopped. */
    struct user_regs_struct saved;
    /* Its x87/SSE/AVX state: an XSAVE area (kind 1) or the FXSAVE one (kind 2). */
    int fpu_kind;
    struct iovec xstate;
    struct user_fpregs_struct fpregs;
    /* The stack bytes the calls' strings and return address went into, and what they held. */
    uint64_t scratch;
    size_t scratch_size;
    unsigned char *scratch_saved;
    /* The stack pointer of each call (its return address is there). */
    uint64_t call_stack;
    /* Whether the thread is in a signal-delivery-stop now (else in a PTRACE_EVENT_STOP). */
    int in_signal_stop;
    /* The thread's signal mask when it was stopped (when `mask_saved`), put back at the end:
       the calls run with the faults' signals unblocked. */
    uint64_t mask;
    int mask_saved;
    /* Signals the thread received while stopped or running a call, in order. */
    siginfo_t *kept;
    int kept_count, kept_capacity;
    /* The join's code for the calls in the process (0: none, the old way), the bytes it
       covers, and the signal it and the run's code stop with (0: none). */
    uint64_t code;
    unsigned char code_saved[FHJ_CODE_SIZE];
    int stop_signal;
    /* A run's code (0: none now), the bytes it covers, the stack slots that lead to it instead
       of the run's return address, and that address. */
    uint64_t run_code;
    unsigned char run_code_saved[FHJ_CODE_SIZE];
    uint64_t patched[FHJ_PATCHES];
    int patched_count;
    uint64_t patched_value;
    /* Whether the calls return into the join's code, over a signal frame (see fhj_place). */
    int returns_by_code;
    /* The stack the calls run on, mapped in the process for them (0: the thread's own), its
       size, and the stack pointer of the calls that map it and unmap it, made on the thread's
       own stack. */
    uint64_t private_stack, private_size, own_call_stack;
    /* Whether the thread is the one named by the caller (the tracer's own, with a large stack
       of the tracer's, by which the tracer knows it). */
    int named;
} fhj_session;

// MARK: - Memory

/* Reads `size` bytes at `address` of the process; 0 when it cannot. */
static int fhj_read(fhj_session *session, uint64_t address, void *bytes, size_t size) {
    ssize_t done = pread(session->memory, bytes, size, (off_t)address);
    if (done >= 0 && done != (ssize_t)size) errno = EIO; /* short: the memory is gone */
    return done == (ssize_t)size;
}

/* Writes `size` bytes at `address` of the process; 0 when it cannot. */
static int fhj_write(fhj_session *session, uint64_t address, const void *bytes, size_t size) {
    ssize_t done = pwrite(session->memory, bytes, size, (off_t)address);
    if (done >= 0 && done != (ssize_t)size) errno = EIO;
    return done == (ssize_t)size;
}

// MARK: - Stops

/* Whether a signal is the thread's own fault, raised by the instruction it ran (it cannot wait:
   the instruction would fault again), rather than one sent to it. */
static int fhj_is_fault(const siginfo_t *information) {
    int signal = information->si_signo;
    return (signal == SIGSEGV || signal == SIGBUS || signal == SIGILL || signal == SIGFPE || signal == SIGTRAP) &&
           information->si_code > 0;
}

/* Keeps a signal to deliver after the detach (a standard signal once: the kernel merges them;
   each real-time one, which the kernel queues). */
static void fhj_keep(fhj_session *session, const siginfo_t *information) {
    for (int index = 0; index < session->kept_count; index++) {
        if (information->si_signo < SIGRTMIN && session->kept[index].si_signo == information->si_signo) return;
    }
    if (session->kept_count == session->kept_capacity) {
        int capacity = session->kept_capacity ? 2 * session->kept_capacity : 16;
        siginfo_t *grown = realloc(session->kept, (size_t)capacity * sizeof *grown);
        if (!grown) return; /* out of memory: the signal is lost, as the kernel loses one it cannot queue */
        session->kept = grown;
        session->kept_capacity = capacity;
    }
    session->kept[session->kept_count++] = *information;
}

/* Takes a stop for the join code's signal: one the process was sent meanwhile (not the code's
   own, which the thread sends itself with tgkill), which the kernel merged with the code's (a
   standard signal is pending once), is kept to be delivered after the detach. */
static void fhj_take_code_signal(fhj_session *session, const siginfo_t *information) {
    if (information->si_code == SI_TKILL && information->si_pid == session->pid) return;
    fhj_keep(session, information);
}

/* The signals the process handles (SigCgt in its status, bit N-1 for signal N); all of them
   when it cannot be read. Those it ignores (SigIgn) in `ignored`, when given (none when the
   status cannot be read). */
static uint64_t fhj_caught_and_ignored(pid_t pid, uint64_t *ignored) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (ignored) *ignored = 0;
    FILE *file = fopen(path, "re");
    if (!file) return UINT64_MAX;
    unsigned long long caught = UINT64_MAX;
    while (fgets(line, sizeof line, file)) {
        if (strncmp(line, "SigCgt:\t", 8) == 0) caught = strtoull(line + 8, NULL, 16);
        if (ignored && strncmp(line, "SigIgn:\t", 8) == 0) *ignored = strtoull(line + 8, NULL, 16);
    }
    fclose(file);
    return caught;
}

/* Whether the process handles `signal` (not when that cannot be read: a process that cannot
   be asked is spared its own fault). */
static int fhj_catches(pid_t pid, int signal) {
    uint64_t caught = fhj_caught_and_ignored(pid, NULL);
    return caught != UINT64_MAX && ((caught >> (signal - 1)) & 1);
}

// MARK: - The join's code in the process

/* The instructions that send `session`'s thread its stop signal (tgkill), into `bytes`. */
static size_t fhj_signal_bytes(const fhj_session *session, unsigned char *bytes) {
    static const unsigned char code[] = {
        0xb8, 0xea, 0x00, 0x00, 0x00, /* mov $SYS_tgkill, %eax */
        0xbf, 0, 0, 0, 0,             /* mov $pid, %edi */
        0xbe, 0, 0, 0, 0,             /* mov $tid, %esi */
        0xba, 0, 0, 0, 0,             /* mov $signal, %edx */
        0x0f, 0x05,                   /* syscall */
    };
    memcpy(bytes, code, sizeof code);
    uint32_t pid = (uint32_t)session->pid, tid = (uint32_t)session->tid, signal = (uint32_t)session->stop_signal;
    memcpy(bytes + 6, &pid, 4);
    memcpy(bytes + 11, &tid, 4);
    memcpy(bytes + 16, &signal, 4);
    return sizeof code;
}

/* The calls' code (see the top of the file): keeps %rax at -8(%rsp) (the return address's
   slot, which rt_sigreturn does not read), sends the thread its stop signal, asks for the
   thread's alternate signal stack into the frame's uc_stack (rt_sigreturn sets it from there:
   so it stays as it is) and returns through rt_sigreturn. At FHJ_CALL_UNMAP, a function
   munmap(address, length) made of the system call alone: the stack the calls ran on is
   unmapped with it, not with the C library's munmap, which the join's start may have traced
   by then (an --inline join counted that call as the program's). */
static void fhj_call_code_bytes(const fhj_session *session, unsigned char *bytes) {
    memset(bytes, 0, FHJ_CODE_SIZE);
    static const unsigned char keep_result[] = {0x48, 0x89, 0x44, 0x24, 0xf8}; /* mov %rax, -8(%rsp) */
    static const unsigned char sigreturn[] = {
        0xb8, 0x83, 0x00, 0x00, 0x00, /* mov $SYS_sigaltstack, %eax */
        0x31, 0xff,                   /* xor %edi, %edi */
        0x48, 0x8d, 0x74, 0x24, 0x10, /* lea 16(%rsp), %rsi: the frame's uc_stack */
        0x0f, 0x05,                   /* syscall */
        0xb8, 0x0f, 0x00, 0x00, 0x00, /* mov $SYS_rt_sigreturn, %eax */
        0x0f, 0x05,                   /* syscall */
        0x0f, 0x0b,                   /* ud2: never reached */
    };
    static const unsigned char unmap[] = {
        0xb8, 0x0b, 0x00, 0x00, 0x00, /* mov $SYS_munmap, %eax */
        0x0f, 0x05,                   /* syscall */
        0xc3,                         /* ret */
    };
    _Static_assert(FHJ_CALL_STOP + sizeof sigreturn <= FHJ_CALL_UNMAP, "the calls' code overlaps");
    _Static_assert(FHJ_CALL_UNMAP + sizeof unmap <= FHJ_CODE_SIZE, "the calls' code is too long");
    memcpy(bytes, keep_result, sizeof keep_result);
    fhj_signal_bytes(session, bytes + sizeof keep_result);
    memcpy(bytes + FHJ_CALL_STOP, sigreturn, sizeof sigreturn);
    memcpy(bytes + FHJ_CALL_UNMAP, unmap, sizeof unmap);
}

/* A run's code, going on to `target`: keeps %rax and %rdx (a return value; every other
   register it uses is free at a return, by the ABI), sends the thread its stop signal, puts
   them back and jumps on. */
static void fhj_run_code_bytes(const fhj_session *session, uint64_t target, unsigned char *bytes) {
    memset(bytes, 0, FHJ_CODE_SIZE);
    static const unsigned char keep_values[] = {0x49, 0x89, 0xc0, 0x49, 0x89, 0xd1}; /* mov %rax, %r8; mov %rdx, %r9 */
    static const unsigned char go_on[] = {
        0x4c, 0x89, 0xc0,                   /* mov %r8, %rax */
        0x4c, 0x89, 0xca,                   /* mov %r9, %rdx */
        0x49, 0xbb, 0, 0, 0, 0, 0, 0, 0, 0, /* movabs $target, %r11 */
        0x41, 0xff, 0xe3,                   /* jmp *%r11 */
        0x0f, 0x0b,                         /* ud2 */
    };
    memcpy(bytes, keep_values, sizeof keep_values);
    fhj_signal_bytes(session, bytes + sizeof keep_values);
    memcpy(bytes + FHJ_RUN_STOP, go_on, sizeof go_on);
    memcpy(bytes + FHJ_RUN_TARGET, &target, sizeof target);
}

/* Writes `bytes` (FHJ_CODE_SIZE of them) into the first 64-byte slot of the spare code
   (``fhj_spare_code``: of the object mapped at `within`, or of any object when 0) whose bytes
   are all zero: the file's padding, not code a join left there, which a thread may still be
   about to run (a tracer killed during a call or a run leaves it; it is never written over).
   Keeps what the slot held in `saved`; returns the slot, 0 when there is none. */
static uint64_t fhj_put_code(fhj_session *session, uint64_t within, unsigned char *saved, const unsigned char *bytes) {
    fhj_spare spares[16];
    int count = fhj_spare_code(session->pid, within, spares, 16);
    for (int index = 0; index < count; index++) {
        for (uint64_t place = spares[index].start; place + FHJ_CODE_SIZE <= spares[index].end; place += FHJ_CODE_SIZE) {
            if (!fhj_read(session, place, saved, FHJ_CODE_SIZE)) break;
            int clean = 1;
            for (size_t byte = 0; byte < FHJ_CODE_SIZE && clean; byte++) clean = saved[byte] == 0;
            if (clean) return fhj_write(session, place, bytes, FHJ_CODE_SIZE) ? place : 0;
        }
    }
    return 0;
}

/* Writes the calls' code into the process's spare code, when there is a place, with a signal
   the process does not catch: SIGURG, SIGWINCH or SIGCHLD, which the default ignores (SIGCONT,
   also ignored, would end a stop of the process), else a signal it has set to be ignored
   (SIGPIPE in many a server; not one the processor raises for a fault, which the kernel
   delivers ignored or not), else SIGWINCH, which it catches then (a Go program catches every
   signal): a tracer alive takes the code's signal before any handler sees it, and one killed
   between the code's signal and its taking leaves the program one SIGWINCH more than the
   terminal sent (its size read again), where a return to address 0 would have ended it.
   Leaves `code` 0 when there is no place. */
static void fhj_write_code(fhj_session *session) {
    uint64_t ignored = 0, caught = fhj_caught_and_ignored(session->pid, &ignored);
    static const int candidates[] = {SIGURG, SIGWINCH, SIGCHLD};
    for (size_t index = 0; index < sizeof candidates / sizeof candidates[0] && !session->stop_signal; index++) {
        if (!((caught >> (candidates[index] - 1)) & 1)) session->stop_signal = candidates[index];
    }
    static const int sent_only[] = {SIGPIPE, SIGHUP,  SIGUSR1, SIGUSR2, SIGALRM, SIGTERM, SIGINT,  SIGQUIT,
                                    SIGTSTP, SIGTTIN, SIGTTOU, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO};
    for (size_t index = 0; index < sizeof sent_only / sizeof sent_only[0] && !session->stop_signal; index++) {
        if ((ignored >> (sent_only[index] - 1)) & 1) session->stop_signal = sent_only[index];
    }
    if (!session->stop_signal) session->stop_signal = SIGWINCH;
    unsigned char bytes[FHJ_CODE_SIZE];
    fhj_call_code_bytes(session, bytes);
    session->code = fhj_put_code(session, 0, session->code_saved, bytes);
}

/* Ends a run's use of its code: the stack slots that still lead to it get the return address
   back (a slot that holds something else now, its frame gone by a longjmp or an exception and
   the memory used again, is left alone), then the code's bytes go back. The thread must not
   be in the code (its registers were set elsewhere). */
static void fhj_end_run_code(fhj_session *session) {
    for (int index = 0; index < session->patched_count; index++) {
        uint64_t held = 0;
        if (fhj_read(session, session->patched[index], &held, sizeof held) && held == session->run_code) {
            fhj_write(session, session->patched[index], &session->patched_value, sizeof session->patched_value);
        }
    }
    session->patched_count = 0;
    if (session->run_code) fhj_write(session, session->run_code, session->run_code_saved, FHJ_CODE_SIZE);
    session->run_code = 0;
}

/* What a wait found (FHJ_STOP_NONE: nothing yet, asked not to wait). */
typedef enum { FHJ_STOP_EVENT, FHJ_STOP_SIGNAL, FHJ_STOP_GONE, FHJ_STOP_ERROR, FHJ_STOP_NONE } fhj_stop;

/* Waits for the thread's next stop (with WNOHANG in `options`, only looks). A
   signal-delivery-stop fills `information`. */
static fhj_stop fhj_wait_stop(fhj_session *session, siginfo_t *information, int *status, int options) {
    for (;;) {
        pid_t waited = waitpid(session->tid, status, __WALL | options);
        if (waited == 0) return FHJ_STOP_NONE;
        if (waited < 0 && errno == EINTR) continue;
        if (waited < 0) return errno == ECHILD ? FHJ_STOP_GONE : FHJ_STOP_ERROR;
        if (WIFEXITED(*status) || WIFSIGNALED(*status)) return FHJ_STOP_GONE;
        if (!WIFSTOPPED(*status)) continue;
        if ((*status >> 16) != 0) {
            session->in_signal_stop = 0;
            return FHJ_STOP_EVENT;
        }
        session->in_signal_stop = 1;
        if (ptrace(PTRACE_GETSIGINFO, session->tid, NULL, information) != 0) {
            memset(information, 0, sizeof *information);
            information->si_signo = WSTOPSIG(*status);
        }
        return FHJ_STOP_SIGNAL;
    }
}

/* Waits for the thread's next stop. */
static fhj_stop fhj_next_stop(fhj_session *session, siginfo_t *information, int *status) {
    return fhj_wait_stop(session, information, status, 0);
}

/* The sentence for a thread that is gone. */
static fhj_status fhj_gone(fhj_session *session, int status, const char *during, char *message, size_t size) {
    if (WIFSIGNALED(status)) {
        fhj_say(message, size, "process %d was killed by signal %d (%s) %s", (int)session->pid, WTERMSIG(status),
                strsignal(WTERMSIG(status)), during);
    } else {
        fhj_say(message, size, "process %d exited %s", (int)session->pid, during);
    }
    return FHJ_EXITED;
}

/* After a ptrace request or a memory access failed: FHJ_EXITED, with the sentence, when the
   thread is gone (killed meanwhile: its memory and registers went first), else FHJ_FAILED with
   the sentence written already. Waits up to a second for an exit to be reported (a process
   killed meanwhile may not look dead yet in /proc). */
static fhj_status fhj_failed(fhj_session *session, char *message, size_t size) {
    for (int attempt = 0; attempt < 1000; attempt++) {
        int status;
        pid_t waited = waitpid(session->tid, &status, WNOHANG | __WALL);
        if (waited == session->tid && (WIFEXITED(status) || WIFSIGNALED(status))) {
            return fhj_gone(session, status, "while it was being joined", message, size);
        }
        if (waited < 0 && errno == ECHILD) {
            fhj_say(message, size, "process %d ended while it was being joined", (int)session->pid);
            return FHJ_EXITED;
        }
        usleep(1000);
    }
    return FHJ_FAILED;
}

// MARK: - Stopping and restoring

/* The thread named `name` (its comm), 0 when none is. */
static pid_t fhj_named_thread(pid_t pid, const char *name) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *tasks = opendir(path);
    if (!tasks) return 0;
    pid_t found = 0;
    struct dirent *entry;
    while (!found && (entry = readdir(tasks))) {
        pid_t tid = (pid_t)atoi(entry->d_name);
        if (tid <= 0) continue;
        char file[96], comm[32] = {0};
        snprintf(file, sizeof file, "/proc/%d/task/%d/comm", (int)pid, (int)tid);
        FILE *stream = fopen(file, "re");
        if (!stream) continue;
        if (fgets(comm, sizeof comm, stream)) {
            comm[strcspn(comm, "\n")] = 0;
            if (strcmp(comm, name) == 0) found = tid;
        }
        fclose(stream);
    }
    closedir(tasks);
    return found;
}

/* The thread to use: the one named `name` when there is one (the tracer's own watching thread,
   which waits in poll holding nothing, for the leave: the program's threads may be in the
   tracer's work all the time, holding its locks, in one that loads libraries in a loop), else
   the main thread, unless it has exited (a zombie while others run). */
static pid_t fhj_choose_thread(pid_t pid, const char *name, int *is_named) {
    *is_named = 0;
    if (name) {
        pid_t named = fhj_named_thread(pid, name);
        *is_named = named > 0;
        if (named > 0) return named;
    }
    fhj_process thread;
    if (fhj_read_process(pid, pid, &thread) && thread.state != 'Z' && thread.state != 'X') return pid;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *tasks = opendir(path);
    if (!tasks) return pid;
    pid_t chosen = pid;
    struct dirent *entry;
    while ((entry = readdir(tasks))) {
        pid_t tid = (pid_t)atoi(entry->d_name);
        if (tid > 0 && tid != pid && fhj_read_process(pid, tid, &thread) && thread.state != 'Z') {
            chosen = tid;
            break;
        }
    }
    closedir(tasks);
    return chosen;
}

/* Whether the bytes before `address` (`before`, its six) end with a call instruction: a
   return address, not a pointer to a function's start that a frame keeps (rtld_fini). */
static int fhj_follows_call(const unsigned char *before) {
    if (before[1] == 0xE8) return 1;                                          /* call rel32 */
    if (before[4] == 0xFF && (before[5] & 0xF8) == 0xD0) return 1;            /* call reg */
    if (before[3] == 0x41 && before[4] == 0xFF && (before[5] & 0xF8) == 0xD0) return 1; /* call r8-r15 */
    if (before[3] == 0xFF && (before[4] & 0xF8) == 0x50) return 1;            /* call [reg+disp8] */
    if (before[0] == 0xFF && (before[1] == 0x15 || (before[1] & 0xF8) == 0x90)) return 1; /* [rip/reg+disp32] */
    return 0;
}

/* Whether the stopped thread is inside the dynamic loader, where a dlopen of the tracer's
   would find the loader's lists half changed (the loader asserts, or the process faults), or
   wait forever for a lock the thread itself holds: a load or an unload under way (`_r_debug`'s
   r_state), one of the loader's two locks taken but not owned (between the lock word and the
   owner's ID: the thread may be taking or letting go of it, and its dlopen would wait for
   itself) or owned by the thread, or its instruction pointer in the loader. Where the locks
   cannot be read, a call into the loader among the return addresses in its stack's top
   kilobyte counts too; where they can, it does not (a stale word, left below the stack pointer
   by a lazy binding or the program's start, made gzip look inside the loader at every stop). */
static int fhj_in_loader(const fhj_session *session, const fhj_dynamic_loader *loader) {
    if (!loader->r_debug) return 0;
    struct r_debug state;
    struct iovec local = {&state, sizeof state}, remote = {(void *)(uintptr_t)loader->r_debug, sizeof state};
    if (process_vm_readv(session->pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof state) return 0;
    if (state.r_state != RT_CONSISTENT) return 1;
    int locks_read = 0;
    if (loader->load_lock) {
        pthread_mutex_t locks[2];
        local = (struct iovec){locks, sizeof locks};
        remote = (struct iovec){(void *)(uintptr_t)loader->load_lock, sizeof locks};
        if (process_vm_readv(session->pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof locks) {
            locks_read = 1;
            for (int index = 0; index < 2; index++) {
                if (locks[index].__data.__lock != 0 &&
                    (locks[index].__data.__owner == 0 || locks[index].__data.__owner == session->tid)) {
                    return 1;
                }
            }
        }
    }
    uint64_t ip = session->saved.rip;
    if (ip >= loader->low && ip < loader->high) return 1;
    if (locks_read) return 0;
    uint64_t words[128];
    local = (struct iovec){words, sizeof words};
    remote = (struct iovec){(void *)(uintptr_t)session->saved.rsp, sizeof words};
    ssize_t got = process_vm_readv(session->pid, &local, 1, &remote, 1, 0);
    for (ssize_t index = 0; index < got / (ssize_t)sizeof words[0]; index++) {
        uint64_t word = words[index];
        if (word < loader->low + 6 || word >= loader->high) continue;
        unsigned char before[6];
        local = (struct iovec){before, sizeof before};
        remote = (struct iovec){(void *)(uintptr_t)(word - 6), sizeof before};
        if (process_vm_readv(session->pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof before &&
            fhj_follows_call(before)) {
            return 1;
        }
    }
    return 0;
}

/* Where a stopped thread is, for the loader's calls the join makes on it. */
typedef enum {
    /* Waiting in a system call that holds nothing the loader needs: the place to prefer. */
    FHJ_PLACE_RESTING,
    /* Running its own code, outside the runtime libraries and the loader: taken when no thread
       rests. */
    FHJ_PLACE_RUNNING,
    /* In a runtime library's code (the C library's, the Swift runtime's: see
       ``fhj_dynamic_loader``; not waiting in a system call), or in a system call that changes
       the memory map (the allocator makes those holding its arena's lock): it may hold a lock
       the tracer's calls take (an allocator's arena, a mutex it is taking or letting go of), and
       they would wait for it forever. Never taken. (The tracer carries its own Swift and C++
       runtimes, so a thread in the process's is safe in fact: the list stays the wider one.) */
    FHJ_PLACE_RUNTIME,
    /* Inside the dynamic loader (``fhj_in_loader``). Never taken. */
    FHJ_PLACE_LOADER,
} fhj_place_kind;

static fhj_place_kind fhj_where(const fhj_session *session, const fhj_dynamic_loader *loader) {
    if (fhj_in_loader(session, loader)) return FHJ_PLACE_LOADER;
    int64_t call = (int64_t)session->saved.orig_rax;
    if (call >= 0) {
        int maps = call == SYS_mmap || call == SYS_munmap || call == SYS_mremap || call == SYS_mprotect ||
                   call == SYS_brk || call == SYS_madvise;
        return maps ? FHJ_PLACE_RUNTIME : FHJ_PLACE_RESTING;
    }
    uint64_t ip = session->saved.rip;
    return fhj_in_runtime(loader, ip) ? FHJ_PLACE_RUNTIME : FHJ_PLACE_RUNNING;
}

/* The executable mappings of the process outside the runtime libraries and the loader (the
   program's code and other libraries'), where a thread that returns from a runtime library
   stands clear of it. */
typedef struct {
    int count;
    struct {
        uint64_t start, end;
    } ranges[256];
} fhj_program_code;

/* What fhj_read_program_code fills. */
typedef struct {
    const fhj_dynamic_loader *loader;
    fhj_program_code *code;
} fhj_code_reading;

static int fhj_add_program_code(const fhj_map_line *line, void *context) {
    fhj_code_reading *reading = context;
    const fhj_dynamic_loader *loader = reading->loader;
    fhj_program_code *code = reading->code;
    /* Not code, the kernel's ([vdso], [vsyscall]), a runtime library's or the loader's. */
    if (line->permissions[2] != 'x' || line->path[0] == '[' || fhj_in_runtime(loader, line->start) ||
        (line->start >= loader->low && line->start < loader->high)) {
        return 0;
    }
    code->ranges[code->count].start = line->start;
    code->ranges[code->count].end = line->end;
    code->count++;
    return code->count == (int)(sizeof code->ranges / sizeof code->ranges[0]);
}

static void fhj_read_program_code(pid_t pid, const fhj_dynamic_loader *loader, fhj_program_code *code) {
    code->count = 0;
    fhj_code_reading reading = {loader, code};
    fhj_each_mapping(pid, fhj_add_program_code, &reading);
}

/* The words of the stopped thread's stack's top (FHJ_STACK_WORDS of them, 32 KiB: glibc's qsort
   recurses deep enough that 8 KiB often held none), from its stack pointer up; how many. */
enum { FHJ_STACK_WORDS = 4096 };
static size_t fhj_stack_top(const fhj_session *session, uint64_t *words) {
    struct iovec local = {words, FHJ_STACK_WORDS * sizeof *words},
                 remote = {(void *)(uintptr_t)session->saved.rsp, FHJ_STACK_WORDS * sizeof *words};
    ssize_t got = process_vm_readv(session->pid, &local, 1, &remote, 1, 0);
    if (got < 0) {
        /* The stack's top is closer than 32 KiB: read up to the end of its page. */
        remote.iov_len = local.iov_len = 4096 - (size_t)(session->saved.rsp & 4095);
        got = process_vm_readv(session->pid, &local, 1, &remote, 1, 0);
    }
    return got > 0 ? (size_t)got / sizeof *words : 0;
}

/* How many return addresses a stop remembers as never reached (``fhj_return_into_program``). */
enum { FHJ_MISSED = 8 };

/* A return address on a stopped thread's stack, and the stack slot that holds it. */
typedef struct {
    uint64_t address, slot;
} fhj_return;

/* The innermost return address on the stopped thread's stack's top (``fhj_stack_top``) that
   leads into the program's code (``fhj_program_code``): where the thread goes when the runtime
   library's or the loader's function it is in returns. Its address 0 when there is none.

   A word that looks like one may be stale: an earlier, deeper call's return address left in a
   frame's slot that was never written since (dlclose's frames hold dlopen's return into the
   program, left by the dlopen before it). A run to it never arrives, and the returns an earlier
   run never reached (`missed`) are passed over, each in the slot that held it: only there, as
   the same address in another slot may be the live one (the next dlopen returns through it;
   passed over by address alone, a process looping on dlopen and dlclose was stopped in dlopen
   with its live return passed over, and not joined, in about 1 join of 20 after the first few).
   A return into a library the program loads and unloads in a loop (its constructor's frame,
   inside dlopen) led the run's code into that library's copy, which its dlclose unmapped: it
   is in the same slot at each load, and passed over there. */
static fhj_return fhj_return_into_program(const fhj_session *session, const fhj_program_code *code,
                                          const fhj_return *missed, int missed_count) {
    uint64_t words[FHJ_STACK_WORDS];
    size_t count = fhj_stack_top(session, words);
    for (size_t index = 0; index < count; index++) {
        uint64_t word = words[index];
        uint64_t slot = session->saved.rsp + (uint64_t)index * sizeof words[0];
        int passed = 0;
        for (int known = 0; known < missed_count && !passed; known++) {
            passed = word == missed[known].address && slot == missed[known].slot;
        }
        if (passed) continue;
        int inside = 0;
        for (int range = 0; range < code->count && !inside; range++) {
            inside = word >= code->ranges[range].start + 6 && word < code->ranges[range].end;
        }
        if (!inside) continue;
        unsigned char before[6];
        struct iovec bytes = {before, sizeof before}, at = {(void *)(uintptr_t)(word - 6), sizeof before};
        if (process_vm_readv(session->pid, &bytes, 1, &at, 1, 0) == (ssize_t)sizeof before && fhj_follows_call(before)) {
            return (fhj_return){word, slot};
        }
    }
    return (fhj_return){0, 0};
}

/* Makes the slots of the stopped thread's stack's top (``fhj_stack_top``) that hold `address`
   lead to a run's code instead, written into the spare code of the very object `address` is
   in: the slot the thread returns through is among them, whatever else holds a copy of the
   address (a stale one left by an earlier call, or one the C library keeps, as dlopen keeps its
   caller's: a copy read meanwhile still names that object). 0 when there is no such slot or no
   place for the code. */
static int fhj_start_run_code(fhj_session *session, uint64_t address) {
    unsigned char bytes[FHJ_CODE_SIZE];
    fhj_run_code_bytes(session, address, bytes);
    uint64_t place = fhj_put_code(session, address, session->run_code_saved, bytes);
    if (!place) return 0;
    session->run_code = place;
    session->patched_value = address;
    uint64_t words[FHJ_STACK_WORDS];
    size_t count = fhj_stack_top(session, words);
    for (size_t index = 0; index < count && session->patched_count < FHJ_PATCHES; index++) {
        uint64_t slot = session->saved.rsp + (uint64_t)index * sizeof words[0];
        if (words[index] == address && fhj_write(session, slot, &place, sizeof place)) {
            session->patched[session->patched_count++] = slot;
        }
    }
    if (session->patched_count == 0) fhj_end_run_code(session);
    return session->patched_count > 0;
}

/* Lets the stopped thread run until it reaches `address`, a return address on its stack, for
   `limit_ms` at most: the stack slots holding it lead to a run's code instead
   (``fhj_start_run_code``), which stops the thread with the stop signal on its way there; or,
   where there is no place for that code or the thread blocks the signal, a hardware breakpoint
   stops it there (in the debug registers of this thread only: its other threads do not see it;
   but a tracer killed meanwhile leaves it set, and the process gets a SIGTRAP there). Sets
   `arrived` when it got there (its registers, as they are at `address`, in `saved`); else it
   is stopped again wherever it is. FHJ_OK unless the thread is gone or ptrace failed. */
static fhj_status fhj_run_to(fhj_session *session, uint64_t address, int limit_ms, int *arrived, char *message,
                             size_t size) {
    *arrived = 0;
    size_t first = offsetof(struct user, u_debugreg[0]), control = offsetof(struct user, u_debugreg[7]),
           state = offsetof(struct user, u_debugreg[6]);
    uint64_t mask = 0;
    int by_code = session->stop_signal != 0 &&
                  ptrace(PTRACE_GETSIGMASK, session->tid, (void *)sizeof mask, &mask) == 0 &&
                  !((mask >> (session->stop_signal - 1)) & 1) &&
                  fhj_start_run_code(session, address);
    if (!by_code && (ptrace(PTRACE_POKEUSER, session->tid, (void *)first, (void *)(uintptr_t)address) != 0 ||
                     ptrace(PTRACE_POKEUSER, session->tid, (void *)control, (void *)1) != 0)) {
        /* DR7: breakpoint 0 enabled for this thread, on execution (type and length 0). */
        ptrace(PTRACE_POKEUSER, session->tid, (void *)control, NULL);
        return FHJ_OK; /* no debug registers here (some virtual machines): stop again instead */
    }
    int deliver = 0, waited = 0, interrupted = 0;
    for (;;) {
        if (ptrace(PTRACE_CONT, session->tid, NULL, (void *)(intptr_t)deliver) != 0 && errno != ESRCH) break;
        deliver = 0;
        int status;
        siginfo_t information;
        fhj_stop stop;
        while ((stop = fhj_wait_stop(session, &information, &status, WNOHANG)) == FHJ_STOP_NONE) {
            usleep(100);
            if (++waited == limit_ms * 10 && !interrupted) {
                interrupted = 1;
                ptrace(PTRACE_INTERRUPT, session->tid, NULL, NULL);
            }
        }
        if (stop == FHJ_STOP_GONE) return fhj_gone(session, status, "as it was being stopped", message, size);
        if (stop == FHJ_STOP_ERROR) {
            fhj_say(message, size, "waiting for process %d: %s", (int)session->pid, strerror(errno));
            return fhj_failed(session, message, size);
        }
        if (stop == FHJ_STOP_EVENT) break;
        struct user_regs_struct registers;
        int got = ptrace(PTRACE_GETREGS, session->tid, NULL, &registers) == 0;
        if (got && by_code && information.si_signo == session->stop_signal &&
            registers.rip == session->run_code + FHJ_RUN_STOP) {
            *arrived = 1;
            fhj_take_code_signal(session, &information);
            break; /* the run code's signal, suppressed */
        }
        if (got && !by_code && information.si_signo == SIGTRAP && registers.rip == address) {
            *arrived = 1;
            break; /* the breakpoint's SIGTRAP, suppressed */
        }
        if (fhj_is_fault(&information)) {
            deliver = information.si_signo;
        } else {
            fhj_keep(session, &information);
        }
    }
    if (!by_code) {
        ptrace(PTRACE_POKEUSER, session->tid, (void *)control, NULL);
        ptrace(PTRACE_POKEUSER, session->tid, (void *)first, NULL);
        ptrace(PTRACE_POKEUSER, session->tid, (void *)state, NULL);
    }
    /* An interrupt asked for that the arrival came before stops the thread later, as an event
       stop, which the calls' waits pass over. */
    if (ptrace(PTRACE_GETREGS, session->tid, NULL, &session->saved) != 0) {
        fhj_say(message, size, "reading the registers of process %d: %s", (int)session->pid, strerror(errno));
        return fhj_failed(session, message, size);
    }
    if (by_code) {
        uint64_t offset = session->saved.rip - session->run_code;
        if (offset < FHJ_CODE_SIZE) {
            /* In the run code (at its stop, or stopped by the interrupt on its way through):
               the thread is put where it would be at `address`. Between its first moves and
               its last, %rax and %rdx are in %r8 and %r9 (free at a return, as %rdi, %rsi,
               %rcx and %r11 that the signal's system call used). */
            if (offset > 6 && offset < FHJ_RUN_STOP + 6) {
                session->saved.rax = session->saved.r8;
                session->saved.rdx = session->saved.r9;
            }
            session->saved.rip = address;
            session->saved.orig_rax = (unsigned long long)-1;
            if (ptrace(PTRACE_SETREGS, session->tid, NULL, &session->saved) != 0) {
                fhj_say(message, size, "setting the registers of process %d: %s", (int)session->pid,
                        strerror(errno));
                return fhj_failed(session, message, size);
            }
            *arrived = 1;
        }
        fhj_end_run_code(session);
    }
    return FHJ_OK;
}

/* Seizes and stops the thread, preferring a stop inside a system call (a thread stopped in
   its own code may hold a lock, of the allocator's or the loader's, that the call would
   need), and never one inside the dynamic loader or a runtime library's code (a program that
   loops on dlopen is stopped again until it is outside, for about two seconds at most); saves
   its registers. */
static fhj_status fhj_stop_thread(fhj_session *session, const fhj_dynamic_loader *loader, const char *thread,
                                  char *message, size_t size) {
    session->tid = fhj_choose_thread(session->pid, thread, &session->named);
    if (ptrace(PTRACE_SEIZE, session->tid, NULL, NULL) != 0) {
        return fhj_explain_refusal(session->pid, errno, message, size);
    }
    session->seized = 1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)session->pid);
    session->memory = open(path, O_RDWR | O_CLOEXEC);
    if (session->memory < 0) {
        fhj_say(message, size, "opening %s: %s", path, strerror(errno));
        return fhj_failed(session, message, size);
    }
    fhj_write_code(session);
    /* Stops before a thread running its own code is taken; how long a stop is looked for. */
    enum { ATTEMPTS = 50, PATIENCE_MS = 2000 };
    struct timespec began;
    clock_gettime(CLOCK_MONOTONIC, &began);
    int in_loader = 0, code_read = 0;
    /* How long a thread in a runtime library is let run towards its return into the program:
       doubled after each time it did not get there, up to 800 ms (a qsort of a million numbers
       spends a quarter of a second in the C library, calling the program's comparator all the
       while). */
    int run_limit_ms = 50;
    fhj_return missed[FHJ_MISSED];
    int missed_count = 0;
    fhj_program_code code;
    uint64_t jitter = (uint64_t)session->pid * 2654435761ULL ^ (uint64_t)time(NULL);
    for (int attempt = 0;; attempt++) {
        if (ptrace(PTRACE_INTERRUPT, session->tid, NULL, NULL) != 0) {
            return fhj_explain_refusal(session->pid, errno, message, size);
        }
        int status;
        siginfo_t information;
        for (;;) {
            fhj_stop stop = fhj_next_stop(session, &information, &status);
            if (stop == FHJ_STOP_GONE) return fhj_gone(session, status, "as it was being stopped", message, size);
            if (stop == FHJ_STOP_ERROR) {
                fhj_say(message, size, "waiting for process %d: %s", (int)session->pid, strerror(errno));
                return fhj_failed(session, message, size);
            }
            if (stop == FHJ_STOP_EVENT) break;
            /* A signal that came first: its own fault goes on to it, any other waits for the detach. */
            int deliver = fhj_is_fault(&information) ? information.si_signo : 0;
            if (!deliver) fhj_keep(session, &information);
            ptrace(PTRACE_CONT, session->tid, NULL, (void *)(intptr_t)deliver);
        }
        if (ptrace(PTRACE_GETREGS, session->tid, NULL, &session->saved) != 0) {
            fhj_say(message, size, "reading the registers of process %d: %s", (int)session->pid, strerror(errno));
            return fhj_failed(session, message, size);
        }
        session->stopped = 1;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long elapsed_ms = (now.tv_sec - began.tv_sec) * 1000 + (now.tv_nsec - began.tv_nsec) / 1000000;
        fhj_place_kind place = fhj_where(session, loader);
        /* A thread in its own code is taken when no stop in a system call came in ATTEMPTS
           stops or half the patience. */
        if (place == FHJ_PLACE_RESTING ||
            (place == FHJ_PLACE_RUNNING && (attempt >= ATTEMPTS - 1 || elapsed_ms >= PATIENCE_MS / 2))) {
            break;
        }
        if (place == FHJ_PLACE_RUNTIME || place == FHJ_PLACE_LOADER) {
            /* Inside a runtime library or the loader: let it run until it returns into the program,
               where it holds none of their locks (a program that loops on dlopen is there for a
               few instructions of each loop, and another stop would hardly ever find it). */
            if (!code_read) fhj_read_program_code(session->pid, loader, &code);
            code_read = 1;
            fhj_return target = fhj_return_into_program(session, &code, missed, missed_count);
            int arrived = 0;
            if (target.address) {
                fhj_status ran = fhj_run_to(session, target.address, run_limit_ms, &arrived, message, size);
                if (ran != FHJ_OK) return ran;
                if (!arrived && run_limit_ms < 800) run_limit_ms *= 2;
                if (!arrived && missed_count < FHJ_MISSED) missed[missed_count++] = target;
            }
            if (arrived && fhj_where(session, loader) == FHJ_PLACE_RUNNING) break;
        }
        in_loader += place == FHJ_PLACE_LOADER;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - began.tv_sec) * 1000 + (now.tv_nsec - began.tv_nsec) / 1000000 >= PATIENCE_MS) {
            if (in_loader * 2 >= attempt + 1) {
                fhj_say(message, size,
                        "process %d was inside the dynamic loader (a dlopen or dlclose under way) %d of the %d times "
                        "it was stopped, in about two seconds, and never where the tracer's loading is safe; it is "
                        "not joined: try again",
                        (int)session->pid, in_loader, attempt + 1);
            } else {
                fhj_say(message, size,
                        "process %d was inside the code of the C library (or another runtime library, where it "
                        "may hold a lock that the tracer's loading needs) or the dynamic loader each of the %d "
                        "times it was stopped, in about two seconds; it is not joined: try again",
                        (int)session->pid, attempt + 1);
            }
            return FHJ_FAILED;
        }
        ptrace(PTRACE_CONT, session->tid, NULL, NULL);
        /* Between 0.5 and 1.5 ms, at random: a program that loops on dlopen has a period of its
           own, which a fixed pause could keep meeting at the same place of its loop. */
        jitter = jitter * 6364136223846793005ULL + 1442695040888963407ULL;
        usleep(500 + (useconds_t)((jitter >> 33) % 1000));
    }
    session->xstate.iov_base = malloc(FHJ_XSTATE);
    session->xstate.iov_len = FHJ_XSTATE;
    if (session->xstate.iov_base &&
        ptrace(PTRACE_GETREGSET, session->tid, (void *)(uintptr_t)NT_X86_XSTATE, &session->xstate) == 0) {
        session->fpu_kind = 1;
    } else if (ptrace(PTRACE_GETFPREGS, session->tid, NULL, &session->fpregs) == 0) {
        session->fpu_kind = 2;
    } else {
        fhj_say(message, size, "reading the floating-point registers of process %d: %s", (int)session->pid,
                strerror(errno));
        return fhj_failed(session, message, size);
    }
    /* A thread may block the faults' signals (one that blocks every signal to leave them to
       sigwait, a new thread before its start has restored its mask): a call that faults there,
       under the fault guard, would make the kernel put the process's SIGSEGV action back to
       the default, for good, and unblock it. The calls run with those signals unblocked. */
    uint64_t faults = (1ULL << (SIGSEGV - 1)) | (1ULL << (SIGBUS - 1)) | (1ULL << (SIGILL - 1)) |
                      (1ULL << (SIGFPE - 1)) | (1ULL << (SIGTRAP - 1));
    /* And the join code's stop signal. */
    if (session->code) faults |= 1ULL << (session->stop_signal - 1);
    if (ptrace(PTRACE_GETSIGMASK, session->tid, (void *)sizeof session->mask, &session->mask) == 0) {
        session->mask_saved = 1;
        uint64_t open_mask = session->mask & ~faults;
        if (open_mask != session->mask &&
            ptrace(PTRACE_SETSIGMASK, session->tid, (void *)sizeof open_mask, &open_mask) != 0) {
            fhj_say(message, size, "unblocking the fault signals of a thread of process %d: %s", (int)session->pid,
                    strerror(errno));
            return fhj_failed(session, message, size);
        }
    } else if (errno == ESRCH) {
        fhj_say(message, size, "reading the signal mask of a thread of process %d: %s", (int)session->pid,
                strerror(errno));
        return fhj_failed(session, message, size);
    }
    return FHJ_OK;
}

/* Puts the registers and stack bytes back and detaches, delivering the kept signals. */
static void fhj_restore(fhj_session *session) {
    /* The registers first: until then the thread stands in the join's code, which a tracer
       killed meanwhile leaves it to run, over the frame the stack bytes below would overwrite. */
    if (session->stopped) ptrace(PTRACE_SETREGS, session->tid, NULL, &session->saved);
    if (session->mask_saved) ptrace(PTRACE_SETSIGMASK, session->tid, (void *)sizeof session->mask, &session->mask);
    if (session->fpu_kind == 1) {
        ptrace(PTRACE_SETREGSET, session->tid, (void *)(uintptr_t)NT_X86_XSTATE, &session->xstate);
    } else if (session->fpu_kind == 2) {
        ptrace(PTRACE_SETFPREGS, session->tid, NULL, &session->fpregs);
    }
    if (session->scratch_saved) {
        fhj_write(session, session->scratch, session->scratch_saved, session->scratch_size);
    }
    fhj_end_run_code(session);
    /* The thread is out of the join's code: the bytes it took go back (no other thread can be
       in it: only this thread's calls and run went there). */
    if (session->code) fhj_write(session, session->code, session->code_saved, FHJ_CODE_SIZE);
    int first = 0;
    /* From a signal-delivery-stop the first kept signal goes with the detach, its information
       intact; the others (and all of them from another stop) are sent again. */
    if (session->in_signal_stop && session->kept_count > 0 &&
        ptrace(PTRACE_SETSIGINFO, session->tid, NULL, &session->kept[0]) == 0) {
        first = session->kept[0].si_signo;
    }
    for (int index = first ? 1 : 0; index < session->kept_count; index++) {
        siginfo_t *information = &session->kept[index];
        /* Queued with its information (sigqueue's value) when the kernel lets a process say it
           sent it (a negative code but SI_TKILL's); else as tgkill sends it. */
        if (information->si_code < 0 && information->si_code != SI_TKILL &&
            syscall(SYS_rt_tgsigqueueinfo, session->pid, session->tid, information->si_signo, information) == 0) {
            continue;
        }
        syscall(SYS_tgkill, session->pid, session->tid, information->si_signo);
    }
    ptrace(PTRACE_DETACH, session->tid, NULL, (void *)(intptr_t)first);
}

// MARK: - Calls

/* Calls `function` with the six `arguments` (integers or pointers) on the stopped thread; its
   %rax in `result`. */
static fhj_status fhj_remote_call(fhj_session *session, const char *name, uint64_t function, const uint64_t *arguments,
                                  uint64_t *result, char *message, size_t size) {
    struct user_regs_struct registers = session->saved;
    registers.rip = function;
    registers.rdi = arguments[0];
    registers.rsi = arguments[1];
    registers.rdx = arguments[2];
    registers.rcx = arguments[3];
    registers.r8 = arguments[4];
    registers.r9 = arguments[5];
    registers.rax = 0;
    registers.rsp = session->call_stack;
    /* No system call to restart when the thread goes on, and the direction flag clear. */
    registers.orig_rax = (unsigned long long)-1;
    registers.eflags &= ~(unsigned long long)0x400;
    /* The join's code keeps each result in the return address's slot: the address again. */
    uint64_t return_address = session->code;
    if (session->returns_by_code && !fhj_write(session, session->call_stack, &return_address, sizeof return_address)) {
        fhj_say(message, size, "writing the stack of process %d: %s", (int)session->pid, strerror(errno));
        return fhj_failed(session, message, size);
    }
    if (ptrace(PTRACE_SETREGS, session->tid, NULL, &registers) != 0 ||
        ptrace(PTRACE_CONT, session->tid, NULL, NULL) != 0) {
        fhj_say(message, size, "starting the call of %s in process %d: %s", name, (int)session->pid,
                strerror(errno));
        return fhj_failed(session, message, size);
    }
    char during[128];
    snprintf(during, sizeof during, "while one of its threads ran %s for the tracer", name);
    for (;;) {
        int status;
        siginfo_t information;
        fhj_stop stop = fhj_next_stop(session, &information, &status);
        if (stop == FHJ_STOP_GONE) return fhj_gone(session, status, during, message, size);
        if (stop == FHJ_STOP_ERROR) {
            fhj_say(message, size, "waiting for process %d: %s", (int)session->pid, strerror(errno));
            return fhj_failed(session, message, size);
        }
        int deliver = 0;
        if (stop == FHJ_STOP_SIGNAL) {
            if (ptrace(PTRACE_GETREGS, session->tid, NULL, &registers) != 0) {
                fhj_say(message, size, "reading the registers of process %d: %s", (int)session->pid,
                        strerror(errno));
                return fhj_failed(session, message, size);
            }
            if (session->returns_by_code && information.si_signo == session->stop_signal &&
                registers.rip == session->code + FHJ_CALL_STOP) {
                fhj_take_code_signal(session, &information);
                if (!fhj_read(session, session->call_stack, result, sizeof *result)) {
                    fhj_say(message, size, "reading the stack of process %d: %s", (int)session->pid, strerror(errno));
                    return fhj_failed(session, message, size);
                }
                return FHJ_OK;
            }
            if (!session->returns_by_code && information.si_signo == SIGSEGV && registers.rip == FHJ_RETURN) {
                *result = registers.rax;
                return FHJ_OK;
            }
            if (fhj_is_fault(&information)) {
                /* Its own fault: the process's handler sees it, as it would without the tracer;
                   one it does not handle would kill the process, which is spared instead. */
                if (!fhj_catches(session->pid, information.si_signo)) {
                    fhj_say(message, size,
                            "%s faulted in process %d with %s at %#llx (address %p); the thread's registers and "
                            "stack were put back, but what the call did until then stays done",
                            name, (int)session->pid, strsignal(information.si_signo), registers.rip,
                            information.si_addr);
                    return FHJ_FAULTED;
                }
                deliver = information.si_signo;
            } else {
                fhj_keep(session, &information);
            }
        }
        if (ptrace(PTRACE_CONT, session->tid, NULL, (void *)(intptr_t)deliver) != 0 && errno == ESRCH) {
            continue; /* the next wait says how it ended */
        }
    }
}

/* Calls `function(first, second)` on the stopped thread; its %rax in `result`. */
static fhj_status fhj_remote(fhj_session *session, const char *name, uint64_t function, uint64_t first,
                             uint64_t second, uint64_t *result, char *message, size_t size) {
    uint64_t arguments[6] = {first, second, 0, 0, 0, 0};
    return fhj_remote_call(session, name, function, arguments, result, message, size);
}

/* The signal frame that rt_sigreturn reads at `frame` (the kernel's struct rt_sigframe, whose
   first word, the return address, the call's `ret` took: its ucontext follows at frame + 8):
   the thread's saved registers, its signal mask and its vector state at `state`. A thread
   stopped in an interrupted system call goes back to make it again, as the kernel would have
   it (rt_sigreturn itself restarts nothing), but for a sleep (see below). Fills `context`
   (written at frame + 8) and `state_bytes`, whose size goes to `state_size`. */
static void fhj_frame(const fhj_session *session, uint64_t state, ucontext_t *context, unsigned char *state_bytes,
                      size_t *state_size) {
    const struct user_regs_struct *r = &session->saved;
    memset(context, 0, sizeof *context);
    greg_t *g = context->uc_mcontext.gregs;
    g[REG_R8] = (greg_t)r->r8, g[REG_R9] = (greg_t)r->r9, g[REG_R10] = (greg_t)r->r10, g[REG_R11] = (greg_t)r->r11;
    g[REG_R12] = (greg_t)r->r12, g[REG_R13] = (greg_t)r->r13, g[REG_R14] = (greg_t)r->r14;
    g[REG_R15] = (greg_t)r->r15, g[REG_RDI] = (greg_t)r->rdi, g[REG_RSI] = (greg_t)r->rsi;
    g[REG_RBP] = (greg_t)r->rbp, g[REG_RBX] = (greg_t)r->rbx, g[REG_RDX] = (greg_t)r->rdx;
    g[REG_RAX] = (greg_t)r->rax, g[REG_RCX] = (greg_t)r->rcx, g[REG_RSP] = (greg_t)r->rsp;
    g[REG_RIP] = (greg_t)r->rip, g[REG_EFL] = (greg_t)r->eflags;
    /* cs, gs, fs, ss: 16 bits each; the frame's ss is used (UC_SIGCONTEXT_SS). */
    g[REG_CSGSFS] = (greg_t)((r->cs & 0xffff) | ((uint64_t)(r->ss & 0xffff) << 48));
    int64_t call = (int64_t)r->orig_rax, value = (int64_t)r->rax;
    if (call >= 0 && (value == -FHJ_ERESTARTSYS || value == -FHJ_ERESTARTNOINTR || value == -FHJ_ERESTARTNOHAND)) {
        g[REG_RAX] = call;
        g[REG_RIP] -= 2; /* the syscall instruction's length */
    } else if (call >= 0 && value == -FHJ_ERESTART_RESTARTBLOCK) {
        /* A sleep whose remaining time only the kernel knows, and rt_sigreturn forgets: it ends
           early with EINTR, as a signal handler would have it end. */
        g[REG_RAX] = -EINTR;
    }
    context->uc_mcontext.fpregs = (fpregset_t)(uintptr_t)state;
    memcpy(&context->uc_sigmask, &session->mask, sizeof session->mask);
    context->uc_flags = FHJ_UC_SIGCONTEXT_SS | FHJ_UC_STRICT_RESTORE_SS;
    if (session->fpu_kind == 1) {
        size_t length = session->xstate.iov_len;
        memcpy(state_bytes, session->xstate.iov_base, length);
        /* ptrace gives the standard (not compacted) XSAVE layout, with XCR0 where a frame keeps
           its software bytes. The frame claims the components the header says are in use
           (XSTATE_BV; the others are in their first state, where rt_sigreturn puts what a frame
           does not claim) and is as long as the last of them: not longer than the frames the
           kernel makes for this thread (without AMX's tile data unless it is in use), which is
           what rt_sigreturn accepts. Each component's place is the processor's (CPUID 0xD). */
        uint64_t in_use = 0;
        memcpy(&in_use, state_bytes + 512, sizeof in_use);
        in_use |= 3; /* x87 and SSE: in the legacy area */
        uint32_t end = 576;    /* the legacy area and the header */
        for (unsigned component = 2; component < 64; component++) {
            if (!((in_use >> component) & 1)) continue;
            unsigned size = 0, offset = 0, flags = 0, unused = 0;
            __cpuid_count(0xD, component, size, offset, flags, unused);
            if (offset + size > end) end = offset + size;
        }
        if (end + 4 <= FHJ_XSTATE && end <= length) {
            struct {
                uint32_t magic1, extended_size;
                uint64_t features;
                uint32_t xstate_size, padding[7];
            } software = {FHJ_XSTATE_MAGIC1, end + 4, in_use, end, {0}};
            memcpy(state_bytes + FHJ_SW_BYTES, &software, sizeof software);
            uint32_t magic2 = FHJ_XSTATE_MAGIC2;
            memcpy(state_bytes + end, &magic2, 4);
            *state_size = end + 4;
            context->uc_flags |= FHJ_UC_FP_XSTATE;
        } else {
            /* Not as expected: the legacy part alone (x87 and SSE), the rest set to its start. */
            memset(state_bytes + FHJ_SW_BYTES, 0, 512 - FHJ_SW_BYTES);
            *state_size = 512;
        }
    } else {
        memcpy(state_bytes, &session->fpregs, 512);
        memset(state_bytes + FHJ_SW_BYTES, 0, 512 - FHJ_SW_BYTES);
        *state_size = 512;
    }
}

/* Copies the strings the calls need below `top`, and places the return address under them:
   with the join's code, under a signal frame (``fhj_frame``) that the code returns through;
   `addresses` receive the strings' addresses, `call_stack` the stack pointer of the calls. On
   the thread's own stack (`keep`), the bytes they cover are kept, to be put back. */
static fhj_status fhj_place(fhj_session *session, uint64_t top, int keep, const char *const *strings,
                            uint64_t *addresses, size_t count, char *message, size_t size) {
    uint64_t next = top;
    for (size_t index = 0; index < count; index++) {
        next = (next - (strlen(strings[index]) + 1)) & ~(uint64_t)15;
        addresses[index] = next;
    }
    session->returns_by_code = session->code && session->mask_saved && session->fpu_kind;
    ucontext_t context;
    unsigned char *state_bytes = NULL;
    size_t state_size = 0;
    uint64_t state = 0, frame_context = 0;
    if (session->returns_by_code) {
        size_t room = session->fpu_kind == 1 ? session->xstate.iov_len + 4 : 512;
        state_bytes = calloc(1, room);
        if (!state_bytes) {
            session->returns_by_code = 0;
        } else {
            state = (next - room) & ~(uint64_t)63; /* XRSTOR's alignment */
            fhj_frame(session, state, &context, state_bytes, &state_size);
            frame_context = (state - sizeof context) & ~(uint64_t)15;
            next = frame_context;
        }
    }
    /* At a function's entry the stack pointer is 8 below a multiple of 16: the return address. */
    session->call_stack = next - 8;
    if (keep) {
        session->scratch = session->call_stack;
        session->scratch_size = (size_t)(top - session->scratch);
        session->scratch_saved = malloc(session->scratch_size);
        if (!session->scratch_saved ||
            !fhj_read(session, session->scratch, session->scratch_saved, session->scratch_size)) {
            free(session->scratch_saved);
            free(state_bytes);
            session->scratch_saved = NULL;
            fhj_say(message, size, "reading the stack of process %d at %#" PRIx64 ": %s", (int)session->pid,
                    session->scratch, strerror(errno));
            return fhj_failed(session, message, size);
        }
    }
    uint64_t return_address = session->returns_by_code ? session->code : FHJ_RETURN;
    int written = fhj_write(session, session->call_stack, &return_address, sizeof return_address);
    for (size_t index = 0; index < count && written; index++) {
        written = fhj_write(session, addresses[index], strings[index], strlen(strings[index]) + 1);
    }
    if (written && session->returns_by_code) {
        written = fhj_write(session, state, state_bytes, state_size) &&
                  fhj_write(session, frame_context, &context, sizeof context);
    }
    free(state_bytes);
    if (!written) {
        fhj_say(message, size, "writing the stack of process %d: %s", (int)session->pid, strerror(errno));
        return fhj_failed(session, message, size);
    }
    return FHJ_OK;
}

/* The string at `address` in the process (at most size - 1 bytes). */
static void fhj_read_string(fhj_session *session, uint64_t address, char *text, size_t size) {
    text[0] = 0;
    if (!address || size == 0) return;
    ssize_t got = pread(session->memory, text, size - 1, (off_t)address);
    text[got > 0 ? (size_t)got : 0] = 0;
}

/* One session: stops a thread, then (with a library) loads it and finds `entry` and `later`
   in it, or (without) checks that `address` is still in the library's code, and calls the
   function as `int f(const char *argument)`; puts everything back. */
static fhj_status fhj_run(pid_t pid, const char *library, int load, const char *thread, const char *entry,
                          uint64_t address, const char *argument, const char *later, uint64_t *later_address,
                          int32_t *result, char *message, size_t size) {
    fhj_status status = fhj_check(pid, message, size);
    if (status != FHJ_OK) return status;
    /* A program caught as it starts, before its loader has mapped the C library, is not taken
       for a static one: the join waits for the C library (its dlopen) a little. */
    if (load && !fhj_wait_for_libc(pid, 2000)) {
        fhj_say(message, size,
                "process %d has not mapped the C library two seconds after its dynamic loader (a program that is "
                "starting, stopped before its libraries were loaded): try again once it runs",
                (int)pid);
        return FHJ_NO_LOADER;
    }
    fhj_session session = {.pid = pid, .memory = -1};
    fhj_dynamic_loader dynamic;
    fhj_find_dynamic_loader(pid, &dynamic);
    status = fhj_stop_thread(&session, &dynamic, thread, message, size);
    fhj_loader loader = {0};
    if (status == FHJ_OK && load) status = fhj_find_loader(pid, &loader, message, size);
    if (status == FHJ_OK && !load) {
        char ignored[256];
        if (fhj_find_loader(pid, &loader, ignored, sizeof ignored) != FHJ_OK) loader = (fhj_loader){0};
    }
    if (status == FHJ_OK && !load && !fhj_maps_code(pid, address, library)) {
        fhj_say(message, size, "%s is not loaded in process %d any more (did it execute another program?)", library,
                (int)pid);
        status = FHJ_LOAD_FAILED;
    }
    const char *strings[] = {library, entry, argument, later ? later : ""};
    uint64_t addresses[4] = {0};
    /* The calls (dlopen, the tracer's start, which attaches every traced function) need more
       stack than a thread may have left: one stopped in a signal handler on a small alternate
       stack overflowed it. They run on a stack of their own, mapped for them by a call made on
       the thread's own stack with nothing but its frame there; without it (no mmap found, or
       it failed), on the thread's own stack. The tracer's own named thread keeps its stack: the
       tracer knows its threads by their stacks, and maps them large. */
    uint64_t own_top = (session.saved.rsp - FHJ_RED_ZONE) & ~(uint64_t)15;
    if (status == FHJ_OK && loader.mmap && loader.munmap && !session.named) {
        status = fhj_place(&session, own_top, 1, NULL, NULL, 0, message, size);
        enum { STACK_SIZE = 8 << 20 };
        uint64_t arguments[6] = {0, STACK_SIZE, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, (uint64_t)-1, 0};
        uint64_t mapped = 0;
        if (status == FHJ_OK) status = fhj_remote_call(&session, "mmap", loader.mmap, arguments, &mapped, message, size);
        if (status == FHJ_OK && mapped != (uint64_t)MAP_FAILED && mapped != 0) {
            session.private_stack = mapped;
            session.private_size = STACK_SIZE;
            session.own_call_stack = session.call_stack;
        } else if (status == FHJ_OK && session.scratch_saved) {
            /* Not mapped: the calls go on the thread's own stack, placed again from its top. */
            fhj_write(&session, session.scratch, session.scratch_saved, session.scratch_size);
            free(session.scratch_saved);
            session.scratch_saved = NULL;
        }
    }
    if (status == FHJ_OK) {
        if (session.private_stack) {
            status = fhj_place(&session, session.private_stack + session.private_size, 0, strings, addresses, 4,
                               message, size);
        } else {
            status = fhj_place(&session, own_top, 1, strings, addresses, 4, message, size);
        }
    }
    uint64_t handle = 0, function = address, value = 0;
    if (status == FHJ_OK && load) {
        int flags = RTLD_NOW | RTLD_NODELETE;
        status = fhj_remote(&session, "dlopen", loader.dlopen, addresses[0], (uint64_t)flags, &handle, message, size);
        if (status == FHJ_OK && handle == 0) {
            uint64_t error = 0;
            char text[512];
            status = fhj_remote(&session, "dlerror", loader.dlerror, 0, 0, &error, message, size);
            if (status == FHJ_OK) {
                fhj_read_string(&session, error, text, sizeof text);
                fhj_say(message, size, "process %d cannot load %s: %s", (int)pid, library,
                        text[0] ? text : "dlopen failed");
                status = FHJ_LOAD_FAILED;
            }
        }
        for (int index = 0; index < 2 && status == FHJ_OK; index++) {
            const char *name = index == 0 ? entry : later;
            if (!name) continue;
            uint64_t found = 0;
            status = fhj_remote(&session, "dlsym", loader.dlsym, handle, addresses[index == 0 ? 1 : 3], &found,
                                message, size);
            if (status == FHJ_OK && found == 0) {
                fhj_say(message, size, "%s, loaded in process %d, has no function %s", library, (int)pid, name);
                status = FHJ_LOAD_FAILED;
            }
            if (index == 0) function = found;
            if (index == 1 && later_address) *later_address = found;
        }
    }
    if (status == FHJ_OK) {
        status = fhj_remote(&session, entry, function, addresses[2], 0, &value, message, size);
        if (status == FHJ_OK) {
            *result = (int32_t)value;
            fhj_say(message, size, "%s", "");
        }
    }
    if (session.private_stack && status != FHJ_EXITED && status != FHJ_FAULTED) {
        /* Unmapped by a call made on the thread's own stack again (the frame placed there for
           the mmap is still whole: only the result's slot changed, which each call sets). */
        uint64_t arguments[6] = {session.private_stack, session.private_size, 0, 0, 0, 0}, unmapped = 0;
        session.call_stack = session.own_call_stack;
        char unmapping[256];
        uint64_t unmap = session.code ? session.code + FHJ_CALL_UNMAP : loader.munmap;
        fhj_status freed = fhj_remote_call(&session, "munmap", unmap, arguments, &unmapped, unmapping,
                                           sizeof unmapping);
        if (freed == FHJ_EXITED || freed == FHJ_FAULTED) {
            status = freed;
            fhj_say(message, size, "%s", unmapping);
        }
    }
    if (status != FHJ_EXITED && session.seized) fhj_restore(&session);
    if (session.memory >= 0) close(session.memory);
    free(session.scratch_saved);
    free(session.xstate.iov_base);
    free(session.kept);
    return status;
}

fhj_status fhj_load_and_call(pid_t pid, const char *library, const char *entry, const char *argument,
                             const char *later, uint64_t *later_address, int32_t *result, char *message,
                             size_t size) {
    return fhj_run(pid, library, 1, NULL, entry, 0, argument, later, later_address, result, message, size);
}

fhj_status fhj_call(pid_t pid, const char *library, const char *entry, uint64_t address, const char *argument,
                    const char *thread, int32_t *result, char *message, size_t size) {
    return fhj_run(pid, library, 0, thread, entry, address, argument, NULL, NULL, result, message, size);
}
