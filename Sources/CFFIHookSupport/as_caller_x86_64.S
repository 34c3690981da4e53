/* ffh_as_caller_common: where the shim of a hooked function that reads its return address
   (as_caller.c) jumps, with the function in %r10 and the call's arguments (integers, at most
   four). Asks ffh_as_caller_take for the `ret` the call's resolver found in the caller's object,
   then calls the function through it (ffh_call_through, jumped to with the stack as it came)
   or, with none, jumps to it. */

#if defined(__x86_64__) && defined(__ELF__)

        .text
        .p2align 4
        .globl  ffh_as_caller_common
        .hidden ffh_as_caller_common
        .type   ffh_as_caller_common, @function
ffh_as_caller_common:
        .cfi_startproc
        pushq   %rbp
        .cfi_def_cfa_offset 16
        .cfi_offset %rbp, -16
        movq    %rsp, %rbp
        .cfi_def_cfa_register %rbp
        pushq   %r10
        pushq   %rdi
        pushq   %rsi
        pushq   %rdx
        pushq   %rcx
        subq    $8, %rsp
        call    ffh_as_caller_take@PLT
        movq    %rax, %r11
        addq    $8, %rsp
        popq    %rcx
        popq    %rdx
        popq    %rsi
        popq    %rdi
        popq    %r10
        leave
        .cfi_def_cfa %rsp, 8
        testq   %r11, %r11
        jz      1f
        /* ffh_call_through(function, through, the four arguments), as a tail call. */
        movq    %rcx, %r9
        movq    %rdx, %r8
        movq    %rsi, %rcx
        movq    %rdi, %rdx
        movq    %r11, %rsi
        movq    %r10, %rdi
        jmp     ffh_call_through
1:
        jmpq    *%r10
        .cfi_endproc
        .size   ffh_as_caller_common, . - ffh_as_caller_common

#endif

#if defined(__ELF__)
        .section .note.GNU-stack,"",@progbits
#endif
