/* Attach without a signature (attach.c, ffh_attach.h), and every other stub that must pass a
   call on with the registers and stack exactly as the caller left them.

   ffh_attach_entry: where an attach stub jumps, with the attachment's record in %r10 and the
   call exactly as the caller made it. It is also the entry of the stubs that only forward
   (FFH_ATTACH_RESOLVES: FFIHookObjC's methods that send a message on to the superclass's
   implementation), for which ffh_attach_enter returns, before reading any thread state, the
   function a resolver chooses from the saved receiver and selector: one register-saving
   entry for both, where the forwarders had an assembly routine of their own with the same
   saves and restores. Saves the argument registers in an enter frame,

        0  rdi rsi rdx rcx r8 r9
       48  rax (%al: vector registers used by a variadic call)
       56  the stack pointer at entry (the address of the return address)
       64  xmm0 .. xmm7, 16 bytes each
      192  scratch, function, thread (filled by ffh_attach_enter)
      216  rbx, which holds the frame's address while the stack pointer is rounded down to 16
           bytes for the call (a compiler may call a function of its own file with the stack less
           aligned than the ABI says: gcc does, for a static function it knows needs no more),
           then a spare word
      232  the return address

   and below it, 528 bytes: the argument vector registers whole where their upper lanes are not
   all zero (ymm or zmm: FFH_STORE_WIDE), and which way they were kept;
   lets ffh_attach_enter run the enter block (which may change the saved registers), restores
   the registers and jumps to the function it returned, with the stack as it came; or, when a
   leave block is to run, takes the return address off the stack (ffh_attach_enter kept it in
   the thread's side stack) and jumps to the thread's cell, whose call puts its own return
   address in the same place and calls the function.

   ffh_attach_return: where a thread's cell jumps, with the frame's index in %r11, once the
   function has returned into the cell (the stack pointer is the caller's again). Saves the result
   registers in a leave frame,

        0  rax rdx
       16  xmm0, xmm1 (16 bytes each)
       48  the index, then the real return address (filled by ffh_attach_leave)
       64  stack pointer at entry, scratch, function, thread
       96  rcx r8, then xmm2, xmm3 (16 bytes each): the rest of a Swift function's result
      144  rbx, which holds the frame's address while the stack is rounded down for the call

   and below it, 144 bytes: the result vector registers whole (ymm0 and ymm1, or zmm), as for
   the arguments;
   lets ffh_attach_leave run the leave block, restores the result registers (the x87 stack is
   left as the original left it) and returns to the real return address. */

#include "registers_x86_64.h"

#if defined(__x86_64__) && defined(__ELF__)
        .hidden ffh_vector_save

        /* The vector registers `indices` (0 and up) kept whole across the blocks, as wide as
           the processor has them (ffh_vector_save, attach.c: 1 the ymm registers, 2 the zmm
           registers; 0 the xmm registers alone, which the frames keep). The block's code may
           use AVX (the C library's string functions do, and their vzeroupper clears every
           upper lane), which would change a `__m256` or `__m512` argument or result.

           Where every lane above the low 16 bytes of those registers is zero (nearly every
           call: a compiler clears them with vzeroupper before a call unless it passes vectors
           there), nothing is stored, and FFH_LOAD_WIDE clears them again with vzeroupper;
           otherwise the registers go whole to 64-byte slots from `base` (register i at i * 64)
           and come back from there. The word at `flag` from `base` says which (0, or the width
           stored: 1 ymm, 2 zmm). The test takes zmm16 and k1 (which no call passes, and which
           the entries do not keep) with AVX-512. FFH_LOAD_WIDE runs before the xmm halves are
           read back (a legacy SSE load leaves the lanes above 128 bits as they are), so a
           block's change to a saved xmm register holds. */
        .macro  FFH_STORE_WIDE base, flag, indices:vararg
        movq    $0, \flag(\base)
        cmpb    $1, ffh_vector_save(%rip)
        jb      .Lffh_wide_stored\@
        je      .Lffh_wide_ymm_test\@
        vpxorq  %zmm16, %zmm16, %zmm16
        .irp    index, \indices
        vporq   %zmm\index, %zmm16, %zmm16
        .endr
        vptestmq ffh_upper_lanes(%rip), %zmm16, %k1
        kortestw %k1, %k1
        jz      .Lffh_wide_stored\@
        movq    $2, \flag(\base)
        .irp    index, \indices
        vmovdqu64 %zmm\index, \index * 64(\base)
        .endr
        jmp     .Lffh_wide_stored\@
.Lffh_wide_ymm_test\@:
        .irp    index, \indices
        vptest  ffh_upper_lanes(%rip), %ymm\index
        jnz     .Lffh_wide_ymm\@
        .endr
        jmp     .Lffh_wide_stored\@
.Lffh_wide_ymm\@:
        movq    $1, \flag(\base)
        .irp    index, \indices
        vmovdqu %ymm\index, \index * 64(\base)
        .endr
.Lffh_wide_stored\@:
        .endm

        .macro  FFH_LOAD_WIDE base, flag, indices:vararg
        cmpq    $1, \flag(\base)
        jb      .Lffh_wide_clear\@
        je      .Lffh_wide_ymm\@
        .irp    index, \indices
        vmovdqu64 \index * 64(\base), %zmm\index
        .endr
        jmp     .Lffh_wide_loaded\@
.Lffh_wide_ymm\@:
        .irp    index, \indices
        vmovdqu \index * 64(\base), %ymm\index
        .endr
        jmp     .Lffh_wide_loaded\@
.Lffh_wide_clear\@:
        cmpb    $0, ffh_vector_save(%rip)
        je      .Lffh_wide_loaded\@
        vzeroupper
.Lffh_wide_loaded\@:
        .endm

        /* xmm8..xmm15, whole, to eight 16-byte slots at `offset` from `base`. */
        .macro  FFH_STORE_UPPER_VECTORS base, offset
        .irp    index, 8, 9, 10, 11, 12, 13, 14, 15
        movdqu  %xmm\index, \offset + (\index - 8) * 16(\base)
        .endr
        .endm

        /* Calls `function` with the stack pointer rounded down to 16 bytes (a compiler may call
           a function of its own file with the stack less aligned than the ABI says: gcc does,
           for a static function it knows needs no more), rbx holding the frame's address
           meanwhile (each entry saves rbx first and restores it after). */
        .macro  FFH_CALL_ALIGNED function
        movq    %rsp, %rbx
        .cfi_def_cfa_register %rbx
        andq    $-16, %rsp
        call    \function@PLT
        movq    %rbx, %rsp
        .cfi_def_cfa_register %rsp
        .endm

        /* The result registers to the leave frame `offset` bytes above rsp
           (ffh_attach_leave_frame: rax, rdx, xmm0 and xmm1 at 0 to 48, rcx, r8, xmm2 and xmm3
           at 96 to 144), and back: both return paths. */
        .macro  FFH_STORE_RESULTS offset
        movq    %rax, \offset(%rsp)
        movq    %rdx, \offset + 8(%rsp)
        movdqu  %xmm0, \offset + 16(%rsp)
        movdqu  %xmm1, \offset + 32(%rsp)
        movq    %rcx, \offset + 96(%rsp)
        movq    %r8, \offset + 104(%rsp)
        movdqu  %xmm2, \offset + 112(%rsp)
        movdqu  %xmm3, \offset + 128(%rsp)
        .endm

        .macro  FFH_LOAD_RESULTS offset
        movq    \offset(%rsp), %rax
        movq    \offset + 8(%rsp), %rdx
        movdqu  \offset + 16(%rsp), %xmm0
        movdqu  \offset + 32(%rsp), %xmm1
        movq    \offset + 96(%rsp), %rcx
        movq    \offset + 104(%rsp), %r8
        movdqu  \offset + 112(%rsp), %xmm2
        movdqu  \offset + 128(%rsp), %xmm3
        .endm

        /* Every register ffh_attach_entry_preserving saved, back from its frame at rsp. */
        .macro  FFH_LOAD_PRESERVED
        FFH_LOAD_GENERAL %rsp
        movq    48(%rsp), %rax
        FFH_LOAD_VECTORS %rsp, 64
        movq    232(%rsp), %r10
        movq    240(%rsp), %r11
        .irp    index, 8, 9, 10, 11, 12, 13, 14, 15
        movdqu  248 + (\index - 8) * 16(%rsp), %xmm\index
        .endr
        .endm
#endif

#if defined(__x86_64__) && defined(__ELF__)

        .text
        .p2align 4
        .globl  ffh_attach_entry
        .hidden ffh_attach_entry
        .type   ffh_attach_entry, @function
ffh_attach_entry:
        .cfi_startproc
        subq    $232, %rsp
        .cfi_def_cfa_offset 240
        FFH_STORE_GENERAL %rsp
        movq    %rax, 48(%rsp)
        leaq    232(%rsp), %r11
        movq    %r11, 56(%rsp)
        FFH_STORE_VECTORS %rsp, 64
        movq    %rbx, 216(%rsp)
        .cfi_offset %rbx, -24
        /* The argument registers whole, below the frame (see FFH_STORE_WIDE). */
        subq    $528, %rsp
        .cfi_adjust_cfa_offset 528
        FFH_STORE_WIDE %rsp, 512, 0, 1, 2, 3, 4, 5, 6, 7
        movq    %r10, %rdi
        leaq    528(%rsp), %rsi
        FFH_CALL_ALIGNED ffh_attach_enter
        FFH_LOAD_WIDE %rsp, 512, 0, 1, 2, 3, 4, 5, 6, 7
        addq    $528, %rsp
        .cfi_adjust_cfa_offset -528
        movq    216(%rsp), %rbx
        .cfi_restore %rbx
        movq    %rax, %r11
        movq    %rdx, %r10
        FFH_LOAD_GENERAL %rsp
        movq    48(%rsp), %rax
        FFH_LOAD_VECTORS %rsp, 64
        testq   %r10, %r10
        jnz     1f
        addq    $232, %rsp
        .cfi_remember_state
        .cfi_def_cfa_offset 8
        jmp     *%r11
        .cfi_restore_state
1:
        /* The leave block is to run: the return address, kept in the side stack, comes off
           the stack, and the thread's cell calls the function from there. */
        addq    $240, %rsp
        .cfi_def_cfa_offset 0
        .cfi_undefined %rip
        jmp     *%r10
        .cfi_endproc
        .size   ffh_attach_entry, .-ffh_attach_entry

        /* Until ffh_attach_leave has stored the real return address in the frame, the unwind
           information says the return address is unknown (a backtrace ends here); from then
           on it is the frame's word at 56. */
        .p2align 4
        .globl  ffh_attach_return
        .hidden ffh_attach_return
        .type   ffh_attach_return, @function
ffh_attach_return:
        .cfi_startproc
        .cfi_def_cfa %rsp, 0
        .cfi_undefined %rip
        subq    $160, %rsp
        .cfi_def_cfa_offset 160
        FFH_STORE_RESULTS 0
        movq    %r11, 48(%rsp)
        movq    $0, 56(%rsp)
        .cfi_offset %rip, -104
        movq    %rbx, 144(%rsp)
        .cfi_offset %rbx, -16
        /* The result registers whole, below the frame (a `__m256` or `__m512` result). */
        subq    $144, %rsp
        .cfi_adjust_cfa_offset 144
        FFH_STORE_WIDE %rsp, 128, 0, 1
        leaq    144(%rsp), %rdi
        FFH_CALL_ALIGNED ffh_attach_leave
        FFH_LOAD_WIDE %rsp, 128, 0, 1
        addq    $144, %rsp
        .cfi_adjust_cfa_offset -144
        movq    144(%rsp), %rbx
        .cfi_restore %rbx
        movq    %rax, %r11
        FFH_LOAD_RESULTS 0
        addq    $160, %rsp
        .cfi_def_cfa_offset 0
        .cfi_undefined %rip
        /* Back where the caller's call put its return address, and a ret, which the
           processor predicts: the caller's call is the one this return matches. */
        pushq   %r11
        ret
        .cfi_endproc
        .size   ffh_attach_return, .-ffh_attach_return


/* The preserving forms, for a function patched inline (ffh_attach_write_stub_preserving): its
   callers may keep values in registers the function does not write (GCC's -fipa-ra), so no
   register but the stack pointer differs from a direct call on the way to the function and
   back, the blocks' changes aside.

   ffh_attach_entry_preserving: the stub has pushed the caller's r11 and then the record, so
   the return address is 16 bytes up. The frame is ffh_attach_entry's (the same offsets, up to
   232), then r10, r11 (the caller's) and xmm8 to xmm15 at 232, 240 and 248 (to 376); the record
   at 376, the caller's r11 at 384, the return address (S) at 392. Everything is restored, and
   the jump goes through the stack's word just below where the stack pointer ends (S - 8 for
   the function, S for the cell): a word the red zone keeps from signal frames. */
        .p2align 4
        .globl  ffh_attach_entry_preserving
        .hidden ffh_attach_entry_preserving
        .type   ffh_attach_entry_preserving, @function
ffh_attach_entry_preserving:
        .cfi_startproc
        .cfi_def_cfa_offset 24
        subq    $376, %rsp
        .cfi_def_cfa_offset 400
        FFH_STORE_GENERAL %rsp
        movq    %rax, 48(%rsp)
        leaq    392(%rsp), %rax
        movq    %rax, 56(%rsp)
        FFH_STORE_VECTORS %rsp, 64
        movq    %r10, 232(%rsp)
        movq    384(%rsp), %rax
        movq    %rax, 240(%rsp)
        FFH_STORE_UPPER_VECTORS %rsp, 248
        movq    %rbx, 216(%rsp)
        .cfi_offset %rbx, -184
        /* Every vector register whole, below the frame (a caller may keep a vector in one the
           function does not write). */
        subq    $1040, %rsp
        .cfi_adjust_cfa_offset 1040
        FFH_STORE_WIDE %rsp, 1024, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
        movq    1040 + 376(%rsp), %rdi
        leaq    1040(%rsp), %rsi
        FFH_CALL_ALIGNED ffh_attach_enter
        FFH_LOAD_WIDE %rsp, 1024, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
        addq    $1040, %rsp
        .cfi_adjust_cfa_offset -1040
        movq    216(%rsp), %rbx
        .cfi_restore %rbx
        testq   %rdx, %rdx
        jnz     1f
        movq    %rax, 384(%rsp)
        FFH_LOAD_PRESERVED
        leaq    392(%rsp), %rsp
        .cfi_remember_state
        .cfi_def_cfa_offset 8
        jmp     *-8(%rsp)
        .cfi_restore_state
1:
        /* The leave block is to run: the return address, kept in the side stack, comes off
           the stack, and the cell's preserving way in calls the function from there. */
        addq    $15, %rdx
        movq    %rdx, 392(%rsp)
        FFH_LOAD_PRESERVED
        leaq    400(%rsp), %rsp
        .cfi_def_cfa_offset 0
        .cfi_undefined %rip
        jmp     *-8(%rsp)
        .cfi_endproc
        .size   ffh_attach_entry_preserving, .-ffh_attach_entry_preserving

/* ffh_attach_return_preserving: where a cell's preserving way in jumps once the function has
   returned, with the cell's index pushed where the return address was (S; the caller's stack
   pointer is S + 8). The leave frame is ffh_attach_return's at the same place (S - 152), and
   below it rsi, rdi, r9, r10, r11 and xmm4 to xmm15 (240 bytes); the return goes through S. */
        .p2align 4
        .globl  ffh_attach_return_preserving
        .hidden ffh_attach_return_preserving
        .type   ffh_attach_return_preserving, @function
ffh_attach_return_preserving:
        .cfi_startproc
        .cfi_def_cfa %rsp, 8
        .cfi_undefined %rip
        subq    $392, %rsp
        .cfi_def_cfa_offset 400
        FFH_STORE_RESULTS 240
        movq    392(%rsp), %rax
        movq    %rax, 288(%rsp)
        movq    $0, 296(%rsp)
        .cfi_offset %rip, -104
        movq    %rbx, 384(%rsp)
        .cfi_offset %rbx, -16
        movq    %rsi, 0(%rsp)
        movq    %rdi, 8(%rsp)
        movq    %r9, 16(%rsp)
        movq    %r10, 24(%rsp)
        movq    %r11, 32(%rsp)
        .irp    index, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
        movdqu  %xmm\index, 40 + (\index - 4) * 16(%rsp)
        .endr
        /* Every vector register whole, below the frame. */
        subq    $1040, %rsp
        .cfi_adjust_cfa_offset 1040
        FFH_STORE_WIDE %rsp, 1024, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
        leaq    1040 + 240(%rsp), %rdi
        FFH_CALL_ALIGNED ffh_attach_leave
        FFH_LOAD_WIDE %rsp, 1024, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
        addq    $1040, %rsp
        .cfi_adjust_cfa_offset -1040
        movq    %rax, 392(%rsp)
        movq    384(%rsp), %rbx
        .cfi_restore %rbx
        FFH_LOAD_RESULTS 240
        movq    0(%rsp), %rsi
        movq    8(%rsp), %rdi
        movq    16(%rsp), %r9
        movq    24(%rsp), %r10
        movq    32(%rsp), %r11
        .irp    index, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
        movdqu  40 + (\index - 4) * 16(%rsp), %xmm\index
        .endr
        leaq    392(%rsp), %rsp
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size   ffh_attach_return_preserving, .-ffh_attach_return_preserving

#endif

#if defined(__x86_64__) && defined(__ELF__)
        /* Ones in every lane above a register's low 16 bytes (FFH_STORE_WIDE's test). */
        .section .rodata
        .p2align 6
ffh_upper_lanes:
        .quad   0, 0, -1, -1, -1, -1, -1, -1
#endif

#if defined(__ELF__)
        .section .note.GNU-stack,"",@progbits
#endif
