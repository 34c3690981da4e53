/* The accesses the fault guard (guard.c) protects, and the return path of its handler.

   ffh_guard_cas(address, expected, desired) and ffh_guard_load(address, value) each touch
   memory the library does not own with one instruction, at a global label; when that
   instruction faults, the guard's handler moves the interrupted thread to
   ffh_guard_recover, which returns -1 from whichever of them faulted. Both are leaf
   functions that leave the stack as they found it, so a plain `ret` from the recovery path
   returns to their caller.

   ffh_guard_restorer is the `sa_restorer` the guard gives the kernel with its handler: the
   handler returns into it, and it asks the kernel to restore the interrupted context. Its
   bytes are the ones unwinders recognise as a signal frame's return (`movq $15, %rax;
   syscall`), and the `nop` before it keeps a lookup at (return address - 1) out of the
   function above. */

#if defined(__x86_64__) && defined(__ELF__)

        .text

/* int ffh_guard_cas(uintptr_t *address, uintptr_t expected, uintptr_t desired):
   1 when the word held `expected` and now holds `desired`, 0 when it held something else,
   -1 (through ffh_guard_recover) when the access faulted. */
        .p2align 4
        .globl  ffh_guard_cas
        .hidden ffh_guard_cas
        .type   ffh_guard_cas, @function
ffh_guard_cas:
        .cfi_startproc
        movq    %rsi, %rax
        .globl  ffh_guard_cas_access
        .hidden ffh_guard_cas_access
ffh_guard_cas_access:
        lock cmpxchgq %rdx, (%rdi)
        sete    %al
        movzbl  %al, %eax
        ret
        .cfi_endproc
        .size   ffh_guard_cas, . - ffh_guard_cas

/* int ffh_guard_load(const uintptr_t *address, uintptr_t *value): 0 with the word stored
   in *value, -1 (through ffh_guard_recover) when the read faulted. */
        .p2align 4
        .globl  ffh_guard_load
        .hidden ffh_guard_load
        .type   ffh_guard_load, @function
ffh_guard_load:
        .cfi_startproc
        .globl  ffh_guard_load_access
        .hidden ffh_guard_load_access
ffh_guard_load_access:
        movq    (%rdi), %rax
        movq    %rax, (%rsi)
        xorl    %eax, %eax
        ret
        .cfi_endproc
        .size   ffh_guard_load, . - ffh_guard_load

/* Where the handler sends a thread whose guarded access faulted: the stack is as it was on
   entry to the guarded function, so this returns -1 to its caller. */
        .p2align 4
        .globl  ffh_guard_recover
        .hidden ffh_guard_recover
        .type   ffh_guard_recover, @function
ffh_guard_recover:
        .cfi_startproc
        movl    $-1, %eax
        ret
        .cfi_endproc
        .size   ffh_guard_recover, . - ffh_guard_recover

/* void ffh_guard_restorer(void): rt_sigreturn (system call 15). No unwind table entry, so
   that unwinders fall back on recognising these bytes as a signal frame. */
        .p2align 4
        nop
        .globl  ffh_guard_restorer
        .hidden ffh_guard_restorer
        .type   ffh_guard_restorer, @function
ffh_guard_restorer:
        .byte   0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00    /* movq $15, %rax */
        .byte   0x0f, 0x05                                  /* syscall */
        .size   ffh_guard_restorer, . - ffh_guard_restorer

#endif

#if defined(__ELF__)
        .section .note.GNU-stack,"",@progbits
#endif
