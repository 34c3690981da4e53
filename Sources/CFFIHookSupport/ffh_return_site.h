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
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>

#if defined(__x86_64__)

/// Calls `function(a, b, c, d)` with `through` as the return address it finds on entry (a
/// `ret`, which returns here): integer arguments only, none on the stack.
uintptr_t ffh_call_through(const void *function, const void *through, uintptr_t a, uintptr_t b, uintptr_t c,
                           uintptr_t d);

/// A `ret` in [`from`, `to`) that ends a function (a pop or a leave before it, padding or a
/// function's first byte after it), so that an unwinder that meets it there (a constructor that
/// walks its stack while dlopen runs it) finds the rule of a function's last instruction; NULL
/// when none. The first 0xc3 byte seen (any is a `ret` when jumped to) goes into `*first` when
/// that is still NULL. The bytes around each lie in the segment [`start`, `end`).
static inline const unsigned char *ffh_return_scan(const unsigned char *start, const unsigned char *end,
                                                   const unsigned char *from, const unsigned char *to,
                                                   const unsigned char **first) {
    for (const unsigned char *byte = from; byte < to; byte++) {
        byte = (const unsigned char *)memchr(byte, 0xc3, (size_t)(to - byte));
        if (!byte) break;
        if (!*first) *first = byte;
        unsigned char before = byte > start ? byte[-1] : 0;
        unsigned char after = byte + 1 < end ? byte[1] : 0;
        int popped = (before >= 0x58 && before <= 0x5f) || before == 0xc9;
        int padded = after == 0xcc || after == 0x90 || after == 0x0f || after == 0x66 || after == 0xf3 ||
                     after == 0x55 || after == 0x41 || after == 0x53;
        if (popped && padded) return byte;
    }
    return NULL;
}

/// A `ret` between `start` and `end`, one that ends a function preferred (ffh_return_scan),
/// looked for from `near` on (a place in the range: the end of the caller's own function is
/// usually a few hundred bytes on), then before it. NULL when none.
static inline const unsigned char *ffh_return_between(const unsigned char *start, const unsigned char *end,
                                                      const unsigned char *near) {
    const unsigned char *first = NULL;
    const unsigned char *found = ffh_return_scan(start, end, near, end, &first);
    if (!found) found = ffh_return_scan(start, end, start, near, &first);
    return found ? found : first;
}

/// A `ret` in an executable, readable segment of the object with load bias `bias` and program
/// headers `headers`: the segment that holds `caller` first (searched from `caller` on), then
/// the others in order. NULL when it has none.
static inline const void *ffh_return_in_segments(uintptr_t bias, const ElfW(Phdr) *headers, size_t count,
                                                 uintptr_t caller) {
    for (int pass = 0; pass < 2; pass++) {
        for (size_t index = 0; index < count; index++) {
            const ElfW(Phdr) *header = &headers[index];
            if (header->p_type != PT_LOAD || (header->p_flags & (PF_X | PF_R)) != (PF_X | PF_R)) continue;
            const unsigned char *start = (const unsigned char *)(bias + header->p_vaddr);
            const unsigned char *end = start + header->p_filesz;
            int holds = caller >= (uintptr_t)start && caller < (uintptr_t)end;
            if (holds != (pass == 0)) continue;
            const unsigned char *found = ffh_return_between(start, end, holds ? (const unsigned char *)caller : start);
            if (found) return found;
        }
    }
    return NULL;
}

/// A `ret` in an executable segment of the object that holds `caller`, or of the main program
/// when none does (the loader takes the main program for a caller it cannot place): NULL when
/// it has none. Takes no lock (`_dl_find_object`, the object's own ELF header, the auxiliary
/// vector): a signal handler that interrupts the loader, which holds its locks, may call it
/// (dl_iterate_phdr, which takes the loader's write lock, deadlocked there).
static inline const void *ffh_return_site(uintptr_t caller) {
    struct dl_find_object found;
    if (_dl_find_object((void *)caller, &found) == 0 && found.dlfo_link_map) {
        const unsigned char *start = (const unsigned char *)found.dlfo_map_start;
        size_t size = (size_t)((const unsigned char *)found.dlfo_map_end - start);
        const ElfW(Ehdr) *header = (const ElfW(Ehdr) *)(const void *)start;
        if (size < sizeof *header || memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 ||
            header->e_phentsize != sizeof(ElfW(Phdr)) ||
            header->e_phoff + (size_t)header->e_phnum * sizeof(ElfW(Phdr)) > size) {
            return NULL;
        }
        return ffh_return_in_segments(found.dlfo_link_map->l_addr,
                                      (const ElfW(Phdr) *)(const void *)(start + header->e_phoff), header->e_phnum,
                                      caller);
    }
    const ElfW(Phdr) *headers = (const ElfW(Phdr) *)getauxval(AT_PHDR);
    size_t count = (size_t)getauxval(AT_PHNUM);
    if (!headers) return NULL;
    uintptr_t bias = 0;
    for (size_t index = 0; index < count; index++) {
        if (headers[index].p_type == PT_PHDR) bias = (uintptr_t)headers - headers[index].p_vaddr;
    }
    return ffh_return_in_segments(bias, headers, count, 0);
}

#endif

#endif
