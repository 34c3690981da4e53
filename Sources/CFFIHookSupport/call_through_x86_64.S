/* ffh_call_through(function, through, a, b, c, d): calls function(a, b, c, d) so that the return
   address it finds on entry is `through`, an address of the caller's choosing, and returns
   its result. `through` must hold a `ret` instruction: the function returns there, and that
   `ret` takes the next word, which is the address of the instruction after the jump below,
   back into this function.

   The loader's dlopen, dlmopen, dlsym and dlvsym read their return address to learn which
   object called them: its DT_RPATH, DT_RUNPATH and namespace decide where dlopen looks for a
   bare name, and RTLD_NEXT means the objects after it. An attach or a hook of one of them calls
   it through a `ret` in the object of the call's real caller (ffh_return_site.h), so that it
   sees that object, not the library's code or a return thunk. Integer arguments only (the
   four the loader's functions take at most), none on the stack. Stack at the jump (16-aligned
   before the first push, as at a call): [through][back here][padding][rbp]. Also assembled
   into the tracer's start library, for its own dlopen and dlmopen. */

#if defined(__x86_64__) && defined(__ELF__)

        .text
        .p2align 4
        .globl  ffh_call_through
        .hidden ffh_call_through
        .type   ffh_call_through, @function
ffh_call_through:
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
        movq    %r9, %rcx
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
        .size   ffh_call_through, . - ffh_call_through

#endif

#if defined(__ELF__)
        .section .note.GNU-stack,"",@progbits
#endif
