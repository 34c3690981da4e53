#ifndef CTESTERRNOFIXTURES_H
#define CTESTERRNOFIXTURES_H

/// A function that fails: sets errno to `value` and returns -1 (0 leaves errno alone and
/// returns 0).
int ct_errno_fail(int value);

/// The slot the callers below call through; holds ct_errno_fail until a test changes it.
extern int (*ct_errno_slot)(int value);
/// The address of ct_errno_slot.
void *ct_errno_slot_address(void);

/// Sets errno to `before`, calls through ct_errno_slot with `value`, and stores in `*seen`
/// the errno the caller finds right after the call, with no other code in between.
int ct_errno_call(int before, int value, int *seen);

/// The same call made on a thread started for it (the thread's first hooked call).
int ct_errno_call_on_new_thread(int before, int value, int *seen);

/// Sets errno to `before`, calls `fsync(fd)` through the program's import entry and stores
/// the errno seen right after in `*seen`.
int ct_errno_call_fsync(int before, int fd, int *seen);

/// errno as C reads it, and a C store to it.
int ct_errno_get(void);
void ct_errno_set(int value);

#endif
