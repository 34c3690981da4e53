#ifndef CSOAKSUPPORT_H
#define CSOAKSUPPORT_H

#include <stddef.h>
#include <stdint.h>

#pragma clang assume_nonnull begin

// The C side of the soak executable: a table of function pointers whose originals are
// compiled C, call wrappers that go through the table (so calls run C -> slot -> closure),
// and counters the originals keep.

/// A two-eightbyte struct passed and returned in registers (one integer, one SSE).
typedef struct {
    int64_t tag;
    double value;
} soak_pair;

/// A 24-byte struct passed and returned in memory.
typedef struct {
    int64_t a;
    int64_t b;
    int64_t c;
} soak_triple;

/// The hooked table: each field has a different signature.
typedef struct {
    int32_t (*add)(int32_t, int32_t);
    double (*fadd)(double, double);
    soak_pair (*mix)(soak_pair, int32_t);
    soak_triple (*shift)(soak_triple, int32_t);
    int64_t (*wide)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float);
} soak_table;

/// Slot indices, also the indices of the original-call counters.
enum {
    SOAK_ADD = 0,
    SOAK_FADD = 1,
    SOAK_MIX = 2,
    SOAK_SHIFT = 3,
    SOAK_WIDE = 4,
    SOAK_SLOT_COUNT = 5
};

/// The process's table, initialised with the originals.
soak_table *soak_table_pointer(void);

/// A bit per slot (1 << index) that does not hold its original function.
int soak_table_differences(void);

/// How many times the original of `slot` ran.
uint64_t soak_original_calls(int slot);

/// Makes the next run of the `add` original skip its counter (a deliberate fault that the
/// soak's checks must catch).
void soak_drop_next_add_count(void);

// Call wrappers: each loads the slot atomically and calls what it holds.

int32_t soak_call_add(int32_t a, int32_t b);
double soak_call_fadd(double x, double y);
soak_pair soak_call_mix(soak_pair pair, int32_t k);
soak_triple soak_call_shift(soak_triple triple, int32_t k);
int64_t soak_call_wide(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, int64_t f, int64_t g, float h);

// The inline soak (ffi-hook-soak --inline): a C function called directly, hooked in its code.

/// What the inline soak's hook adds to a result, so that a caller tells hooked calls apart.
#define SOAK_INLINE_MARK 1000000

/// a + b, counting its runs; never inlined (inline_target.c).
int64_t soak_inline_add(int64_t a, int64_t b);

/// How many times soak_inline_add ran.
uint64_t soak_inline_runs(void);

/// Calls soak_inline_add(base + i, 1) directly for i in 0..<count and counts in *hooked the
/// results that carry SOAK_INLINE_MARK; returns count, or -1 - i for the first result that is
/// neither the sum nor the marked sum.
int64_t soak_inline_loop(int64_t count, int64_t base, int64_t *hooked);

/// The resident set size in bytes, from /proc/self/statm (0 when unreadable).
uint64_t soak_resident_bytes(void);

/// The bytes of heap in use: AddressSanitizer's count of live allocations when it is loaded
/// (its quarantine is not in use), otherwise glibc's mallinfo2; 0 under valgrind, whose
/// allocator keeps no such figures. `source` receives which.
uint64_t soak_heap_bytes(const char *_Nullable *_Nullable source);

#pragma clang assume_nonnull end

#endif
