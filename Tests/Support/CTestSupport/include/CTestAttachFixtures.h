#ifndef CTESTATTACHFIXTURES_H
#define CTESTATTACHFIXTURES_H

// C functions and callers for the attach tests: shapes whose arguments and results travel in
// every kind of register and on the stack, a variadic function, callers that reach a
// function through a slot (so the compiler made the call), and originals that recurse,
// longjmp, unwind, take backtraces, block, and end their thread.

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    long a, b;
} at_pair;
typedef struct {
    double x, y;
} at_point;
typedef struct {
    long a, b, c;
} at_triple;

/// What every function below leads to through these slots (set by at_reset).
typedef struct {
    long (*add)(long, long);
    double (*mix)(long, double, long, double, long, double, long, double, long, double, float, long, double);
    long (*many)(long, long, long, long, long, long, long, long, double, double, double, double, double, double,
                 double, double, double, double, at_triple);
    double (*vsum)(int count, ...);
    at_pair (*pair)(long, long);
    at_point (*point)(double, double);
    at_triple (*triple)(long, long, long);
    long double (*extended)(long double, long double);
    long (*recurse)(long depth);
    long (*jumper)(long value);
    long (*tracer)(long value);
    long (*block)(long value);
    long (*exiter)(long value);
    long (*unwinder)(long value);
    long (*signaller)(long value);
    long (*tail)(long, long);
    void (*thrower)(long value);
    /// Tail-calls at_table.thrower(value) (a jump through the table).
    void (*tail_thrower)(long value);
    long (*trapper)(long value);
    int (*setjmper)(void *buffer);
} at_slots;

/// The slots, and a reset that points each at its function.
extern at_slots at_table;
void at_reset(void);
at_slots *at_slots_get(void);

/// Calls through the slots, as compiled code would (the compiler lays out every argument).
long at_call_add(long a, long b);
/// Registers fork handlers (prepare and parent) that each call at_add through its slot; 0 on
/// success. Registered before the library's own, they run inside fork between the library's.
int at_fork_register(void);
double at_call_mix(void);
double at_call_mix_direct(void);
long at_call_many(void);
long at_call_many_direct(void);
double at_call_vsum(void);
at_pair at_call_pair(long a, long b);
at_point at_call_point(double x, double y);
at_triple at_call_triple(long a, long b, long c);
long double at_call_extended(long double a, long double b);
long at_call_recurse(long depth);
/// Calls at_table.tail(a, b), whose function tail-calls at_table.add(a, b) (a jump through the
/// slot, which enters the add slot's attach at the same stack pointer).
long at_call_tail(long a, long b);

/// Calls at_table.jumper(value) under setjmp: the original longjmps back when value is odd.
/// Returns the jumper's result, or -1 when it jumped.
long at_call_jumper(long value);

/// Calls at_table.setjmper (the C library's _setjmp) and, on its first return, longjmps back to
/// it: 100 times the number of times the call returned plus the second return's value (207
/// when both returns reach this caller).
int at_call_setjmp_twice(void);
/// The same through a direct call of _setjmp.
int at_call_setjmp_twice_direct(void);
/// Calls at_table.add(value, 1) after a sigsetjmp that at_escape_now jumps back to: -1 when
/// the call was left that way (from a block), else the call's result.
long at_call_escaping(long value);
/// siglongjmp back into at_call_escaping, as a signal handler that leaves would.
void at_escape_now(void);

/// A stub in front of _setjmp as a PLT entry is: `endbr64; bnd jmp *[rip + x]`, the word at x
/// holding _setjmp's address.
int at_setjmp_plt(void *buffer);

/// The address of the C library's _setjmp.
void *at_setjmp_address(void);

/// Calls at_table.tracer(0): the original counts with _Unwind_Backtrace the frames from inside
/// it, and records whether the address of the return in this caller is among them; glibc's
/// backtrace() likewise. Returns 1 when both found the caller and reached at least `minimum`
/// frames.
long at_call_tracer(void);
/// What the last at_call_tracer saw: frames from _Unwind_Backtrace (`which` 0) and backtrace()
/// (1), and whether each found the caller (2 and 3).
int at_tracer_report(int which);

/// Calls at_table.unwinder(0): the original raises an exception that nothing catches
/// (_Unwind_RaiseException), and returns the unwinder's code: 5 (_URC_END_OF_STACK) when phase
/// one walked the whole stack, through the attached frame, without finding a handler.
long at_call_unwinder(void);

/// at_table.block(value): waits while the hold is set, then returns value * 2; the count of
/// calls inside it.
void at_block_set_hold(int hold);
int at_block_inside_count(void);
long at_call_block(long value);

/// Starts a thread that calls at_table.exiter(value); the original calls pthread_exit, which
/// unwinds the thread's stack (forced unwinding, through the attached frame) and runs a
/// cleanup registered in the caller's frame. Returns 1 when the thread ended and the cleanup ran.
int at_exit_in_thread(long value);

/// Installs a SIGUSR1 handler that calls at_table.add(20, 22) and keeps the result (read with
/// at_signal_result); at_table.signaller(value) raises SIGUSR1 from inside, then returns value.
long at_signal_result(void);
/// The calling thread's kernel id.
int at_gettid(void);
void at_install_signal_handler(void);
long at_call_signaller(long value);

/// Calls at_table.trapper(value) (never inlined, so that a debugger's backtrace names this
/// caller): the original raises SIGTRAP, where a debugger running the process stops (a process
/// without one ends), then returns value + 1.
long at_call_trapper(long value);

/// at_table.thrower(value): throws `value` as a C++ exception (a `long`) when it is not 0
/// (attach_exceptions.cpp).
void at_throw(long value);
/// Calls at_table.thrower(value) in a C++ `try` that catches a `long`: returns what was caught
/// plus 1000, or -1 when nothing was thrown.
long at_call_catching(long value);

/// As at_call_catching, through at_table.tail_thrower: with both attached, two calls share one
/// return slot, and the exception passes through both thunks to the handler.
long at_call_catching_through_tail(long value);

/// What at_step_calls saw: the attached calls of a signal handler run after every instruction
/// of calls through `add`.
typedef struct {
    /// The main thread's calls' blocks.
    uint64_t main_enters, main_leaves;
    /// The handler's calls, and their blocks.
    uint64_t handler_calls, handler_enters, handler_leaves;
    /// Handler calls made while the thread ran an attach block (or the library's own work),
    /// those of them whose interrupted instruction was in the attach path's C code, and
    /// the handler calls outside a block that interrupted that code.
    uint64_t in_block, in_block_in_code, in_code;
    /// Calls whose result was wrong, and handler calls that ran their blocks inside a block or
    /// skipped them outside one.
    uint64_t wrong;
    /// (at_step_first_call) The records the process holds for the thread after its call, and
    /// the handler's calls made while the thread had no side stack yet.
    uint64_t records, sideless;
    /// (at_step_calls_above) Whether the signal stack lay above the thread's stack.
    uint64_t above;
} at_step_tally;

/// Calls `add` through its slot `count` times with the trap flag set: after every instruction
/// a SIGTRAP handler calls `add` too. The blocks of an attach on `add` must call
/// at_step_block; `reentry`: the attach allows re-entry (its blocks run inside a block too). Whether this can run here (not under ThreadSanitizer, the section's bounds
/// known).
at_step_tally at_step_calls(long count, int reentry);
int at_step_available(void);
/// Called by the test's enter (0) and leave (1) blocks.
void at_step_block(int leaving);

/// As at_step_calls, on a new thread whose SIGTRAP handler runs on a signal stack mapped above
/// the thread's own stack (`above` says whether it was); the thread's first call, which sets it
/// up, is not stepped.
at_step_tally at_step_calls_above(long count);
/// Whether at_step_calls_above can run here (at_step_available, and not under
/// AddressSanitizer, where no memory above a thread's stack was found to map).
int at_step_above_available(void);

/// Makes one call through `add` on a new thread (its first hooked call: the thread claims a
/// record and, for an attach, sets up its side stack) with the trap flag set, and a SIGTRAP
/// handler that calls `add` too: with `mode` 1 after every instruction run while the thread's
/// record marks the library's own work (`in_block` counts them), with `mode` 2 once, as the
/// thread enters the claim of its record. The slot's hooks (an attach where `attached` is 1,
/// else hooks with a signature) call at_step_block. `handler_calls`, `handler_enters`,
/// `main_enters` and `wrong` as at_step_calls: a handler's call must run both blocks, or, for
/// an attach while the thread had no side stack yet and was not making one (`sideless`),
/// neither. With `alternate` 1 the handler runs on a signal stack the thread sets up first
/// (SA_ONSTACK). With mode 1, the handler lets `skip` instructions of the making of the side
/// stack go by before it calls (its call then makes one while the thread's is half made).
at_step_tally at_step_first_call(int mode, int attached, int alternate, long skip);

/// What at_functions_enter and at_functions_leave saw, read from the frames by the byte offsets
/// AttachFunctions documents (not through the library's own types).
typedef struct {
    uint64_t enters, leaves;
    uint64_t rdi, rsi, rax_count, enter_sp, enter_return, enter_function, enter_thread;
    double xmm0;
    uint64_t result, leave_sp, leave_scratch, leave_return, leave_function, leave_thread;
} at_functions_seen;

/// An enter function for AttachFunctions, in C: records the frame's words into `context` (an
/// at_functions_seen), adds 100 to the second integer argument and sets the scratch word to 77.
void at_functions_enter(void *context, void *frame);
/// Its leave function: records the leave frame's words and doubles the integer result.
void at_functions_leave(void *context, void *frame);

#ifdef __cplusplus
}
#endif

/// A slot holding a function that returns 0x1111…, 0x2121…, 0x3131…, 0x4141… in rax, rdx, rcx
/// and r8 and 0x5151…, 0x6161…, 0x7171…, 0x8181… in xmm0 to xmm3 (every register a Swift
/// function returns in), and the caller that stores the eight values in `out` (after
/// ct_all_returns_reset has put the function in the slot).
void **ct_all_returns_slot_address(void);
void ct_all_returns_reset(void);
void ct_call_all_returns(uint64_t out[8]);
/// Overwrites rax, rdx, rcx, r8 and xmm0 to xmm3 with all ones bits, as any code a leave block
/// runs may.
void ct_clobber_return_registers(void);

/// Calls `function(a, b)` with the stack 8 bytes off the ABI's 16-byte alignment at the call,
/// as gcc may call a static function of its own file; returns its result.
long ct_call_misaligned(long (*function)(long, long), long a, long b);
/// Returns `value * 2`, through a vector local stored with an aligned move: it faults when
/// called with the stack off the ABI's alignment.
double ct_needs_aligned_stack(double value);

#endif
