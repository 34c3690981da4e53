#ifndef CTESTTHREADFIXTURES_H
#define CTESTTHREADFIXTURES_H

#include <stdint.h>

/// Starts `threads` C threads that each call the `int(int, int)` function held at `slot`
/// `calls` times with arguments (i, 1), loading the slot before every call (as
/// ct_fix_call_add_through), joins them and returns the sum of every result; -1 when a
/// thread could not be started.
long long ct_threads_call_add(int (**slot)(int, int), int threads, long long calls);

/// Calls `fsync(fd)` through the program's import entry on a thread started for it; returns
/// its result.
int ct_fsync_on_new_thread(int fd);

/// Blocks every signal but SIGSEGV and SIGBUS on the calling thread (as a thread that leaves
/// signals to another does), stores the thread's id in `*thread`, then reads one byte from
/// `fd` with a system call made in this function (at ct_blocked_read_syscall_address, where
/// a thread stopped in it has its instruction pointer, or 2 bytes on): what the system call
/// returned, a negative errno on failure.
long ct_blocked_read(int fd, volatile int *thread);

/// ct_blocked_read, the thread saying first that it takes only faults (`says(1)`: the
/// library's ffh_patch_thread_takes_faults_only) and taking it back after (`says(0)`).
long ct_blocked_read_saying(int fd, volatile int *thread, void (*says)(int));

/// Reads the thread id ct_blocked_read stores (atomically, as it is stored).
int ct_load_thread_id(volatile int *thread);

/// The address of ct_blocked_read's system call instruction.
uintptr_t ct_blocked_read_syscall_address(void);

/// Starts a thread named "ct-deaf-spin" that blocks every signal, SIGSEGV included, and spins
/// outside any system call until ct_deaf_spinner_stop: one no stop request can reach. Returns
/// the spinner (one at a time), NULL when the thread could not start.
void *ct_deaf_spinner_start(void);

/// The spinner's kernel thread id.
int ct_deaf_spinner_thread(void *spinner);

/// Stops the spinner's thread and waits for it to end.
void ct_deaf_spinner_stop(void *spinner);

/// Keeps the process from starting threads from now on, as a sandbox that refuses `clone`
/// does: a seccomp filter makes `clone3` unknown and a `clone` that makes a thread fail with
/// EAGAIN, so every pthread_create fails (a clone of another kind, the leak checker's, still
/// works). 0 when the filter is in place.
int ct_threads_cannot_start(void);

#endif
