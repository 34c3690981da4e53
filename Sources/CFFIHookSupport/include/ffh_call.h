#ifndef FFH_CALL_H
#define FFH_CALL_H

// Calls of C functions without libffi's ffi_call: register plans (x86-64 and arm64) for
// signatures whose values all travel in registers, System V plans (x86-64) for every other
// shape, and the System V closure entry that slot closures enter through.

#include <stddef.h>
#include <stdint.h>

// MARK: - Copies without libc

/// Copies `size` bytes on the call path with private code, never libc's `memcpy`: a copy of
/// a size known only at run time, or a plain loop, compiles to a call through the import
/// table, which a program may have hooked. (Constant small sizes compile to loads and
/// stores, `memcpy` or not.)
static inline void ffh_copy(void *target, const void *source, size_t size) {
#if defined(__x86_64__)
    __asm__ __volatile__("rep movsb" : "+D"(target), "+S"(source), "+c"(size) : : "memory");
#else
    volatile unsigned char *to = target;
    const volatile unsigned char *from = source;
    for (size_t index = 0; index < size; index++) to[index] = from[index];
#endif
}

/// Zeroes `size` bytes on the call path with private code, never libc's `memset` (see
/// ``ffh_copy``).
static inline void ffh_zero(void *target, size_t size) {
#if defined(__x86_64__)
    __asm__ __volatile__("rep stosb" : "+D"(target), "+c"(size) : "a"(0) : "memory");
#else
    volatile unsigned char *to = target;
    for (size_t index = 0; index < size; index++) to[index] = 0;
#endif
}

// MARK: - Plans switched off (tests)

/// Whether call interfaces made on the calling thread are made without plans (tests of
/// `ffi_call` and libffi's closure entry switch them off on their own thread, so that tests
/// running beside them on other threads are not affected).
int ffh_plans_off_here(void);

/// Switches plans off (1) or on (0) for the interfaces the calling thread makes from now on.
void ffh_set_plans_off_here(int off);

// MARK: - Register calls

/// How many general-purpose and floating-point registers carry arguments on this platform.
#if defined(__x86_64__)
#define FFH_GENERAL_REGISTERS 6
#elif defined(__aarch64__)
#define FFH_GENERAL_REGISTERS 8
#else
#define FFH_GENERAL_REGISTERS 0
#endif
#define FFH_FLOATING_REGISTERS 8

/// The argument registers of one call: integer and pointer arguments in `general`, float and
/// double arguments (as 64-bit patterns, a float in the low half) in `floating`. A plan's call
/// loads every one of them; the callee reads the registers its prototype names and ignores
/// the rest, which the C calling conventions of x86-64 System V and AAPCS64 allow for a
/// non-variadic function whose arguments all travel in registers.
typedef struct {
    uint64_t general[FFH_GENERAL_REGISTERS > 0 ? FFH_GENERAL_REGISTERS : 1];
    uint64_t floating[FFH_FLOATING_REGISTERS];
} ffh_registers;

/// Whether this platform has the register calls below.
int ffh_register_calls_available(void);

// MARK: - Register call plans

/// How a value travels in a register: integers narrower than 64 bits are sign- or
/// zero-extended as compilers expect of a caller, a float is the low half of its register.
typedef uint8_t ffh_value_kind;
enum {
    FFH_VALUE_SIGNED_8,
    FFH_VALUE_SIGNED_16,
    FFH_VALUE_SIGNED_32,
    FFH_VALUE_UNSIGNED_8,
    FFH_VALUE_UNSIGNED_16,
    FFH_VALUE_UNSIGNED_32,
    FFH_VALUE_64,
    FFH_VALUE_FLOAT,
    FFH_VALUE_DOUBLE,
    /// A result only: the function returns nothing.
    FFH_VALUE_VOID,
    /// A System V move only: a number of bytes copied as they are (part or all of an
    /// aggregate, a `long double`, half of an `__int128`).
    FFH_VALUE_BYTES,
};

/// One argument of a plan: where libffi's argument list has it, what it is, and the index of
/// the register it goes in (of the general or the floating-point bank, by its kind).
typedef struct {
    uint16_t argument;
    ffh_value_kind kind;
    uint8_t reg;
} ffh_plan_step;

/// A call of a function whose arguments and result all travel in registers, worked out once
/// per signature.
typedef struct {
    const ffh_plan_step *steps;
    uint32_t count;
    ffh_value_kind result;
    /// Whether an argument travels in a floating-point register: when none does, the call
    /// loads only the general-purpose ones.
    uint8_t usesFloatingRegisters;
} ffh_plan;

/// Calls `function` as `plan` says with the arguments `arguments` points to (libffi's
/// argument list) and stores the result in `returnValue` as `ffi_call` does: integers
/// narrower than 64 bits widened to 64, a float in 4 bytes, a double in 8. `returnValue`
/// may be NULL for a void result.
void ffh_call_plan(const void *plan, const void *function, void *const *arguments, void *returnValue);

/// A routine that calls a function as a plan says: `ffh_call_plan` with an `ffh_plan`, or on
/// x86-64 `ffh_call_sysv` with an `ffh_sysv_plan`. A call interface keeps the routine and
/// the plan and makes every call with one indirect call.
typedef void (*ffh_plan_caller)(const void *plan, const void *function, void *const *arguments, void *returnValue);

// MARK: - System V x86-64 call plans

#if defined(__x86_64__)

/// Where a System V call's frame words are: words 0-5 are the general argument registers
/// (`rdi`, `rsi`, `rdx`, `rcx`, `r8`, `r9`), 6-13 the low halves of `xmm0`-`xmm7`, and
/// from 14 on the words of the stack argument area, from its lowest address.
#define FFH_SYSV_FIRST_SSE_WORD 6
#define FFH_SYSV_FIRST_STACK_WORD 14

/// One move of a System V call: a value of `kind` (or, for `FFH_VALUE_BYTES`, `size` bytes)
/// read at byte `offset` of argument `argument` (of libffi's argument list) and written at
/// frame word `word` and on. A scalar fills its whole word, widened as a register holds it.
typedef struct {
    uint32_t size;
    uint32_t offset;
    uint32_t word;
    uint16_t argument;
    ffh_value_kind kind;
    uint8_t reserved;
} ffh_sysv_move;

/// Where a piece of a System V result is when the callee returns.
typedef uint8_t ffh_sysv_source;
enum {
    FFH_SYSV_RAX,
    FFH_SYSV_RDX,
    FFH_SYSV_XMM0,
    FFH_SYSV_XMM1,
    /// The top of the x87 stack, then the value under it (a `_Complex long double`'s
    /// imaginary part); 10 bytes each.
    FFH_SYSV_ST0,
    FFH_SYSV_ST1,
};

/// One piece of a result: a value of `kind` (stored widened, as `ffi_call` stores it) or,
/// for `FFH_VALUE_BYTES`, `size` bytes, from `source` to byte `offset` of the result.
typedef struct {
    ffh_sysv_source source;
    ffh_value_kind kind;
    uint8_t size;
    uint8_t offset;
} ffh_sysv_result_piece;

/// Where the library's closure entry keeps what a call brought, as byte offsets from the
/// start of its frame: the argument registers (laid out as a call's frame words 0-13) at 0,
/// a scratch area where it assembles an aggregate whose eightbytes arrived in registers
/// that are not next to each other, and the caller's stack arguments, which lie just above
/// the entry's frame.
#define FFH_ENTRY_SCRATCH_OFFSET 240
#define FFH_ENTRY_SCRATCH_BYTES 96
#define FFH_ENTRY_STACK_OFFSET 368

/// A call of any System V x86-64 shape, worked out once per signature: the moves that fill
/// the argument registers and the stack, and where the result comes back; for a closure
/// that receives such calls, where each argument arrives.
typedef struct {
    const ffh_sysv_move *moves;
    uint32_t moveCount;
    /// The stack argument area in 8-byte words; even, so that `rsp` stays 16-aligned.
    uint32_t stackWords;
    /// How many SSE registers carry arguments: a variadic callee reads it from `%al`.
    uint8_t sseCount;
    /// Whether the result is written through a hidden pointer (the return buffer) in `rdi`.
    uint8_t returnsInMemory;
    /// How many values the callee leaves on the x87 stack (0, 1 or 2); they are popped.
    uint8_t x87Count;
    /// How many entries of `result` are used.
    uint8_t resultCount;
    ffh_sysv_result_piece result[2];
    /// The closure side: where each of `argumentCount` arguments arrives, as an offset from
    /// the entry's frame (see `FFH_ENTRY_STACK_OFFSET`).
    const uint32_t *locations;
    /// Copies into the scratch area: frame word `word` to byte `offset` of the entry's frame
    /// (in its scratch area; `argument`, `kind` and `size` unused: a whole word moves).
    const ffh_sysv_move *gathers;
    uint32_t argumentCount;
    uint32_t gatherCount;
    /// What a forwarded call (``ffh_forward_sysv``) redoes before it reuses the registers as
    /// they arrived: a narrow integer (`kind`) widened again at frame word `word`, where a
    /// block may have stored a new value in its low bytes; or, for `FFH_VALUE_BYTES`, the
    /// scratch word at byte `offset` of the entry's frame copied back to frame word `word`.
    const ffh_sysv_move *fixups;
    uint32_t fixupCount;
    /// Where a call has only register arguments, is not variadic and returns a scalar or
    /// nothing: the result's kind (`FFH_VALUE_VOID` for none), and a forwarded call is a
    /// plain C call with the registers. `FFH_VALUE_BYTES` otherwise.
    ffh_value_kind registerResult;
    /// Whether a forwarded call is the commonest shape: integers and pointers in general
    /// registers alone, an integer or pointer result, nothing to redo (`registerResult` at most
    /// `FFH_VALUE_64`, no fixup, no SSE register): one test on the call path.
    uint8_t integerCall;
} ffh_sysv_plan;

/// Calls `function` as `plan` says with the arguments `arguments` points to (libffi's
/// argument list) and stores the result in `returnValue` as `ffi_call` does: integers
/// narrower than 64 bits widened to 64, a float in 4 bytes, aggregates byte for byte, a
/// `long double` in its first 10 bytes. `returnValue` may be NULL only for a void result.
/// Takes no lock and allocates nothing on the heap: the stack area is on the C stack.
void ffh_call_sysv(const void *plan, const void *function, void *const *arguments, void *returnValue);

/// Calls `function` with the arguments of a call that entered through the library's System V
/// closure entry, as they are now: `arguments` must be the list that entry made (the
/// handler's), and `plan` the plan of the slot record it entered with. Reuses the argument
/// registers and the caller's stack arguments where they arrived, redoing only the plan's
/// fixups, so it moves no argument that stayed where it was. Stores the result as
/// ``ffh_call_sysv`` does.
void ffh_forward_sysv(const void *plan, const void *function, void *const *arguments, void *returnValue);

/// The bytes of a closure's trampoline that enters through ``ffh_closure_entry`` instead of
/// libffi's entry: no more than libffi's own trampoline takes.
#define FFH_ENTRY_TRAMPOLINE_SIZE 32

/// Writes at `trampoline` (the writable address of a libffi closure's trampoline, prepared
/// by `ffi_prep_closure_loc`) code that enters the library's System V closure entry with
/// `record`, a slot record whose `plan` says where the arguments arrive. The entry builds
/// the argument list from the plan, without classifying a value per call, and calls the
/// same handler libffi's entry would (``ffh_handler``); where the plan passes nothing in a
/// vector register, an entry that does not save them. Writes `FFH_ENTRY_TRAMPOLINE_SIZE`
/// bytes, all within the closure's trampoline.
void ffh_install_entry(void *trampoline, const void *record);

/// ``ffh_install_entry`` for the slot of a function patched inline, whose callers may count on
/// registers the function does not write (GCC's `-fipa-ra`): the trampoline pushes `record`
/// rather than loading a register, and the entry (`ffh_closure_entry_preserving`) returns
/// every register but those of the result as the caller left them, whatever the hooks did.
void ffh_install_entry_preserving(void *trampoline, const void *record);

/// Whether the trampoline at `trampoline` (a closure's, written by ``ffh_install_entry`` or
/// ``ffh_install_entry_preserving``) is the preserving one.
int ffh_entry_is_preserving(const void *trampoline);

/// Writes at `trampoline` `FFH_ENTRY_TRAMPOLINE_SIZE` bytes of x86-64 code that loads `data`
/// into `%r10` and jumps to `target` with every argument register untouched: the trampoline
/// of ``ffh_install_entry``, and of other entries that find their data in `%r10`. Does
/// nothing on other architectures.
void ffh_write_trampoline(void *trampoline, const void *data, const void *target);

#endif

#endif
