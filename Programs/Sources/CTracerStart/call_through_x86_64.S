/* fhs_call_through(function, through, a, b, c): calls function(a, b, c) so that the return
   address it finds on entry is `through`, an address of the caller's choosing, and returns
   its result. `through` must hold a `ret` instruction: the function returns there, and that
   `ret` takes the next word, which is the address of the instruction after the jump below,
   back into this function.

   The loader's dlopen and dlmopen read their return address to learn which object called
   them (its DT_RPATH, DT_RUNPATH and namespace decide where a bare name is looked for): this
   library's wrappers of them call the loader through a `ret` in the object that called the
   wrapper, so the loader sees that object, not this library. Stack at the jump
   (16-aligned before the first push, as at a call): [through][back here][padding][rbp]. */

#if defined(__x86_64__) && defined(__ELF__)

        .text
        .p2align 4
        .globl  fhs_call_through
        .hidden fhs_call_through
        .type   fhs_call_through, @function
fhs_call_through:
        .cfi_startproc
        pushq   %rbp
        .cfi_def_cfa_offset 16
        .cfi_offset %rbp, -16
        movq    %rsp, %rbp
        .cfi_def_cfa_register %rbp
        movq    %rdi, %rax
        movq    %rsi, %r11
        movq    %rdx, %rdi
        movq    %rcx, %rsi
        movq    %r8, %rdx
        subq    $8, %rsp
        leaq    1f(%rip), %r10
        pushq   %r10
        pushq   %r11
        jmpq    *%rax
1:
        leave
        .cfi_def_cfa %rsp, 8
        ret
        .cfi_endproc
        .size   fhs_call_through, . - fhs_call_through

#endif

#if defined(__ELF__)
        .section .note.GNU-stack,"",@progbits
#endif
