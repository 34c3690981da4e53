#ifndef CTRACERJOIN_H
#define CTRACERJOIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#pragma clang assume_nonnull begin

// Joining a running process (prefix fhj_): `ffi-hook-tracer --pid` stops one thread of it
// with ptrace, makes that thread call the loader (`dlopen`, `dlsym`) and one entry point of
// the tracer library, puts every register and every byte it wrote back, and detaches. The
// process's other threads run on meanwhile. Linux x86-64 only.

/// What became of a call made in another process; the message says more.
typedef enum {
    /// The entry point ran and returned; its result is in `result`.
    FHJ_OK = 0,
    /// No process has this ID (or it exited before it could be stopped).
    FHJ_NO_PROCESS = 1,
    /// The kernel refused to let this process trace it: another user's process, Yama's
    /// ptrace_scope, a process that made itself non-dumpable, or no CAP_SYS_PTRACE.
    FHJ_NOT_PERMITTED = 2,
    /// Another tracer (a debugger, strace, ltrace) traces it already.
    FHJ_ALREADY_TRACED = 3,
    /// It exited (or was killed) while one of its threads ran the call.
    FHJ_EXITED = 4,
    /// It has no loader to call: not a glibc process, or a glibc older than 2.34 without
    /// libdl.so.2, or not a 64-bit x86 process, or a kernel thread.
    FHJ_NO_LOADER = 5,
    /// The loader refused: `dlopen` failed (the message holds `dlerror`'s text), or the library
    /// has no such entry point (or, asked not to load it, the library is not loaded).
    FHJ_LOAD_FAILED = 6,
    /// The call faulted in the process (the message says where); registers and memory were
    /// put back, but what the call had done until then stays done.
    FHJ_FAULTED = 7,
    /// Something else failed (a system call of the tracer's own; the message names it).
    FHJ_FAILED = 8,
} fhj_status;

/// Stops a thread of process `pid` (its main thread, or another when the main thread has
/// exited), loads `library` there with `dlopen` (RTLD_NOW | RTLD_NODELETE), finds `entry` with
/// `dlsym`, and calls it as `int entry(const char *argument)`, the argument copied onto the
/// thread's stack (below its red zone); `later`, when given, is looked up too (before the
/// call) and its address stored in `later_address`, for ``fhj_call``. Then puts back the
/// thread's registers (general, x87/SSE/AVX state) and the stack bytes it wrote, and detaches;
/// the signals the thread received meanwhile are delivered to it after the detach (the first
/// one with its original information, real-time ones each). Blocks until that is done,
/// however long the call takes.
///
/// The thread is chosen, when it can be, while it waits in a system call (not while it runs
/// code that may hold a lock the loader needs), and never inside the dynamic loader, holding
/// the loader's lock, in the code of a library the tracer's own code uses (the C library, the
/// Swift and C++ runtimes) outside a system call, or in a system call that changes the memory
/// map (the allocator makes those holding its lock): such a thread is let run to its return
/// into the program's code, or stopped again; after about two seconds without such a stop,
/// FHJ_FAILED. `message` receives a sentence explaining any
/// status but FHJ_OK (and is empty for FHJ_OK); `result` the entry's return value.
fhj_status fhj_load_and_call(
    pid_t pid, const char *library, const char *entry, const char *argument, const char *_Nullable later,
    uint64_t *_Nullable later_address, int32_t *result, char *message, size_t message_size);

/// Calls the function at `address` (named `entry` in messages), which ``fhj_load_and_call``
/// found in `library`, as ``fhj_load_and_call`` calls its entry, without calling the loader
/// (so that nothing but the function runs in the process); FHJ_LOAD_FAILED when `address` is
/// not in `library`'s code in the process any more. The call is made on the thread named
/// `thread` (its comm) when there is one, else on the thread ``fhj_load_and_call`` uses.
fhj_status fhj_call(
    pid_t pid, const char *library, const char *entry, uint64_t address, const char *argument,
    const char *_Nullable thread, int32_t *result, char *message, size_t message_size);

/// Why the process cannot be traced at all, checked before stopping it: FHJ_OK when nothing
/// stands in the way that can be seen from /proc, else FHJ_NO_PROCESS, FHJ_ALREADY_TRACED,
/// FHJ_EXITED (a zombie) or FHJ_NOT_PERMITTED (this process itself), with a message.
fhj_status fhj_check(pid_t pid, char *message, size_t message_size);

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (the wrapper has one), so that
/// they wait until ``fhj_wait`` reads them instead of ending the wrapper mid-injection.
void fhj_block_interrupts(void);

/// What ended ``fhj_wait``.
typedef enum {
    /// The time ran out.
    FHJ_WAIT_TIMEOUT = 0,
    /// SIGINT, SIGTERM or SIGHUP arrived (or was already pending).
    FHJ_WAIT_INTERRUPTED = 1,
    /// The process exited.
    FHJ_WAIT_EXITED = 2,
} fhj_wait_reason;

/// Waits until `milliseconds` pass (forever when negative), an interrupt blocked by
/// ``fhj_block_interrupts`` arrives, or process `pid` exits.
fhj_wait_reason fhj_wait(pid_t pid, int64_t milliseconds);

/// Whether process `pid` still runs (not exited, not a zombie).
int fhj_alive(pid_t pid);

#pragma clang assume_nonnull end

#endif
