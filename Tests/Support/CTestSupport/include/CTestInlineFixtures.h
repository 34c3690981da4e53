#ifndef CTESTINLINEFIXTURES_H
#define CTESTINLINEFIXTURES_H

#include <stdint.h>

// Hand-written functions for the inline-hook relocator (inline_fixtures_x86_64.S), one case
// of relocation in the first bytes of each.

/// a + 2 * b behind a plain prologue.
int64_t ct_inline_plain(int64_t a, int64_t b);
/// a + ct_inline_global, loaded RIP-relative first.
int64_t ct_inline_rip(int64_t a);
/// a + 3, with a `jmp rel8` in the first 5 bytes.
int64_t ct_inline_jmp8(int64_t a);
/// a < 10 ? 2 : 1, with a `jl rel8` in the first 6 bytes.
int64_t ct_inline_jcc8(int64_t a);
/// a + 100, calling ct_inline_helper with a `call rel32` first.
int64_t ct_inline_call(int64_t a);
/// Returns 100.
int64_t ct_inline_helper(void);
/// n == 1 ? 7 : n - 1, with a `loop` in the first 5 bytes.
int64_t ct_inline_loop(int64_t n);
/// n == 0 ? 2 : 1, with a `jrcxz` in the first 5 bytes.
int64_t ct_inline_jrcxz(int64_t n);
/// a + 5, starting with `endbr64`.
int64_t ct_inline_endbr(int64_t a);
/// n + (n - 1) + ... + 1, with a `jnz` at offset 8 back to offset 2.
int64_t ct_inline_backward(int64_t n);
/// (int)a, in three bytes.
int32_t ct_inline_tiny(int32_t a);

/// r + 1, after a loop of n (>= 1) turns inside its first 6 bytes.
int64_t ct_inline_spin(int64_t n, int64_t r);

/// f() + 1, calling f with `call rdi` first (2 bytes).
int64_t ct_inline_callreg(int64_t (*f)(void));

/// 0: the address its `call $+5` pushed, minus the address of the instruction after it.
int64_t ct_inline_thunk(void);

/// 0: the address its `call $+5` pushed, read from the stack, minus the address after the call.
int64_t ct_inline_callnext(void);

/// a + 109, with RIP-relative operands among live registers (add, lea, cmp with an immediate).
int64_t ct_inline_ripmix(int64_t a);
/// a < 0 ? 43 : 41, with flags live across a RIP-relative load.
int64_t ct_inline_ripflags(int64_t a);
/// a + 41, with a kept in the red zone across a RIP-relative load.
int64_t ct_inline_ripredzone(int64_t a);
/// a + 1, stored to and loaded from ct_inline_cell RIP-relative.
int64_t ct_inline_ripstore(int64_t a);
/// a + 82: RIP-relative loads with a REX.B and a VEX.B that the operand ignores (AVX2).
int64_t ct_inline_ripvex(int64_t a);
/// a + 41: an EVEX RIP-relative load with an EVEX.B the operand ignores (AVX-512F, VL).
int64_t ct_inline_ripevex(int64_t a);
/// a + 41, through push qword [rip + ct_inline_global].
int64_t ct_inline_rippush(int64_t a);
/// 2a, through jmp qword [rip + cell] to a function that reads a from the red zone.
int64_t ct_inline_ripjmp(int64_t a);
/// a + 100, through call qword [rip + cell] to ct_inline_helper.
int64_t ct_inline_ripcall(int64_t a);

/// What ct_inline_ripstore last stored.
int64_t ct_inline_cell_value(void);

/// Whether this processor runs AVX2, and AVX-512F with VL.
int ct_cpu_has_avx2(void);
int ct_cpu_has_avx512vl(void);

/// a + 3 + 0x1122334455667788; it starts 16 bytes before a page boundary and an instruction at
/// offset 13 straddles the boundary.
int64_t ct_inline_straddle(int64_t a);

/// 41.
extern int64_t ct_inline_global;

/// The functions' sizes in bytes.
extern const int64_t ct_inline_plain_size, ct_inline_rip_size, ct_inline_jmp8_size, ct_inline_jcc8_size,
    ct_inline_call_size, ct_inline_loop_size, ct_inline_jrcxz_size, ct_inline_endbr_size, ct_inline_backward_size,
    ct_inline_tiny_size, ct_inline_spin_size, ct_inline_callreg_size, ct_inline_thunk_size,
    ct_inline_straddle_size, ct_inline_callnext_size, ct_inline_ripmix_size, ct_inline_ripflags_size,
    ct_inline_ripredzone_size, ct_inline_ripstore_size, ct_inline_ripvex_size, ct_inline_ripevex_size,
    ct_inline_rippush_size, ct_inline_ripjmp_size, ct_inline_ripcall_size;

/// a + 1, writing no register but eax.
int32_t ct_ipra_leaf(int32_t a);
/// Keeps known values in every caller-saved register but rax and rdi across a direct call of
/// ct_ipra_leaf(a), as a caller compiled with GCC's -fipa-ra may, and stores what they hold
/// after it: rcx, rdx, rsi, rdi, r8, r9, r10, r11 and rax to registers[0..<9], xmm0 to xmm15 to
/// vectors (16 bytes each).
void ct_ipra_call(int32_t a, uint64_t *registers, uint8_t *vectors);
/// Writes no register: stores `a` in ct_ipra_seen.
void ct_ipra_leaf_void(int32_t a);
/// ct_ipra_call for ct_ipra_leaf_void (rax holds the address of ct_ipra_pattern at the call).
void ct_ipra_call_void(int32_t a, uint64_t *registers, uint8_t *vectors);
/// x * 0.5 in the low half of xmm0, whose high half it keeps; writes no other register.
double ct_ipra_leaf_double(double x);
/// ct_ipra_call for ct_ipra_leaf_double, whose argument is the low half of xmm0 as
/// ct_ipra_pattern has it.
void ct_ipra_call_double(int32_t a, uint64_t *registers, uint8_t *vectors);
/// ct_ipra_call for ct_ipra_leaf keeping the vector registers whole: ymm0 to ymm15 loaded from
/// ct_ipra_wide_pattern (the first 32 of each 64 bytes) across the call, then stored to
/// `vectors` (64 bytes each, the first 32 written). Needs AVX.
void ct_ipra_call_ymm(int32_t a, uint8_t *vectors);
/// The same with zmm0 to zmm15, 64 bytes each. Needs AVX-512.
void ct_ipra_call_zmm(int32_t a, uint8_t *vectors);
/// What ct_ipra_call_ymm and ct_ipra_call_zmm load: 64 bytes for each vector register.
extern const uint8_t ct_ipra_wide_pattern[1024];
/// What ct_ipra_leaf_void stored last.
extern int32_t ct_ipra_seen;
static inline int32_t ct_ipra_last_seen(void) { return __atomic_load_n(&ct_ipra_seen, __ATOMIC_RELAXED); }
/// What ct_ipra_call loads: xmm0 to xmm15 (16 bytes each), then rcx, rdx, rsi, r8, r9, r10, r11.
extern const uint64_t ct_ipra_pattern[39];
/// The address of ct_ipra_pattern, which the callers hold in rax at the call.
static inline uint64_t ct_ipra_pattern_address(void) { return (uint64_t)(uintptr_t)ct_ipra_pattern; }

/// Calls fixture `which` (0 plain(a, b), 1 rip, 2 jmp8, 3 jcc8, 4 call, 5 loop, 6 jrcxz,
/// 7 endbr, 8 backward, 9 tiny) with a direct `call`, as code inside one object does.
int64_t ct_inline_direct(int32_t which, int64_t a, int64_t b);
/// Calls ct_inline_plain(i, 1) directly for i in 0..<count; counts in *hooked the results a
/// hook raised by 1000. Returns count, or -1 - i for a result that is neither.
int64_t ct_inline_plain_loop(int64_t count, int64_t *hooked);

#endif
