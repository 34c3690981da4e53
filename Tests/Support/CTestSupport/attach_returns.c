#include "CTestAttachFixtures.h"

// A function that returns a value in every register a Swift function may return one in (rax,
// rdx, rcx, r8, xmm0 to xmm3), a caller that keeps all eight, and a function that overwrites
// those registers, for a leave block to call: an attach's leave path must hand the caller
// what the function returned in each of them.

#if defined(__x86_64__) && defined(__linux__)

void *ct_all_returns_slot;

__asm__(
    ".text\n"
    ".p2align 4\n"
    ".globl ct_all_returns\n"
    ".type ct_all_returns, @function\n"
    "ct_all_returns:\n"
    "    movabsq $0x5151515151515151, %rax\n    movq %rax, %xmm0\n"
    "    movabsq $0x6161616161616161, %rax\n    movq %rax, %xmm1\n"
    "    movabsq $0x7171717171717171, %rax\n    movq %rax, %xmm2\n"
    "    movabsq $0x8181818181818181, %rax\n    movq %rax, %xmm3\n"
    "    movabsq $0x1111111111111111, %rax\n"
    "    movabsq $0x2121212121212121, %rdx\n"
    "    movabsq $0x3131313131313131, %rcx\n"
    "    movabsq $0x4141414141414141, %r8\n"
    "    ret\n"
    ".size ct_all_returns, .-ct_all_returns\n"
    "\n"
    ".p2align 4\n"
    ".globl ct_call_all_returns\n"
    ".type ct_call_all_returns, @function\n"
    "ct_call_all_returns:\n"
    "    pushq %rbx\n"
    "    movq %rdi, %rbx\n"
    "    call *ct_all_returns_slot(%rip)\n"
    "    movq %rax, 0(%rbx)\n"
    "    movq %rdx, 8(%rbx)\n"
    "    movq %rcx, 16(%rbx)\n"
    "    movq %r8, 24(%rbx)\n"
    "    movq %xmm0, 32(%rbx)\n"
    "    movq %xmm1, 40(%rbx)\n"
    "    movq %xmm2, 48(%rbx)\n"
    "    movq %xmm3, 56(%rbx)\n"
    "    popq %rbx\n"
    "    ret\n"
    ".size ct_call_all_returns, .-ct_call_all_returns\n"
    "\n"
    ".p2align 4\n"
    ".globl ct_clobber_return_registers\n"
    ".type ct_clobber_return_registers, @function\n"
    "ct_clobber_return_registers:\n"
    "    movq $-1, %rax\n    movq %rax, %xmm0\n    movq %rax, %xmm1\n    movq %rax, %xmm2\n    movq %rax, %xmm3\n"
    "    movq $-1, %rdx\n    movq $-1, %rcx\n    movq $-1, %r8\n"
    "    ret\n"
    ".size ct_clobber_return_registers, .-ct_clobber_return_registers\n");

void ct_all_returns(void);

void ct_all_returns_reset(void) { ct_all_returns_slot = (void *)ct_all_returns; }

void **ct_all_returns_slot_address(void) { return &ct_all_returns_slot; }

#endif

// A caller that calls a function with the stack 8 bytes off the ABI's alignment, as gcc may
// call a static function of its own file, and a function that needs the ABI's alignment (its
// vector local is stored with an aligned move).

#if defined(__x86_64__) && defined(__linux__)

#include <emmintrin.h>

__asm__(
    ".text\n"
    ".p2align 4\n"
    ".globl ct_call_misaligned\n"
    ".type ct_call_misaligned, @function\n"
    "ct_call_misaligned:\n"
    "    movq %rdi, %rax\n"
    "    movq %rsi, %rdi\n"
    "    movq %rdx, %rsi\n"
    "    call *%rax\n"
    "    ret\n"
    ".size ct_call_misaligned, .-ct_call_misaligned\n");

__attribute__((noinline)) double ct_needs_aligned_stack(double value) {
    volatile __m128d vector = _mm_set1_pd(value);
    double lanes[2];
    _mm_storeu_pd(lanes, vector);
    return lanes[0] + lanes[1];
}

#endif
