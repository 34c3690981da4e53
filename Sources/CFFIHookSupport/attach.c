#define _GNU_SOURCE
#include "ffh_attach.h"
#include "call_internal.h"
#include "ffh_call.h"
#include "ffh_guard.h"
#include "ffh_memory.h"
#include "ffh_return_site.h"
#include "ffh_syscall.h"
#include "ffh_thread.h"

#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#if defined(__x86_64__) && defined(__ELF__)

#include <elf.h>

/* ffh_attach_entry, ffh_attach_return and their preserving forms: attach_x86_64.S. */
void ffh_attach_entry(void);
void ffh_attach_return(void);
void ffh_attach_entry_preserving(void);
void ffh_attach_return_preserving(void);

/* libgcc's registration of unwind information (the package links gcc_s). */
extern void __register_frame_info(const void *begin, void *object);

/* LeakSanitizer's, when the process runs under it: the unwinder keeps memory it allocates for
   a registration (its sorted table of the thunks' FDEs) in the registration's object, which
   lives in the side stack's mapping; the leak checker must scan that mapping to see it held. */
extern void __lsan_register_root_region(const void *begin, size_t size) __attribute__((weak));


static ffh_attach_dispatch ffh_attach_dispatch_function;

/* How the entries keep the vector registers (attach_x86_64.S reads it): 0 the xmm registers
   only, 1 the ymm registers whole, 2 the zmm registers whole. Set as the library loads, from
   what the processor has and the kernel saves for the process (XCR0), before any attach. */
__attribute__((visibility("hidden"))) uint8_t ffh_vector_save;
/* The widest the machine allows, as ffh_vector_save counts. */
static uint8_t ffh_vector_widest;

__attribute__((constructor)) static void ffh_vector_detect(void) {
    uint32_t eax = 1, ebx = 0, ecx = 0, edx = 0;
    __asm__("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx));
    /* OSXSAVE (the kernel enabled XGETBV) and AVX. */
    if (!(ecx & (1u << 27)) || !(ecx & (1u << 28))) return;
    uint32_t low, high;
    __asm__("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    /* The kernel keeps the SSE and AVX state (XCR0 bits 1 and 2). */
    if ((low & 0x6) != 0x6) return;
    uint8_t widest = 1;
    uint32_t leaf = 7, features = 0, sub = 0, other = 0;
    __asm__("cpuid" : "+a"(leaf), "=b"(features), "+c"(sub), "=d"(other));
    /* AVX-512 Foundation, with the opmask and both halves of the upper zmm state kept (XCR0
       bits 5 to 7). */
    if ((features & (1u << 16)) && (low & 0xE0) == 0xE0) widest = 2;
    ffh_vector_widest = widest;
    __atomic_store_n(&ffh_vector_save, widest, __ATOMIC_RELEASE);
}

int ffh_attach_vector_width(void) { return 16 << __atomic_load_n(&ffh_vector_save, __ATOMIC_ACQUIRE); }

int ffh_attach_set_vector_width(int width) {
    uint8_t wanted = width >= 64 ? 2 : width >= 32 ? 1 : 0;
    if (wanted > ffh_vector_widest) wanted = ffh_vector_widest;
    __atomic_store_n(&ffh_vector_save, wanted, __ATOMIC_RELEASE);
    return 16 << wanted;
}
static uint64_t ffh_attach_skipped;
static uint64_t ffh_attach_abandoned;
static uint64_t ffh_attach_passed;
static uint64_t ffh_attach_passed_library;
/* The passed calls the library's own work did not make, counted once each: a reader that took
   the difference of the two counts above while another thread's work passed a call could see one
   count moved and not the other. */
static uint64_t ffh_attach_passed_program;

int ffh_attach_available(void) { return 1; }

uint64_t ffh_attach_skipped_leaves(void) { return __atomic_load_n(&ffh_attach_skipped, __ATOMIC_RELAXED); }

uint64_t ffh_attach_abandoned_frames(void) { return __atomic_load_n(&ffh_attach_abandoned, __ATOMIC_RELAXED); }

uint64_t ffh_attach_passed_calls(void) { return __atomic_load_n(&ffh_attach_passed, __ATOMIC_RELAXED); }

uint64_t ffh_attach_passed_library_calls(void) { return __atomic_load_n(&ffh_attach_passed_library, __ATOMIC_RELAXED); }

uint64_t ffh_attach_passed_program_calls(void) { return __atomic_load_n(&ffh_attach_passed_program, __ATOMIC_RELAXED); }

/* One call on a thread's side stack. */
typedef struct {
    /* The real return address and where it was (the stack pointer at the call's entry). */
    uint64_t ret;
    uint64_t sp;
    ffh_attach *record;
    /* The record's epoch when the call entered, and what the enter block left. */
    uintptr_t epoch;
    uint64_t scratch;
    uint64_t function;
    /* Whether the frame below was still being written when this one was pushed (a signal
       handler interrupted that push): FFH_SIDE_FILLING or 0, given back to the side stack's
       depth as this frame leaves. */
    uint64_t below;
    /* How many bytes past its usual place the unwinder is told this call's thunk frame has its
       CFA (see ffh_side_write_unwind): 0, or more for a frame whose return slot later frames
       took over (a function that tail-calls another attached one, two attaches of one slot),
       each thunk frame of one slot then having a CFA of its own. */
    uint64_t bias;
} ffh_side_frame;

/* A side stack's depth word: the number of frames, and this bit while the top frame is being
   written. A signal handler's attached call that interrupts the push of a frame takes the next
   slot and leaves the one being written alone (see ffh_attach_enter). */
#define FFH_SIDE_FILLING ((uint64_t)1 << 63)

/* The thunks: a header of two words (the addresses of ffh_attach_return and
   ffh_attach_return_preserving) and a 32-byte cell per frame. An attached call whose leave
   block is to run is made from cell i of its thread: the entry takes the caller's return
   address off the stack (into frame i) and jumps to the cell, whose call puts the cell's own
   return address exactly where the caller's was (the stack arguments stay where they are) and
   calls the function. A real call, so the processor predicts the function's return; the cell
   then enters the return path with its index, and the return to the caller is a `ret` the
   processor predicts too (the caller's call pushed it). The unwinder looks a return address up
   at the byte before it, inside the cell's call: cell i's row of the unwind information.

   A cell has two ways in. At its start (ffh_attach_entry): `call *%r11`, then its index in r11
   and a jump to ffh_attach_return. FFH_THUNK_PRESERVING bytes in (ffh_attach_entry_preserving):
   the same call through the frame's word in the calls page (FFH_THUNK_SPAN bytes below the
   cell, written by ffh_attach_enter), its index pushed, and a jump to
   ffh_attach_return_preserving: no register is written on the way to the function and back
   but the stack's words below the caller's stack pointer, which are the callee's. */
enum {
    FFH_THUNK_HEADER = 16,
    FFH_THUNK_CELL = 32,
    FFH_THUNK_PRESERVING = 15,
    FFH_THUNK_BYTES = FFH_THUNK_HEADER + FFH_THUNK_CELL * FFH_ATTACH_DEPTH,
    /* The thunks' pages, and as many below them that hold each cell's function word (the
       words of the preserving calls, at the cell's address less this). */
    FFH_THUNK_SPAN = (FFH_THUNK_BYTES + 4095) / 4096 * 4096,
    /* Per cell: DW_CFA_def_cfa_expression (1), length (1), DW_OP_breg7 and its offset (2),
       DW_OP_addr and its 8 bytes, DW_OP_deref (1), DW_OP_plus (1); DW_CFA_expression (1),
       register (1), length (1), DW_OP_addr and its 8 bytes; then DW_CFA_advance_loc (1). */
    FFH_EH_ROW = 28,
    FFH_EH_BYTES = 64 + FFH_EH_ROW * FFH_ATTACH_DEPTH + 64,
};

/* What ffh_side_write_unwind writes at most: the CIE (24 bytes, padded), the FDE's header
   (25), its rows (the last without an advance), its padding (7 at most), the end (4). */
_Static_assert(24 + 25 + FFH_EH_ROW * FFH_ATTACH_DEPTH - 1 + 7 + 4 <= FFH_EH_BYTES,
               "the unwind information outgrows its buffer");

// MARK: - gdb's JIT interface

/* gdb reads neither libgcc's registered unwind information nor memory that no file maps: to
   unwind through a thunk it needs an object file that describes the thunks. Its JIT
   compilation interface (the gdb manual, "JIT Compilation Interface") takes one from memory:
   the program links an entry for the object into a list that starts at the symbol
   __jit_debug_descriptor, then calls __jit_debug_register_code, where gdb keeps a breakpoint
   and reads the new object (a gdb that attaches later reads the whole list).

   Each thread's side stack carries such an object, an ELF relocatable file whose sections
   have their run-time addresses: a .text without contents over the thunks, the thunks' CIE
   and FDE as .eh_frame (libgcc is handed the same bytes, in place), and a function symbol
   that names the thunks. Entries are linked once and never taken out: side stacks are never
   freed.

   The two symbols are the library's own and local (static, named through asm labels), not
   those of another JIT in the process, which a process with LLVM's JIT, say, defines. gdb
   (since version 10) looks the pair up in each loaded object and reads each object's list on
   its own, so two JITs coexist; sharing another's list would race with its writers, whose
   lock (LLVM's is a C++ mutex of its own) is not for us to take. Local symbols also never
   clash with another definition at link time nor bind another JIT's references to ours. gdb
   finds them in the symbol table of the file that links the library (a stripped file has
   none); where that same file also defines the pair as global symbols, gdb reads that other
   list and not this one. */

enum { FFH_JIT_REGISTER = 1 };

/* An entry of the list, and the list (the layouts the gdb manual gives). */
typedef struct ffh_jit_entry {
    struct ffh_jit_entry *next;
    struct ffh_jit_entry *prev;
    const void *symfile_addr;
    uint64_t symfile_size;
} ffh_jit_entry;

typedef struct {
    uint32_t version;
    uint32_t action_flag;
    ffh_jit_entry *relevant_entry;
    ffh_jit_entry *first_entry;
} ffh_jit_descriptor;

__attribute__((used)) static ffh_jit_descriptor ffh_jit_list __asm__("__jit_debug_descriptor") = {1, 0, NULL, NULL};

/* Where gdb's breakpoint waits. Empty, but kept as a call: the barrier tells the compiler
   that the call reads the list. */
__attribute__((used, noinline)) static void ffh_jit_notify(void) __asm__("__jit_debug_register_code");
static void ffh_jit_notify(void) { __asm__ __volatile__("" ::: "memory"); }

/* Held while an entry is linked: a spin lock, which needs neither memory nor a libc call (the
   call path), taken across fork (ffh_attach_setup). Never held while its holder could need it
   again: a thread inside the library, as ffh_side_make runs, passes attached calls straight
   through, signal handlers' included. */
static int ffh_jit_lock;

static void ffh_jit_take(void *lock) {
    while (__atomic_exchange_n((int *)lock, 1, __ATOMIC_ACQUIRE)) ffh_syscall0(SYS_sched_yield);
}

static void ffh_jit_give(void *lock) { __atomic_store_n((int *)lock, 0, __ATOMIC_RELEASE); }

/* The rank of the lock among those taken across fork (ffh_fork_protect_with): a leaf, taken
   last. */
enum { FFH_JIT_FORK_RANK = 1000 };

/* Also has the lock of gdb's list taken across fork. */
static void ffh_attach_thread_released(ffh_thread *thread);

void ffh_attach_setup(ffh_attach_dispatch dispatch) {
    (void)ffh_fork_protect_with(ffh_jit_take, ffh_jit_give, &ffh_jit_lock, FFH_JIT_FORK_RANK);
    /* A released record's side stack starts empty for its next thread. */
    ffh_thread_set_release_hook(ffh_attach_thread_released);
    __atomic_store_n(&ffh_attach_dispatch_function, dispatch, __ATOMIC_RELEASE);
}

/* The object's sections, in order after the null one, and their names. */
enum {
    FFH_JIT_TEXT = 1,
    FFH_JIT_EH_FRAME,
    FFH_JIT_SYMTAB,
    FFH_JIT_STRTAB,
    FFH_JIT_SHSTRTAB,
    FFH_JIT_SECTIONS,
};

static const char ffh_jit_section_names[] = "\0.text\0.eh_frame\0.symtab\0.strtab\0.shstrtab";
/* Offsets of the names above. */
static const uint32_t ffh_jit_section_name_at[FFH_JIT_SECTIONS] = {0, 1, 7, 17, 25, 33};
static const char ffh_jit_symbol_names[] = "\0swift_ffi_hook_return_thunk";

/* A thread's object, laid out as its file: the header, the section headers, then the
   sections' contents (the unwind information first, 8-byte aligned as libgcc reads it). */
typedef struct {
    Elf64_Ehdr header;
    Elf64_Shdr sections[FFH_JIT_SECTIONS];
    unsigned char eh[FFH_EH_BYTES];
    /* The null symbol, then the thunks' function symbol. */
    Elf64_Sym symbols[2];
    char symbol_names[sizeof ffh_jit_symbol_names];
    char section_names[sizeof ffh_jit_section_names];
} ffh_jit_image;

// MARK: - Side stacks

/* A thread record's side stack, mapped on its first attached call and kept with the record
   (records are reused, never freed; so are side stacks, their thunks and their unwind
   information, and the entries that hand those to gdb). */
typedef struct ffh_side {
    /* How many frames are in use, with FFH_SIDE_FILLING while the top one is being written. */
    uint64_t depth;
    unsigned char *thunks;
    ffh_side_frame frames[FFH_ATTACH_DEPTH];
    /* libgcc's `struct object` for the registration (opaque; it needs less than this). */
    uint64_t object[32];
    /* gdb's entry for `image`. */
    ffh_jit_entry jit;
    /* The thunks' unwind information (image.eh) in an object file for gdb. */
    ffh_jit_image image;
} ffh_side;

/* Where cell `index` of a side stack begins. */
static inline uint64_t ffh_cell(const ffh_side *side, uint64_t index) {
    return (uint64_t)(uintptr_t)side->thunks + FFH_THUNK_HEADER + FFH_THUNK_CELL * index;
}

/* The return address a call made from cell `index` has: right after the cell's call. */
static inline uint64_t ffh_thunk(const ffh_side *side, uint64_t index) { return ffh_cell(side, index) + 3; }

/* The same for a call made through the cell's preserving way in. */
static inline uint64_t ffh_thunk_preserving(const ffh_side *side, uint64_t index) {
    return ffh_cell(side, index) + FFH_THUNK_PRESERVING + 6;
}

/* Whether `value` is a return address of a call from cell `index`, either way in. */
static inline int ffh_is_thunk(const ffh_side *side, uint64_t index, uint64_t value) {
    return value == ffh_thunk(side, index) || value == ffh_thunk_preserving(side, index);
}

static unsigned char *ffh_put32(unsigned char *at, uint32_t value) {
    memcpy(at, &value, 4);
    return at + 4;
}

static unsigned char *ffh_put64(unsigned char *at, uint64_t value) {
    memcpy(at, &value, 8);
    return at + 8;
}

/* Writes the side stack's unwind information: one CIE and one FDE covering the thunks, whose
   row for cell i says the return address is saved at frames[i].ret and the frame's CFA is the
   stack pointer (the caller's, once the original has returned into the thunk) plus 8 plus
   frames[i].bias. Returns its length, the zero word that ends it included. */
static uint64_t ffh_side_write_unwind(ffh_side *side) {
    unsigned char *start = side->image.eh;
    unsigned char *at = start;
    /* CIE */
    unsigned char *cie = at;
    at += 4;                       /* length, below */
    at = ffh_put32(at, 0);         /* CIE id */
    *at++ = 1;                     /* version */
    *at++ = 'z';
    *at++ = 'R';
    *at++ = 0;
    *at++ = 1;                     /* code alignment */
    *at++ = 0x78;                  /* data alignment -8 */
    *at++ = 16;                    /* return address column: rip */
    *at++ = 1;                     /* augmentation data length */
    *at++ = 0x00;                  /* FDE pointers: DW_EH_PE_absptr */
    /* The thunk's frame: its CFA is the caller's stack pointer plus 8 (plus the frame's bias:
       each row), and the caller's stack pointer is given outright (the thunk's own). A CFA
       equal to the caller's stack pointer would equal the CFA of the function that returns
       into the thunk, and an unwinder that tells frames apart by CFA (libgcc's, which then
       aborts a C++ exception caught in the caller) would take the thunk's frame for the
       handler's; so would two thunk frames of one return slot (a tail call from one attached
       function into another) with one CFA: the bias sets them apart. */
    *at++ = 0x16;                  /* DW_CFA_val_expression rsp, [DW_OP_breg7 0] */
    *at++ = 7;
    *at++ = 2;
    *at++ = 0x77;
    *at++ = 0;
    while ((at - cie) % 8 != 0) *at++ = 0; /* DW_CFA_nop */
    ffh_put32(cie, (uint32_t)(at - cie - 4));
    /* FDE */
    unsigned char *fde = at;
    at += 4;
    at = ffh_put32(at, (uint32_t)(at - cie)); /* CIE pointer: back to the CIE */
    at = ffh_put64(at, (uint64_t)(uintptr_t)side->thunks + FFH_THUNK_HEADER);
    at = ffh_put64(at, (uint64_t)FFH_THUNK_CELL * FFH_ATTACH_DEPTH);
    *at++ = 0; /* augmentation data length */
    for (unsigned index = 0; index < FFH_ATTACH_DEPTH; index++) {
        *at++ = 0x0f; /* DW_CFA_def_cfa_expression [rsp + 8 + frames[index].bias] */
        *at++ = 13;
        *at++ = 0x77; /* DW_OP_breg7 8 */
        *at++ = 8;
        *at++ = 0x03; /* DW_OP_addr &frames[index].bias */
        at = ffh_put64(at, (uint64_t)(uintptr_t)&side->frames[index].bias);
        *at++ = 0x06; /* DW_OP_deref */
        *at++ = 0x22; /* DW_OP_plus */
        *at++ = 0x10; /* DW_CFA_expression rip, [DW_OP_addr &frames[index].ret] */
        *at++ = 16;
        *at++ = 9;
        *at++ = 0x03;
        at = ffh_put64(at, (uint64_t)(uintptr_t)&side->frames[index].ret);
        if (index + 1 < FFH_ATTACH_DEPTH) *at++ = 0x40 | FFH_THUNK_CELL; /* DW_CFA_advance_loc 32 */
    }
    while ((at - fde) % 8 != 0) *at++ = 0;
    ffh_put32(fde, (uint32_t)(at - fde - 4));
    at = ffh_put32(at, 0); /* the end */
    return (uint64_t)(at - start);
}

/* Fills in one section header of `image`: `offset` is in the image, `address` at run time. */
static void ffh_jit_section(ffh_jit_image *image, unsigned index, uint32_t type, uint64_t flags, uint64_t address,
                            uint64_t offset, uint64_t size, uint64_t alignment) {
    Elf64_Shdr *section = &image->sections[index];
    section->sh_name = ffh_jit_section_name_at[index];
    section->sh_type = type;
    section->sh_flags = flags;
    section->sh_addr = address;
    section->sh_offset = offset;
    section->sh_size = size;
    section->sh_addralign = alignment;
}

/* Writes the rest of the side stack's object around its unwind information (`eh_length`
   bytes, written): the ELF header, the section headers, the symbol table and the names. */
static void ffh_jit_write_image(ffh_side *side, uint64_t eh_length) {
    ffh_jit_image *image = &side->image;
    Elf64_Ehdr *header = &image->header;
    memcpy(header->e_ident, ELFMAG, SELFMAG);
    header->e_ident[EI_CLASS] = ELFCLASS64;
    header->e_ident[EI_DATA] = ELFDATA2LSB;
    header->e_ident[EI_VERSION] = EV_CURRENT;
    header->e_ident[EI_OSABI] = ELFOSABI_SYSV;
    header->e_type = ET_REL;
    header->e_machine = EM_X86_64;
    header->e_version = EV_CURRENT;
    header->e_shoff = offsetof(ffh_jit_image, sections);
    header->e_ehsize = sizeof(Elf64_Ehdr);
    header->e_shentsize = sizeof(Elf64_Shdr);
    header->e_shnum = FFH_JIT_SECTIONS;
    header->e_shstrndx = FFH_JIT_SHSTRTAB;
    /* The section headers; section 0 stays null. */
    ffh_jit_section(image, FFH_JIT_TEXT, SHT_NOBITS, SHF_ALLOC | SHF_EXECINSTR, (uint64_t)(uintptr_t)side->thunks,
                    offsetof(ffh_jit_image, eh), FFH_THUNK_BYTES, 16);
    ffh_jit_section(image, FFH_JIT_EH_FRAME, SHT_PROGBITS, SHF_ALLOC, (uint64_t)(uintptr_t)image->eh,
                    offsetof(ffh_jit_image, eh), eh_length, 8);
    ffh_jit_section(image, FFH_JIT_SYMTAB, SHT_SYMTAB, 0, 0, offsetof(ffh_jit_image, symbols), sizeof image->symbols,
                    8);
    image->sections[FFH_JIT_SYMTAB].sh_link = FFH_JIT_STRTAB;
    image->sections[FFH_JIT_SYMTAB].sh_info = 1; /* the first global symbol */
    image->sections[FFH_JIT_SYMTAB].sh_entsize = sizeof(Elf64_Sym);
    ffh_jit_section(image, FFH_JIT_STRTAB, SHT_STRTAB, 0, 0, offsetof(ffh_jit_image, symbol_names),
                    sizeof image->symbol_names, 1);
    ffh_jit_section(image, FFH_JIT_SHSTRTAB, SHT_STRTAB, 0, 0, offsetof(ffh_jit_image, section_names),
                    sizeof image->section_names, 1);
    /* The thunks' symbol: every cell (an offset in .text, as in any relocatable file). */
    Elf64_Sym *thunk = &image->symbols[1];
    thunk->st_name = 1;
    thunk->st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    thunk->st_other = STV_DEFAULT;
    thunk->st_shndx = FFH_JIT_TEXT;
    thunk->st_value = FFH_THUNK_HEADER;
    thunk->st_size = (uint64_t)FFH_THUNK_CELL * FFH_ATTACH_DEPTH;
    memcpy(image->symbol_names, ffh_jit_symbol_names, sizeof ffh_jit_symbol_names);
    memcpy(image->section_names, ffh_jit_section_names, sizeof ffh_jit_section_names);
}

/* Links the side stack's object into gdb's list, and tells gdb (which, if it runs the
   process, reads it before the call returns). */
static void ffh_jit_register(ffh_side *side) {
    ffh_jit_entry *entry = &side->jit;
    entry->symfile_addr = &side->image;
    entry->symfile_size = sizeof side->image;
    ffh_jit_take(&ffh_jit_lock);
    entry->prev = NULL;
    entry->next = ffh_jit_list.first_entry;
    if (entry->next) entry->next->prev = entry;
    ffh_jit_list.first_entry = entry;
    ffh_jit_list.relevant_entry = entry;
    ffh_jit_list.action_flag = FFH_JIT_REGISTER;
    ffh_jit_notify();
    ffh_jit_give(&ffh_jit_lock);
}

/* Maps a side stack and its thunks for `thread`, writes and registers their unwind
   information with libgcc and, in an object file, with gdb. NULL when the kernel refuses
   memory. System calls by instruction: this runs
   on the call path, where the program may have hooked mmap. */
static ffh_side *ffh_side_make(ffh_thread *thread) {
    long memory = ffh_syscall6(SYS_mmap, 0, (long)sizeof(ffh_side), PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory < 0 && memory > -4096) return NULL;
    /* The cells' function words, then the thunks: one mapping, so that a cell reaches its
       word by a 32-bit displacement. */
    long code = ffh_syscall6(SYS_mmap, 0, (long)(2 * FFH_THUNK_SPAN), PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code < 0 && code > -4096) {
        ffh_syscall3(SYS_munmap, memory, (long)sizeof(ffh_side), 0);
        return NULL;
    }
    ffh_side *side = (ffh_side *)memory;
    unsigned char *thunks = (unsigned char *)code + FFH_THUNK_SPAN;
    side->thunks = thunks;
    uint64_t common[2] = {(uint64_t)(uintptr_t)&ffh_attach_return, (uint64_t)(uintptr_t)&ffh_attach_return_preserving};
    /* int3 everywhere first, by `rep stosb` rather than the C library's memset: this runs on a
       thread's first attached call, whose caller's vector registers the AVX2 and AVX-512 forms
       of memset would write (zmm16 and up, or the upper halves by vzeroupper). */
    void *fill = thunks;
    size_t left = FFH_THUNK_SPAN;
    __asm__ volatile("rep stosb" : "+D"(fill), "+c"(left) : "a"(0xcc) : "memory");
    memcpy(thunks, common, sizeof common);
    for (uint32_t index = 0; index < FFH_ATTACH_DEPTH; index++) {
        unsigned char *cell = thunks + FFH_THUNK_HEADER + FFH_THUNK_CELL * index;
        unsigned char *at = cell;
        *at++ = 0x41; /* call *%r11 */
        *at++ = 0xff;
        *at++ = 0xd3;
        *at++ = 0x41; /* mov $index, %r11d */
        *at++ = 0xbb;
        memcpy(at, &index, 4);
        at += 4;
        *at++ = 0xff; /* jmp *common[0](%rip) */
        *at++ = 0x25;
        int32_t displacement = (int32_t)((intptr_t)thunks - (intptr_t)(at + 4));
        memcpy(at, &displacement, 4);
        at += 4;
        /* The preserving way in (FFH_THUNK_PRESERVING bytes into the cell). */
        *at++ = 0xff; /* call *word(%rip), the word FFH_THUNK_SPAN bytes below the cell */
        *at++ = 0x15;
        displacement = (int32_t)((intptr_t)(cell - FFH_THUNK_SPAN) - (intptr_t)(at + 4));
        memcpy(at, &displacement, 4);
        at += 4;
        *at++ = 0x68; /* push $index */
        memcpy(at, &index, 4);
        at += 4;
        *at++ = 0xff; /* jmp *common[1](%rip) */
        *at++ = 0x25;
        displacement = (int32_t)((intptr_t)(thunks + 8) - (intptr_t)(at + 4));
        memcpy(at, &displacement, 4);
    }
    ffh_syscall3(SYS_mprotect, (long)thunks, (long)FFH_THUNK_SPAN, PROT_READ | PROT_EXEC);
    /* Usable from here (frames and thunks): a signal handler that interrupts the rest of the
       set-up runs both blocks of its calls (see ffh_attach_enter_in_work), whose frames the
       unwinder and gdb find only once the unwind information below is registered. One that
       interrupted the set-up before this point made the thread a side stack of its own (nothing
       here takes a lock until now): that one stays, and this one goes. */
    ffh_side *none = NULL;
    if (!__atomic_compare_exchange_n(&thread->side, &none, side, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) {
        ffh_syscall3(SYS_munmap, code, (long)(2 * FFH_THUNK_SPAN), 0);
        ffh_syscall3(SYS_munmap, memory, (long)sizeof(ffh_side), 0);
        return none;
    }
    if (__lsan_register_root_region) __lsan_register_root_region(side, sizeof(ffh_side));
    uint64_t eh_length = ffh_side_write_unwind(side);
    __register_frame_info(side->image.eh, side->object);
    ffh_jit_write_image(side, eh_length);
    ffh_jit_register(side);
    return side;
}

/* Drops frames of calls that left without returning (a longjmp or an exception past them):
   the top frame while a call enters at or above its stack pointer and its return-address slot
   no longer holds its thunk (read under the fault guard, unless it is the entering call's own
   slot: the slot may be on a stack that is gone). A frame whose slot still holds its thunk is
   kept: on another stack (a signal handler's alternate stack, say), or, at the entering call's
   own stack pointer, the frame of an attach the call has just passed through (two attaches of
   one slot, or a function that tail-calls another attached one), whose thunk is now the
   entering call's return address. So is a frame below the entering call whose slot still
   holds the return address it had when the frame was pushed: its call has not reached its
   thunk yet (between the push and the thunk's call, which writes the thunk's address there),
   and a signal handler on a stack above the thread's (an alternate stack mapped higher) has
   interrupted it. */
static void ffh_side_drop_abandoned(ffh_side *side, uint64_t sp) {
    uint64_t depth = side->depth;
    while (depth > 0) {
        const ffh_side_frame *top = &side->frames[depth - 1];
        if (top->sp > sp) break;
        uintptr_t value = 0;
        if (top->sp == sp) {
            value = *(const uint64_t *)(uintptr_t)sp;
        } else if (ffh_read_word((const void *)(uintptr_t)top->sp, &value) != 0) {
            value = 0;
        } else if (value == top->ret) {
            break;
        }
        if (ffh_is_thunk(side, depth - 1, value)) break;
        depth--;
        __atomic_fetch_add(&ffh_attach_abandoned, 1, __ATOMIC_RELAXED);
    }
    side->depth = depth;
}

/* Opens the library's window of work on the thread around an attachment's blocks: registers
   `window` (a block, or a signal handler that interrupts it, may jump out with longjmp; its
   cleanup then ends the window) and marks the thread inside a call when it is not already (see
   ffh_call_enter); returns whether it did. The thread is not marked busy: the attach path's C
   code calls no function a program can hook or attach to, so a signal handler that interrupts
   it and calls an attached function runs that function's blocks (see ffh_attach_run). */
static inline int ffh_attach_begin(ffh_thread *thread, ffh_window *window) {
    uintptr_t generation = __atomic_load_n(&thread->generation, __ATOMIC_RELAXED);
    int outermost = !(generation & 1);
    ffh_window_open_inline(window, thread, outermost);
    if (outermost) ffh_call_enter(thread, generation);
    return outermost;
}

/* Ends what ffh_attach_begin began. */
static inline void ffh_attach_end(ffh_thread *thread, ffh_window *window, int outermost) {
    if (outermost) ffh_call_leave(thread);
    ffh_window_close_inline(window);
}

/* Calls `function(first, second, third)` with the thread's `attach_block` set (and `busy` set
   to `busy` when that is not 0) for the call alone: the flag is written by the instruction
   before the call and given back by the one after it. One statement of assembly, because the
   compiler, given the same in C, moved arguments and spilled registers inside the marked
   stretch (about 15 instructions a block in an optimised build, during which a signal
   handler's attached calls skipped their blocks). The statement is a call as far as registers
   go: every register a call may change is declared changed, and `function`, `thread` and what
   the flag held stay in registers a call keeps (the compiler picks them). It is only ever
   inlined into ffh_attach_enter and ffh_attach_leave (through ffh_attach_run, inlined too, in
   every build), which make calls of their own: the compiler then keeps the stack pointer
   aligned for calls and nothing below it (no red zone), which the call in the statement
   would overwrite; and the stack pointer does not move, so the unwind information holds. */
static inline __attribute__((always_inline)) void ffh_attach_call_marked(const void *function, uintptr_t first,
                                                                        uintptr_t second, uintptr_t third,
                                                                        ffh_thread *thread, int32_t busy) {
    register uintptr_t a __asm__("rdi") = first;
    register uintptr_t b __asm__("rsi") = second;
    register uintptr_t c __asm__("rdx") = third;
    int32_t was = thread->attach_block;
    if (busy) {
        __asm__ __volatile__("movl $1, %c[block](%[thread])\n\t"
                             "movl %[busy], %c[busyAt](%[thread])\n\t"
                             "call *%[function]\n\t"
                             "movl $0, %c[busyAt](%[thread])\n\t"
                             "movl %[was], %c[block](%[thread])"
                             : "+r"(a), "+r"(b), "+r"(c)
                             : [function] "r"(function), [thread] "r"(thread), [was] "r"(was), [busy] "r"(busy),
                               [block] "i"(__builtin_offsetof(ffh_thread, attach_block)),
                               [busyAt] "i"(__builtin_offsetof(ffh_thread, busy))
                             : "rax", "rcx", "r8", "r9", "r10", "r11", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5",
                               "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
                               "memory", "cc");
    } else {
        __asm__ __volatile__("movl $1, %c[block](%[thread])\n\t"
                             "call *%[function]\n\t"
                             "movl %[was], %c[block](%[thread])"
                             : "+r"(a), "+r"(b), "+r"(c)
                             : [function] "r"(function), [thread] "r"(thread), [was] "r"(was),
                               [block] "i"(__builtin_offsetof(ffh_thread, attach_block))
                             : "rax", "rcx", "r8", "r9", "r10", "r11", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5",
                               "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
                               "memory", "cc");
    }
}

/* Runs a block through the Swift side with the thread marked as running one: attached calls
   the block makes (and those of a signal handler that interrupts it, and the Swift runtime's
   calls around it) go straight to their functions. Where the call path marks its own code
   (an unoptimised build, `entry_busy`), the Swift side's code around the block is marked too,
   so that hooks of the runtime's functions see none of its calls; the Swift side clears the
   mark for the block itself (a block's calls of hooked functions run their hooks, as any
   code's do). A longjmp out of the block ends both marks with the window's cleanup
   (ffh_window_open's, through ffh_abandoned). */
static inline __attribute__((always_inline)) void ffh_attach_run(ffh_thread *thread, ffh_attach_dispatch dispatch,
                                                                 uintptr_t state, uintptr_t flags, void *frame,
                                                                 int leaving) {
    if (flags & FFH_ATTACH_CALLS_FUNCTIONS) {
        /* Blocks written as C functions: called from here, with nothing of the library's
           around them to mark (a block's calls run their hooks). */
        const ffh_attach_functions *functions = (const ffh_attach_functions *)state;
        void (*block)(void *, void *) = leaving ? functions->leave : functions->enter;
        if (block) ffh_attach_call_marked((const void *)block, (uintptr_t)functions->context, (uintptr_t)frame, 0, thread, 0);
    } else {
        ffh_attach_call_marked((const void *)dispatch, state, (uintptr_t)frame, (uintptr_t)leaving, thread,
                               thread->entry_busy);
    }
}

/* What ffh_attach_enter returns to the entry (in rax and rdx): the function, and the cell to
   call it from (0: jump to it, the caller's return address left in place). */
typedef struct {
    uintptr_t function;
    uintptr_t cell;
} ffh_attach_target;

/* Pushes a frame for the call at `sp` onto the side stack; returns its slot, or
   FFH_ATTACH_DEPTH when the stack is full. Safe against a signal handler that interrupts it
   anywhere and makes attached calls of its own, which push and pop frames above it (handlers
   nest, so each is done before the interrupted push resumes):
   - before the depth word is written (the slot reserved), a handler's call takes the same
     slot and gives it back; the push then writes the slot as if nothing happened;
   - after, the word carries FFH_SIDE_FILLING: a handler's call leaves the slot being written
     alone (it drops no abandoned frames under it, since the frame's fields are not all there)
     and pushes above it; its frame records the bit, and its leave gives it back to the word.
   A handler left by siglongjmp while it interrupted a push leaves the bit on that slot for
   good: the slot and those under it are then never dropped as abandoned, only reset when the
   thread record is released (a slot or a few of the thread's 512, not a wrong frame). */
static inline __attribute__((always_inline)) uint64_t ffh_side_push(ffh_side *side, uint64_t sp, ffh_attach *record, uintptr_t epoch,
                                     uint64_t scratch, uintptr_t original) {
    uint64_t word = side->depth;
    uint64_t depth = word & ~FFH_SIDE_FILLING;
    if (!(word & FFH_SIDE_FILLING) && depth > 0 && side->frames[depth - 1].sp <= sp) {
        ffh_side_drop_abandoned(side, sp);
        depth = word = side->depth;
    }
    if (depth >= FFH_ATTACH_DEPTH) return FFH_ATTACH_DEPTH;
    __atomic_store_n(&side->depth, (depth + 1) | FFH_SIDE_FILLING, __ATOMIC_RELAXED);
    __asm__ __volatile__("" ::: "memory");
    ffh_side_frame *top = &side->frames[depth];
    top->ret = *(const uint64_t *)(uintptr_t)sp;
    top->sp = sp;
    top->record = record;
    top->epoch = epoch;
    top->scratch = scratch;
    top->function = original;
    top->below = word & FFH_SIDE_FILLING;
    top->bias = 0;
    /* Frames below whose return slot this call takes over (it was tail-called from an attached
       function, or passed through another attach of its slot) get CFAs above its own, a byte
       apart (at most 7: a function's CFA is 16 bytes or more above its caller's stack pointer). */
    for (uint64_t below = depth, bias = 1; below > 0 && bias < 8; below--, bias++) {
        if (side->frames[below - 1].sp != sp) break;
        side->frames[below - 1].bias = bias;
    }
    /* A signal handler that interrupts from here on sees the frame in place. */
    __asm__ __volatile__("" ::: "memory");
    __atomic_store_n(&side->depth, depth + 1, __ATOMIC_RELAXED);
    return depth;
}

/* The attach path's C code (ffh_attach_enter and ffh_attach_leave, with what they inline)
   lies in a section of its own, whose bounds the linker names (__start_ffh_attach_text and
   __stop_ffh_attach_text): a test that interrupts every instruction of an attached call tells
   by them which interruptions landed in this code. */
#define FFH_ATTACH_TEXT __attribute__((section("ffh_attach_text")))

/* The window of library work (ffh_attach_begin's cleanup buffer) must lie on the thread's
   stack: glibc's longjmp runs the buffers it jumps over by comparing their addresses with the
   stack's, and AddressSanitizer would otherwise move this function's locals to its heap of fake
   frames (detect_stack_use_after_return), where a siglongjmp out of a block skips them. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#undef FFH_ATTACH_TEXT
#define FFH_ATTACH_TEXT __attribute__((section("ffh_attach_text"), no_sanitize("address")))
#endif
#endif

/* A stub that only forwards (FFH_ATTACH_RESOLVES): the function its resolver chooses for the
   call, from the saved argument registers. */
static __attribute__((noinline)) ffh_attach_target ffh_attach_resolve(const ffh_attach *record, uintptr_t flags,
                                                                      ffh_attach_enter_frame *frame) {
    const ffh_original_resolver *resolver = (const ffh_original_resolver *)record->state;
    uint64_t *first = &frame->general[flags & FFH_ATTACH_RESULT_IN_MEMORY ? 1 : 0];
    void *arguments[2] = {first, first + 1};
    ffh_attach_target target = {resolver->resolve(resolver->context, arguments), 0};
    return target;
}

/* The thread's side stack, made on its first attached call. Registering the unwind
   information calls into libgcc (a lock, perhaps memory): as the library's own work, which
   attached or hooked functions pass through (not a signal handler's calls that interrupt it:
   see ffh_attach_enter_in_work). A signal handler may have made the side stack since the
   caller read it. Out of line: the work notes this frame's address, which would otherwise give
   the call path a frame pointer. */
static __attribute__((noinline)) ffh_side *ffh_side_first(ffh_thread *thread) {
    int32_t was = ffh_thread_begin_work(thread);
    int32_t making = thread->making_side;
    thread->making_side = 1;
    ffh_side *side = thread->side ? thread->side : ffh_side_make(thread);
    thread->making_side = making;
    thread->busy = was;
    return side;
}

/* Runs the enter block of a call through `record` (its function `original`) and pushes the
   call's frame onto `side` for the leave block. Returns where the call goes on. */
static inline __attribute__((always_inline)) ffh_attach_target ffh_attach_enter_blocks(
    ffh_attach *record, ffh_attach_enter_frame *frame, ffh_thread *thread, ffh_side *side, uintptr_t original) {
    ffh_attach_target target = {original, 0};
    ffh_window window;
    int outermost = ffh_attach_begin(thread, &window);
    uintptr_t epoch = __atomic_load_n(&record->epoch, __ATOMIC_ACQUIRE);
    uintptr_t state = __atomic_load_n(&record->state, __ATOMIC_ACQUIRE);
    uintptr_t flags = __atomic_load_n(&record->flags, __ATOMIC_ACQUIRE);
    ffh_attach_dispatch dispatch = __atomic_load_n(&ffh_attach_dispatch_function, __ATOMIC_ACQUIRE);
    if (state && dispatch && __atomic_load_n(&record->epoch, __ATOMIC_ACQUIRE) == epoch) {
        frame->scratch = 0;
        frame->function = original;
        frame->thread = (uint64_t)(uint32_t)thread->tid;
        if (flags & FFH_ATTACH_ENTERS) ffh_attach_run(thread, dispatch, state, flags, frame, 0);
        if (flags & FFH_ATTACH_LEAVES) {
            uint64_t slot = ffh_side_push(side, frame->sp, record, epoch, frame->scratch, original);
            if (slot < FFH_ATTACH_DEPTH) {
                target.cell = ffh_cell(side, slot);
            } else {
                __atomic_fetch_add(&ffh_attach_skipped, 1, __ATOMIC_RELAXED);
            }
        }
    }
    ffh_attach_end(thread, &window, outermost);
    return target;
}

/* Whether a call (at stack pointer `sp`) that finds the thread marked is a signal handler's
   that interrupted the library's work (FFH_BUSY_WORK) outside any block whose calls it would
   count as (see ffh_work_interrupted), or any call inside fork between its handlers
   (FFH_BUSY_FORK): such a call runs its blocks. */
static inline int ffh_attach_interrupts_work(const ffh_thread *thread, uintptr_t flags, uint64_t sp) {
    if (thread->attach_block & !(flags & FFH_ATTACH_REENTERS)) return 0;
    return thread->busy == FFH_BUSY_FORK ||
           (thread->busy == FFH_BUSY_WORK && ffh_work_interrupted(thread, (uintptr_t)sp));
}

/* A call made without a side stack by a signal handler that interrupted the library's work
   before the thread had one (but while the work made it: see ffh_attach_enter_in_work): no
   side stack can be made (the work may hold the locks that takes), and with none the leave
   block cannot run; so that a tool sees either both blocks of a call or neither, it goes
   straight through, counted as a call that skipped its blocks (not the library's). */
static inline ffh_attach_target ffh_attach_pass_sideless(uintptr_t original) {
    __atomic_fetch_add(&ffh_attach_passed, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ffh_attach_passed_program, 1, __ATOMIC_RELAXED);
    ffh_attach_target target = {original, 0};
    return target;
}

/* A signal handler's call that interrupted the thread's FFH_BUSY_WORK (a thread's set-up as it
   claims its record or makes its side stack, the walk after a `dlopen`): it is the program's
   call, not the work's, so it runs its blocks, with the thread's mark lifted for the part of it
   here and set again for the work to go on. Calls made meanwhile (the blocks', a nested
   handler's) find `work_interrupted` set: none of them makes a side stack. */
FFH_ATTACH_TEXT static __attribute__((noinline)) ffh_attach_target ffh_attach_enter_in_work(ffh_attach *record,
                                                                            ffh_attach_enter_frame *frame,
                                                                            ffh_thread *thread, uintptr_t original) {
    ffh_side *side = thread->side;
    /* The work it interrupted is making the side stack, and has taken no lock yet (it would
       have published the side stack first): the handler's call makes one of its own, which the
       work then uses. Other work may hold the locks making one takes. */
    if (!side && thread->making_side) side = ffh_side_make(thread);
    if (!side) return ffh_attach_pass_sideless(original);
    int32_t work = thread->busy, interrupted = thread->work_interrupted;
    thread->busy = 0;
    thread->work_interrupted = 1;
    ffh_attach_target target = ffh_attach_enter_blocks(record, frame, thread, side, original);
    thread->work_interrupted = interrupted;
    thread->busy = work;
    return target;
}

/* Where a call of a thread that has a record goes on (ffh_attach_enter's common path). */
static inline __attribute__((always_inline)) ffh_attach_target ffh_attach_enter_thread(ffh_attach *record,
                                                                                     uintptr_t flags,
                                                                                     ffh_attach_enter_frame *frame) {
    uintptr_t original = __atomic_load_n(&record->original, __ATOMIC_ACQUIRE);
    ffh_attach_target target = {original, 0};
    ffh_thread *thread = ffh_thread_current();
    if (!thread) return target;
    if (__builtin_expect(thread->busy | (thread->attach_block & !(flags & FFH_ATTACH_REENTERS)), 0)) {
        if (ffh_attach_interrupts_work(thread, flags, frame->sp)) {
            return ffh_attach_enter_in_work(record, frame, thread, original);
        }
        __atomic_fetch_add(&ffh_attach_passed, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(thread->busy == FFH_BUSY_WORK ? &ffh_attach_passed_library : &ffh_attach_passed_program, 1,
                           __ATOMIC_RELAXED);
        return target;
    }
    ffh_side *side = thread->side;
    if (__builtin_expect(!side, 0)) {
        if (thread->work_interrupted) return ffh_attach_pass_sideless(original);
        side = ffh_side_first(thread);
        if (!side) return target;
    }
    return ffh_attach_enter_blocks(record, frame, thread, side, original);
}

__attribute__((visibility("hidden"))) uintptr_t ffh_attach_call_as_caller(uintptr_t a, uintptr_t b, uintptr_t c,
                                                                         uintptr_t d);

/* A stub that forwards (FFH_ATTACH_RESOLVES), or one whose function reads its return address
   (FFH_ATTACH_AS_CALLER): a call that pushed a frame goes on to ffh_attach_call_as_caller,
   which the cell calls in the function's place. Out of the common path's line. */
FFH_ATTACH_TEXT static __attribute__((noinline)) ffh_attach_target ffh_attach_enter_special(
    ffh_attach *record, uintptr_t flags, ffh_attach_enter_frame *frame) {
    if (flags & FFH_ATTACH_RESOLVES) return ffh_attach_resolve(record, flags, frame);
    ffh_attach_target target = ffh_attach_enter_thread(record, flags, frame);
    if (target.cell) target.function = (uintptr_t)&ffh_attach_call_as_caller;
    return target;
}

/* Called by ffh_attach_entry and ffh_attach_entry_preserving; returns where the call goes on.
   A call made from a cell also has the function in the cell's word (the preserving way in
   calls through it; the other takes it in r11). */
FFH_ATTACH_TEXT __attribute__((visibility("hidden"))) ffh_attach_target ffh_attach_enter(ffh_attach *record,
                                                                         ffh_attach_enter_frame *frame) {
    uintptr_t flags = __atomic_load_n(&record->flags, __ATOMIC_ACQUIRE);
    ffh_attach_target target = __builtin_expect(flags & (FFH_ATTACH_RESOLVES | FFH_ATTACH_AS_CALLER), 0)
                                   ? ffh_attach_enter_special(record, flags, frame)
                                   : ffh_attach_enter_thread(record, flags, frame);
    if (target.cell) *(uint64_t *)(uintptr_t)(target.cell - FFH_THUNK_SPAN) = target.function;
    return target;
}

/* Ends the process with a message when a return thunk finds no frame of its own: the real
   return address is lost, and returning anywhere would run arbitrary code. Never expected. */
static __attribute__((noreturn, noinline)) void ffh_attach_lost(void) {
    static const char message[] =
        "swift-ffi-hook: an attached call returned, but its thread's side stack no longer holds its frame\n";
    ffh_syscall3(SYS_write, 2, (long)message, (long)sizeof message - 1);
    __builtin_trap();
}

/* What a thread's cell calls in place of a function that reads its return address
   (FFH_ATTACH_AS_CALLER), with the call's arguments (integers, at most four: the loader's
   dlopen, dlmopen, dlsym, dlvsym): its own return address is the cell's thunk, which names the
   side-stack frame that holds the function and the real return address; the function is called
   through a `ret` in the real caller's object, and returns here, then to the thunk. The search
   for that `ret` lists the loaded objects: the library's own work. */
__attribute__((visibility("hidden"))) uintptr_t ffh_attach_call_as_caller(uintptr_t a, uintptr_t b, uintptr_t c,
                                                                         uintptr_t d) {
    uint64_t thunk = (uint64_t)(uintptr_t)__builtin_return_address(0);
    ffh_thread *thread = ffh_thread_current();
    ffh_side *side = thread ? thread->side : NULL;
    if (!side) ffh_attach_lost();
    uint64_t offset = thunk - ffh_thunk(side, 0);
    if (offset / FFH_THUNK_CELL >= FFH_ATTACH_DEPTH || !ffh_is_thunk(side, offset / FFH_THUNK_CELL, thunk)) {
        ffh_attach_lost();
    }
    const ffh_side_frame *frame = &side->frames[offset / FFH_THUNK_CELL];
    uintptr_t function = (uintptr_t)frame->function;
    int32_t was = ffh_thread_begin_work(thread);
    const void *through = ffh_return_site((uintptr_t)frame->ret);
    thread->busy = was;
    if (!through) return ((uintptr_t (*)(uintptr_t, uintptr_t, uintptr_t, uintptr_t))function)(a, b, c, d);
    return ffh_call_through((const void *)function, through, a, b, c, d);
}

/* Runs the leave block of a call through `record` made at `epoch`. */
static inline __attribute__((always_inline)) void ffh_attach_leave_blocks(ffh_thread *thread, ffh_attach *record,
                                                                         uintptr_t epoch,
                                                                         ffh_attach_leave_frame *frame) {
    ffh_window window;
    int outermost = ffh_attach_begin(thread, &window);
    uintptr_t state = __atomic_load_n(&record->state, __ATOMIC_ACQUIRE);
    /* (Read again after the state: the flags that go with it, when the epoch holds.) */
    uintptr_t flags = __atomic_load_n(&record->flags, __ATOMIC_ACQUIRE);
    ffh_attach_dispatch dispatch = __atomic_load_n(&ffh_attach_dispatch_function, __ATOMIC_ACQUIRE);
    if (state && dispatch && __atomic_load_n(&record->epoch, __ATOMIC_ACQUIRE) == epoch) {
        ffh_attach_run(thread, dispatch, state, flags, frame, 1);
    }
    ffh_attach_end(thread, &window, outermost);
}

/* Called by ffh_attach_return; returns the real return address. */
FFH_ATTACH_TEXT __attribute__((visibility("hidden"))) uintptr_t ffh_attach_leave(ffh_attach_leave_frame *frame) {
    ffh_thread *thread = ffh_current_thread;
    ffh_side *side = thread ? thread->side : NULL;
    uint64_t index = frame->index;
    uint64_t sp = (uint64_t)(uintptr_t)frame + sizeof(ffh_attach_leave_frame) - 8;
    if (!side || index >= FFH_ATTACH_DEPTH || side->frames[index].sp != sp) ffh_attach_lost();
    const ffh_side_frame *own = &side->frames[index];
    uint64_t ret = own->ret;
    frame->returnAddress = ret;
    frame->sp = sp;
    frame->scratch = own->scratch;
    frame->function = own->function;
    frame->thread = (uint64_t)(uint32_t)thread->tid;
    ffh_attach *record = own->record;
    uintptr_t epoch = own->epoch;
    /* Frames above this one belong to calls a longjmp left: they go with it. */
    uint64_t depth = side->depth & ~FFH_SIDE_FILLING;
    if (depth > index + 1) __atomic_fetch_add(&ffh_attach_abandoned, depth - index - 1, __ATOMIC_RELAXED);
    __asm__ __volatile__("" ::: "memory");
    side->depth = index | own->below;
    __asm__ __volatile__("" ::: "memory");
    uintptr_t flags = __atomic_load_n(&record->flags, __ATOMIC_ACQUIRE);
    if (__builtin_expect(thread->busy | (thread->attach_block & !(flags & FFH_ATTACH_REENTERS)), 0)) {
        /* A signal handler's call that interrupted the library's work runs its leave block as
           it ran its enter block (ffh_attach_enter_in_work). */
        if (!ffh_attach_interrupts_work(thread, flags, sp)) return ret;
        int32_t work = thread->busy, interrupted = thread->work_interrupted;
        thread->busy = 0;
        thread->work_interrupted = 1;
        ffh_attach_leave_blocks(thread, record, epoch, frame);
        thread->work_interrupted = interrupted;
        thread->busy = work;
        return ret;
    }
    ffh_attach_leave_blocks(thread, record, epoch, frame);
    return ret;
}

void ffh_attach_write_stub(void *stub, ffh_attach *record) {
    ffh_write_trampoline(stub, record, (const void *)&ffh_attach_entry);
}

void ffh_attach_write_stub_preserving(void *stub, ffh_attach *record) {
    unsigned char code[FFH_ATTACH_STUB_SIZE];
    uint64_t recordAddress = (uint64_t)(uintptr_t)record;
    uint64_t entry = (uint64_t)(uintptr_t)&ffh_attach_entry_preserving;
    static const unsigned char endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
    memset(code, 0xcc, sizeof code); /* int3 after the jump */
    memcpy(code, endbr64, 4);
    code[4] = 0x41; /* push %r11 */
    code[5] = 0x53;
    code[6] = 0x49; /* movabs $record, %r11 */
    code[7] = 0xbb;
    memcpy(code + 8, &recordAddress, 8);
    code[16] = 0x41; /* push %r11 */
    code[17] = 0x53;
    code[18] = 0x49; /* movabs $ffh_attach_entry_preserving, %r11 */
    code[19] = 0xbb;
    memcpy(code + 20, &entry, 8);
    code[28] = 0x41; /* jmp *%r11 */
    code[29] = 0xff;
    code[30] = 0xe3;
    memcpy(stub, code, sizeof code);
}

uintptr_t ffh_attach_stub_original(uintptr_t code) {
    uintptr_t words[4];
    for (int index = 0; index < 4; index++) {
        if (ffh_guarded_load((const void *)(code + 8 * (uintptr_t)index), &words[index]) != 0) return 0;
    }
    unsigned char bytes[32];
    memcpy(bytes, words, sizeof bytes);
    uint64_t target, record;
    /* endbr64; movabs $record, %r10; movabs $ffh_attach_entry, %r11 (ffh_write_trampoline) */
    static const unsigned char head[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x49, 0xba};
    /* endbr64; push %r11; movabs $record, %r11; push %r11; movabs $ffh_attach_entry_preserving,
       %r11 (ffh_attach_write_stub_preserving) */
    static const unsigned char preserving[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x53, 0x49, 0xbb};
    if (memcmp(bytes, head, sizeof head) == 0 && bytes[14] == 0x49 && bytes[15] == 0xbb) {
        memcpy(&target, bytes + 16, 8);
        if (target != (uint64_t)(uintptr_t)&ffh_attach_entry) return 0;
        memcpy(&record, bytes + 6, 8);
    } else if (memcmp(bytes, preserving, sizeof preserving) == 0 && bytes[16] == 0x41 && bytes[17] == 0x53 &&
               bytes[18] == 0x49 && bytes[19] == 0xbb) {
        memcpy(&target, bytes + 20, 8);
        if (target != (uint64_t)(uintptr_t)&ffh_attach_entry_preserving) return 0;
        memcpy(&record, bytes + 8, 8);
    } else {
        return 0;
    }
    return __atomic_load_n(&((const ffh_attach *)(uintptr_t)record)->original, __ATOMIC_ACQUIRE);
}

uint64_t ffh_attach_depth(void) {
    ffh_thread *thread = ffh_current_thread;
    ffh_side *side = thread ? thread->side : NULL;
    return side ? side->depth & ~FFH_SIDE_FILLING : 0;
}

int ffh_attach_is_return_thunk(uintptr_t address) {
    ffh_thread *thread = ffh_current_thread;
    ffh_side *side = thread ? thread->side : NULL;
    if (!side) return 0;
    uint64_t first = ffh_thunk(side, 0);
    if (address < first || address > ffh_thunk_preserving(side, FFH_ATTACH_DEPTH - 1)) return 0;
    return ffh_is_thunk(side, (address - first) / FFH_THUNK_CELL, address);
}

static void ffh_attach_thread_released(ffh_thread *thread) {
    ffh_side *side = thread->side;
    if (side) side->depth = 0;
}

#else

void ffh_attach_setup(ffh_attach_dispatch dispatch) { (void)dispatch; }
int ffh_attach_available(void) { return 0; }
int ffh_attach_vector_width(void) { return 16; }
int ffh_attach_set_vector_width(int width) {
    (void)width;
    return 16;
}
uint64_t ffh_attach_skipped_leaves(void) { return 0; }
uint64_t ffh_attach_abandoned_frames(void) { return 0; }
uint64_t ffh_attach_passed_calls(void) { return 0; }
uint64_t ffh_attach_passed_library_calls(void) { return 0; }
uint64_t ffh_attach_passed_program_calls(void) { return 0; }
uint64_t ffh_attach_depth(void) { return 0; }
int ffh_attach_is_return_thunk(uintptr_t address) {
    (void)address;
    return 0;
}
void ffh_attach_write_stub(void *stub, ffh_attach *record) {
    (void)stub;
    (void)record;
}

void ffh_attach_write_stub_preserving(void *stub, ffh_attach *record) {
    (void)stub;
    (void)record;
}

uintptr_t ffh_attach_stub_original(uintptr_t code) {
    (void)code;
    return 0;
}

#endif
