// Hand-written functions whose first bytes hold one case each of what the inline-hook
// relocator must move (Tests/FFIHookInlineTests). Each takes integers in rdi and returns in
// rax; the comments give the bytes that the tests rely on. Sizes: ct_inline_*_size.
#if defined(__x86_64__) && defined(__linux__)
        .intel_syntax noprefix
        .text

#define FUNCTION(name) .globl name; .type name, @function; .p2align 4; name:
#define END(name) name##_end: .size name, . - name; .pushsection .rodata; .p2align 3; .globl name##_size; \
        name##_size: .quad name##_end - name; .popsection

// (a, b) -> a + 2 * b: push rbp (1); mov rbp, rsp (3); lea rax, [rdi + rsi * 2] (4); ...
FUNCTION(ct_inline_plain)
        push rbp
        mov rbp, rsp
        lea rax, [rdi + rsi * 2]
        pop rbp
        ret
END(ct_inline_plain)

// a -> a + ct_inline_global (41): mov rax, [rip + global] (7); ...
FUNCTION(ct_inline_rip)
        mov rax, qword ptr [rip + ct_inline_global]
        add rax, rdi
        ret
END(ct_inline_rip)

// a -> a + 3: mov rax, rdi (3); jmp rel8 (2) over int3 filler.
FUNCTION(ct_inline_jmp8)
        mov rax, rdi
        .byte 0xEB, 4
        int3
        int3
        int3
        int3
        add rax, 3
        ret
END(ct_inline_jmp8)

// a -> a < 10 ? 2 : 1: cmp rdi, 10 (4); jl rel8 (2); ...
FUNCTION(ct_inline_jcc8)
        cmp rdi, 10
        .byte 0x7C, 6
        mov eax, 1
        ret
        mov eax, 2
        ret
END(ct_inline_jcc8)

// a -> a + 100: call rel32 to ct_inline_helper (5); add rax, rdi; ret.
FUNCTION(ct_inline_call)
        .byte 0xE8
        .long ct_inline_helper - (. + 4)
        add rax, rdi
        ret
END(ct_inline_call)

FUNCTION(ct_inline_helper)
        mov eax, 100
        ret
END(ct_inline_helper)

// n -> n == 1 ? 7 : n - 1: mov rcx, rdi (3); loop rel8 (2); ...
FUNCTION(ct_inline_loop)
        mov rcx, rdi
        .byte 0xE2, 6
        mov eax, 7
        ret
        mov rax, rcx
        ret
END(ct_inline_loop)

// n -> n == 0 ? 2 : 1: mov rcx, rdi (3); jrcxz rel8 (2); ...
FUNCTION(ct_inline_jrcxz)
        mov rcx, rdi
        .byte 0xE3, 6
        mov eax, 1
        ret
        mov eax, 2
        ret
END(ct_inline_jrcxz)

// a -> a + 5: endbr64 (4); mov rax, rdi (3); add rax, 5 (4); ret.
FUNCTION(ct_inline_endbr)
        .byte 0xF3, 0x0F, 0x1E, 0xFA
        mov rax, rdi
        add rax, 5
        ret
END(ct_inline_endbr)

// n (>= 1) -> n + (n - 1) + ... + 1: xor eax, eax (2); add rax, rdi (3); dec rdi (3);
// jnz rel8 back to offset 2 (2); ret.
FUNCTION(ct_inline_backward)
        xor eax, eax
1:      add rax, rdi
        dec rdi
        .byte 0x75, 1b - (. + 1)
        ret
END(ct_inline_backward)

// a -> a (as an int): mov eax, edi (2); ret (1). Three bytes.
FUNCTION(ct_inline_tiny)
        mov eax, edi
        ret
END(ct_inline_tiny)

// (n, r) -> r + 1 after counting n (>= 1) down to 0 in a loop that lies inside the first
// bytes: nop (1); dec rdi (3); jnz rel8 back to the dec (2); lea rax, [rsi + 1]; ret. A thread
// spinning in it sits inside the bytes a patch overwrites, at offset 1 or 4.
FUNCTION(ct_inline_spin)
        nop
1:      dec rdi
        jnz 1b
        lea rax, [rsi + 1]
        ret
END(ct_inline_spin)

// f -> f() + 1: call rdi (2); add rax, 1 (4); ret. The call's return address (offset 2) lies
// inside the first 5 bytes.
FUNCTION(ct_inline_callreg)
        call rdi
        add rax, 1
        ret
END(ct_inline_callreg)

// () -> its own address's distance from the label after the call, 0: call $+5 (5); pop rax
// (1); lea rcx, [rip - 6] (7, the label); sub rax, rcx (3); ret. The position thunk.
FUNCTION(ct_inline_thunk)
        call 1f
1:      pop rax
        lea rcx, [rip + 1b]
        sub rax, rcx
        ret
END(ct_inline_thunk)

// () -> 0: call $+5 (5); mov rax, [rsp] (4); add rsp, 8 (4); lea rcx, [rip + label after the
// call] (7); sub rax, rcx (3); ret. The call pushes its own end without a pop after it.
FUNCTION(ct_inline_callnext)
        call 1f
1:      mov rax, qword ptr [rsp]
        add rsp, 8
        lea rcx, [rip + 1b]
        sub rax, rcx
        ret
END(ct_inline_callnext)

// Functions whose RIP-relative operands the relocator must reach from a trampoline beyond
// ±2 GB (tests copy them whole).

// a -> a + 41 + 41 + 26 + 1 = a + 109: add rax, [rip + global] with rcx, rdx, rbx, rsi live;
// lea rdi, [rip + global]; cmp qword [rip + global], 41 (an immediate after the displacement).
FUNCTION(ct_inline_ripmix)
        push rbx
        mov rax, rdi
        mov ecx, 3
        mov edx, 5
        mov ebx, 7
        mov esi, 11
        add rax, qword ptr [rip + ct_inline_global]
        lea rdi, [rip + ct_inline_global]
        add rax, qword ptr [rdi]
        add rax, rcx
        add rax, rdx
        add rax, rbx
        add rax, rsi
        cmp qword ptr [rip + ct_inline_global], 41
        sete cl
        movzx ecx, cl
        add rax, rcx
        pop rbx
        ret
END(ct_inline_ripmix)

// a -> a < 0 ? 43 : 41: the flags of cmp rdi, 0 live across mov rax, [rip + global].
FUNCTION(ct_inline_ripflags)
        cmp rdi, 0
        mov rax, qword ptr [rip + ct_inline_global]
        mov ecx, 0
        setl cl
        lea rax, [rax + rcx * 2]
        ret
END(ct_inline_ripflags)

// a -> a + 41: a kept in the red zone at [rsp - 8] and [rsp - 128] across a RIP-relative load.
FUNCTION(ct_inline_ripredzone)
        mov qword ptr [rsp - 8], rdi
        mov qword ptr [rsp - 128], rdi
        mov rax, qword ptr [rip + ct_inline_global]
        add rax, qword ptr [rsp - 8]
        add rax, qword ptr [rsp - 128]
        sub rax, rdi
        ret
END(ct_inline_ripredzone)

// a -> a + 1, through writable memory: mov [rip + cell], rdi; mov rax, [rip + cell]; inc.
FUNCTION(ct_inline_ripstore)
        mov qword ptr [rip + ct_inline_cell], rdi
        mov rax, qword ptr [rip + ct_inline_cell]
        add rax, 1
        ret
END(ct_inline_ripstore)

// a -> a + 82: mov rax, [rip + global] with a REX.B that RIP-relative addressing ignores
// (49 8B 05), then vpbroadcastq xmm0, [rip + global] with its VEX.B set likewise (C4 C2 79 59
// 05): the rewrite through a register must clear both. AVX2.
FUNCTION(ct_inline_ripvex)
        .byte 0x49, 0x8B, 0x05
        .long ct_inline_global - (. + 4)
        .byte 0xC4, 0xC2, 0x79, 0x59, 0x05
        .long ct_inline_global - (. + 4)
        vmovq rcx, xmm0
        add rax, rcx
        add rax, rdi
        ret
END(ct_inline_ripvex)

// a -> a + 41: vpbroadcastq xmm1, [rip + global] in EVEX with its B set (62 D2 FD 08 59 0D).
// AVX-512F and VL.
FUNCTION(ct_inline_ripevex)
        .byte 0x62, 0xD2, 0xFD, 0x08, 0x59, 0x0D
        .long ct_inline_global - (. + 4)
        vmovq rax, xmm1
        add rax, rdi
        ret
END(ct_inline_ripevex)

// a -> a + 41: push qword [rip + global]; pop rax, with a kept at [rsp - 16] across them.
FUNCTION(ct_inline_rippush)
        mov qword ptr [rsp - 16], rdi
        push qword ptr [rip + ct_inline_global]
        pop rax
        add rax, qword ptr [rsp - 16]
        ret
END(ct_inline_rippush)

// a -> 2a: a kept at [rsp - 8], then jmp qword [rip + ct_inline_jump_cell] to
// ct_inline_redzone_double, which reads it there.
FUNCTION(ct_inline_ripjmp)
        mov qword ptr [rsp - 8], rdi
        jmp qword ptr [rip + ct_inline_jump_cell]
END(ct_inline_ripjmp)

FUNCTION(ct_inline_redzone_double)
        mov rax, qword ptr [rsp - 8]
        add rax, rax
        ret
END(ct_inline_redzone_double)

// a -> a + 100: call qword [rip + ct_inline_call_cell] (ct_inline_helper); add rax, rdi.
FUNCTION(ct_inline_ripcall)
        sub rsp, 8
        call qword ptr [rip + ct_inline_call_cell]
        add rsp, 8
        add rax, rdi
        ret
END(ct_inline_ripcall)

// a -> a + 3 + 0x1122334455667788, starting 16 bytes before a page boundary, so that its
// 10-byte movabs at offset 13 straddles the boundary: mov rax, rdi (3); add rax, 1 (4);
// xor ecx, ecx (2); add rcx, 2 (4); movabs rdx, imm64 (10, offsets 13 ..< 23, the page ends
// at 16); add rax, rdx; add rax, rcx; ret. A test splits the mapping at the boundary.
        .p2align 12
        .skip 4096 - 16, 0xCC
FUNCTION(ct_inline_straddle)
        mov rax, rdi
        add rax, 1
        xor ecx, ecx
        add rcx, 2
        movabs rdx, 0x1122334455667788
        add rax, rdx
        add rax, rcx
        ret
END(ct_inline_straddle)

// A function that writes no register but eax, and a caller that counts on that as a caller
// compiled with GCC's -fipa-ra may, for a function that binds locally: it keeps values in every
// other caller-saved register across the call. ct_ipra_leaf: a -> a + 1 in eax: mov eax, edi (2);
// add eax, 1 (3); ret. ct_ipra_call(a, registers, vectors): loads xmm0..xmm15, rcx, rdx, rsi, r8,
// r9, r10 and r11 from ct_ipra_pattern (16 bytes a vector register, then a word each), calls
// ct_ipra_leaf(a) directly, and stores rcx, rdx, rsi, rdi, r8, r9, r10, r11 and rax to
// registers[0..<9] and xmm0..xmm15 to vectors (16 bytes each).
FUNCTION(ct_ipra_leaf)
        mov eax, edi
        add eax, 1
        ret
END(ct_ipra_leaf)

// ct_ipra_call, ct_ipra_call_void and ct_ipra_call_double: one caller each for ct_ipra_leaf,
// ct_ipra_leaf_void and ct_ipra_leaf_double; rax holds the address of ct_ipra_pattern at the call.
        .macro IPRA_CALLER name, leaf
        .globl \name
        .type \name, @function
        .p2align 4
\name:
        push r12
        push r13
        sub rsp, 8
        mov r12, rsi
        mov r13, rdx
        lea rax, [rip + ct_ipra_pattern]
        .irp index, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
        movdqu xmm\index, xmmword ptr [rax + \index * 16]
        .endr
        mov rcx, qword ptr [rax + 256]
        mov rdx, qword ptr [rax + 264]
        mov rsi, qword ptr [rax + 272]
        mov r8, qword ptr [rax + 280]
        mov r9, qword ptr [rax + 288]
        mov r10, qword ptr [rax + 296]
        mov r11, qword ptr [rax + 304]
        call \leaf
        mov qword ptr [r12], rcx
        mov qword ptr [r12 + 8], rdx
        mov qword ptr [r12 + 16], rsi
        mov qword ptr [r12 + 24], rdi
        mov qword ptr [r12 + 32], r8
        mov qword ptr [r12 + 40], r9
        mov qword ptr [r12 + 48], r10
        mov qword ptr [r12 + 56], r11
        mov qword ptr [r12 + 64], rax
        .irp index, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
        movdqu xmmword ptr [r13 + \index * 16], xmm\index
        .endr
        add rsp, 8
        pop r13
        pop r12
        ret
        .size \name, . - \name
        .endm

        IPRA_CALLER ct_ipra_call, ct_ipra_leaf

// a -> nothing, stored in ct_ipra_seen: mov [rip + seen], edi (6); ret. Writes no register.
FUNCTION(ct_ipra_leaf_void)
        mov dword ptr [rip + ct_ipra_seen], edi
        ret
END(ct_ipra_leaf_void)

        IPRA_CALLER ct_ipra_call_void, ct_ipra_leaf_void

// x -> x * 0.5 in the low half of xmm0, its high half kept: mulsd xmm0, [rip + half] (8); ret.
FUNCTION(ct_ipra_leaf_double)
        mulsd xmm0, qword ptr [rip + ct_ipra_half]
        ret
END(ct_ipra_leaf_double)

        IPRA_CALLER ct_ipra_call_double, ct_ipra_leaf_double

// ct_ipra_call_ymm(a, vectors) and ct_ipra_call_zmm(a, vectors): ct_ipra_call's caller keeping
// the vector registers whole (a caller built with -mavx or -mavx512f and -fipa-ra may): loads
// ymm0..ymm15 (zmm0..zmm15) from ct_ipra_wide_pattern (64 bytes a register, of which a ymm
// register takes the first 32), calls ct_ipra_leaf(a) directly and stores the registers to
// vectors (64 bytes each; the first 32 of each for ymm).
        .macro IPRA_WIDE_CALLER name, move, register, size
        .globl \name
        .type \name, @function
        .p2align 4
\name:
        push r12
        mov r12, rsi
        lea rax, [rip + ct_ipra_wide_pattern]
        .irp index, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
        \move \register\index, \size ptr [rax + \index * 64]
        .endr
        call ct_ipra_leaf
        .irp index, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
        \move \size ptr [r12 + \index * 64], \register\index
        .endr
        pop r12
        vzeroupper
        ret
        .size \name, . - \name
        .endm

        IPRA_WIDE_CALLER ct_ipra_call_ymm, vmovdqu, ymm, ymmword
        IPRA_WIDE_CALLER ct_ipra_call_zmm, vmovdqu64, zmm, zmmword

        .section .rodata
        .p2align 6
        .globl ct_ipra_wide_pattern
ct_ipra_wide_pattern:
        .irp index, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
        .irp lane, 0, 1, 2, 3, 4, 5, 6, 7
        .quad 0x7A11E00000000000 + \index * 0x1000100 + \lane * 0x10001
        .endr
        .endr
        .size ct_ipra_wide_pattern, . - ct_ipra_wide_pattern

        .p2align 4
        .globl ct_ipra_pattern
ct_ipra_pattern:
        .irp index, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
        .quad 0x5EC7000000000000 + \index * 0x10001
        .quad 0x0FF1CE0000000000 + \index * 0x20003
        .endr
        .irp index, 1, 2, 3, 4, 5, 6, 7
        .quad 0xC0FFEE0000000000 + \index * 0x1010101
        .endr
ct_ipra_half:
        .double 0.5
        .text

        .data
        .p2align 3
        .globl ct_inline_global
ct_inline_global:
        .quad 41
        .globl ct_ipra_seen
ct_ipra_seen:
        .quad 0
        .globl ct_inline_cell
ct_inline_cell:
        .quad 0
ct_inline_jump_cell:
        .quad ct_inline_redzone_double
ct_inline_call_cell:
        .quad ct_inline_helper

        .section .note.GNU-stack, "", @progbits
#endif
