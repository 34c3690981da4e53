#define _GNU_SOURCE
#include "CTracerSupport.h"

#include <elf.h>
#include <link.h>
#include <stdlib.h>

// Lazily bound import entries, for a joined process's leave: an attach binds such an entry
// to its function first (the loader's resolver would otherwise overwrite the hook), and the
// removal leaves it bound; the leave puts back the PLT address it held before the join, so
// that the process's import tables are byte for byte as they were.

/* What the walk needs of one object: its JUMP_SLOT relocations and where its code, its
   writable data and its RELRO range are. */
typedef struct {
    uintptr_t base;
    const ElfW(Sym) *symbols;
    const char *strings;
    const ElfW(Rela) *plt;
    size_t plt_size;
    const ElfW(Phdr) *segments;
    ElfW(Half) count;
} fht_lazy_object;

/* The loader rewrites the address entries of a writable dynamic section to run-time
   addresses; a read-only one (the vDSO's) keeps link-time ones. */
static uintptr_t fht_lazy_address(uintptr_t base, uintptr_t value) { return value < base ? value + base : value; }

/* Whether `address` is in a loadable segment of the object with all of `flags` (PF_X, PF_W),
   and, for PF_W, outside its RELRO range (made read-only after relocation). */
static int fht_lazy_in(const fht_lazy_object *object, uintptr_t address, ElfW(Word) flags) {
    int inside = 0;
    for (ElfW(Half) index = 0; index < object->count; index++) {
        const ElfW(Phdr) *segment = &object->segments[index];
        uintptr_t start = object->base + segment->p_vaddr;
        if (address < start || address >= start + segment->p_memsz) continue;
        if (segment->p_type == PT_GNU_RELRO) return 0;
        if (segment->p_type == PT_LOAD && (segment->p_flags & flags) == flags) inside = 1;
    }
    return inside;
}

/* Reads the object's dynamic section; 0 when it has no JUMP_SLOT relocations to look at. */
static int fht_lazy_read(struct dl_phdr_info *info, fht_lazy_object *object) {
    *object = (fht_lazy_object){.base = (uintptr_t)info->dlpi_addr, .segments = info->dlpi_phdr,
                                .count = info->dlpi_phnum};
    const ElfW(Dyn) *entry = NULL;
    for (ElfW(Half) index = 0; index < info->dlpi_phnum; index++) {
        if (info->dlpi_phdr[index].p_type == PT_DYNAMIC) {
            entry = (const ElfW(Dyn) *)(object->base + info->dlpi_phdr[index].p_vaddr);
        }
    }
    if (!entry) return 0;
    int rela = 1;
    for (; entry->d_tag != DT_NULL; entry++) {
        uintptr_t value = entry->d_un.d_ptr;
        switch (entry->d_tag) {
        case DT_SYMTAB: object->symbols = (const ElfW(Sym) *)fht_lazy_address(object->base, value); break;
        case DT_STRTAB: object->strings = (const char *)fht_lazy_address(object->base, value); break;
        case DT_JMPREL: object->plt = (const ElfW(Rela) *)fht_lazy_address(object->base, value); break;
        case DT_PLTRELSZ: object->plt_size = entry->d_un.d_val; break;
        case DT_PLTREL: rela = entry->d_un.d_val == DT_RELA; break;
        default: break;
        }
    }
    return rela && object->symbols && object->strings && object->plt && object->plt_size > 0;
}

/* Calls `each` for every JUMP_SLOT entry of the object in writable memory outside RELRO,
   with whether its value leads into the object's own code (not bound yet). */
typedef void (*fht_lazy_each)(void *context, const fht_lazy_object *object, const char *symbol,
                              uintptr_t *slot, int lazy);

typedef struct {
    fht_lazy_each each;
    void *context;
} fht_lazy_walk;

static int fht_lazy_visit(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    fht_lazy_walk *walk = data;
    fht_lazy_object object;
    if (!fht_lazy_read(info, &object)) return 0;
    for (size_t offset = 0; offset + sizeof(ElfW(Rela)) <= object.plt_size; offset += sizeof(ElfW(Rela))) {
        const ElfW(Rela) *relocation = (const ElfW(Rela) *)((const char *)object.plt + offset);
        if (ELF64_R_TYPE(relocation->r_info) != R_X86_64_JUMP_SLOT || ELF64_R_SYM(relocation->r_info) == 0) continue;
        uintptr_t *slot = (uintptr_t *)(object.base + relocation->r_offset);
        if (!fht_lazy_in(&object, (uintptr_t)slot, PF_W)) continue;
        uintptr_t value = __atomic_load_n(slot, __ATOMIC_RELAXED);
        const char *symbol = object.strings + object.symbols[ELF64_R_SYM(relocation->r_info)].st_name;
        walk->each(walk->context, &object, symbol, slot, fht_lazy_in(&object, value, PF_X));
    }
    return 0;
}

typedef struct {
    fht_lazy_visitor visit;
    void *context;
} fht_lazy_report;

static void fht_lazy_report_one(void *context, const fht_lazy_object *object, const char *symbol, uintptr_t *slot,
                                int lazy) {
    (void)object;
    fht_lazy_report *report = context;
    if (lazy) report->visit(report->context, symbol, (uintptr_t)slot, __atomic_load_n(slot, __ATOMIC_RELAXED));
}

void fht_lazy_entries(fht_lazy_visitor visit, void *context) {
    fht_lazy_report report = {visit, context};
    fht_lazy_walk walk = {fht_lazy_report_one, &report};
    dl_iterate_phdr(fht_lazy_visit, &walk);
}

/* The code ranges of every loaded object: a bound entry leads into one of them, a hook's
   entry does not (its closure is in memory of its own). */
typedef struct {
    uintptr_t (*ranges)[2];
    size_t count, capacity;
} fht_code_ranges;

static int fht_code_visit(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    fht_code_ranges *code = data;
    for (ElfW(Half) index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *segment = &info->dlpi_phdr[index];
        if (segment->p_type != PT_LOAD || !(segment->p_flags & PF_X) || code->count == code->capacity) continue;
        uintptr_t start = (uintptr_t)info->dlpi_addr + segment->p_vaddr;
        code->ranges[code->count][0] = start;
        code->ranges[code->count][1] = start + segment->p_memsz;
        code->count++;
    }
    return 0;
}

static int fht_is_code(const fht_code_ranges *code, uintptr_t address) {
    for (size_t index = 0; index < code->count; index++) {
        if (address >= code->ranges[index][0] && address < code->ranges[index][1]) return 1;
    }
    return 0;
}

typedef struct {
    const uintptr_t *slots;
    const uintptr_t *values;
    size_t count;
    size_t restored;
    fht_code_ranges code;
} fht_lazy_restore;

static void fht_lazy_restore_one(void *context, const fht_lazy_object *object, const char *symbol,
                                 uintptr_t *slot, int lazy) {
    (void)symbol;
    (void)lazy; /* an entry bound to a function of its own object also leads into its code */
    fht_lazy_restore *restore = context;
    /* The slots are sorted: a binary search. */
    size_t low = 0, high = restore->count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (restore->slots[middle] < (uintptr_t)slot) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    if (low == restore->count || restore->slots[low] != (uintptr_t)slot) return;
    uintptr_t value = restore->values[low];
    /* The same object still: the old value leads into its code. */
    if (!fht_lazy_in(object, value, PF_X)) return;
    uintptr_t bound = __atomic_load_n(slot, __ATOMIC_RELAXED);
    /* Bound to a function, not holding a hook (of someone else's) nor the old value already. */
    if (bound == value || !fht_is_code(&restore->code, bound)) return;
    if (__atomic_compare_exchange_n(slot, &bound, value, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) restore->restored++;
}

size_t fht_restore_lazy_entries(const uintptr_t *slots, const uintptr_t *values, size_t count) {
    enum { CAPACITY = 8192 };
    fht_lazy_restore restore = {slots, values, count, 0, {malloc(CAPACITY * sizeof(uintptr_t[2])), 0, CAPACITY}};
    if (!restore.code.ranges) return 0;
    dl_iterate_phdr(fht_code_visit, &restore.code);
    fht_lazy_walk walk = {fht_lazy_restore_one, &restore};
    dl_iterate_phdr(fht_lazy_visit, &walk);
    free(restore.code.ranges);
    return restore.restored;
}
