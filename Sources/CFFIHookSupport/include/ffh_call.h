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
/// double arguments (as 64-bit patterns, a float in the low half) in `floating`.
typedef struct {
    uint64_t general[FFH_GENERAL_REGISTERS > 0 ? FFH_GENERAL_REGISTERS : 1];
    uint64_t floating[FFH_FLOATING_REGISTERS];
} ffh_registers;

/// Whether this platform has the register calls below.
int ffh_register_calls_available(void);

/// Calls `function` with every argument register loaded from `registers` and returns the
/// integer return register. The callee reads the registers its prototype names and ignores
/// the rest, which the C calling conventions of x86-64 System V and AAPCS64 allow for a
/// non-variadic function whose arguments all travel in registers.
uint64_t ffh_call_returning_integer(const void *function, const ffh_registers *registers);

/// As ffh_call_returning_integer, returning the floating-point return register's 64 bits (a
/// float result in the low half).
uint64_t ffh_call_returning_floating(const void *function, const ffh_registers *registers);

/// As ffh_call_returning_integer, for a function that returns nothing.
void ffh_call_returning_void(const void *function, const ffh_registers *registers);

#endif
