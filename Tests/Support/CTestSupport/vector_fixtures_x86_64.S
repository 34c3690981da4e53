// Functions that take and return whole vector registers, and callers that pass them so, in
// assembly: the convention is then the one the System V ABI gives (__m256d in ymm0 and ymm1,
// __m512d in zmm0 and zmm1, the result in ymm0 or zmm0) whatever flags the C compiler had.
#if defined(__x86_64__) && defined(__linux__)
        .intel_syntax noprefix
        .text

#define FUNCTION(name) .globl name; .type name, @function; .p2align 4; name:
#define END(name) .size name, . - name

// vf_add256(a, b): a + b, four doubles in ymm0 and ymm1.
FUNCTION(vf_add256)
        vaddpd ymm0, ymm0, ymm1
        ret
END(vf_add256)

// vf_add512(a, b): a + b, eight doubles in zmm0 and zmm1.
FUNCTION(vf_add512)
        vaddpd zmm0, zmm0, zmm1
        ret
END(vf_add512)

// vf_call256(function, a, b, out) and vf_call512(function, a, b, out): load ymm0 (zmm0) from a
// and ymm1 (zmm1) from b (32 or 64 bytes each), call function, store ymm0 (zmm0) to out.
        .macro VF_CALLER name, move, register, size
        .globl \name
        .type \name, @function
        .p2align 4
\name:
        push rbx
        mov rbx, rcx
        \move \register\()0, \size ptr [rsi]
        \move \register\()1, \size ptr [rdx]
        call rdi
        \move \size ptr [rbx], \register\()0
        vzeroupper
        pop rbx
        ret
        .size \name, . - \name
        .endm

        VF_CALLER vf_call256, vmovdqu, ymm, ymmword
        VF_CALLER vf_call512, vmovdqu64, zmm, zmmword

        .section .note.GNU-stack, "", @progbits
#endif
