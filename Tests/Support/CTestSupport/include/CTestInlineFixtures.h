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

/// 41.
extern int64_t ct_inline_global;

/// The functions' sizes in bytes.
extern const int64_t ct_inline_plain_size, ct_inline_rip_size, ct_inline_jmp8_size, ct_inline_jcc8_size,
    ct_inline_call_size, ct_inline_loop_size, ct_inline_jrcxz_size, ct_inline_endbr_size, ct_inline_backward_size,
    ct_inline_tiny_size;

#endif
