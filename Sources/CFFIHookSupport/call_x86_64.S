/* ffh_sysv_invoke(frame, function): performs one System V x86-64 call that
   ffh_call_sysv (call.c) has laid out in `frame`.

   frame:   0  rdi rsi rdx rcx r8 r9       (6 words)
           48  xmm0 .. xmm7, low halves    (8 words)
          112  pointer to the stack area
          120  size of the stack area in bytes (a multiple of 16)
          128  value for %al: SSE registers used (read by variadic callees)
          136  x87 values to pop after the call (0, 1 or 2)
          144  rax, rdx, xmm0, xmm1 after the call
          176  st(0), 192 st(1) after the call (10 bytes each)  */

#include "registers_x86_64.h"

/* Offsets in an ffh_slot (ffh_thread.h; thread.c asserts them). */
#define FFH_SLOT_STATE_OFFSET 0
#define FFH_SLOT_RESOLVER_OFFSET 48

#if defined(__x86_64__) && defined(__ELF__)

        .text
        .p2align 4
        .globl  ffh_sysv_invoke
        .hidden ffh_sysv_invoke
        .type   ffh_sysv_invoke, @function
ffh_sysv_invoke:
        .cfi_startproc
        FFH_FRAME_BEGIN
        pushq   %rbx
        .cfi_offset %rbx, -24
        pushq   %r12
        .cfi_offset %r12, -32
        movq    %rdi, %rbx              /* the frame, kept across the call */
        movq    %rsi, %r12              /* the function */

        /* The stack arguments, copied to the bottom of a 16-aligned area, a word at a
           time (a few words: cheaper than rep movsq's start-up). */
        movq    120(%rbx), %rcx
        subq    %rcx, %rsp
        movq    112(%rbx), %rsi
        xorl    %eax, %eax
3:
        cmpq    %rcx, %rax
        jae     4f
        movq    (%rsi,%rax), %rdx
        movq    %rdx, (%rsp,%rax)
        addq    $8, %rax
        jmp     3b
4:

        FFH_LOAD_VECTORS %rbx, 48, movq, 8
        FFH_LOAD_GENERAL %rbx
        movl    128(%rbx), %eax
        call    *%r12

        movq    %rax, 144(%rbx)
        movq    %rdx, 152(%rbx)
        movq    %xmm0, 160(%rbx)
        movq    %xmm1, 168(%rbx)
        movq    136(%rbx), %rcx
        testq   %rcx, %rcx
        jz      1f
        fstpt   176(%rbx)
        cmpq    $1, %rcx
        je      1f
        fstpt   192(%rbx)
1:
        leaq    -16(%rbp), %rsp
        popq    %r12
        .cfi_restore %r12
        popq    %rbx
        .cfi_restore %rbx
        popq    %rbp
        .cfi_def_cfa %rsp, 8
        .cfi_restore %rbp
        ret
        .cfi_endproc
        .size   ffh_sysv_invoke, .-ffh_sysv_invoke

/* ffh_closure_entry: where a slot closure's trampoline (ffh_install_entry) jumps, with the
   slot record in %r10. Saves the argument registers in an entry frame (call_internal.h),
   lets ffh_closure_dispatch (thread.c) run the call, and returns what it left:

        0  rdi rsi rdx rcx r8 r9, xmm0 .. xmm7 low halves, as they arrived
      112  the rest of a call frame, for a call forwarded with these registers
      144  rax, rdx, xmm0, xmm1 to return
      208  the result buffer (32 bytes); x87 results at 208 and 224
      240  scratch space (96 bytes)
      336  what the landing pad needs (ffh_closure_unwound)
      352  the saved rbp, then the return address
      368  the caller's stack arguments (FFH_ENTRY_STACK_OFFSET)

   ffh_closure_entry_general is the same entry for signatures that pass nothing in a vector
   register (its plan's sseCount is 0: no floating-point argument, and no aggregate with one):
   the vector registers carry nothing the call reads, so their words are left unwritten, and
   nothing reads them (a forwarded call loads them, and its callee ignores them). Most C
   functions take only integers and pointers; eight stores fewer on each of their calls.

   An exception that unwinds through the call (an Objective-C or C++ exception thrown by the
   original or a block) lands at the entry's landing pad, through the cleanup-only personality
   of C (__gcc_personality_v0), which gives the thread back the state the call took, then goes
   on unwinding.

   The frame keeps its place relative to the caller's stack arguments, so its offsets hold
   whatever the stack's alignment at entry; calls out of the entry are made with the stack
   pointer rounded down to 16 bytes, since a compiler may call a function of its own file with
   the stack less aligned than the ABI says (gcc does, for a static function it knows needs
   no more). */
        .macro  CLOSURE_ENTRY name, vectors
        .text
        .p2align 4
        .globl  \name
        .hidden \name
        .type   \name, @function
\name:
        .cfi_startproc
        .cfi_personality 0x9b, DW.ref.__gcc_personality_v0
        .cfi_lsda 0x1b, .Llsda_\name
        endbr64
        /* A slot with no hooks whose function has no resolver: a jump to the function, which
           gets the call exactly as the caller made it (r11 aside, which the trampoline wrote
           too), whatever its shape: a variadic function's arguments past those its signature
           names included, which a call through the register plan would not pass. The state
           is the function itself then (ffh_slot); FFH_SLOT_HOOKED is its sign bit, and 0 a
           NULL slot an instead hook filled. */
        movq    FFH_SLOT_STATE_OFFSET(%r10), %r11
        testq   %r11, %r11
        jle     .Lenter_\name
        cmpq    $0, FFH_SLOT_RESOLVER_OFFSET(%r10)
        jne     .Lenter_\name
        jmp     *%r11
.Lenter_\name:
        pushq   %rbp
        .cfi_def_cfa_offset 16
        .cfi_offset %rbp, -16
        movq    %rsp, %rbp
        .cfi_def_cfa_register %rbp
        subq    $352, %rsp
        movq    $0, 344(%rsp)
        FFH_STORE_GENERAL %rsp
        .if \vectors
        FFH_STORE_VECTORS %rsp, 48, movq, 8
        .endif
        movq    %r10, %rdi
        movq    %rsp, %rsi
        andq    $-16, %rsp
.Lcall_begin_\name:
        call    ffh_closure_dispatch@PLT
.Lcall_end_\name:
        leaq    -352(%rbp), %rsp
        testl   %eax, %eax
        jz      2f
        cmpl    $1, %eax
        je      1f
        fldt    224(%rsp)
1:
        fldt    208(%rsp)
2:
        movq    144(%rsp), %rax
        movq    152(%rsp), %rdx
        movq    160(%rsp), %xmm0
        movq    168(%rsp), %xmm1
        .cfi_remember_state
        leave
        .cfi_def_cfa %rsp, 8
        .cfi_restore %rbp
        ret
        /* The landing pad: rbp is the entry's again (rsp is the call's), rax holds the
           exception. */
        .cfi_restore_state
.Lunwound_\name:
        leaq    -352(%rbp), %rsp
        movq    %rax, 144(%rsp)
        movq    %rsp, %rdi
        andq    $-16, %rsp
        call    ffh_closure_unwound@PLT
        movq    -208(%rbp), %rdi
        call    _Unwind_Resume@PLT
        ud2
        .cfi_endproc
        .size   \name, .-\name

        /* The call-site table: the call of ffh_closure_dispatch has a cleanup. */
        .section .gcc_except_table,"a",@progbits
        .p2align 2
.Llsda_\name:
        .byte   0xff            /* landing pads are relative to the function's start */
        .byte   0xff            /* no type table */
        .byte   0x01            /* call-site entries in uleb128 */
        .uleb128 .Lsites_end_\name - .Lsites_\name
.Lsites_\name:
        .uleb128 .Lcall_begin_\name - \name
        .uleb128 .Lcall_end_\name - .Lcall_begin_\name
        .uleb128 .Lunwound_\name - \name
        .uleb128 0              /* no action: a cleanup */
.Lsites_end_\name:
        .text
        .endm

        CLOSURE_ENTRY ffh_closure_entry, 1
        CLOSURE_ENTRY ffh_closure_entry_general, 0

        .hidden DW.ref.__gcc_personality_v0
        .weak   DW.ref.__gcc_personality_v0
        .section .data.rel.local.DW.ref.__gcc_personality_v0,"awG",@progbits,DW.ref.__gcc_personality_v0,comdat
        .p2align 3
        .type   DW.ref.__gcc_personality_v0, @object
        .size   DW.ref.__gcc_personality_v0, 8
DW.ref.__gcc_personality_v0:
        .quad   __gcc_personality_v0
        .text

#endif

#if defined(__ELF__)
        .section .note.GNU-stack,"",@progbits
#endif
