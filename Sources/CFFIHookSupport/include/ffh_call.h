#ifndef FFH_CALL_H
#define FFH_CALL_H

// Calls of C functions whose arguments all travel in registers, without libffi.

#include <stdint.h>

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
void ffh_call_plan(const ffh_plan *plan, const void *function, void *const *arguments, void *returnValue);

#endif
