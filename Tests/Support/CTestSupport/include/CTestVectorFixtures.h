#ifndef CTEST_VECTOR_FIXTURES_H
#define CTEST_VECTOR_FIXTURES_H

#include <stdint.h>

// Functions that take and return whole vector registers (`__m256d` in ymm, `__m512d` in zmm),
// called through slots an attach hooks, and code that uses every lane of every vector register
// as a block's code may (the C library's string functions do on machines with AVX). The
// vector types stay out of this header: Swift sees the slots as pointers.

/// 1 when the processor and the kernel give the process AVX (the ymm registers).
int vf_has_avx(void);
/// 1 when they give it AVX-512 Foundation (the zmm registers).
int vf_has_avx512(void);

/// The slot of `__m256d vf_add256(__m256d a, __m256d b)` (a + b, lane by lane; in assembly,
/// as are the callers that pass the vectors in registers).
void **vf_slot256(void);
/// The slot of `__m512d vf_add512(__m512d a, __m512d b)`.
void **vf_slot512(void);
/// Calls the function in vf_slot256 `rounds` times with four different lanes in each argument
/// (the round number in the first; in odd rounds the lanes above the low 16 bytes zero) and
/// returns how many results were wrong in any lane; -1 without AVX.
int vf_check256(int rounds);
/// The same through vf_slot512, eight lanes; -1 without AVX-512.
int vf_check512(int rounds);

/// Writes all ones to every lane of every vector register the processor has (ymm0 to ymm15,
/// or zmm0 to zmm31) and returns without vzeroupper: what a block's code may leave there.
void vf_clobber(void);

#endif
