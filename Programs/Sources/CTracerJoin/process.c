#define _GNU_SOURCE
#include "join.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// MARK: - Messages

void fhj_say(char *message, size_t size, const char *format, ...) {
    if (size == 0) return;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(message, size, format, arguments);
    va_end(arguments);
}

// MARK: - /proc

int fhj_read_process(pid_t pid, pid_t tid, fhj_process *process) {
    char path[64];
    if (tid > 0) {
        snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    } else {
        snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    }
    FILE *file = fopen(path, "re");
    if (!file) return 0;
    memset(process, 0, sizeof *process);
    char line[256];
    while (fgets(line, sizeof line, file)) {
        if (strncmp(line, "Name:\t", 6) == 0) {
            snprintf(process->name, sizeof process->name, "%s", line + 6);
            process->name[strcspn(process->name, "\n")] = 0;
        } else if (strncmp(line, "State:\t", 7) == 0) {
            process->state = line[7];
        } else if (strncmp(line, "Uid:\t", 5) == 0) {
            unsigned ids[4] = {0};
            sscanf(line + 5, "%u %u %u %u", &ids[0], &ids[1], &ids[2], &ids[3]);
            for (int index = 0; index < 4; index++) process->uids[index] = (uid_t)ids[index];
        } else if (strncmp(line, "TracerPid:\t", 11) == 0) {
            process->tracer = (pid_t)atoi(line + 11);
        }
    }
    fclose(file);
    return 1;
}

/* Whether process `pid` is a kernel thread (PF_KTHREAD among the flags of /proc/PID/stat, the
   ninth field): it has no memory of a program's, and ptrace refuses it whoever asks. */
static int fhj_is_kernel_thread(pid_t pid) {
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *file = fopen(path, "re");
    if (!file) return 0;
    int got = fgets(line, sizeof line, file) != NULL;
    fclose(file);
    /* The command name, in parentheses, may hold spaces and parentheses: the fields follow the
       last ')'. */
    const char *after = got ? strrchr(line, ')') : NULL;
    if (!after) return 0;
    char state;
    int parent, group, session, terminal, foreground;
    unsigned long flags = 0;
    if (sscanf(after + 1, " %c %d %d %d %d %d %lu", &state, &parent, &group, &session, &terminal, &foreground,
               &flags) != 7) {
        return 0;
    }
    return (flags & 0x00200000UL) != 0; /* PF_KTHREAD */
}

fhj_status fhj_check(pid_t pid, char *message, size_t size) {
    fhj_say(message, size, "%s", "");
    if (pid <= 0) {
        fhj_say(message, size, "%d is not a process ID", (int)pid);
        return FHJ_NO_PROCESS;
    }
    if (pid == getpid()) {
        fhj_say(message, size, "process %d is the tracer itself", (int)pid);
        return FHJ_NOT_PERMITTED;
    }
    fhj_process process;
    if (!fhj_read_process(pid, 0, &process)) {
        fhj_say(message, size, "no process with ID %d", (int)pid);
        return FHJ_NO_PROCESS;
    }
    if (process.state == 'Z' || process.state == 'X') {
        fhj_say(message, size, "process %d (%s) has exited (a zombie its parent has not reaped)", (int)pid,
                process.name);
        return FHJ_EXITED;
    }
    if (fhj_is_kernel_thread(pid)) {
        fhj_say(message, size,
                "process %d (%s) is a kernel thread: it runs no program, only the kernel's own code, and cannot be "
                "traced",
                (int)pid, process.name);
        return FHJ_NO_LOADER;
    }
    if (process.tracer != 0) {
        fhj_process tracer;
        const char *name = fhj_read_process(process.tracer, 0, &tracer) ? tracer.name : "?";
        fhj_say(message, size,
                "process %d (%s) is already traced by process %d (%s); a process has one tracer at a time: end "
                "that one (a debugger, strace, ltrace) first",
                (int)pid, process.name, (int)process.tracer, name);
        return FHJ_ALREADY_TRACED;
    }
    return FHJ_OK;
}

/* What a value of /proc/sys/kernel/yama/ptrace_scope allows. */
static const char *fhj_yama_meaning(int scope) {
    switch (scope) {
    case 0: return "0, classic: a process may trace any process of its own user";
    case 1:
        return "1, restricted: without CAP_SYS_PTRACE a process may trace only its descendants and the processes "
               "that named it with prctl(PR_SET_PTRACER); run the tracer as root (or with CAP_SYS_PTRACE), or allow "
               "it with `sysctl kernel.yama.ptrace_scope=0`";
    case 2: return "2, admin-only: only a process with CAP_SYS_PTRACE may trace; run the tracer as root";
    case 3: return "3, no attach: no process may trace another until the system restarts";
    default: return "an unknown value";
    }
}

fhj_status fhj_explain_refusal(pid_t pid, int error, char *message, size_t size) {
    fhj_process process;
    if (error == ESRCH || !fhj_read_process(pid, 0, &process)) {
        fhj_say(message, size, "no process with ID %d (it may have exited)", (int)pid);
        return FHJ_NO_PROCESS;
    }
    if (error != EPERM) {
        fhj_say(message, size, "cannot trace process %d (%s): ptrace: %s", (int)pid, process.name, strerror(error));
        return FHJ_FAILED;
    }
    char reasons[768] = "";
    size_t used = 0;
    uid_t me = geteuid();
    if (me != 0 && (process.uids[0] != me || process.uids[1] != me || process.uids[2] != me)) {
        used += (size_t)snprintf(reasons + used, sizeof reasons - used,
                                 "; it belongs to user ID %u, and only a process with CAP_SYS_PTRACE (root) may "
                                 "trace another user's process",
                                 (unsigned)process.uids[1]);
    }
    char path[64];
    struct stat directory;
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    if (used < sizeof reasons && stat(path, &directory) == 0 && directory.st_uid == 0 && process.uids[1] != 0) {
        used += (size_t)snprintf(reasons + used, sizeof reasons - used,
                                 "; it is not dumpable (a set-user-ID program, or prctl(PR_SET_DUMPABLE, 0)), "
                                 "which only CAP_SYS_PTRACE may trace");
    }
    FILE *yama = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    if (yama) {
        int scope = -1;
        if (fscanf(yama, "%d", &scope) != 1) scope = -1;
        fclose(yama);
        if (used < sizeof reasons && scope != 0) {
            used += (size_t)snprintf(reasons + used, sizeof reasons - used, "; Yama's ptrace_scope is %s",
                                     fhj_yama_meaning(scope));
        }
    }
    if (used == 0) {
        snprintf(reasons, sizeof reasons,
                 "; this process may lack CAP_SYS_PTRACE where it is needed (a container, or a security module)");
    }
    fhj_say(message, size, "not permitted to trace process %d (%s)%s", (int)pid, process.name, reasons);
    return FHJ_NOT_PERMITTED;
}

int fhj_alive(pid_t pid) {
    fhj_process process;
    return fhj_read_process(pid, 0, &process) && process.state != 'Z' && process.state != 'X';
}

// MARK: - Waiting

/* The signals that end a wait: an interrupt from the terminal, a termination request, a hang-up. */
static const int fhj_interrupts[] = {SIGINT, SIGTERM, SIGHUP};

/* The set of ``fhj_interrupts``. */
static sigset_t fhj_interrupt_set(void) {
    sigset_t set;
    sigemptyset(&set);
    for (size_t index = 0; index < sizeof fhj_interrupts / sizeof fhj_interrupts[0]; index++) {
        sigaddset(&set, fhj_interrupts[index]);
    }
    return set;
}

void fhj_block_interrupts(void) {
    sigset_t set = fhj_interrupt_set();
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* CLOCK_MONOTONIC in milliseconds. */
static int64_t fhj_now_milliseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

fhj_wait_reason fhj_wait(pid_t pid, int64_t milliseconds) {
    sigset_t set = fhj_interrupt_set();
    int signals = signalfd(-1, &set, SFD_CLOEXEC);
    /* A pidfd reads ready when the process exits; without one, /proc is asked every 100 ms. */
    int process = (int)syscall(SYS_pidfd_open, pid, 0);
    int64_t deadline = milliseconds < 0 ? -1 : fhj_now_milliseconds() + milliseconds;
    fhj_wait_reason reason = FHJ_WAIT_TIMEOUT;
    for (;;) {
        if (!fhj_alive(pid)) {
            reason = FHJ_WAIT_EXITED;
            break;
        }
        int64_t left = deadline < 0 ? -1 : deadline - fhj_now_milliseconds();
        if (deadline >= 0 && left <= 0) break;
        int timeout = process >= 0 ? (left < 0 || left > 1000000 ? 1000000 : (int)left)
                                   : (left < 0 || left > 100 ? 100 : (int)left);
        struct pollfd watched[2] = {{.fd = signals, .events = POLLIN}, {.fd = process, .events = POLLIN}};
        int ready = poll(watched, 2, timeout);
        if (ready < 0 && errno != EINTR) break;
        if (ready > 0 && (watched[0].revents & POLLIN)) {
            struct signalfd_siginfo information;
            if (read(signals, &information, sizeof information) > 0) {
                reason = FHJ_WAIT_INTERRUPTED;
                break;
            }
        }
        if (ready > 0 && (watched[1].revents & (POLLIN | POLLHUP))) {
            reason = FHJ_WAIT_EXITED;
            break;
        }
    }
    if (signals >= 0) close(signals);
    if (process >= 0) close(process);
    return reason;
}
