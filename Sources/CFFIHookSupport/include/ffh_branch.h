#ifndef FFH_BRANCH_H
#define FFH_BRANCH_H

// The bytes of a stretch of code that could encode a direct branch into the first bytes of
// given functions: a filter in front of a decoder, which then decodes only around them.

#include <stddef.h>
#include <stdint.h>

/// How many 64-bit words ffh_branch_candidates needs for its bitmap of the watched bytes (one
/// bit for each byte from the first function's start to the last window's end: 128 KiB for
/// 1 MiB of code); `(size_t)-1` when the windows wrap around the address space.
size_t ffh_branch_blocks(const uintptr_t *functions, size_t count, uintptr_t window);

/// Writes into `candidates` (up to `capacity`; returns how many there are in all) the
/// addresses of the bytes of `code` (`size` bytes, mapped and readable, at run-time address
/// `code`) that are the opcode of a direct branch, if an instruction starts at or before them,
/// whose target lands more than 0 and fewer than `window` bytes past the last of `functions`
/// (`count` addresses, sorted ascending) at or below it (fewer than `windows[i]` bytes past
/// `functions[i]` where `windows` is given and that is smaller): `jmp`/`jcc`/`loop`/`jrcxz` rel8, `jmp`/`call`
/// rel32, `jcc` rel32 (0F 8x), `xbegin` rel32 and rel16. Every such instruction a decoder finds
/// in the code has its opcode among them: prefixes do not move the end of the instruction, from
/// which the target counts; the decoder tells which of them are instructions. `blocks` is
/// `words` zeroed words, as many as ffh_branch_blocks says (the caller allocates them: the
/// library calls no allocator of its own here); returns `(size_t)-1` when they are not.
size_t ffh_branch_candidates(
    const uint8_t *code, size_t size, const uintptr_t *functions, size_t count, uintptr_t window,
    const uint8_t *windows, uint64_t *blocks, size_t words, uintptr_t *candidates, size_t capacity);

/// ffh_branch_candidates reading at most `width` bytes at a time: 32 (AVX2, where the
/// processor has it; what ffh_branch_candidates does there), 16 (SSE2), 1 (a byte at a time),
/// 0 the widest the processor allows. Every width finds the same candidates: for tests, which
/// hold them to each other and to a decoding.
size_t ffh_branch_candidates_at_width(
    int width, const uint8_t *code, size_t size, const uintptr_t *functions, size_t count, uintptr_t window,
    const uint8_t *windows, uint64_t *blocks, size_t words, uintptr_t *candidates, size_t capacity);

/// The length of the x86-64 instruction at `code` (at most `available` bytes readable), for the
/// instructions compilers emit: the one-byte, 0F, 0F 38 and 0F 3A maps with their prefixes,
/// VEX and EVEX. A table lookup and the ModRM arithmetic, a few dozen machine instructions
/// where a full decoder takes hundreds; 0 for what it leaves to a full decoder (what is invalid
/// in 64-bit mode, XOP, a prefix after REX, relative branches of 16-bit operand size, bytes that
/// run out). A direct relative branch (`jmp`, `jcc`, `call`, `loop`, `jrcxz`, `xbegin`) has its
/// displacement stored in `relative`; anything else, INT64_MIN. A test holds it to Zydis at
/// every instruction of whole libraries.
size_t ffh_x86_length(const uint8_t *code, size_t available, int64_t *relative);

/// A direct branch that ffh_branch_decode found: its address and its target.
typedef struct {
    uintptr_t from;
    uintptr_t target;
} ffh_branch_found;

/// Decodes instructions by ffh_x86_length from `*address` while below `end`, each allowed to
/// run up to `limit`: an instruction that runs over the next of `starts` (`count` addresses,
/// sorted; `*next` is the index of the first above the place decoded, kept from call to call)
/// was not one, and decoding goes on from that start. Writes the direct branches whose targets
/// the bitmap of a call of ffh_branch_candidates with `functions`, `function_count`, `window`
/// and `blocks` marks as watched into `found`, up to `capacity`, and returns how many. Stops
/// with `*address` at the next instruction once `found` is full, at an instruction the length
/// table leaves to a full decoder (`*undecoded` set: the caller decodes it and goes on after
/// it), or at `end` or past it.
size_t ffh_branch_decode(uintptr_t *address, uintptr_t end, uintptr_t limit, const uintptr_t *starts, size_t count,
                         size_t *next, const uintptr_t *functions, size_t function_count, uintptr_t window,
                         const uint64_t *blocks, ffh_branch_found *found, size_t capacity, int *undecoded);

/// Whether `target` is watched by the bitmap of a call of ffh_branch_candidates with
/// `functions`, `count`, `window` and `blocks`.
int ffh_branch_is_watched(const uintptr_t *functions, size_t count, uintptr_t window, const uint64_t *blocks,
                          uintptr_t target);

/// How many bytes from `code` (at most `available` readable) a patch of `patch` bytes at the
/// start of a function displaces: after an `endbr64` when it starts with one, whole instructions
/// (by ffh_x86_length) until the patch is covered. 0 when one of them is left to a full decoder
/// or the bytes run out. What the relocation of the function then copies, when it copies
/// nothing more (a relocation may copy more: a function shorter than the patch).
size_t ffh_x86_displaced_length(const uint8_t *code, size_t available, size_t patch);

/// The most bytes ffh_x86_plain_prefix copies (its `copy` holds this many).
#define FFH_X86_PLAIN_COPY 64

/// The bytes a patch of `patch` bytes at the start of the function at `code` (at most
/// `available` bytes readable) displaces, when every instruction among them runs as well from
/// a copy at `trampoline`: decoded by ffh_x86_length, with no relative operand and neither a
/// call nor anything that ends the flow (return, indirect jump, `int3`, `ud2`, `hlt`...), and
/// any memory operand relative to the instruction pointer within 32 bits of the copy. Writes
/// the copy into `copy` (FFH_X86_PLAIN_COPY bytes), those operands' displacements rewritten
/// for `trampoline`. The patch starts after an `endbr64` (`*patch_offset` 4, else 0), and the
/// instructions' offsets go into `offsets` (`*count` of them, at most `capacity`). 0 when one
/// of them is not such an instruction: a full decoder then relocates them.
size_t ffh_x86_plain_prefix(const uint8_t *code, size_t available, size_t patch, uintptr_t trampoline,
                            uint8_t *copy, size_t *patch_offset, uint8_t *offsets, size_t capacity, size_t *count);

#endif
