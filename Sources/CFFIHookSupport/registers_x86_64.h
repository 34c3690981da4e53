/* The argument registers of the System V x86-64 calling convention as the library's
   assembly entries and its call routine keep them in a frame: the six general registers in
   one run of words (rdi, rsi, rdx, rcx, r8, r9), and the eight vector registers after them,
   their low halves (the closure entry and ffh_sysv_invoke, whose "frame words" the register
   plans address) or whole (attach, which passes a call on exactly as it came). One set of
   macros, included by call_x86_64.S and attach_x86_64.S, so that the entries cannot disagree
   about the order. */

#ifndef FFH_REGISTERS_X86_64_H
#define FFH_REGISTERS_X86_64_H

#if defined(__ASSEMBLER__) && defined(__x86_64__)

        /* An entry's frame pointer: rbp pushed and pointing at the new frame, with the unwind
           information that says so (after .cfi_startproc). */
        .macro  FFH_FRAME_BEGIN
        endbr64
        pushq   %rbp
        .cfi_def_cfa_offset 16
        .cfi_offset %rbp, -16
        movq    %rsp, %rbp
        .cfi_def_cfa_register %rbp
        .endm

        /* rdi..r9 to the six words at `offset` from `base`. */
        .macro  FFH_STORE_GENERAL base, offset=0
        .set    ffh_word, \offset
        .irp    register, rdi, rsi, rdx, rcx, r8, r9
        movq    %\register, ffh_word(\base)
        .set    ffh_word, ffh_word + 8
        .endr
        .endm

        /* rdi..r9 from the six words at `offset` from `base`. */
        .macro  FFH_LOAD_GENERAL base, offset=0
        .set    ffh_word, \offset
        .irp    register, rdi, rsi, rdx, rcx, r8, r9
        movq    ffh_word(\base), %\register
        .set    ffh_word, ffh_word + 8
        .endr
        .endm

        /* The low halves of xmm0..xmm7 to the eight words at `offset` from `base`
           (`instruction` movq), or the whole registers to eight 16-byte slots (movdqu). */
        .macro  FFH_STORE_VECTORS base, offset, instruction=movdqu, size=16
        .irp    index, 0, 1, 2, 3, 4, 5, 6, 7
        \instruction %xmm\index, \offset + \index * \size(\base)
        .endr
        .endm

        /* xmm0..xmm7 back from where FFH_STORE_VECTORS put them. */
        .macro  FFH_LOAD_VECTORS base, offset, instruction=movdqu, size=16
        .irp    index, 0, 1, 2, 3, 4, 5, 6, 7
        \instruction \offset + \index * \size(\base), %xmm\index
        .endr
        .endm

        /* xmm0..xmm15, whole, to sixteen 16-byte slots at `offset` from `base`, and back. */
        .macro  FFH_STORE_ALL_VECTORS base, offset
        .irp    index, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
        movdqu  %xmm\index, \offset + \index * 16(\base)
        .endr
        .endm

        .macro  FFH_LOAD_ALL_VECTORS base, offset
        .irp    index, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
        movdqu  \offset + \index * 16(\base), %xmm\index
        .endr
        .endm

#endif

#endif
