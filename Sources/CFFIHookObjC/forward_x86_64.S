/* ffh_objc_forward_entry: the implementation of a method this module adds to a class so
   that a hook covers the class alone (an inherited method, or a method of a class made for
   per-instance hooks). Each such method is a trampoline (ffh_objc_forwarder_make) that loads
   its forwarder's data into %r10 and jumps here. It saves the argument registers (and %al,
   the vector count of a variadic call), asks ffh_objc_forwarder_target for the superclass's
   implementation as it is now, puts the registers back and jumps there: the implementation
   runs as if it had been called directly, with the caller's stack arguments and return
   address, whatever the method's signature. */
#if defined(__x86_64__) && defined(__ELF__)
        .text
        .p2align 4
        .globl  ffh_objc_forward_entry
        .hidden ffh_objc_forward_entry
        .type   ffh_objc_forward_entry, @function
ffh_objc_forward_entry:
        .cfi_startproc
        endbr64
        pushq   %rbp
        .cfi_def_cfa_offset 16
        .cfi_offset %rbp, -16
        movq    %rsp, %rbp
        .cfi_def_cfa_register %rbp
        subq    $192, %rsp
        movq    %rdi, 0(%rsp)
        movq    %rsi, 8(%rsp)
        movq    %rdx, 16(%rsp)
        movq    %rcx, 24(%rsp)
        movq    %r8, 32(%rsp)
        movq    %r9, 40(%rsp)
        movq    %rax, 48(%rsp)
        movdqu  %xmm0, 64(%rsp)
        movdqu  %xmm1, 80(%rsp)
        movdqu  %xmm2, 96(%rsp)
        movdqu  %xmm3, 112(%rsp)
        movdqu  %xmm4, 128(%rsp)
        movdqu  %xmm5, 144(%rsp)
        movdqu  %xmm6, 160(%rsp)
        movdqu  %xmm7, 176(%rsp)
        movq    %rdx, %rcx
        movq    %rsi, %rdx
        movq    %rdi, %rsi
        movq    %r10, %rdi
        call    ffh_objc_forwarder_target@PLT
        movq    %rax, %r11
        movq    0(%rsp), %rdi
        movq    8(%rsp), %rsi
        movq    16(%rsp), %rdx
        movq    24(%rsp), %rcx
        movq    32(%rsp), %r8
        movq    40(%rsp), %r9
        movq    48(%rsp), %rax
        movdqu  64(%rsp), %xmm0
        movdqu  80(%rsp), %xmm1
        movdqu  96(%rsp), %xmm2
        movdqu  112(%rsp), %xmm3
        movdqu  128(%rsp), %xmm4
        movdqu  144(%rsp), %xmm5
        movdqu  160(%rsp), %xmm6
        movdqu  176(%rsp), %xmm7
        leave
        .cfi_def_cfa %rsp, 8
        .cfi_restore %rbp
        jmp     *%r11
        .cfi_endproc
        .size   ffh_objc_forward_entry, .-ffh_objc_forward_entry
#endif

#if defined(__ELF__)
        .section .note.GNU-stack,"",@progbits
#endif
