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

// vf_call256(function, a, b, out): loads ymm0 from a and ymm1 from b (32 bytes each), calls
// function, stores ymm0 to out.
FUNCTION(vf_call256)
        push rbx
        mov rbx, rcx
        vmovdqu ymm0, ymmword ptr [rsi]
        vmovdqu ymm1, ymmword ptr [rdx]
        call rdi
        vmovdqu ymmword ptr [rbx], ymm0
        vzeroupper
        pop rbx
        ret
END(vf_call256)

// vf_call512(function, a, b, out): the same with zmm0 and zmm1 (64 bytes each).
FUNCTION(vf_call512)
        push rbx
        mov rbx, rcx
        vmovdqu64 zmm0, zmmword ptr [rsi]
        vmovdqu64 zmm1, zmmword ptr [rdx]
        call rdi
        vmovdqu64 zmmword ptr [rbx], zmm0
        vzeroupper
        pop rbx
        ret
END(vf_call512)

        .section .note.GNU-stack, "", @progbits
#endif
