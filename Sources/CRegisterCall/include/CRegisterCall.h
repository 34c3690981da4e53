#ifndef CREGISTERCALL_H
#define CREGISTERCALL_H

#include <stdint.h>

/// How many general-purpose and floating-point registers carry arguments on this platform.
#if defined(__x86_64__)
#define CREGISTERCALL_GENERAL 6
#elif defined(__aarch64__)
#define CREGISTERCALL_GENERAL 8
#else
#define CREGISTERCALL_GENERAL 0
#endif
#define CREGISTERCALL_FLOATING 8

/// The argument registers of one call: integer and pointer arguments in `general`, float and
/// double arguments (as 64-bit patterns, a float in the low half) in `floating`.
typedef struct {
    uint64_t general[CREGISTERCALL_GENERAL > 0 ? CREGISTERCALL_GENERAL : 1];
    uint64_t floating[CREGISTERCALL_FLOATING];
} cregistercall_registers;

/// Whether this platform has the register calls below.
int cregistercall_available(void);

/// Calls `function` with every argument register loaded from `registers` and returns the
/// integer return register. The callee reads the registers its prototype names and ignores
/// the rest, which the C calling conventions of x86-64 System V and AAPCS64 allow for a
/// non-variadic function whose arguments all travel in registers.
uint64_t cregistercall_integer(const void *function, const cregistercall_registers *registers);

/// As cregistercall_integer, returning the floating-point return register's 64 bits (a
/// float result in the low half).
uint64_t cregistercall_floating(const void *function, const cregistercall_registers *registers);

/// As cregistercall_integer, for a function that returns nothing.
void cregistercall_void(const void *function, const cregistercall_registers *registers);

#endif
