#ifndef CHOOKSUPPORT_H
#define CHOOKSUPPORT_H

#include <stdint.h>

#include "chooksupport_thread.h"

// MARK: - Register calls

/// How many general-purpose and floating-point registers carry arguments on this platform.
#if defined(__x86_64__)
#define CHOOKSUPPORT_GENERAL 6
#elif defined(__aarch64__)
#define CHOOKSUPPORT_GENERAL 8
#else
#define CHOOKSUPPORT_GENERAL 0
#endif
#define CHOOKSUPPORT_FLOATING 8

/// The argument registers of one call: integer and pointer arguments in `general`, float and
/// double arguments (as 64-bit patterns, a float in the low half) in `floating`.
typedef struct {
    uint64_t general[CHOOKSUPPORT_GENERAL > 0 ? CHOOKSUPPORT_GENERAL : 1];
    uint64_t floating[CHOOKSUPPORT_FLOATING];
} chooksupport_registers;

/// Whether this platform has the register calls below.
int chooksupport_available(void);

/// Calls `function` with every argument register loaded from `registers` and returns the
/// integer return register. The callee reads the registers its prototype names and ignores
/// the rest, which the C calling conventions of x86-64 System V and AAPCS64 allow for a
/// non-variadic function whose arguments all travel in registers.
uint64_t chooksupport_integer(const void *function, const chooksupport_registers *registers);

/// As chooksupport_integer, returning the floating-point return register's 64 bits (a
/// float result in the low half).
uint64_t chooksupport_floating(const void *function, const chooksupport_registers *registers);

/// As chooksupport_integer, for a function that returns nothing.
void chooksupport_void(const void *function, const chooksupport_registers *registers);

// MARK: - Memory barriers for reclamation

/// Registers the process for expedited private memory barriers (Linux membarrier);
/// returns 0 when they are available.
int chooksupport_membarrier_register(void);

/// Makes every running thread of the process execute a full memory barrier before it
/// returns, so readers can do without one; returns 0 on success.
int chooksupport_membarrier(void);

/// Keeps the compiler from moving memory accesses across this point (no instruction is
/// emitted). Swift has no signal fence; a reader whose hardware barrier is supplied by
/// chooksupport_membarrier still needs this one.
static inline void chooksupport_compiler_barrier(void) { __asm__ __volatile__("" ::: "memory"); }

// MARK: - Safe memory access

/// Reads the machine word at `address` into `value` without faulting: returns 0 on success,
/// -1 when the address is not readable in this process.
int chooksupport_read_word(const void *address, uintptr_t *value);

/// Whether the 32-bit word at `address` (4-byte aligned) can be written, asked of the kernel
/// without changing it (an atomic OR with 0 through `FUTEX_WAKE_OP`, which fails with EFAULT
/// on memory that is unmapped or not writable): 1 when writable, 0 when not.
int chooksupport_is_writable(void *address);

#endif
