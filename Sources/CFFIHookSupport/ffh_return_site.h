#ifndef FFH_RETURN_SITE_H
#define FFH_RETURN_SITE_H

// A `ret` in the object of a call's caller, through which the library calls a function of the
// loader's that reads its own return address (dlopen, dlmopen, dlsym, dlvsym: see
// ffh_call_through in call_through_x86_64.S), so that the loader sees that caller's object.
// Shared by the library's attach and hooks and by the tracer's start library (its dlopen and
// dlmopen), which includes this header without linking the library.

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <link.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)

/// Calls `function(a, b, c, d)` with `through` as the return address it finds on entry (a
/// `ret`, which returns here): integer arguments only, none on the stack.
uintptr_t ffh_call_through(const void *function, const void *through, uintptr_t a, uintptr_t b, uintptr_t c,
                           uintptr_t d);

/// A `ret` between `start` and `end`: any 0xc3 byte is one when jumped to; one that ends a
/// function (a pop or a leave before it, padding or a function's first byte after it) is
/// preferred, so that an unwinder that meets it there (a constructor that walks its stack
/// while dlopen runs it) finds the rule of a function's last instruction. NULL when none.
static inline const unsigned char *ffh_return_between(const unsigned char *start, const unsigned char *end) {
    const unsigned char *first = NULL;
    for (const unsigned char *byte = start; byte < end; byte++) {
        byte = (const unsigned char *)memchr(byte, 0xc3, (size_t)(end - byte));
        if (!byte) break;
        if (!first) first = byte;
        unsigned char before = byte > start ? byte[-1] : 0;
        unsigned char after = byte + 1 < end ? byte[1] : 0;
        int popped = (before >= 0x58 && before <= 0x5f) || before == 0xc9;
        int padded = after == 0xcc || after == 0x90 || after == 0x0f || after == 0x66 || after == 0xf3 ||
                     after == 0x55 || after == 0x41 || after == 0x53;
        if (popped && padded) return byte;
    }
    return first;
}

/// The search of ffh_return_site: the caller, and the answer so far.
typedef struct {
    uintptr_t caller;
    const unsigned char *found;
    int placed;
} ffh_return_search;

static inline int ffh_return_search_object(struct dl_phdr_info *info, size_t size, void *context) {
    (void)size;
    ffh_return_search *search = (ffh_return_search *)context;
    int holds = 0;
    for (ElfW(Half) index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        if (header->p_type != PT_LOAD) continue;
        uintptr_t start = info->dlpi_addr + header->p_vaddr;
        if (search->caller >= start && search->caller - start < header->p_memsz) holds = 1;
    }
    /* The first object listed is the main program: the answer unless another holds the caller. */
    if (!holds && search->placed) return 0;
    search->found = NULL;
    for (ElfW(Half) index = 0; index < info->dlpi_phnum && !search->found; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        if (header->p_type != PT_LOAD || (header->p_flags & (PF_X | PF_R)) != (PF_X | PF_R)) continue;
        const unsigned char *start = (const unsigned char *)(info->dlpi_addr + header->p_vaddr);
        search->found = ffh_return_between(start, start + header->p_filesz);
    }
    search->placed = 1;
    return holds;
}

/// A `ret` in an executable segment of the object that holds `caller`, or of the main program
/// when none does (the loader takes the main program for a caller it cannot place): NULL when
/// it has none. Lists the loaded objects (dl_iterate_phdr, under the loader's lock).
static inline const void *ffh_return_site(uintptr_t caller) {
    ffh_return_search search = {caller, NULL, 0};
    dl_iterate_phdr(ffh_return_search_object, &search);
    return search.found;
}

#endif

#endif
