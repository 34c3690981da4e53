#ifndef FFH_ATTACH_H
#define FFH_ATTACH_H
// Attaching to a function without its signature (x86-64 System V): a stub per attached slot
// enters ffh_attach_entry with the attachment's record in %r10; the entry saves the argument
// registers, runs the enter block, and jumps to the original with the caller's registers and
// stack as they came. To run a leave block, the call's return address is kept on the thread's
// side stack and the original is called from a thunk of the calling thread's own, whose return
// address takes the caller's place on the stack: the original returns into the thunk, which
// runs the leave block and returns to the real return address. Each thread's thunks have unwind information (registered with the unwinder) that
// names the real return address, so exceptions and backtrace() find the caller; gdb finds it
// too, in an object file in memory handed to its JIT interface (attach.c).
#include <stdint.h>

/// How many calls deep one thread's side stack reaches; deeper calls still run, with their
/// enter blocks, but their leave blocks are skipped (and counted).
#define FFH_ATTACH_DEPTH 512

/// What an attach stub's `%r10` points at: the part of an attachment that lives as long as its
/// stub (a caller may have read the stub's address and call it at any later time).
typedef struct ffh_attach {
    /// The function calls go on to (read atomically: a replacement may change it).
    uintptr_t original;
    /// The attachment while one is installed (an unretained Swift object), 0 while the stub
    /// only passes calls through.
    uintptr_t state;
    /// Changes whenever `state` does (writers: the registry's lock), so that a call that
    /// entered under one attachment never runs the leave block of another.
    uintptr_t epoch;
    /// FFH_ATTACH_ENTERS and FFH_ATTACH_LEAVES: which blocks the attachment has;
    /// FFH_ATTACH_REENTERS.
    uintptr_t flags;
} ffh_attach;

enum {
    FFH_ATTACH_ENTERS = 1,
    FFH_ATTACH_LEAVES = 2,
    /// The blocks run also for calls made while an attach block runs on the thread.
    FFH_ATTACH_REENTERS = 4,
    /// A stub that only forwards: `state` is an ffh_original_resolver (ffh_thread.h) whose
    /// `resolve` chooses, for each call, the function the call goes on to, from a list of the
    /// first two arguments (its `code` is the stub's). No block runs and no thread record is
    /// read, so the entry is the whole cost. FFIHookObjC's forwarders to a superclass.
    FFH_ATTACH_RESOLVES = 8,
    /// With FFH_ATTACH_RESOLVES: the first argument register holds the address of a result
    /// returned in memory, and the list starts at the second.
    FFH_ATTACH_RESULT_IN_MEMORY = 16,
    /// The blocks are C functions: `state` is an ffh_attach_functions, whose functions the
    /// attach path calls itself (no dispatch through the Swift side).
    FFH_ATTACH_CALLS_FUNCTIONS = 32,
    /// The function reads its own return address to learn its caller's object (the loader's
    /// dlopen, dlmopen, dlsym, dlvsym): a call whose leave block is to run is made through a
    /// `ret` in the real caller's object (ffh_return_site.h), not from the thread's cell, whose
    /// address the function would take for its caller's.
    FFH_ATTACH_AS_CALLER = 64,
};

/// An attachment's blocks as C functions (FFH_ATTACH_CALLS_FUNCTIONS): each gets `context` and
/// the frame the Swift side's blocks read through EnterContext and LeaveContext (an
/// ffh_attach_enter_frame, an ffh_attach_leave_frame). Lives as long as its attachment.
typedef struct ffh_attach_functions {
    void (*enter)(void *context, void *frame);
    void (*leave)(void *context, void *frame);
    void *context;
} ffh_attach_functions;

/// What the entry saves, and the enter block reads and writes: the argument registers as they
/// arrived (the original gets them back from here).
typedef struct {
    /// rdi, rsi, rdx, rcx, r8, r9.
    uint64_t general[6];
    /// rax: in a call of a variadic function, the number of vector registers used (in %al).
    uint64_t rax;
    /// The stack pointer at entry: the address of the return address.
    uint64_t sp;
    /// xmm0 to xmm7, whole (16 bytes each).
    uint64_t vector[16];
    /// The per-call value handed to the leave block.
    uint64_t scratch;
    /// The function the call goes on to.
    uint64_t function;
    /// The caller's kernel thread id.
    uint64_t thread;
    uint64_t reserved[2];
} ffh_attach_enter_frame;

/// What the return thunk saves, and the leave block reads and writes: every register a C or
/// Swift function returns a value in (C: rax, rdx, xmm0, xmm1; Swift: rax, rdx, rcx, r8 and
/// xmm0 to xmm3; r12, Swift's error register, is one the leave code keeps as C does).
typedef struct {
    /// rax and rdx, then xmm0 and xmm1 whole, as the original returned them.
    uint64_t rax;
    uint64_t rdx;
    uint64_t xmm0[2];
    uint64_t xmm1[2];
    /// Which frame of the thread's side stack the call has (from the thunk).
    uint64_t index;
    /// The real return address (where the unwind information of the thunk's common code
    /// finds it while the leave block runs).
    uint64_t returnAddress;
    /// The stack pointer at the call's entry, the scratch value, the function.
    uint64_t sp;
    uint64_t scratch;
    uint64_t function;
    uint64_t thread;
    /// rcx and r8, then xmm2 and xmm3 whole: the rest of a Swift function's result.
    uint64_t rcx;
    uint64_t r8;
    uint64_t xmm2[2];
    uint64_t xmm3[2];
    /// Where the return path keeps rbx while it calls with the stack rounded down to 16 bytes.
    uint64_t reserved[2];
} ffh_attach_leave_frame;

/// What runs an attachment's blocks (the Swift side): `state` is the record's state, `frame`
/// an ffh_attach_enter_frame (`leaving` 0) or an ffh_attach_leave_frame (`leaving` 1).
typedef void (*ffh_attach_dispatch)(uintptr_t state, void *frame, int leaving);

/// Sets the function that runs blocks; once, before the first stub is written.
void ffh_attach_setup(ffh_attach_dispatch dispatch);

/// The function the attach stub at `code` passes calls on to, or 0 when `code` is not an attach
/// stub's (read through the fault guard: any address may be asked about).
uintptr_t ffh_attach_stub_original(uintptr_t code);

/// The bytes of a stub.
#define FFH_ATTACH_STUB_SIZE 32

/// Writes an attach stub for `record` at `stub` (writable memory that is also executable, or
/// whose code alias is executed): `%r10` = `record`, then a jump to the entry.
void ffh_attach_write_stub(void *stub, ffh_attach *record);

/// Writes an attach stub for `record` at `stub` whose calls keep every register the function
/// leaves alone: r11 and `record` pushed, then a jump to the preserving entry. For a function
/// patched inline, whose callers may count on registers the function does not write (GCC's
/// -fipa-ra, for a function that binds locally). The general registers and xmm0 to xmm15 reach
/// the function as the caller left them (the enter block's changes to the argument registers
/// aside) and come back to the caller as the function left them (the leave block's changes to
/// the result registers aside); the upper halves of the vector registers and xmm16 to xmm31
/// are kept as far as the blocks leave them alone, the flags are not.
void ffh_attach_write_stub_preserving(void *stub, ffh_attach *record);

/// How many leave blocks were skipped because a thread's side stack was full.
uint64_t ffh_attach_skipped_leaves(void);
/// How many side-stack frames were found abandoned (a longjmp or an exception left the call
/// without returning) and dropped; their leave blocks never ran.
uint64_t ffh_attach_abandoned_frames(void);
/// How many attached calls went straight to their functions, without blocks, because their
/// thread was running an attach block (calls the blocks make, and calls of a signal handler
/// that interrupted one) or the library's own code.
uint64_t ffh_attach_passed_calls(void);
/// Of those, the calls the library's own work made (its thread marked FFH_BUSY_WORK).
uint64_t ffh_attach_passed_library_calls(void);
/// Of those, the others (counted once each, so that a reader while other threads pass calls
/// gets a consistent figure, which the difference of the two counts above is not).
uint64_t ffh_attach_passed_program_calls(void);
/// How many frames the calling thread's side stack holds now (0 without one).
uint64_t ffh_attach_depth(void);
/// Whether `address` is where one of the calling thread's attached calls returns to (its
/// return thunk). A call whose return address it is was not made by a call instruction of its
/// own: an attached function tail-called it (or it passed through another attach of its slot),
/// so it shares that call's stack pointer. A call at an earlier call's stack pointer that finds
/// any other return address was made afresh: the earlier one was left (longjmp, an exception).
int ffh_attach_is_return_thunk(uintptr_t address);
/// Whether this platform has attach (x86-64 ELF).
int ffh_attach_available(void);
/// How wide the attach entries keep the vector registers a call passes on (arguments 0 to 7 on
/// the way in, results 0 and 1 on the way out, all sixteen in the preserving forms): 16 (the
/// xmm registers: no AVX), 32 (ymm: AVX) or 64 (zmm: AVX-512), the widest the processor and the
/// kernel give the process. A block's code that uses AVX (the C library's string functions do)
/// would otherwise change the upper lanes of a `__m256` or `__m512` argument or result.
int ffh_attach_vector_width(void);
/// Makes the entries keep `width` bytes of each vector register (16, 32 or 64), at most what
/// the processor has; returns the width in effect. For tests, which try each way on one
/// machine; with no attached call in flight.
int ffh_attach_set_vector_width(int width);

#endif
