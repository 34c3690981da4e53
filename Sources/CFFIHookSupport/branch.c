#include "ffh_branch.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#include <immintrin.h>
#define FFH_BRANCH_WIDE 1
#endif

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

/* Whether the byte at `at` of `code` is the opcode of a direct branch, were an instruction to
   start at or before it, whose target is watched. */
static inline __attribute__((always_inline)) int ffh_branch_candidate(const ffh_branch_watch *watch, const uint8_t *code,
                                                                      size_t size, size_t at) {
    uint8_t kind = ffh_branch_kind[code[at]];
    if (__builtin_expect(kind == FFH_BRANCH_NONE, 1)) return 0;
    size_t left = size - at;
    uintptr_t base = (uintptr_t)code;
    switch (kind) {
    case FFH_BRANCH_REL8:
        return left >= 2 && ffh_branch_watched(watch, base + at + 2 + (intptr_t)(int8_t)code[at + 1]);
    case FFH_BRANCH_REL32:
        return left >= 5 && ffh_branch_watched(watch, base + at + 5 + (intptr_t)ffh_branch_rel32(code + at + 1));
    case FFH_BRANCH_ESCAPE:
        return left >= 6 && code[at + 1] >= 0x80 && code[at + 1] <= 0x8F &&
               ffh_branch_watched(watch, base + at + 6 + (intptr_t)ffh_branch_rel32(code + at + 2));
    case FFH_BRANCH_XBEGIN:
        return (left >= 6 && code[at + 1] == 0xF8 &&
                ffh_branch_watched(watch, base + at + 6 + (intptr_t)ffh_branch_rel32(code + at + 2))) ||
               (left >= 4 && code[at + 1] == 0xF8 &&
                ffh_branch_watched(watch, base + at + 4 + (intptr_t)ffh_branch_rel16(code + at + 2)));
    }
    return 0;
}

/* Stores the candidates among the bytes `bits` marks in the block at `at`. */
static inline __attribute__((always_inline)) void ffh_branch_take(const ffh_branch_watch *watch, const uint8_t *code,
                                                                  size_t size, size_t at, uint64_t bits,
                                                                  uintptr_t *candidates, size_t capacity,
                                                                  size_t *found) {
    while (bits) {
        size_t byte = at + (size_t)__builtin_ctzll(bits);
        bits &= bits - 1;
        if (ffh_branch_candidate(watch, code, size, byte)) {
            if (*found < capacity) candidates[*found] = (uintptr_t)code + byte;
            (*found)++;
        }
    }
}

/* A pass of the filter over the blocks of `code` from byte `at` on, BYTES bytes at a time
   (the vector type VECTOR, whose intrinsics begin with PREFIX and whose whole-register
   operations end in WHOLE), the byte after each beside them: the opcodes of the branches with a
   32-bit displacement (E8, E9, 0F 8x, C7 F8), which may land anywhere, and those of the
   branches with an 8-bit one (7x, E0 to E3, EB) only where a watched byte is within their reach
   of the block, which most of a library's code is not: its functions' windows are a few bytes
   in every few hundred. The table then tells each apart. Returns where it stopped (the rest is
   left to a narrower pass). `reachable` is the first function whose window may still be in an
   8-bit branch's reach of the block: before it, every window ends more than 126 bytes before
   it; an 8-bit branch in the block lands from 126 bytes before it to BYTES + 128 after its
   start. */
#define FFH_BRANCH_PASS(NAME, ATTRIBUTES, BYTES, VECTOR, PREFIX, WHOLE)                                               \
    ATTRIBUTES static size_t NAME(const ffh_branch_watch *watch, const uint8_t *code, size_t size, size_t at,         \
                                  const uintptr_t *functions, size_t count, uintptr_t window, uintptr_t *candidates, \
                                  size_t capacity, size_t *found) {                                                 \
        const VECTOR high_nibble = PREFIX##_set1_epi8((char)0xF0), seven = PREFIX##_set1_epi8(0x70),                \
                     low_two = PREFIX##_set1_epi8((char)0xFC), counter = PREFIX##_set1_epi8((char)0xE0),            \
                     short_jump = PREFIX##_set1_epi8((char)0xEB), low_one = PREFIX##_set1_epi8((char)0xFE),         \
                     near_call = PREFIX##_set1_epi8((char)0xE8), escape = PREFIX##_set1_epi8(0x0F),                 \
                     condition = PREFIX##_set1_epi8((char)0x80), move = PREFIX##_set1_epi8((char)0xC7),             \
                     abort_target = PREFIX##_set1_epi8((char)0xF8);                                                 \
        size_t reachable = 0;                                                                                       \
        for (; at + BYTES + 1 <= size; at += BYTES) {                                                               \
            uintptr_t here = (uintptr_t)code + at;                                                                  \
            while (reachable < count && functions[reachable] + window + 126 <= here) reachable++;                   \
            int near = reachable < count && functions[reachable] <= here + BYTES + 128;                             \
            VECTOR bytes = PREFIX##_loadu_##WHOLE((const VECTOR *)(const void *)(code + at));                       \
            VECTOR next = PREFIX##_loadu_##WHOLE((const VECTOR *)(const void *)(code + at + 1));                    \
            VECTOR far = PREFIX##_or_##WHOLE(                                                                       \
                PREFIX##_or_##WHOLE(                                                                                \
                    PREFIX##_cmpeq_epi8(PREFIX##_and_##WHOLE(bytes, low_one), near_call),                           \
                    PREFIX##_and_##WHOLE(PREFIX##_cmpeq_epi8(bytes, escape),                                        \
                                         PREFIX##_cmpeq_epi8(PREFIX##_and_##WHOLE(next, high_nibble), condition))), \
                PREFIX##_and_##WHOLE(PREFIX##_cmpeq_epi8(bytes, move), PREFIX##_cmpeq_epi8(next, abort_target)));   \
            uint64_t bits = (uint32_t)PREFIX##_movemask_epi8(far);                                                  \
            if (near) {                                                                                             \
                VECTOR short_branch =                                                                               \
                    PREFIX##_or_##WHOLE(PREFIX##_or_##WHOLE(                                                        \
                                            PREFIX##_cmpeq_epi8(PREFIX##_and_##WHOLE(bytes, high_nibble), seven),   \
                                            PREFIX##_cmpeq_epi8(PREFIX##_and_##WHOLE(bytes, low_two), counter)),    \
                                        PREFIX##_cmpeq_epi8(bytes, short_jump));                                    \
                bits |= (uint32_t)PREFIX##_movemask_epi8(short_branch);                                             \
            }                                                                                                       \
            ffh_branch_take(watch, code, size, at, bits, candidates, capacity, found);                              \
        }                                                                                                           \
        return at;                                                                                                  \
    }

#if defined(__SSE2__)
/* Sixteen bytes at a time (SSE2, which every x86-64 processor has). */
FFH_BRANCH_PASS(ffh_branch_pass16, , 16, __m128i, _mm, si128)
#endif

#if defined(FFH_BRANCH_WIDE)
/* Thirty-two bytes at a time (AVX2): half the loop's instructions over a library's code, where
   the sweep of a batch that plans few functions is most of its time. */
FFH_BRANCH_PASS(ffh_branch_pass32, __attribute__((target("avx2"))), 32, __m256i, _mm256, si256)

/* Whether the thirty-two-byte pass can be used: -1 not known yet, 0 no, 1 yes (AVX2, with the
   kernel keeping the ymm registers). */
static int ffh_branch_wide = -1;

static int ffh_branch_wide_available(void) {
    uint32_t eax = 1, ebx = 0, ecx = 0, edx = 0;
    __asm__("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx));
    /* OSXSAVE and AVX, then the SSE and AVX state kept (XCR0 bits 1 and 2), then AVX2. */
    if (!(ecx & (1u << 27)) || !(ecx & (1u << 28))) return 0;
    uint32_t low, high;
    __asm__("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    if ((low & 0x6) != 0x6) return 0;
    uint32_t leaf = 7, features = 0, sub = 0, other = 0;
    __asm__("cpuid" : "+a"(leaf), "=b"(features), "+c"(sub), "=d"(other));
    return (features & (1u << 5)) != 0;
}
#endif

size_t ffh_branch_candidates(
    const uint8_t *code, size_t size, const uintptr_t *functions, size_t count, uintptr_t window,
    const uint8_t *windows, uint64_t *blocks, size_t words, uintptr_t *candidates, size_t capacity) {
    return ffh_branch_candidates_at_width(0, code, size, functions, count, window, windows, blocks, words, candidates,
                                          capacity);
}

size_t ffh_branch_candidates_at_width(
    int width, const uint8_t *code, size_t size, const uintptr_t *functions, size_t count, uintptr_t window,
    const uint8_t *windows, uint64_t *blocks, size_t words, uintptr_t *candidates, size_t capacity) {
    if (!code || size == 0 || !functions || count == 0 || window == 0) return 0;
    if (!blocks || words != ffh_branch_blocks(functions, count, window)) return (size_t)-1;
    uintptr_t low = functions[0];
    ffh_branch_watch watch = {.low = low, .high = functions[count - 1] + window, .bits = blocks};
    /* The windows, then their functions' starts taken out (a window may reach past the next
       start). Marking the same bits again for another stretch changes nothing. */
    for (size_t index = 0; index < count; index++) {
        uintptr_t own = windows && windows[index] < window ? windows[index] : window;
        for (uintptr_t bit = functions[index] + 1 - low; bit < functions[index] + own - low; bit++) {
            blocks[bit >> 6] |= 1ULL << (bit & 63);
        }
    }
    for (size_t index = 0; index < count; index++) {
        uintptr_t bit = functions[index] - low;
        blocks[bit >> 6] &= ~(1ULL << (bit & 63));
    }
    size_t found = 0;
    size_t at = 0;
#if defined(FFH_BRANCH_WIDE)
    int wide = __atomic_load_n(&ffh_branch_wide, __ATOMIC_RELAXED);
    if (wide < 0) {
        wide = ffh_branch_wide_available();
        __atomic_store_n(&ffh_branch_wide, wide, __ATOMIC_RELAXED);
    }
    if (wide && (width == 0 || width >= 32)) {
        at = ffh_branch_pass32(&watch, code, size, at, functions, count, window, candidates, capacity, &found);
    }
#endif
#if defined(__SSE2__)
    if (width == 0 || width >= 16) {
        at = ffh_branch_pass16(&watch, code, size, at, functions, count, window, candidates, capacity, &found);
    }
#endif
    for (; at < size; at++) {
        if (ffh_branch_candidate(&watch, code, size, at)) {
            if (found < capacity) candidates[found] = (uintptr_t)code + at;
            found++;
        }
    }
    return found;
}

// MARK: - Instruction lengths

/* What an opcode of the one-byte map takes after it: whether a ModRM byte (FFH_X86_MODRM), and
   which immediate (FFH_X86_IMM_*); FFH_X86_OTHER for what ffh_x86_length leaves to a full
   decoder (invalid in 64-bit mode, prefixes, escapes handled apart). */
enum {
    FFH_X86_MODRM = 0x10,
    FFH_X86_IMM_NONE = 0,
    FFH_X86_IMM_8 = 1,
    FFH_X86_IMM_16 = 2,
    FFH_X86_IMM_Z = 3,   /* 4 bytes, 2 with 66 */
    FFH_X86_IMM_V = 4,   /* 4 bytes, 2 with 66, 8 with REX.W (mov r, imm) */
    FFH_X86_IMM_ENTER = 5, /* 2 + 1 */
    FFH_X86_IMM_MOFFS = 6, /* an address: 8 bytes, 4 with 67 */
    FFH_X86_IMM_REL8 = 7,
    FFH_X86_IMM_REL32 = 8,
    FFH_X86_GROUP3 = 9,  /* F6, F7: an immediate for /0 and /1 only */
    FFH_X86_OTHER = 0xFF,
};

#define M FFH_X86_MODRM
#define X FFH_X86_OTHER
static const uint8_t ffh_x86_one_byte[256] = {
    /* 00 */ M, M, M, M, 1, 3, X, X, M, M, M, M, 1, 3, X, X,
    /* 10 */ M, M, M, M, 1, 3, X, X, M, M, M, M, 1, 3, X, X,
    /* 20 */ M, M, M, M, 1, 3, X, X, M, M, M, M, 1, 3, X, X,
    /* 30 */ M, M, M, M, 1, 3, X, X, M, M, M, M, 1, 3, X, X,
    /* 40 */ X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    /* 50 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    /* 60 */ X, X, X, M, X, X, X, X, 3, M | 3, 1, M | 1, 0, 0, 0, 0,
    /* 70 */ 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    /* 80 */ M | 1, M | 3, X, M | 1, M, M, M, M, M, M, M, M, M, M, M, M,
    /* 90 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, X, 0, 0, 0, 0, 0,
    /* A0 */ 6, 6, 6, 6, 0, 0, 0, 0, 1, 3, 0, 0, 0, 0, 0, 0,
    /* B0 */ 1, 1, 1, 1, 1, 1, 1, 1, 4, 4, 4, 4, 4, 4, 4, 4,
    /* C0 */ M | 1, M | 1, 2, 0, X, X, M | 1, M | 3, 5, 0, 2, 0, 0, 1, X, 0,
    /* D0 */ M, M, M, M, X, X, X, 0, M, M, M, M, M, M, M, M,
    /* E0 */ 7, 7, 7, 7, 1, 1, 1, 1, 8, 8, X, 7, 0, 0, 0, 0,
    /* F0 */ X, 0, X, X, 0, 0, M | 9, M | 9, 0, 0, 0, 0, 0, 0, M, M,
};

/* The same for the two-byte map (0F xx); 0F 0F (3DNow!), 0F 38 and 0F 3A are handled apart. */
static const uint8_t ffh_x86_two_byte[256] = {
    /* 00 */ M, M, M, M, X, 0, 0, 0, 0, 0, X, 0, X, M, 0, X,
    /* 10 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
    /* 20 */ M, M, M, M, X, X, X, X, M, M, M, M, M, M, M, M,
    /* 30 */ 0, 0, 0, 0, 0, 0, X, 0, X, X, X, X, X, X, X, X,
    /* 40 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
    /* 50 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
    /* 60 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
    /* 70 */ M | 1, M | 1, M | 1, M | 1, M, M, M, 0, M, M, X, X, M, M, M, M,
    /* 80 */ 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8,
    /* 90 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
    /* A0 */ 0, 0, 0, M, M | 1, M, X, X, 0, 0, 0, M, M | 1, M, M, M,
    /* B0 */ M, M, M, M, M, M, M, M, X, M, M | 1, M, M, M, M, M,
    /* C0 */ M, M, M | 1, M, M | 1, M | 1, M | 1, M, 0, 0, 0, 0, 0, 0, 0, 0,
    /* D0 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
    /* E0 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
    /* F0 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
};
#undef M
#undef X

/* The bytes a ModRM byte (and its SIB byte and displacement) take, from the ModRM byte at
   `at` on; 0 when they run past `end`. Addresses of 32 bits (67) encode the same way in 64-bit
   mode. */
static size_t ffh_x86_modrm_length(const uint8_t *at, const uint8_t *end) {
    if (at >= end) return 0;
    uint8_t modrm = *at, mod = modrm >> 6, rm = modrm & 7;
    size_t length = 1;
    if (mod == 3) return length;
    if (rm == 4) {
        if (at + 1 >= end) return 0;
        if (mod == 0 && (at[1] & 7) == 5) length += 4;
        length += 1;
    } else if (mod == 0 && rm == 5) {
        length += 4;
    }
    if (mod == 1) length += 1;
    if (mod == 2) length += 4;
    return length;
}

/* What ffh_x86_decode learns of an instruction besides its length: where its ModRM byte is
   (NULL without one) and the opcode of the one-byte map it starts with (after its prefixes;
   0x0F for the other maps, VEX and EVEX included). */
typedef struct {
    const uint8_t *modrm;
    uint8_t opcode;
    /* The byte after 0F in the legacy two-byte map; 0 elsewhere. */
    uint8_t second;
    /* Whether a 67 prefix makes its addresses 32 bits wide. */
    uint8_t address32;
} ffh_x86_shape;

static size_t ffh_x86_decode(const uint8_t *code, size_t available, int64_t *relative, ffh_x86_shape *shape);

size_t ffh_x86_length(const uint8_t *code, size_t available, int64_t *relative) {
    ffh_x86_shape shape;
    return ffh_x86_decode(code, available, relative, &shape);
}

static size_t ffh_x86_decode(const uint8_t *code, size_t available, int64_t *relative, ffh_x86_shape *shape) {
    const uint8_t *at = code, *end = code + (available < 15 ? available : 15);
    shape->modrm = NULL;
    shape->opcode = 0;
    shape->second = 0;
    shape->address32 = 0;
    int operand16 = 0, address32 = 0, repne = 0, prefixed = 0;
    *relative = INT64_MIN;
    for (; at < end; at++) {
        uint8_t byte = *at;
        if (byte == 0x66) {
            operand16 = 1;
        } else if (byte == 0x67) {
            address32 = 1;
            shape->address32 = 1;
        } else if (byte == 0xF2) {
            repne = 1;
        } else if (!(byte == 0xF0 || byte == 0xF2 || byte == 0xF3 || byte == 0x2E || byte == 0x36 || byte == 0x3E ||
                     byte == 0x26 || byte == 0x64 || byte == 0x65)) {
            break;
        }
        prefixed = 1;
    }
    int wide = 0;
    if (at < end && (*at & 0xF0) == 0x40) {
        wide = (*at & 8) != 0;
        prefixed = 1;
        at++;
        /* A prefix after REX (which the processor then ignores) is left to the full decoder. */
        if (at < end && ((*at & 0xF0) == 0x40 || *at == 0x66 || *at == 0x67 || *at == 0xF0 || *at == 0xF2 ||
                         *at == 0xF3 || *at == 0x2E || *at == 0x36 || *at == 0x3E || *at == 0x26 || *at == 0x64 ||
                         *at == 0x65)) {
            return 0;
        }
    }
    if (at >= end) return 0;
    uint8_t opcode = *at++;
    uint8_t kind;
    if (opcode == 0xC4 || opcode == 0xC5 || opcode == 0x62) {
        /* VEX and EVEX: a prefix before them is invalid, left to the full decoder. */
        if (prefixed) return 0;
        size_t payload = opcode == 0xC5 ? 1 : opcode == 0xC4 ? 2 : 3;
        if (at + payload >= end) return 0;
        unsigned map = opcode == 0xC5 ? 1 : opcode == 0xC4 ? (at[0] & 0x1F) : (at[0] & 0x07);
        if (opcode == 0x62 && ((at[0] & 0x08) || !(at[1] & 0x04))) return 0; /* reserved bits */
        if (!(map == 1 || map == 2 || map == 3 || (opcode == 0x62 && (map == 5 || map == 6)))) return 0;
        at += payload;
        uint8_t second = *at++;
        /* vzeroupper and vzeroall (VEX 0F 77) alone have no ModRM byte. */
        shape->opcode = 0x0F;
        if (map == 1 && second == 0x77) return opcode == 0x62 ? 0 : (size_t)(at - code);
        shape->modrm = at;
        size_t modrm = ffh_x86_modrm_length(at, end);
        if (modrm == 0) return 0;
        at += modrm;
        int immediate = map == 3 || (map == 1 && ((second >= 0x70 && second <= 0x73) || second == 0xC2 ||
                                                  (second >= 0xC4 && second <= 0xC6)));
        if (immediate) at++;
        return at <= end ? (size_t)(at - code) : 0;
    }
    shape->opcode = opcode;
    if (opcode == 0x0F) {
        if (at >= end) return 0;
        uint8_t second = *at++;
        shape->second = second;
        if (second == 0x38 || second == 0x3A) {
            if (at >= end) return 0;
            at++;
            shape->modrm = at;
            size_t modrm = ffh_x86_modrm_length(at, end);
            if (modrm == 0) return 0;
            at += modrm + (second == 0x3A ? 1 : 0);
            return at <= end ? (size_t)(at - code) : 0;
        }
        if (second == 0x0F) { /* 3DNow!: ModRM, then the operation's byte */
            shape->modrm = at;
            size_t modrm = ffh_x86_modrm_length(at, end);
            if (modrm == 0) return 0;
            at += modrm + 1;
            return at <= end ? (size_t)(at - code) : 0;
        }
        /* popcnt and lzcnt's forms without F3 (jmpe, bsr's own is there), and SSE4a's extrq and
           insertq (66 or F2 0F 78, with two immediates): left to the full decoder. */
        if (second == 0xB8 || (second == 0x78 && (operand16 || repne))) return 0;
        kind = ffh_x86_two_byte[second];
        if (kind == FFH_X86_OTHER) return 0;
    } else {
        if (opcode == 0x8F && at < end && (*at & 0x38) != 0) return 0; /* XOP */
        kind = ffh_x86_one_byte[opcode];
        if (kind == FFH_X86_OTHER) return 0;
        /* C6 and C7 are mov with /0 only, and xabort and xbegin (F8); xbegin's immediate is
           relative, the abort address. */
        if ((opcode == 0xC6 || opcode == 0xC7) && at < end && (*at & 0x38) != 0 && *at != 0xF8) return 0;
        if (opcode == 0xC7 && at < end && *at == 0xF8) kind = FFH_X86_MODRM | FFH_X86_IMM_REL32;
    }
    int isRelative = (kind & 0x0F) == FFH_X86_IMM_REL8 || (kind & 0x0F) == FFH_X86_IMM_REL32;
    /* A relative branch of 16-bit operand size, whose target processors compute differently. */
    if (isRelative && operand16) return 0;
    uint8_t reg = 0;
    if (kind & FFH_X86_MODRM) {
        if (at >= end) return 0;
        reg = (*at >> 3) & 7;
        shape->modrm = at;
        /* mov to and from control and debug registers (0F 20 to 23) take any ModRM byte as
           naming registers. */
        size_t modrm = opcode == 0x0F && at[-1] >= 0x20 && at[-1] <= 0x23 ? 1 : ffh_x86_modrm_length(at, end);
        if (modrm == 0) return 0;
        at += modrm;
    }
    size_t immediate = 0;
    switch (kind & 0x0F) {
    case FFH_X86_IMM_NONE: break;
    case FFH_X86_IMM_8: immediate = 1; break;
    case FFH_X86_IMM_16: immediate = 2; break;
    case FFH_X86_IMM_Z: immediate = operand16 && !wide ? 2 : 4; break;
    case FFH_X86_IMM_V: immediate = wide ? 8 : operand16 ? 2 : 4; break;
    case FFH_X86_IMM_ENTER: immediate = 3; break;
    case FFH_X86_IMM_MOFFS: immediate = address32 ? 4 : 8; break;
    case FFH_X86_IMM_REL8: immediate = 1; break;
    case FFH_X86_IMM_REL32: immediate = 4; break;
    case FFH_X86_GROUP3: immediate = reg <= 1 ? (opcode == 0xF6 ? 1 : operand16 && !wide ? 2 : 4) : 0; break;
    }
    const uint8_t *value = at;
    at += immediate;
    if (at > end) return 0;
    size_t length = (size_t)(at - code);
    if (isRelative) {
        int32_t wide32;
        memcpy(&wide32, value, sizeof wide32);
        *relative = immediate == 1 ? (int64_t)(int8_t)value[0] : (int64_t)wide32;
    }
    return length;
}

// MARK: - Decoding stretches

int ffh_branch_is_watched(const uintptr_t *functions, size_t count, uintptr_t window, const uint64_t *blocks,
                          uintptr_t target) {
    if (!functions || count == 0 || !blocks) return 0;
    ffh_branch_watch watch = {.low = functions[0], .high = functions[count - 1] + window, .bits = blocks};
    return ffh_branch_watched(&watch, target);
}

size_t ffh_branch_decode(uintptr_t *address, uintptr_t end, uintptr_t limit, const uintptr_t *starts, size_t count,
                         size_t *next, const uintptr_t *functions, size_t function_count, uintptr_t window,
                         const uint64_t *blocks, ffh_branch_found *found, size_t capacity, int *undecoded) {
    *undecoded = 0;
    if (!functions || function_count == 0 || !blocks) return 0;
    ffh_branch_watch watch = {.low = functions[0], .high = functions[function_count - 1] + window, .bits = blocks};
    uintptr_t place = *address;
    size_t following_start = *next;
    size_t written = 0;
    while (place < end && written < capacity) {
        int64_t relative;
        ffh_x86_shape shape;
        size_t length = ffh_x86_decode((const uint8_t *)place, (size_t)(limit - place), &relative, &shape);
        if (length == 0) {
            *undecoded = 1;
            break;
        }
        if (relative != INT64_MIN) {
            uintptr_t target = place + length + (uintptr_t)relative;
            if (ffh_branch_watched(&watch, target)) {
                found[written].from = place;
                found[written].target = target;
                written++;
            }
        }
        uintptr_t following = place + length;
        /* An instruction that runs over a known start was not one: go on from the start. */
        while (following_start < count && starts[following_start] <= place) following_start++;
        if (following_start < count && starts[following_start] < following) following = starts[following_start];
        place = following;
    }
    *address = place;
    *next = following_start;
    return written;
}

size_t ffh_x86_displaced_length(const uint8_t *code, size_t available, size_t patch) {
    static const uint8_t endbr64[4] = {0xF3, 0x0F, 0x1E, 0xFA};
    size_t start = available >= 4 && memcmp(code, endbr64, 4) == 0 ? 4 : 0;
    size_t offset = 0;
    while (offset < start + patch) {
        if (offset >= available) return 0;
        int64_t relative;
        size_t length = ffh_x86_length(code + offset, available - offset, &relative);
        if (length == 0) return 0;
        offset += length;
    }
    return offset;
}

// MARK: - Plain prologues

/* Whether the instruction ffh_x86_decode described runs as well anywhere, its memory operand
   relative to the instruction pointer aside (see ffh_x86_rip_relative): no relative operand
   (checked by the caller), and neither a call nor anything after which the next bytes may not
   run (return, jump through a register or memory, interrupt, halt, undefined opcode, the system
   and transaction groups). */
static int ffh_x86_runs_anywhere(const ffh_x86_shape *shape) {
    switch (shape->opcode) {
    case 0xC2: case 0xC3: case 0xCA: case 0xCB: case 0xCC: case 0xCD: case 0xCF: case 0xF4: return 0;
    case 0xC6: return !(shape->modrm && *shape->modrm == 0xF8); /* xabort */
    case 0xFF: {
        uint8_t reg = shape->modrm ? (*shape->modrm >> 3) & 7 : 0;
        return reg < 2 || reg > 5; /* call and jmp, near and far */
    }
    case 0x0F:
        return !(shape->second == 0x0B || shape->second == 0xB9 || shape->second == 0xFF || shape->second == 0x01 ||
                 (shape->second >= 0x20 && shape->second <= 0x23));
    default: return 1;
    }
}

/* Whether its ModRM byte names a memory operand relative to the instruction pointer (mod 00,
   r/m 101, no SIB byte): its 32-bit displacement follows the ModRM byte. */
static int ffh_x86_rip_relative(const ffh_x86_shape *shape) {
    return shape->modrm && (*shape->modrm & 0xC7) == 0x05;
}

size_t ffh_x86_plain_prefix(const uint8_t *code, size_t available, size_t patch, uintptr_t trampoline,
                            uint8_t *copy, size_t *patch_offset, uint8_t *offsets, size_t capacity, size_t *count) {
    static const uint8_t endbr64[4] = {0xF3, 0x0F, 0x1E, 0xFA};
    size_t start = available >= 4 && memcmp(code, endbr64, 4) == 0 ? 4 : 0;
    size_t offset = 0, instructions = 0;
    while (offset < start + patch) {
        if (offset >= available || instructions == capacity || offset + 15 > FFH_X86_PLAIN_COPY) return 0;
        int64_t relative;
        ffh_x86_shape shape;
        size_t length = ffh_x86_decode(code + offset, available - offset, &relative, &shape);
        if (length == 0 || relative != INT64_MIN || !ffh_x86_runs_anywhere(&shape)) return 0;
        memcpy(copy + offset, code + offset, length);
        if (ffh_x86_rip_relative(&shape)) {
            /* The same address from the copy, when it is within a 32-bit displacement of it; an
               address 32 bits wide (67) is left to the full decoder. */
            if (shape.address32) return 0;
            size_t at = (size_t)(shape.modrm + 1 - code);
            int32_t displacement;
            memcpy(&displacement, code + at, sizeof displacement);
            uintptr_t end = (uintptr_t)code + offset + length;
            uintptr_t target = end + (uintptr_t)(intptr_t)displacement;
            int64_t moved = (int64_t)(target - (trampoline + offset + length));
            if (moved < INT32_MIN || moved > INT32_MAX) return 0;
            int32_t narrow = (int32_t)moved;
            memcpy(copy + at, &narrow, sizeof narrow);
        }
        offsets[instructions++] = (uint8_t)offset;
        offset += length;
    }
    *patch_offset = start;
    *count = instructions;
    return offset;
}
