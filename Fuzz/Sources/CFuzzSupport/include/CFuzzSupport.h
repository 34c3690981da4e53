#ifndef CFUZZSUPPORT_H
#define CFUZZSUPPORT_H

#include <stdint.h>

// MARK: - Call probe (InterfaceFuzzer)

/// The argument registers a probe call received: integer and pointer arguments in
/// `general`, float and double arguments as 64-bit patterns (a float in the low half).
typedef struct {
    uint64_t general[6];
    uint64_t floating[8];
} cfuzz_probe_registers;

/// Records every argument register and returns the pattern set by cfuzz_probe_prepare in
/// the integer return register. Called through a call interface whose arguments all travel
/// in registers, it receives them where a compiled callee of that signature would, and
/// reads the registers that carry nothing as they are.
uint64_t cfuzz_probe_integer(
    uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3, uint64_t g4, uint64_t g5, double f0, double f1, double f2,
    double f3, double f4, double f5, double f6, double f7);

/// As cfuzz_probe_integer, returning the pattern in the floating-point return register.
double cfuzz_probe_floating(
    uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3, uint64_t g4, uint64_t g5, double f0, double f1, double f2,
    double f3, double f4, double f5, double f6, double f7);

/// The address of cfuzz_probe_floating when `floating` is nonzero, else of cfuzz_probe_integer.
const void *cfuzz_probe_address(int floating);

/// Clears the record of the last probe call and sets the bits the next one returns.
void cfuzz_probe_prepare(uint64_t result);

/// Copies the registers of the last probe call; returns how many probe calls were made
/// since cfuzz_probe_prepare.
int cfuzz_probe_collect(cfuzz_probe_registers *registers);

// MARK: - Hooked functions (HookSequenceFuzzer)

/// The function at `index` (0: a + b, 1: a * b, 2: a - b, wrapping); NULL for other indices.
const void *cfuzz_binary_function(int index);

/// Loads the function pointer in `slot` (acquire) and calls it with `a` and `b`; a NULL slot
/// is not called: `*called` is set to 0 and the result is 0.
int32_t cfuzz_call_slot(void *const *slot, int32_t a, int32_t b, int *called);

/// Marks the calling thread as the one that runs the fuzzer's inputs.
void cfuzz_mark_fuzzing_thread(void);

/// Whether the calling thread is the one marked by cfuzz_mark_fuzzing_thread.
int cfuzz_is_fuzzing_thread(void);

/// Starts a detached thread running `body`; returns 0 on success.
int cfuzz_start_thread(void (*body)(void));

#endif
