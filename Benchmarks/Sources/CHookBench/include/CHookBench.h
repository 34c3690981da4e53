#ifndef CHOOKBENCH_H
#define CHOOKBENCH_H

#include <stdint.h>

/// The C signatures the benchmark calls, one slot and one original function each.
typedef enum hb_signature {
    /// `int (int, int)`
    HB_INT_INT = 0,
    /// `void (void)`
    HB_VOID = 1,
    /// `double (double, double)`
    HB_DOUBLE = 2,
    /// `int (int, int, int, int, int, int)`: every integer argument register in use.
    HB_SIX_INTS = 3,
    /// `double (struct hb_point)`: a 16-byte struct passed in two SSE registers.
    HB_STRUCT16 = 4,
    /// `struct hb_record (struct hb_record)`: a 40-byte struct passed and returned in memory.
    HB_STRUCT40 = 5,
    HB_SIGNATURE_COUNT = 6
} hb_signature;

/// A 16-byte struct, passed by value in registers.
typedef struct hb_point {
    double x;
    double y;
} hb_point;

/// A 40-byte struct, passed and returned by value through memory.
typedef struct hb_record {
    long long a, b, c, d, e;
} hb_record;

// The originals. None is inlined, so every call is a real call.
int hb_add(int a, int b);
void hb_tick(void);
double hb_mix(double a, double b);
int hb_sum6(int a, int b, int c, int d, int e, int f);
double hb_point_sum(hb_point point);
hb_record hb_record_next(hb_record record);

/// `hb_add` with 16 bytes of no-ops ahead of its addition: long enough for frida-gum's
/// Interceptor, which patches a function's first 16 bytes and refuses a shorter one. It is
/// also the function the inline rows patch, called directly from a C loop (a `call rel32`,
/// no slot, no pointer), and given to frida by its address.
int hb_add_padded(int a, int b);

/// Makes `hb_add_padded` the original of `HB_INT_INT` and puts it in its slot, so that every
/// mechanism of the peer comparison calls the one function frida can patch. Call it before
/// anything is installed on `HB_INT_INT`: a raw closure keeps the original it was made with.
void hb_use_padded_int_int(void);

/// The address of `hb_add_padded`, the function the inline rows patch in its own code.
void *hb_direct_function(void);

/// A compiled replacement for `hb_add_padded`, as a user of `Hook.replace` writes one: it
/// calls the original through the pointer ``hb_set_replacement_original`` stored (for an
/// inline hook, the trampoline that `ReplacementToken.original` gives).
int hb_add_replacement(int a, int b);

/// Stores the function ``hb_add_replacement`` calls as the original.
void hb_set_replacement_original(void *original);

/// An empty attach function (FFIHook's AttachFunctions), as a user writes one in C: what the
/// rows with C functions run on entry and on return, and frida's rows with empty C listeners.
void hb_empty_attach_function(void *context, void *frame);

/// How many times `hb_tick` has run (wrapping), so that a check can see that a call of
/// `void (void)` reached the original.
unsigned hb_tick_calls(void);

/// The type encoding of `signature` (`"iii"` for `int (int, int)`).
const char *hb_encoding(hb_signature signature);

/// The address of the slot that holds the function of `signature`; a hook replaces its content.
void **hb_slot(hb_signature signature);

/// The original function of `signature`.
void *hb_original(hb_signature signature);

/// Nanoseconds on the monotonic clock.
uint64_t hb_now_ns(void);

/// Sleeps for `nanoseconds` (resumed after a signal).
void hb_sleep_ns(uint64_t nanoseconds);

/// Calls the function in the slot of `signature` `iterations` times, reading the slot anew
/// for each call, with arguments that change every call; returns the elapsed nanoseconds.
uint64_t hb_time_slot_calls(hb_signature signature, int64_t iterations);

/// Calls the slot of `signature` once with fixed arguments and reports whether the result
/// is what the original returns for them (a hook that forwards must not change it); for
/// `void (void)`, whether the original ran once.
int hb_check_slot(hb_signature signature);

/// Puts a raw libffi closure in the slot of `signature`: its handler only forwards the call
/// to the original with `ffi_call`, the least a libffi-based hook can do. Returns 0, or -1
/// when libffi cannot make the closure. The closure is made once and kept.
int hb_raw_closure_install(hb_signature signature);

/// Puts a raw libffi closure in the slot of `signature`, prepared with the same cif as
/// ``hb_raw_closure_install``, whose handler reads the arguments from libffi's array, calls
/// the original through a typed function pointer and stores the result in libffi's buffer:
/// the least any hook built on a libffi closure can cost. Returns 0, or -1 when libffi cannot
/// make the closure. The closure is made once and kept.
int hb_closure_limit_install(hb_signature signature);

/// Writes the original back into the slot of `signature`.
void hb_slot_restore(hb_signature signature);

/// A loop that makes `iterations` calls of `signature` a certain way (through its slot, directly,
/// as Objective-C messages).
typedef void (*hb_call_loop)(hb_signature signature, int64_t iterations);

/// The loop of ``hb_time_slot_calls``, untimed: calls through the slot of `signature`.
void hb_slot_loop(hb_signature signature, int64_t iterations);

/// Arithmetic without memory or calls, `iterations` rounds of it, as an ``hb_call_loop``
/// (`signature` is ignored): a floor for thread scaling that shows whether the two threads
/// got a core each.
void hb_alu_loop(hb_signature signature, int64_t iterations);

/// Starts `threads` threads that each run `loop` for `iterations` calls of `signature`,
/// released together once every one of them runs; returns the nanoseconds from the first
/// thread's first call to the last thread's last, or 0 when a thread cannot be started.
uint64_t hb_time_threaded_calls(hb_call_loop loop, hb_signature signature, int threads, int64_t iterations);

// MARK: - Direct calls (inline hooks)

/// Calls `hb_add_padded` `iterations` times with a direct `call` from a C loop, with
/// arguments that change every call; returns the elapsed nanoseconds. Nothing in the loop
/// can be redirected but the function's own first bytes: an inline hook, or frida's patch.
uint64_t hb_time_direct_calls(int64_t iterations);

/// The loop of ``hb_time_direct_calls``, untimed, as an ``hb_call_loop`` (`signature` is
/// ignored: the function is `int (int, int)`).
void hb_direct_loop(hb_signature signature, int64_t iterations);

/// Calls `hb_add_padded(40, 2)` directly and reports whether it returned 42.
int hb_check_direct(void);

/// Starts `threads` threads (at most 16) that call `hb_add_padded` directly in a loop and
/// check every result, until ``hb_direct_callers_stop``; returns once all of them are
/// calling. Returns 0, or -1 when a thread cannot be started (none is left running) or
/// callers are running already.
int hb_direct_callers_start(int threads);

/// Stops the threads ``hb_direct_callers_start`` started and waits for them; returns the
/// calls they made in all, and stores in `wrong` how many returned something other than
/// the sum of their arguments.
int64_t hb_direct_callers_stop(int64_t *wrong);

// MARK: - Peers

/// A helper process that hooks this one from outside (frida attaches through ptrace), and the
/// pipes to its standard input and from its standard output.
typedef struct hb_peer {
    int pid;
    int to;
    int from;
} hb_peer;

/// Lets processes of this user trace this one (where Yama allows ptrace only from ancestors;
/// without Yama nothing changes), ignores SIGPIPE, and starts `arguments` (NULL-terminated,
/// the first found through PATH) with our environment and standard error. Returns 0, or an
/// errno value.
int hb_peer_start(char *const *arguments, hb_peer *peer);

/// Writes `line` and a newline to the peer (nothing when `line` is NULL), then reads one line
/// of its answer into `answer` without the newline, cut to `capacity` - 1 bytes and
/// NUL-terminated. Returns the answer's length, or -1 when the peer has closed its end.
long hb_peer_exchange(hb_peer *peer, const char *line, char *answer, long capacity);

/// Closes the pipe to the peer, which tells it to undo everything and quit, then waits for it.
/// Returns its exit status, or -1 when it did not exit normally.
int hb_peer_finish(hb_peer *peer);

// The inline batch rows and the library rows.
#include "hb_batch.h"
#include "hb_library.h"

#endif
