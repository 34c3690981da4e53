#ifndef FFH_PATCH_H
#define FFH_PATCH_H

// Writing machine code that other threads may be executing (inline hooks): the process's
// other threads are stopped with a signal while the bytes change, and a thread stopped inside
// the bytes being replaced is moved to the matching instruction elsewhere. One stop writes a
// whole batch.
//
// Between stopping the threads and releasing them the library makes system calls with the
// processor's instruction only: a stopped thread may hold any lock (the allocator's, the
// dynamic linker's), and a function the library would call may be the one being hooked.

#include <stddef.h>
#include <stdint.h>

/// A move: a stopped thread whose instruction pointer is `from` continues at `to`.
typedef struct {
    uintptr_t from;
    uintptr_t to;
} ffh_patch_move;

/// Why a write did not happen (0 when it did).
typedef enum {
    FFH_PATCH_DONE = 0,
    /// The platform has no code writer (only Linux x86-64 has one).
    FFH_PATCH_UNSUPPORTED = 1,
    /// No real-time signal was free for stopping threads, or installing its handler failed.
    FFH_PATCH_NO_SIGNAL = 2,
    /// A thread did not stop in time and its instruction pointer could not be read.
    FFH_PATCH_THREAD_UNRESPONSIVE = 3,
    /// A thread was inside the bytes to replace at a place no move names.
    FFH_PATCH_THREAD_INSIDE = 4,
    /// The code could not be written: `mprotect` failed with `error`.
    FFH_PATCH_PROTECTION = 5,
    /// The bytes found at the address are not the ones expected.
    FFH_PATCH_CHANGED = 6,
    /// Memory for the stop's bookkeeping could not be mapped.
    FFH_PATCH_NO_MEMORY = 7,
    /// The code's memory is not mapped any more.
    FFH_PATCH_UNMAPPED = 8,
} ffh_patch_status;

/// What the last look at a thread that did not stop in time found (`error` of a result whose
/// status is FFH_PATCH_THREAD_UNRESPONSIVE); no bit: it did not block the signal, yet never
/// answered.
enum {
    /// It blocked the stop signal and was running (or its system call could not be read).
    FFH_UNRESPONSIVE_BLOCKS_SIGNAL = 1,
    /// It blocked SIGSEGV too, so the request could not be repeated that way.
    FFH_UNRESPONSIVE_BLOCKS_SEGV = 2,
    /// The request had gone again as SIGSEGV.
    FFH_UNRESPONSIVE_ASKED_BY_SEGV = 4,
};

/// What a stop did.
typedef struct {
    ffh_patch_status status;
    /// The thread concerned by a failure (its kernel thread id), 0 for none.
    int32_t thread;
    /// That thread's instruction pointer, when known.
    uintptr_t pc;
    /// The errno of a failed system call, 0 for none; for FFH_PATCH_THREAD_UNRESPONSIVE, the
    /// FFH_UNRESPONSIVE_* bits.
    int32_t error;
    /// How many other threads were stopped.
    int32_t stopped;
    /// How many of them were moved.
    int32_t moved;
} ffh_patch_result;

/// One write of a batch: the `length` bytes at `address`, which must hold `expected`, become
/// `bytes`. A stopped thread whose instruction pointer lies in [`watch_start`, `watch_end`)
/// is moved by the entry of `moves` whose `from` it equals; one that no entry names (or that
/// sleeps in a system call there, and cannot be moved) keeps this write from happening.
/// `protection` is the page's protection (PROT_* bits), restored where the page's protection
/// had to change for the write. The `status` and the fields after it are the write's outcome.
typedef struct {
    void *address;
    const uint8_t *expected;
    const uint8_t *bytes;
    size_t length;
    int protection;
    uintptr_t watch_start;
    uintptr_t watch_end;
    const ffh_patch_move *moves;
    size_t move_count;
    /// Out: FFH_PATCH_DONE, THREAD_INSIDE, PROTECTION, CHANGED or UNMAPPED; or, when the stop
    /// itself failed, the stop's status.
    ffh_patch_status status;
    /// Out: the thread that kept the write from happening, and its instruction pointer.
    int32_t thread;
    uintptr_t pc;
    /// Out: the errno of a failed system call.
    int32_t error;
    /// Out: how many stopped threads this write moved.
    int32_t moved;
} ffh_patch_request;

/// Writes every request of `requests` while every other thread of the process is stopped,
/// once for the whole batch. Each request succeeds or fails on its own (its `status`); a
/// request that fails is not written at all. The bytes go through `/proc/self/mem`, which
/// writes read-only code without changing any mapping's protection; where the kernel forbids
/// that, the page is made writable for the moment of the write. Returns FFH_PATCH_DONE when
/// the threads were stopped (then each request says how it went), or why they could not be
/// (then nothing was written, and each request has that status); `result` says how many
/// threads were stopped and moved.
ffh_patch_status ffh_patch_write_batch(ffh_patch_request *requests, size_t count, ffh_patch_result *result);

/// One write as a batch of one: replaces the `length` bytes at `address`, which must hold
/// `expected`, with `bytes`, with every other thread stopped (see ffh_patch_request for the
/// other arguments). Nothing is written on failure. Returns the status, which `result` details.
ffh_patch_status ffh_patch_write(
    void *address, const uint8_t *expected, const uint8_t *bytes, size_t length, int protection,
    uintptr_t watch_start, uintptr_t watch_end, const ffh_patch_move *moves, size_t move_count,
    ffh_patch_result *result);

/// Writes `length` bytes into code that no thread runs yet (a fresh trampoline in memory the
/// library mapped executable): through `/proc/self/mem`, else by making the whole area
/// [`area`, `area` + `area_length`) writable and executable for the moment of the write (so
/// that its mapping does not split) and read-and-execute again. No thread is stopped. Returns
/// 0, or the errno of the failure.
int ffh_patch_write_code(void *address, const void *bytes, size_t length, void *area, size_t area_length);

/// Stops the other threads and reports each one's instruction pointer into `pcs` (up to
/// `capacity`, returning how many threads were stopped, or -1 with `result` saying why),
/// then releases them: for tests, and to see where threads are.
int ffh_patch_sample(uintptr_t *pcs, size_t capacity, ffh_patch_result *result);

/// The signal used to stop threads, 0 before the first stop.
int ffh_patch_signal(void);

/// Says (`yes` 1) that the calling thread blocks every signal but those a fault raises, the
/// stop signal among them (a tool's own thread, which must take none of the program's
/// signals): a stop asks it by SIGSEGV at once, which parks it as the stop signal would,
/// rather than after a wait for the stop signal and a look at its state in /proc. Taken back
/// (`yes` 0) before the thread ends, since its number may go to another thread then. Sixteen
/// threads at most are remembered; others are asked the usual way.
void ffh_patch_thread_takes_faults_only(int yes);

/// Whether this thread is inside the stop's signal handler now (parked by a writer on another
/// thread, or on its way in or out): a thread where code made to run from outside the process
/// (a tracer's call on a thread it stopped) must not run.
int ffh_patch_thread_is_parked(void);

/// How many times the process's threads have been stopped (every batch of writes, and every
/// sample, stops them once): for tests and benchmarks.
uint64_t ffh_patch_stop_count(void);

/// How many times stops have looked at the state in /proc (done for a thread that did not park
/// at the stop signal within a short wait) of the thread the last call named, and names
/// `thread` for the count from now on, from 0: for tests.
uint64_t ffh_patch_inspections(int32_t thread);

#endif
