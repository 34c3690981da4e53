#include "CTestHookLock.h"

/* -1: held alone; 0: free; n > 0: held by n tests together. */
static int ct_hook_lock_state;
/* Set while a test waits to hold the lock alone: no new shared hold is given meanwhile, so
   that a run of tests holding it together cannot keep it from that test for ever. */
static int ct_hook_lock_waiting;

int ct_hook_lock_try_shared(void) {
    if (__atomic_load_n(&ct_hook_lock_waiting, __ATOMIC_ACQUIRE)) return 0;
    int state = __atomic_load_n(&ct_hook_lock_state, __ATOMIC_ACQUIRE);
    while (state >= 0) {
        if (__atomic_compare_exchange_n(&ct_hook_lock_state, &state, state + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            return 1;
        }
    }
    return 0;
}

int ct_hook_lock_try_exclusive(void) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&ct_hook_lock_state, &expected, -1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&ct_hook_lock_waiting, 0, __ATOMIC_RELEASE);
        return 1;
    }
    __atomic_store_n(&ct_hook_lock_waiting, 1, __ATOMIC_RELEASE);
    return 0;
}

void ct_hook_lock_release_shared(void) { __atomic_sub_fetch(&ct_hook_lock_state, 1, __ATOMIC_ACQ_REL); }

void ct_hook_lock_release_exclusive(void) { __atomic_store_n(&ct_hook_lock_state, 0, __ATOMIC_RELEASE); }
