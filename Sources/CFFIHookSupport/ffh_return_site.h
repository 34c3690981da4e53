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

/// Whether the bytes before the `ret` at `byte` (the segment starting at `start`) end an
/// instruction that leaves the stack pointer alone: a multi-byte no-op, or (unless
/// `nops_only`) `xor eax, eax`, `mov eax, edi` or `mov eax, imm32`. An unwinder that meets the
/// `ret`'s address as a return address looks up the row of the byte before it (the call it
/// takes it to follow): there, as at the `ret`, the frame is gone and the return address is at
/// the stack pointer. After a `pop` or a `leave`, the row still counts the register popped,
/// and the unwinder read the slot above the right one: a constructor that walks its stack
/// while dlopen runs it lost every frame above dlopen (or crashed).
static inline int ffh_return_follows_plain(const unsigned char *start, const unsigned char *byte, int nops_only) {
    /* The instructions, by the bytes they end with: the multi-byte no-ops compilers pad with
       (a `ret` that branches land on, after a tail call's jump), and the few of a function
       that returns a constant or its argument. */
    static const unsigned char plain[][11] = {
        {3, 0x0f, 0x1f, 0x00},
        {4, 0x0f, 0x1f, 0x40, 0x00},
        {5, 0x0f, 0x1f, 0x44, 0x00, 0x00},
        {6, 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00},
        {7, 0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00},
        {8, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
        {9, 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
        {10, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
    };
    size_t before = (size_t)(byte - start);
    for (size_t index = 0; index < sizeof plain / sizeof plain[0]; index++) {
        size_t length = plain[index][0];
        if (before >= length && memcmp(byte - length, &plain[index][1], length) == 0) return 1;
    }
    if (nops_only) return 0;
    if (before >= 5 && byte[-5] == 0xb8) return 1; /* mov eax, imm32 */
    if (before >= 2 && byte[-2] == 0x31 && byte[-1] == 0xc0) return 1; /* xor eax, eax */
    if (before >= 2 && byte[-2] == 0x89 && byte[-1] == 0xf8) return 1; /* mov eax, edi */
    return 0;
}

/// Reads an unsigned LEB128 number at `*at`, moving past it.
static inline uint64_t ffh_return_uleb(const unsigned char **at) {
    uint64_t value = 0;
    unsigned shift = 0;
    unsigned char byte;
    do {
        byte = *(*at)++;
        if (shift < 64) value |= (uint64_t)(byte & 0x7f) << shift;
        shift += 7;
    } while (byte & 0x80);
    return value;
}

/// Whether the unwind table whose search table (`.eh_frame_hdr`) is at `header` describes the
/// byte at `pc`: 1 when it does (an unwinder that meets a return address one past it finds its
/// frame's rule there; `*function` is then the start of the function it describes), 0 when it
/// does not (the unwinder stops there), -1 when that cannot be told. Only the common encodings
/// are read (a sorted table of 4-byte offsets from the header, FDEs whose addresses are 4 bytes
/// relative to themselves).
static inline int ffh_return_unwinds(const unsigned char *header, uintptr_t pc, uintptr_t *function) {
    if (!header || header[0] != 1 || header[3] != 0x3b) return -1; /* version 1; datarel sdata4 */
    if ((header[1] & 0x0f) != 0x0b && (header[1] & 0x0f) != 0x03) return -1; /* eh_frame_ptr: 4 bytes */
    if (header[2] != 0x03 && header[2] != 0x0b) return -1;                    /* the count: 4 bytes */
    uint32_t count;
    memcpy(&count, header + 8, sizeof count);
    const unsigned char *table = header + 12;
    /* The last entry whose function starts at or below pc. */
    size_t low = 0, high = count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        int32_t start;
        memcpy(&start, table + middle * 8, sizeof start);
        if ((uintptr_t)(header + start) <= pc) low = middle + 1;
        else high = middle;
    }
    if (low == 0) return 0;
    int32_t offset;
    memcpy(&offset, table + (low - 1) * 8 + 4, sizeof offset);
    const unsigned char *fde = header + offset;
    uint32_t length;
    int32_t back;
    memcpy(&length, fde, sizeof length);
    memcpy(&back, fde + 4, sizeof back);
    if (length < 12 || length == 0xffffffffu) return -1;
    /* Its CIE's augmentation says how the FDE's addresses are encoded ("zR", "zPLR"...). */
    const unsigned char *cie = fde + 4 - back;
    const unsigned char *at = cie + 9; /* length, id, version */
    const char *augmentation = (const char *)at;
    size_t size = 0;
    while (size < 8 && augmentation[size]) size++;
    if (size == 8 || augmentation[0] != 'z') return -1;
    at += size + 1;
    (void)ffh_return_uleb(&at); /* code alignment */
    (void)ffh_return_uleb(&at); /* data alignment (signed: only skipped) */
    if (cie[8] == 1) at++;      /* the return address register: a byte in version 1 */
    else (void)ffh_return_uleb(&at);
    (void)ffh_return_uleb(&at); /* the augmentation data's length */
    unsigned char encoding = 0xff;
    for (size_t index = 1; index < size; index++) {
        char letter = augmentation[index];
        if (letter == 'R') {
            encoding = *at++;
        } else if (letter == 'L') {
            at++;
        } else if (letter == 'P') {
            unsigned char personality = *at++;
            if ((personality & 0x0f) == 0x0b || (personality & 0x0f) == 0x03) at += 4;
            else if ((personality & 0x0f) == 0x0c || (personality & 0x0f) == 0x04 || personality == 0x00) at += 8;
            else return -1;
        } else if (letter != 'S' && letter != 'B') {
            return -1;
        }
    }
    if (encoding != 0x1b) return -1; /* pcrel sdata4 */
    int32_t begin;
    uint32_t range;
    memcpy(&begin, fde + 8, sizeof begin);
    memcpy(&range, fde + 12, sizeof range);
    uintptr_t first = (uintptr_t)(fde + 8) + (uintptr_t)(intptr_t)begin;
    *function = first;
    return pc >= first && pc - first < range;
}

/// A `ret` in the segment [`start`, `end`) that an unwinder reads right: one with padding or a
/// function's first byte after it, after an instruction that leaves the stack pointer alone
/// (ffh_return_follows_plain), where the unwind table `unwind` (`.eh_frame_hdr`, NULL when the
/// object has none) describes that instruction, 32 bytes or more into its function (when the
/// table cannot tell, after a no-op only); NULL when none. Meanwhile, into `others` (each when
/// still NULL): [0] the first with padding after it and a no-op before it that the table does
/// not describe (an unwinder stops there, having found no frame: the frames below it stay
/// right); [1] the first with padding after it after a pop or a leave (the unwinder reads the
/// slot above the right one), not in its function's first 32 bytes; [2] the first 0xc3 byte
/// (any is a `ret` when jumped to).
static inline const unsigned char *ffh_return_scan(const unsigned char *start, const unsigned char *end,
                                                   const unsigned char *unwind, const unsigned char *others[3]) {
    for (const unsigned char *byte = start; byte < end; byte++) {
        byte = (const unsigned char *)memchr(byte, 0xc3, (size_t)(end - byte));
        if (!byte) break;
        if (!others[2]) others[2] = byte;
        unsigned char after = byte + 1 < end ? byte[1] : 0;
        int padded = after == 0xcc || after == 0x90 || after == 0x0f || after == 0x66 || after == 0xf3 ||
                     after == 0x55 || after == 0x41 || after == 0x53;
        if (!padded) continue;
        uintptr_t function = 0;
        int described = unwind ? ffh_return_unwinds(unwind, (uintptr_t)byte - 1, &function) : -1;
        /* Past the first bytes of its function, which an inline hook overwrites (up to 32): a
           call returning here meanwhile would come back into the middle of the patch. */
        int deep = described == 1 && (uintptr_t)byte - function >= 32;
        if ((deep || described == -1) && ffh_return_follows_plain(start, byte, described == -1)) return byte;
        if (described == 0 && !others[0] && ffh_return_follows_plain(start, byte, 1)) others[0] = byte;
        unsigned char before = byte > start ? byte[-1] : 0;
        if (!others[1] && (described != 1 || deep) && ((before >= 0x58 && before <= 0x5f) || before == 0xc9)) {
            others[1] = byte;
        }
    }
    return NULL;
}

/// The best `ret` of the segment [`start`, `end`) as ffh_return_scan ranks them, searched from
/// the segment's start so that every caller of a segment gets the same one. NULL when none.
static inline const unsigned char *ffh_return_between(const unsigned char *start, const unsigned char *end,
                                                      const unsigned char *unwind) {
    const unsigned char *others[3] = {NULL, NULL, NULL};
    const unsigned char *found = ffh_return_scan(start, end, unwind, others);
    return found ? found : others[0] ? others[0] : others[1] ? others[1] : others[2];
}

/// The `ret`s found, by segment: a segment's search can cover megabytes (a program without a
/// `ret` the unwinder reads right after its caller's), once. Slots of two words, each stored
/// on its own: a reader that meets a slot half written, or a segment unloaded and another
/// mapped at its address, takes the `ret` only if it lies in the segment and is still one, which
/// makes it a `ret` of the caller's object whatever it was found for. (One table in each binary
/// that includes this header.)
#define FFH_RETURN_CACHE 64
static uintptr_t ffh_return_cache[FFH_RETURN_CACHE][2];

static inline size_t ffh_return_slot(const unsigned char *start) {
    return (size_t)(((uintptr_t)start >> 12) * 0x9E3779B97F4A7C15ull >> 58) % FFH_RETURN_CACHE;
}

/// The `ret` remembered for the segment [`start`, `end`), NULL when none is (or it is no longer
/// one).
static inline const unsigned char *ffh_return_cached(const unsigned char *start, const unsigned char *end) {
    size_t slot = ffh_return_slot(start);
    if (__atomic_load_n(&ffh_return_cache[slot][0], __ATOMIC_ACQUIRE) != (uintptr_t)start) return NULL;
    const unsigned char *found = (const unsigned char *)__atomic_load_n(&ffh_return_cache[slot][1], __ATOMIC_ACQUIRE);
    return found >= start && found < end && *found == 0xc3 ? found : NULL;
}

static inline void ffh_return_remember(const unsigned char *start, const unsigned char *found) {
    size_t slot = ffh_return_slot(start);
    __atomic_store_n(&ffh_return_cache[slot][1], (uintptr_t)found, __ATOMIC_RELEASE);
    __atomic_store_n(&ffh_return_cache[slot][0], (uintptr_t)start, __ATOMIC_RELEASE);
}

/// A `ret` in an executable, readable segment of the object with load bias `bias` and program
/// headers `headers`: the segment that holds `caller` first (searched from its start), then
/// the others in order. NULL when it has none.
static inline const void *ffh_return_in_segments(uintptr_t bias, const ElfW(Phdr) *headers, size_t count,
                                                 uintptr_t caller, const unsigned char *unwind) {
    for (int pass = 0; pass < 2; pass++) {
        for (size_t index = 0; index < count; index++) {
            const ElfW(Phdr) *header = &headers[index];
            if (header->p_type != PT_LOAD || (header->p_flags & (PF_X | PF_R)) != (PF_X | PF_R)) continue;
            const unsigned char *start = (const unsigned char *)(bias + header->p_vaddr);
            const unsigned char *end = start + header->p_filesz;
            int holds = caller >= (uintptr_t)start && caller < (uintptr_t)end;
            if (holds != (pass == 0)) continue;
            const unsigned char *found = ffh_return_cached(start, end);
            if (!found) {
                found = ffh_return_between(start, end, unwind);
                if (found) ffh_return_remember(start, found);
            }
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
                                      caller, (const unsigned char *)found.dlfo_eh_frame);
    }
    const ElfW(Phdr) *headers = (const ElfW(Phdr) *)getauxval(AT_PHDR);
    size_t count = (size_t)getauxval(AT_PHNUM);
    if (!headers) return NULL;
    uintptr_t bias = 0;
    for (size_t index = 0; index < count; index++) {
        if (headers[index].p_type == PT_PHDR) bias = (uintptr_t)headers - headers[index].p_vaddr;
    }
    const unsigned char *unwind = NULL;
    for (size_t index = 0; index < count; index++) {
        if (headers[index].p_type == PT_GNU_EH_FRAME) unwind = (const unsigned char *)(bias + headers[index].p_vaddr);
    }
    return ffh_return_in_segments(bias, headers, count, 0, unwind);
}

#endif

#endif
