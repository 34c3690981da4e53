#ifndef FFH_STOP_H
#define FFH_STOP_H

// Stopping the process's other threads while code changes (stop.c), for the writer
// (writer.c): every other thread is sent a real-time signal whose handler reports where the
// thread was and parks it until the stop ends; a thread that blocks the signal is asked again
// through SIGSEGV, or found asleep in a system call (its place read from /proc).
//
// Between ffh_stop_world and ffh_release_world nothing here calls libc: a stopped thread may
// hold any lock, and a function the writer would call may be the one being written.

#include <stddef.h>
#include <stdint.h>

#include "ffh_patch.h"

/// One stop. Its threads are the entries of indices below `limit` whose stop is `number`.
typedef struct {
    uint64_t number;
    size_t limit;
    /// How many threads parked.
    int32_t stopped;
    uint64_t saved_mask;
} ffh_stop;

/// Where a thread of a stop is.
typedef enum {
    /// Not a thread of this stop (or one that exited).
    FFH_STOPPED_NONE = 0,
    /// Parked in the handler: its place is known and it can be moved.
    FFH_STOPPED_PARKED = 1,
    /// Asleep in a system call with the signal blocked: its place is known, it cannot be moved.
    FFH_STOPPED_IN_SYSCALL = 2,
} ffh_stopped_kind;

/// Takes the stop lock and stops every other thread; FFH_PATCH_DONE, or a status with
/// `result` filled (the threads that did stop are stopped all the same: release them).
ffh_patch_status ffh_stop_world(ffh_stop *stop, ffh_patch_result *result);

/// The thread of entry `index` (below `stop->limit`): what it is, its id and its place.
ffh_stopped_kind ffh_stop_thread(const ffh_stop *stop, size_t index, int32_t *thread, uintptr_t *pc);

/// Sends a parked thread on at `destination` when it is released (0: where it was).
void ffh_stop_move(const ffh_stop *stop, size_t index, uintptr_t destination);

/// Ends the stop: parked threads go on (each applying its move as it leaves the handler; the
/// stopper does not wait for them) and the stop lock is released.
void ffh_release_world(ffh_stop *stop);

#endif
