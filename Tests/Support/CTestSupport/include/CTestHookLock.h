#ifndef CTEST_HOOK_LOCK_H
#define CTEST_HOOK_LOCK_H

// A lock the test targets share, in one process: tests that compare the process's hook
// figures exactly (Hook.statistics, closure counts) hold it alone, tests that install hooks of
// their own in other suites hold it together. Not tied to a thread (an async test may end on
// another), and only ever tried: a waiting test sleeps and tries again.

/// Takes the lock shared; 1 when taken, 0 when a test holds it alone.
int ct_hook_lock_try_shared(void);
/// Takes the lock alone; 1 when taken, 0 when anyone holds it.
int ct_hook_lock_try_exclusive(void);
/// Gives back a shared hold.
void ct_hook_lock_release_shared(void);
/// Gives back the lone hold.
void ct_hook_lock_release_exclusive(void);

#endif
