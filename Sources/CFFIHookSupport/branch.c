#include "ffh_branch.h"

#include <string.h>

/* The watched targets: a bitmap with one bit for each byte from the first function's start to
   the end of the last one's window, set for the bytes inside a window but not at a function's
   start. A target is watched when its bit is set: it lies past the last function start at or
   below it, by fewer bytes than the window. */
typedef struct {
    uintptr_t low, high;
    const uint64_t *bits;
} ffh_branch_watch;

static inline int ffh_branch_watched(const ffh_branch_watch *watch, uintptr_t target) {
    if (target <= watch->low || target >= watch->high) return 0;
    uintptr_t bit = target - watch->low;
    return (int)((watch->bits[bit >> 6] >> (bit & 63)) & 1);
}

static int32_t ffh_branch_rel32(const uint8_t *at) {
    int32_t value;
    memcpy(&value, at, sizeof value);
    return value;
}

static int16_t ffh_branch_rel16(const uint8_t *at) {
    int16_t value;
    memcpy(&value, at, sizeof value);
    return value;
}

size_t ffh_branch_blocks(const uintptr_t *functions, size_t count, uintptr_t window) {
    if (!functions || count == 0 || window == 0) return 0;
    uintptr_t low = functions[0], high = functions[count - 1] + window;
    if (high < low) return (size_t)-1; /* wrapped */
    return (size_t)((high - low) / 64 + 1);
}

/* What an opcode byte can begin: nothing watched (most bytes), a rel8 branch (jmp, jcc, loop,
   jrcxz), a rel32 jmp or call, the first byte of a two-byte opcode (jcc rel32 is 0F 80-8F), or
   the first byte of xbegin (C7 F8). */
enum { FFH_BRANCH_NONE, FFH_BRANCH_REL8, FFH_BRANCH_REL32, FFH_BRANCH_ESCAPE, FFH_BRANCH_XBEGIN };
static const uint8_t ffh_branch_kind[256] = {
    [0x70 ... 0x7F] = FFH_BRANCH_REL8, [0xE0 ... 0xE3] = FFH_BRANCH_REL8, [0xEB] = FFH_BRANCH_REL8,
    [0xE8] = FFH_BRANCH_REL32,         [0xE9] = FFH_BRANCH_REL32,         [0x0F] = FFH_BRANCH_ESCAPE,
    [0xC7] = FFH_BRANCH_XBEGIN,
};

size_t ffh_branch_candidates(
    const uint8_t *code, size_t size, const uintptr_t *functions, size_t count, uintptr_t window, uint64_t *blocks,
    size_t words, uintptr_t *candidates, size_t capacity) {
    if (!code || size == 0 || !functions || count == 0 || window == 0) return 0;
    if (!blocks || words != ffh_branch_blocks(functions, count, window)) return (size_t)-1;
    uintptr_t low = functions[0];
    ffh_branch_watch watch = {.low = low, .high = functions[count - 1] + window, .bits = blocks};
    /* The windows, then their functions' starts taken out (a window may reach past the next
       start). Marking the same bits again for another stretch changes nothing. */
    for (size_t index = 0; index < count; index++) {
        for (uintptr_t bit = functions[index] + 1 - low; bit < functions[index] + window - low; bit++) {
            blocks[bit >> 6] |= 1ULL << (bit & 63);
        }
    }
    for (size_t index = 0; index < count; index++) {
        uintptr_t bit = functions[index] - low;
        blocks[bit >> 6] &= ~(1ULL << (bit & 63));
    }
    size_t found = 0;
    uintptr_t base = (uintptr_t)code;
    for (size_t at = 0; at < size; at++) {
        uint8_t kind = ffh_branch_kind[code[at]];
        if (__builtin_expect(kind == FFH_BRANCH_NONE, 1)) continue;
        size_t left = size - at;
        int watched = 0;
        switch (kind) {
        case FFH_BRANCH_REL8:
            watched = left >= 2 && ffh_branch_watched(&watch, base + at + 2 + (intptr_t)(int8_t)code[at + 1]);
            break;
        case FFH_BRANCH_REL32:
            watched = left >= 5 && ffh_branch_watched(&watch, base + at + 5 + (intptr_t)ffh_branch_rel32(code + at + 1));
            break;
        case FFH_BRANCH_ESCAPE:
            watched = left >= 6 && code[at + 1] >= 0x80 && code[at + 1] <= 0x8F &&
                      ffh_branch_watched(&watch, base + at + 6 + (intptr_t)ffh_branch_rel32(code + at + 2));
            break;
        case FFH_BRANCH_XBEGIN:
            watched = (left >= 6 && code[at + 1] == 0xF8 &&
                       ffh_branch_watched(&watch, base + at + 6 + (intptr_t)ffh_branch_rel32(code + at + 2))) ||
                      (left >= 4 && code[at + 1] == 0xF8 &&
                       ffh_branch_watched(&watch, base + at + 4 + (intptr_t)ffh_branch_rel16(code + at + 2)));
            break;
        }
        if (watched) {
            if (found < capacity) candidates[found] = base + at;
            found++;
        }
    }
    return found;
}
