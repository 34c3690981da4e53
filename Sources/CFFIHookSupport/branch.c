#include "ffh_branch.h"

#include <string.h>

/* The watched targets: the functions' windows, and a bitmap of 32-byte blocks that hold part of
   one (most branch targets are in no such block, and are rejected by one bit). */
typedef struct {
    const uintptr_t *functions;
    size_t count;
    uintptr_t window;
    uintptr_t low, high;
    uint64_t *blocks;
} ffh_branch_watch;

static int ffh_branch_watched(const ffh_branch_watch *watch, uintptr_t target) {
    if (target <= watch->low || target >= watch->high) return 0;
    uintptr_t block = (target - watch->low) >> 5;
    if (!(watch->blocks[block >> 6] & (1ULL << (block & 63)))) return 0;
    /* The last function at or below the target. */
    size_t low = 0, high = watch->count;
    while (low < high) {
        size_t middle = (low + high) / 2;
        if (watch->functions[middle] <= target) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    if (low == 0) return 0;
    uintptr_t offset = target - watch->functions[low - 1];
    return offset > 0 && offset < watch->window;
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
    size_t blockCount = ((high - low) >> 5) + 1;
    return (blockCount + 63) / 64;
}

size_t ffh_branch_candidates(
    const uint8_t *code, size_t size, const uintptr_t *functions, size_t count, uintptr_t window, uint64_t *blocks,
    size_t words, uintptr_t *candidates, size_t capacity) {
    if (!code || size == 0 || !functions || count == 0 || window == 0) return 0;
    if (!blocks || words != ffh_branch_blocks(functions, count, window)) return (size_t)-1;
    ffh_branch_watch watch = {
        .functions = functions, .count = count, .window = window, .low = functions[0],
        .high = functions[count - 1] + window, .blocks = blocks};
    size_t blockCount = words * 64;
    for (size_t index = 0; index < count; index++) {
        uintptr_t first = (functions[index] + 1 - watch.low) >> 5;
        uintptr_t last = (functions[index] + window - 1 - watch.low) >> 5;
        for (uintptr_t block = first; block <= last && block < blockCount; block++) {
            watch.blocks[block >> 6] |= 1ULL << (block & 63);
        }
    }
    size_t found = 0;
    uintptr_t base = (uintptr_t)code;
#define FFH_BRANCH_CANDIDATE(target)                                                                   \
    do {                                                                                              \
        if (ffh_branch_watched(&watch, (target))) {                                                   \
            if (found < capacity) candidates[found] = base + at;                                      \
            found++;                                                                                  \
            goto next;                                                                                \
        }                                                                                             \
    } while (0)
    for (size_t at = 0; at < size; at++) {
        uint8_t byte = code[at];
        size_t left = size - at;
        if (byte == 0xEB || (byte >= 0x70 && byte <= 0x7F) || (byte >= 0xE0 && byte <= 0xE3)) {
            if (left >= 2) FFH_BRANCH_CANDIDATE(base + at + 2 + (intptr_t)(int8_t)code[at + 1]);
        } else if (byte == 0xE8 || byte == 0xE9) {
            if (left >= 5) FFH_BRANCH_CANDIDATE(base + at + 5 + (intptr_t)ffh_branch_rel32(code + at + 1));
        } else if (byte == 0x0F) {
            if (left >= 6 && code[at + 1] >= 0x80 && code[at + 1] <= 0x8F) {
                FFH_BRANCH_CANDIDATE(base + at + 6 + (intptr_t)ffh_branch_rel32(code + at + 2));
            }
        } else if (byte == 0xC7) {
            if (left >= 6 && code[at + 1] == 0xF8) {
                FFH_BRANCH_CANDIDATE(base + at + 6 + (intptr_t)ffh_branch_rel32(code + at + 2));
            }
            if (left >= 4 && code[at + 1] == 0xF8) {
                FFH_BRANCH_CANDIDATE(base + at + 4 + (intptr_t)ffh_branch_rel16(code + at + 2));
            }
        }
    next:;
    }
#undef FFH_BRANCH_CANDIDATE
    return found;
}
