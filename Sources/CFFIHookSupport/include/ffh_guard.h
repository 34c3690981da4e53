#ifndef FFH_GUARD_H
#define FFH_GUARD_H

// Reads and compare-and-swaps of memory the library does not own (a slot its owner may
// unmap or protect at any moment) that cannot crash the process.
//
// On Linux x86-64 each access is one instruction at a known address, run under a fault
// guard: a SIGSEGV and SIGBUS handler, installed with the `rt_sigaction` system call (never
// through libc's `sigaction`, which a program may hook), that turns a fault at one of those
// instructions into an error return and passes every other fault to the handler that was
// installed before it, as the kernel would have: an SA_SIGINFO or plain handler is called
// with that handler's signal mask and SA_NODEFER and SA_RESETHAND honoured; under SIG_DFL
// or SIG_IGN the default action is restored and the fault repeats, ending the process with
// the signal it got. The guard runs on the alternate signal stack when the thread has one.
//
// A handler installed after the guard (a crash reporter, a sanitizer) is found by the next
// guarded access, which asks the kernel (one system call: is the guard still the SIGSEGV
// handler?) and puts the guard back on top, passing other faults to that handler in turn;
// a handler that passes faults on to the one it replaced (the guard) gets from the guard the
// handler before it, not itself. At most eight handlers are covered that way per signal;
// after that, accesses fall back to the check below. Inside a session (a short stretch of
// work on one thread, such as one install or removal) the kernel is asked once, at the
// first access. A program that replaces only its SIGBUS handler after the guard is not
// noticed (SIGBUS only arises for a slot in a file mapping cut short). A handler installed
// for a moment and then replaced by the action it saved (the guard) stays covered, and gets
// the faults that are not the guard's, if a guarded access covered it in that moment.
//
// Elsewhere the accesses say the guard is unavailable, and ffh_memory.h's callers ask the
// kernel instead: whether the memory can be written (a futex operation that fails on memory
// that is unmapped or read-only) right before the exchange, where a window remains in which
// an unmap can make the exchange fault, or for a copy of the word.

#include <signal.h>
#include <stdint.h>

/// What ``ffh_guarded_exchange`` and ``ffh_guarded_load`` return when the guard is not in
/// place (another platform, or it could not be installed): the caller chooses another way
/// (ffh_memory.h's ``ffh_read_word`` and ``ffh_exchange_if_writable`` ask the kernel).
#define FFH_GUARD_UNAVAILABLE (-2)

/// Replaces the aligned machine word at `address` with `desired` if it holds `expected`,
/// without faulting: 1 when replaced, 0 when it held something else, -1 when it cannot be
/// written (unmapped, read-only, or a bus error), ``FFH_GUARD_UNAVAILABLE`` without the guard.
int ffh_guarded_exchange(void *address, uintptr_t expected, uintptr_t desired);

/// Reads the machine word at `address` into `value` without faulting: 0 on success, -1
/// when it cannot be read, ``FFH_GUARD_UNAVAILABLE`` without the guard.
int ffh_guarded_load(const void *address, uintptr_t *value);

/// How many faults the guarded accesses took in this process so far (each a SIGSEGV or SIGBUS
/// the thread took and the guard turned into an error return); 0 where there is no guard.
uint64_t ffh_guard_faults_taken(void);

/// Installs the fault guard, or puts it back on top of a handler installed since: 0 when it
/// is in place for SIGSEGV and SIGBUS, -1 when it cannot be (another platform, or too many
/// handlers installed over it). Idempotent and thread-safe; the guarded accesses call it.
int ffh_guard_install(void);

/// Blocks `signal` while the guard's handler runs, from now on (the code writer's stop
/// signal: a thread parked through SIGSEGV must not take it inside the handler).
void ffh_guard_block_during(int signal);

/// A function that may take a SIGSEGV sent with `sigqueue` (si_code SI_QUEUE) before the guard
/// treats it as a fault: 1 when it took it (the handler then returns), 0 when it is not its.
typedef int (*ffh_guard_claimer)(siginfo_t *info, void *context);

/// Sets the function that takes queued SIGSEGVs first: the code writer's (CFFIHookPatch), whose
/// stop requests go again as SIGSEGV to a thread that blocks its real-time signal.
void ffh_guard_set_claimer(ffh_guard_claimer claimer);

/// The restorer the guard installs its handler with (the kernel's `sa_restorer`, which returns
/// from a handler through `rt_sigreturn`), for the library's other handlers.
void ffh_guard_restorer(void);

/// Whether the guard is the handler the kernel runs for SIGSEGV and for SIGBUS right now.
int ffh_guard_is_installed(void);

/// Starts a session on this thread (sessions nest): its guarded accesses ask the kernel
/// whether the guard is in place only once, at the first. Keep it short: a handler the
/// program installs during a session is covered only by the next one.
void ffh_guard_session_begin(void);

/// Ends the session ffh_guard_session_begin started.
void ffh_guard_session_end(void);

#endif
