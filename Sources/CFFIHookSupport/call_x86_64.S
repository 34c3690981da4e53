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
/* The registers the preserving entry keeps below its frame (preserved_t, call_internal.h). */
#define FFH_PRESERVED_BYTES 336

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
   no more).

   ffh_closure_entry_preserving is the entry of a function patched inline
   (ffh_install_entry_preserving): its callers may keep values in registers the function does
   not write (GCC's -fipa-ra, for a function that binds locally), so no register but those of
   the result differs from a direct call when it returns. Its trampoline pushes the record
   rather than loading a register (the caller's r10 and r11 are kept), so the record comes off
   the stack first, and the frame keeps its place above the caller's stack arguments. Below
   the frame it keeps every register a call may write (preserved_t: rax, rdx, rdi, rsi, rcx,
   r8, r9, r10, r11, then xmm0 .. xmm15 whole, at 0, 8, ... 64 and 80); its dispatch writes
   the result into the registers the result takes there, and the entry returns them all.
   The caller's r10 and r11 wait in the red zone (which signal frames skip) until the frame
   is made; a slot with no hooks gets its jump through a red-zone word, no register written. */
        .macro  CLOSURE_ENTRY name, vectors, preserving=0, dispatch=ffh_closure_dispatch
        .text
        .p2align 4
        .globl  \name
        .hidden \name
        .type   \name, @function
\name:
        .cfi_startproc
        .cfi_personality 0x9b, DW.ref.__gcc_personality_v0
        .cfi_lsda 0x1b, .Llsda_\name
        .if \preserving
        .cfi_def_cfa_offset 16  /* the record the trampoline pushed */
        .endif
        endbr64
        .if \preserving
        movq    %r10, -8(%rsp)
        movq    %r11, -16(%rsp)
        popq    %r10
        .cfi_def_cfa_offset 8
        /* The caller's r10 at -16(%rsp), r11 at -24(%rsp). */
        .endif
        /* A slot with no hooks whose function has no resolver: a jump to the function, which
           gets the call exactly as the caller made it (r11 aside, which the trampoline wrote
           too, but for the preserving entry), whatever its shape: a variadic function's
           arguments past those its signature names included, which a call through the
           register plan would not pass. The state is the function itself then (ffh_slot);
           FFH_SLOT_HOOKED is its sign bit, and 0 a NULL slot an instead hook filled. */
        movq    FFH_SLOT_STATE_OFFSET(%r10), %r11
        testq   %r11, %r11
        jle     .Lenter_\name
        cmpq    $0, FFH_SLOT_RESOLVER_OFFSET(%r10)
        jne     .Lenter_\name
        .if \preserving
        movq    %r11, -8(%rsp)
        movq    -16(%rsp), %r10
        movq    -24(%rsp), %r11
        jmp     *-8(%rsp)
        .else
        jmp     *%r11
        .endif
.Lenter_\name:
        pushq   %rbp
        .cfi_def_cfa_offset 16
        .cfi_offset %rbp, -16
        movq    %rsp, %rbp
        .cfi_def_cfa_register %rbp
        .if \preserving
        subq    $352 + FFH_PRESERVED_BYTES, %rsp
        movq    %rax, 0(%rsp)
        movq    %rdx, 8(%rsp)
        movq    %rdi, 16(%rsp)
        movq    %rsi, 24(%rsp)
        movq    %rcx, 32(%rsp)
        movq    %r8, 40(%rsp)
        movq    %r9, 48(%rsp)
        movq    -8(%rbp), %r11          /* the caller's r10 and r11, out of the frame's way */
        movq    %r11, 56(%rsp)
        movq    -16(%rbp), %r11
        movq    %r11, 64(%rsp)
        FFH_STORE_ALL_VECTORS %rsp, 80
        leaq    FFH_PRESERVED_BYTES(%rsp), %r11
        movq    $0, 344(%r11)
        FFH_STORE_GENERAL %r11
        FFH_STORE_VECTORS %r11, 48, movq, 8
        movq    %r11, %rsi
        .else
        subq    $352, %rsp
        movq    $0, 344(%rsp)
        FFH_STORE_GENERAL %rsp
        .if \vectors
        FFH_STORE_VECTORS %rsp, 48, movq, 8
        .endif
        movq    %rsp, %rsi
        .endif
        movq    %r10, %rdi
        andq    $-16, %rsp
.Lcall_begin_\name:
        call    \dispatch@PLT
.Lcall_end_\name:
        .if \preserving
        leaq    -352 - FFH_PRESERVED_BYTES(%rbp), %rsp
        .set    ffh_frame, FFH_PRESERVED_BYTES
        .else
        leaq    -352(%rbp), %rsp
        .set    ffh_frame, 0
        .endif
        testl   %eax, %eax
        jz      2f
        cmpl    $1, %eax
        je      1f
        fldt    ffh_frame + 224(%rsp)
1:
        fldt    ffh_frame + 208(%rsp)
2:
        .if \preserving
        movq    0(%rsp), %rax
        movq    8(%rsp), %rdx
        movq    16(%rsp), %rdi
        movq    24(%rsp), %rsi
        movq    32(%rsp), %rcx
        movq    40(%rsp), %r8
        movq    48(%rsp), %r9
        movq    56(%rsp), %r10
        movq    64(%rsp), %r11
        FFH_LOAD_ALL_VECTORS %rsp, 80
        .else
        movq    144(%rsp), %rax
        movq    152(%rsp), %rdx
        movq    160(%rsp), %xmm0
        movq    168(%rsp), %xmm1
        .endif
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
        CLOSURE_ENTRY ffh_closure_entry_preserving, 1, 1, ffh_closure_dispatch_preserving

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
