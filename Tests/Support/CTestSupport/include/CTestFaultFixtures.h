#ifndef CTEST_FAULT_FIXTURES_H
#define CTEST_FAULT_FIXTURES_H

// Memory that goes away under the library's writes, faults it must not swallow, and a
// signal handler of the program's own, for the fault guard's tests.

/// A fresh page (mmap, anonymous) with `protection` (PROT_* flags), or NULL.
void *ff_map_page(int protection);
/// Changes the page's protection (mprotect); 0 on success.
int ff_protect_page(void *page, int protection);
/// Unmaps the page (munmap); 0 on success.
int ff_unmap_page(void *page);

/// Writes through a NULL pointer: a real fault, outside anything the library guards.
void ff_write_through_null(void);

/// Installs a SIGSEGV handler of the program's own (sigaction with SA_SIGINFO) that counts
/// the faults it gets and returns to ff_touch with siglongjmp; 0 on success.
int ff_install_user_handler(void);
/// The handler of ff_install_user_handler, installed with SA_RESETHAND: the kernel puts the
/// default action back as it delivers the first fault. 0 on success.
int ff_install_resetting_user_handler(void);
/// Sets SIGSEGV to SIG_IGN (which the kernel overrides for a fault); 0 on success.
int ff_ignore_faults(void);
/// Reads the word at `address` with the handler of ff_install_user_handler ready to catch a
/// fault: 1 when it did, and reported `address` as the fault's address; 0 when the read did
/// not fault; -1 when the handler reported another address.
int ff_touch(const void *address);
/// How many faults the handler of ff_install_user_handler got.
int ff_user_handler_calls(void);

/// Installs a SIGSEGV handler that, like a crash reporter, passes each fault on to the
/// action it replaced (calling it, or restoring SIG_DFL and returning), after writing
/// "the chaining handler ran: call N" to standard error; past three calls it ends the
/// process with _exit(3). 0 on success.
int ff_install_chaining_handler(void);

/// A `int (*)(int)` that returns its argument plus one: what each slot of a race table holds.
int ff_original(int value);
/// A page holding a table of `count` slots (at most 512), each set to ff_original, or NULL.
void **ff_table_map(int count);
/// One round of the unmap race: `callers` threads share out the slots of `table` (a page
/// from ff_table_map; caller k takes slots k, k + callers, …), read theirs, then call each
/// once with the slot's index; as soon as all have read, this thread waits `delay` spins
/// and unmaps the table while the calls (and whatever hooks on the slots do, such as
/// removing themselves) run. Returns the sum of the calls' results, or -1 when a thread
/// could not be started or the table not unmapped.
long ff_race_round(void **table, int count, int callers, int delay);

/// `ffh_interrupted_below` asked over stack memory that holds the signal frame of a handler
/// that has returned (SIGUSR2 raised 8 KB deeper, from a frame that has returned too): 0 when it
/// tells that frame from a running handler's.
int ff_interrupted_below_left_frame(void);
/// `ffh_interrupted_below` asked from inside a SIGUSR2 handler about the frame that raised it: 1.
int ff_interrupted_below_running_handler(void);

#endif
