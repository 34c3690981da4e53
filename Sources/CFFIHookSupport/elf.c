#define _GNU_SOURCE
#include "ffh_elf.h"

#include "ffh_gnu_hash.h"
#include "ffh_memory.h"
#include "ffh_return_site.h"
#include "ffh_syscall.h"

#include <dlfcn.h>
#include <errno.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>

#if defined(__x86_64__)
#define FFH_ELF_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define FFH_ELF_R_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define FFH_ELF_R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define FFH_ELF_R_GLOB_DAT R_AARCH64_GLOB_DAT
#else
#define FFH_ELF_R_JUMP_SLOT (-1)
#define FFH_ELF_R_GLOB_DAT (-1)
#endif

// MARK: - Loaded objects

typedef struct {
    ffh_elf_object *objects;
    size_t count;
    size_t capacity;
    int failed;
} ffh_elf_snapshot;

/* Runs with the loader's list locked: copies, never calls back into Swift. */
static int ffh_elf_collect(struct dl_phdr_info *info, size_t size, void *context) {
    (void)size;
    ffh_elf_snapshot *snapshot = context;
    if (snapshot->count == snapshot->capacity) {
        size_t capacity = snapshot->capacity ? snapshot->capacity * 2 : 32;
        ffh_elf_object *grown = realloc(snapshot->objects, capacity * sizeof *grown);
        if (!grown) {
            snapshot->failed = 1;
            return 1;
        }
        snapshot->objects = grown;
        snapshot->capacity = capacity;
    }
    char *path = strdup(info->dlpi_name ? info->dlpi_name : "");
    if (!path) {
        snapshot->failed = 1;
        return 1;
    }
    uintptr_t lowest = UINTPTR_MAX, highest = 0;
    for (ElfW(Half) index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        if (header->p_type != PT_LOAD) continue;
        uintptr_t start = (uintptr_t)info->dlpi_addr + header->p_vaddr;
        if (start < lowest) lowest = start;
        if (start + header->p_memsz > highest) highest = start + header->p_memsz;
    }
    snapshot->objects[snapshot->count++] = (ffh_elf_object){
        .path = path,
        .base = (uintptr_t)info->dlpi_addr,
        .program_headers = info->dlpi_phdr,
        .program_header_count = info->dlpi_phnum,
        .lowest = lowest,
        .highest = highest,
    };
    return 0;
}

ffh_elf_object *ffh_elf_objects(size_t *count) {
    ffh_elf_snapshot snapshot = {0};
    dl_iterate_phdr(ffh_elf_collect, &snapshot);
    if (snapshot.failed) {
        ffh_elf_free_objects(snapshot.objects, snapshot.count);
        *count = 0;
        return NULL;
    }
    *count = snapshot.count;
    return snapshot.objects;
}

/* Reads the loader's count of unloads (dlpi_subs) from the first object it lists. */
static int ffh_elf_read_unloads(struct dl_phdr_info *info, size_t size, void *context) {
    uint64_t *unloads = context;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) *unloads = info->dlpi_subs;
    return 1;
}

uint64_t ffh_elf_unloads(void) {
    /* A loader that does not count gets a number no other call returns: every walk then
       looks at every object. */
    static uint64_t uncounted = 0;
    uint64_t unloads = UINT64_MAX;
    dl_iterate_phdr(ffh_elf_read_unloads, &unloads);
    if (unloads == UINT64_MAX) return (1ull << 63) | __atomic_add_fetch(&uncounted, 1, __ATOMIC_RELAXED);
    return unloads;
}

int ffh_elf_in_object(const void *address) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
    struct dl_find_object found;
    return _dl_find_object((void *)(uintptr_t)address, &found) == 0;
#else
    (void)address;
    return -1;
#endif
}

void ffh_elf_free_objects(ffh_elf_object *objects, size_t count) {
    for (size_t index = 0; index < count; index++) free(objects[index].path);
    free(objects);
}

void *ffh_elf_pin(const ffh_elf_object *object) {
    const char *path = object->path[0] ? object->path : NULL;
    void *handle = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle) return NULL;
    struct link_map *map = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || (uintptr_t)map->l_addr != object->base) {
        dlclose(handle);
        return NULL;
    }
    return handle;
}

void ffh_elf_unpin(void *handle) {
    if (handle) dlclose(handle);
}

int ffh_elf_settled_object(uintptr_t address, ffh_elf_instance *instance) {
    struct dl_find_object found;
    /* The range the loader gives an object may begin inside a page: glibc's for a program
       whose writable segment follows a gap after its code begins at that segment's address,
       which need not be a page's start. Asked of a page's start (the callers ask of pages),
       the lookup then finds nothing there; the page's last byte is the object's (an object's
       pages hold no other object's bytes). */
    if (_dl_find_object((void *)address, &found) != 0 || !found.dlfo_link_map) {
        uintptr_t last = address | 4095;
        if (last == address || _dl_find_object((void *)last, &found) != 0 || !found.dlfo_link_map) return 0;
    }
    instance->map = (uintptr_t)found.dlfo_link_map;
    instance->start = (uintptr_t)found.dlfo_map_start;
    instance->end = (uintptr_t)found.dlfo_map_end;
    return 1;
}

// MARK: - Dynamic section

/* The loader rewrites the address entries of a writable dynamic section to run-time
   addresses; a read-only one (the vDSO's, or under other loaders) keeps link-time ones. */
static uintptr_t ffh_elf_address(const ffh_elf_object *object, uintptr_t value) {
    return value < object->base ? value + object->base : value;
}

typedef struct {
    const ElfW(Sym) *symbols;
    const char *strings;
    const ElfW(Rela) *plt;
    size_t plt_size;
    int plt_is_rela;
    const ElfW(Rela) *rela;
    size_t rela_size;
    size_t rela_entry;
    size_t soname;
    int has_soname;
    const ElfW(Half) *versions;
    const char *needed_versions;
    size_t needed_version_count;
    const char *defined_versions;
    size_t defined_version_count;
    const uint32_t *gnu_hash;
    const uint32_t *sysv_hash;
} ffh_elf_dynamic;

static int ffh_elf_read_dynamic(const ffh_elf_object *object, ffh_elf_dynamic *out) {
    memset(out, 0, sizeof *out);
    out->plt_is_rela = 1;
    out->rela_entry = sizeof(ElfW(Rela));
    const ElfW(Phdr) *headers = object->program_headers;
    const ElfW(Dyn) *dynamic = NULL;
    for (uint16_t index = 0; index < object->program_header_count; index++) {
        if (headers[index].p_type == PT_DYNAMIC) {
            dynamic = (const ElfW(Dyn) *)(object->base + headers[index].p_vaddr);
        }
    }
    if (!dynamic) return 0;
    for (; dynamic->d_tag != DT_NULL; dynamic++) {
        uintptr_t value = dynamic->d_un.d_ptr;
        switch (dynamic->d_tag) {
        case DT_SYMTAB: out->symbols = (const ElfW(Sym) *)ffh_elf_address(object, value); break;
        case DT_STRTAB: out->strings = (const char *)ffh_elf_address(object, value); break;
        case DT_JMPREL: out->plt = (const ElfW(Rela) *)ffh_elf_address(object, value); break;
        case DT_PLTRELSZ: out->plt_size = dynamic->d_un.d_val; break;
        case DT_PLTREL: out->plt_is_rela = dynamic->d_un.d_val == DT_RELA; break;
        case DT_RELA: out->rela = (const ElfW(Rela) *)ffh_elf_address(object, value); break;
        case DT_RELASZ: out->rela_size = dynamic->d_un.d_val; break;
        case DT_RELAENT: out->rela_entry = dynamic->d_un.d_val ? dynamic->d_un.d_val : sizeof(ElfW(Rela)); break;
        case DT_SONAME:
            out->soname = dynamic->d_un.d_val;
            out->has_soname = 1;
            break;
        case DT_VERSYM: out->versions = (const ElfW(Half) *)ffh_elf_address(object, value); break;
        case DT_VERNEED: out->needed_versions = (const char *)ffh_elf_address(object, value); break;
        case DT_VERNEEDNUM: out->needed_version_count = dynamic->d_un.d_val; break;
        case DT_VERDEF: out->defined_versions = (const char *)ffh_elf_address(object, value); break;
        case DT_VERDEFNUM: out->defined_version_count = dynamic->d_un.d_val; break;
        case DT_GNU_HASH: out->gnu_hash = (const uint32_t *)ffh_elf_address(object, value); break;
        case DT_HASH: out->sysv_hash = (const uint32_t *)ffh_elf_address(object, value); break;
        default: break;
        }
    }
    return out->symbols && out->strings;
}

const char *ffh_elf_soname(const ffh_elf_object *object) {
    ffh_elf_dynamic dynamic;
    if (!ffh_elf_read_dynamic(object, &dynamic) || !dynamic.has_soname) return NULL;
    return dynamic.strings + dynamic.soname;
}

/* The version the dynamic symbol at `index` asks for (`GLIBC_2.2.5`), from DT_VERSYM and
   the version needs (or definitions, for a symbol the object also defines); NULL when the
   symbol is unversioned. */
static const char *ffh_elf_version(const ffh_elf_dynamic *dynamic, size_t index) {
    if (!dynamic->versions) return NULL;
    ElfW(Half) version = dynamic->versions[index] & 0x7fff;
    if (version <= 1) return NULL; /* VER_NDX_LOCAL, VER_NDX_GLOBAL */
    const char *need = dynamic->needed_versions;
    for (size_t count = 0; need && count < dynamic->needed_version_count; count++) {
        const ElfW(Verneed) *needed = (const ElfW(Verneed) *)need;
        const char *aux = need + needed->vn_aux;
        for (ElfW(Half) auxIndex = 0; auxIndex < needed->vn_cnt; auxIndex++) {
            const ElfW(Vernaux) *entry = (const ElfW(Vernaux) *)aux;
            if (entry->vna_other == version) return dynamic->strings + entry->vna_name;
            if (entry->vna_next == 0) break;
            aux += entry->vna_next;
        }
        if (needed->vn_next == 0) break;
        need += needed->vn_next;
    }
    const char *definition = dynamic->defined_versions;
    for (size_t count = 0; definition && count < dynamic->defined_version_count; count++) {
        const ElfW(Verdef) *defined = (const ElfW(Verdef) *)definition;
        if (defined->vd_ndx == version && defined->vd_cnt > 0) {
            const ElfW(Verdaux) *name = (const ElfW(Verdaux) *)(definition + defined->vd_aux);
            return dynamic->strings + name->vda_name;
        }
        if (defined->vd_next == 0) break;
        definition += defined->vd_next;
    }
    return NULL;
}

/* Whether a GLOB_DAT relocation of symbol `index` takes the address of a function the object
   defines itself: then its entry is no import. It holds the address the object's code takes of
   its own function, which the object compares with the addresses its data holds (filled by
   R_X86_64_64 relocations, which no hook changes): OpenSSL's CRYPTO_malloc calls its allocator
   when that is not CRYPTO_malloc, so a hook in the entry made it call itself for ever. The
   object's calls to its own function go through its PLT (JUMP_SLOT), or are bound inside it;
   only code built with -fno-plt calls through such an entry. It is left out of every list of
   entries, and no hook goes in it. */
static int ffh_elf_takes_own_address(const ffh_elf_dynamic *dynamic, size_t index) {
    return dynamic->symbols[index].st_shndx != SHN_UNDEF;
}

/* Appends the entries of one RELA table whose relocation is a JUMP_SLOT or GLOB_DAT of
   `symbol`; returns the new total. */
static size_t ffh_elf_scan(
    const ffh_elf_object *object, const ffh_elf_dynamic *dynamic, const ElfW(Rela) *table, size_t size,
    size_t entry_size, const char *symbol, ffh_elf_entry *entries, size_t capacity, size_t found) {
    if (!table || entry_size == 0) return found;
    for (size_t offset = 0; offset + entry_size <= size; offset += entry_size) {
        const ElfW(Rela) *relocation = (const ElfW(Rela) *)((const char *)table + offset);
        long type = (long)ELF64_R_TYPE(relocation->r_info);
        ffh_elf_kind kind;
        if (type == FFH_ELF_R_JUMP_SLOT) {
            kind = FFH_ELF_JUMP_SLOT;
        } else if (type == FFH_ELF_R_GLOB_DAT) {
            kind = FFH_ELF_GLOBAL_DATA;
        } else {
            continue;
        }
        size_t index = ELF64_R_SYM(relocation->r_info);
        if (index == 0) continue;
        if (kind == FFH_ELF_GLOBAL_DATA && ffh_elf_takes_own_address(dynamic, index)) continue;
        const char *name = dynamic->strings + dynamic->symbols[index].st_name;
        if (symbol && strcmp(name, symbol) != 0) continue;
        if (found < capacity) {
            entries[found] = (ffh_elf_entry){.slot = object->base + relocation->r_offset,
                                             .kind = kind,
                                             .version = ffh_elf_version(dynamic, index),
                                             .name = name};
        }
        found++;
    }
    return found;
}

size_t ffh_elf_find_entries(
    const ffh_elf_object *object, const char *symbol, ffh_elf_entry *entries, size_t capacity) {
    ffh_elf_dynamic dynamic;
    if (!ffh_elf_read_dynamic(object, &dynamic)) return 0;
    size_t found = 0;
    if (dynamic.plt_is_rela) {
        found = ffh_elf_scan(
            object, &dynamic, dynamic.plt, dynamic.plt_size, sizeof(ElfW(Rela)), symbol, entries, capacity, found);
    }
    return ffh_elf_scan(
        object, &dynamic, dynamic.rela, dynamic.rela_size, dynamic.rela_entry, symbol, entries, capacity, found);
}

/* One indexed entry: the entry without its version (looked up only for the entries found), the
   symbol's index in the dynamic symbol table, its name's hash and the next entry with the same
   name. */
typedef struct {
    uintptr_t slot;
    const char *name;
    uint32_t hash;
    uint32_t symbol;
    int32_t next;
    uint8_t kind;
} ffh_elf_indexed;

struct ffh_elf_index {
    ffh_elf_dynamic dynamic;
    ffh_elf_indexed *entries;
    size_t count;
    /* Open addressing, a power of two: the first entry of each name, or -1. */
    int32_t *buckets;
    size_t mask;
};


/* Which entries an index keeps: those whose name's hash has its bit in a Bloom filter (see
   ffh_elf_index_make_filtered), those named by one of a few names (ffh_elf_index_make_named),
   or all (neither given). */
typedef struct {
    const uint64_t *filter;
    size_t words;
    const char *const *names;
    size_t name_count;
} ffh_elf_keep;

/* Whether a name's hash may be one of the names a filter was made of (see ffh_elf_index_make). */
static int ffh_elf_filter_has(const uint64_t *filter, size_t words, uint32_t hash) {
    return !filter || ((filter[(hash >> 6) & (words - 1)] >> (hash & 63)) & 1);
}

/* Whether `name` is one of the names `keep` lists. */
static int ffh_elf_keep_names(const ffh_elf_keep *keep, const char *name) {
    for (size_t place = 0; place < keep->name_count; place++) {
        const char *kept = keep->names[place];
        if (kept && kept[0] == name[0] && strcmp(kept, name) == 0) return 1;
    }
    return 0;
}

/* Appends one RELA table's JUMP_SLOT and GLOB_DAT entries to the index's list (counting them
   only when the list is NULL: all of them, or with names to keep those named); keeping only
   those `keep` lets through; returns the new count. */
static size_t ffh_elf_index_scan(const ffh_elf_object *object, const ffh_elf_dynamic *dynamic, const ElfW(Rela) *table,
                                 size_t size, size_t entry_size, ffh_elf_indexed *entries, size_t count,
                                 const ffh_elf_keep *keep) {
    if (!table || entry_size == 0) return count;
    for (size_t offset = 0; offset + entry_size <= size; offset += entry_size) {
        const ElfW(Rela) *relocation = (const ElfW(Rela) *)((const char *)table + offset);
        long type = (long)ELF64_R_TYPE(relocation->r_info);
        if (type != FFH_ELF_R_JUMP_SLOT && type != FFH_ELF_R_GLOB_DAT) continue;
        size_t index = ELF64_R_SYM(relocation->r_info);
        if (index == 0 || index > UINT32_MAX) continue;
        if (type == FFH_ELF_R_GLOB_DAT && ffh_elf_takes_own_address(dynamic, index)) continue;
        if (keep->names && !ffh_elf_keep_names(keep, dynamic->strings + dynamic->symbols[index].st_name)) continue;
        if (entries) {
            const char *name = dynamic->strings + dynamic->symbols[index].st_name;
            uint32_t hash = ffh_gnu_hash(name);
            if (!ffh_elf_filter_has(keep->filter, keep->words, hash)) continue;
            entries[count] = (ffh_elf_indexed){
                .slot = object->base + relocation->r_offset,
                .name = name,
                .hash = hash,
                .symbol = (uint32_t)index,
                .next = -1,
                .kind = type == FFH_ELF_R_JUMP_SLOT ? FFH_ELF_JUMP_SLOT : FFH_ELF_GLOBAL_DATA,
            };
        }
        count++;
    }
    return count;
}

ffh_elf_index *ffh_elf_index_make(const ffh_elf_object *object) { return ffh_elf_index_make_filtered(object, NULL, 0); }

static ffh_elf_index *ffh_elf_index_make_keeping(const ffh_elf_object *object, const ffh_elf_keep *keep);

ffh_elf_index *ffh_elf_index_make_filtered(const ffh_elf_object *object, const uint64_t *filter, size_t words) {
    if (words == 0 || (words & (words - 1)) != 0) filter = NULL;
    ffh_elf_keep keep = {.filter = filter, .words = words, .names = NULL, .name_count = 0};
    return ffh_elf_index_make_keeping(object, &keep);
}

ffh_elf_index *ffh_elf_index_make_named(const ffh_elf_object *object, const char *const *names, size_t count) {
    /* (With no names, none is kept: an empty list is not "every name".) */
    static const char *const none[1] = {NULL};
    ffh_elf_keep keep = {.filter = NULL, .words = 0, .names = names ? names : none, .name_count = names ? count : 0};
    return ffh_elf_index_make_keeping(object, &keep);
}

/* Makes an index of the entries `keep` lets through. */
static ffh_elf_index *ffh_elf_index_make_keeping(const ffh_elf_object *object, const ffh_elf_keep *keep) {
    /* Field by field: a compiler turns malloc and a memset of all of it into calloc, which the
       library does not call (every function it calls is one a user may hook). */
    ffh_elf_index *index = malloc(sizeof *index);
    if (!index) return NULL;
    index->entries = NULL;
    index->count = 0;
    index->buckets = NULL;
    index->mask = 0;
    if (!ffh_elf_read_dynamic(object, &index->dynamic)) return index;
    const ffh_elf_dynamic *dynamic = &index->dynamic;
    size_t count = 0;
    for (int pass = 0; pass < 2; pass++) {
        count = 0;
        if (dynamic->plt_is_rela) {
            count = ffh_elf_index_scan(object, dynamic, dynamic->plt, dynamic->plt_size, sizeof(ElfW(Rela)),
                                       index->entries, count, keep);
        }
        count = ffh_elf_index_scan(object, dynamic, dynamic->rela, dynamic->rela_size, dynamic->rela_entry,
                                   index->entries, count, keep);
        if (pass == 1 || count == 0 || count > INT32_MAX / 2) break;
        index->entries = malloc(count * sizeof *index->entries);
        if (!index->entries) {
            free(index);
            return NULL;
        }
    }
    if (index->entries && count == 0) {
        /* The filter kept none. */
        free(index->entries);
        index->entries = NULL;
    }
    if (!index->entries) return index;
    size_t buckets = 16;
    while (buckets < count * 2) buckets *= 2;
    index->buckets = malloc(buckets * sizeof *index->buckets);
    if (!index->buckets) {
        ffh_elf_index_free(index);
        return NULL;
    }
    memset(index->buckets, 0xff, buckets * sizeof *index->buckets);
    index->mask = buckets - 1;
    index->count = count;
    /* Backwards, so that each name's list ends up in the tables' order. */
    for (size_t position = count; position-- > 0;) {
        ffh_elf_indexed *entry = &index->entries[position];
        for (size_t bucket = entry->hash & index->mask;; bucket = (bucket + 1) & index->mask) {
            int32_t head = index->buckets[bucket];
            if (head < 0) {
                index->buckets[bucket] = (int32_t)position;
                break;
            }
            const ffh_elf_indexed *first = &index->entries[head];
            if (first->hash == entry->hash && strcmp(first->name, entry->name) == 0) {
                entry->next = head;
                index->buckets[bucket] = (int32_t)position;
                break;
            }
        }
    }
    return index;
}

uint32_t ffh_elf_name_hash(const char *symbol) { return ffh_gnu_hash(symbol); }

size_t ffh_elf_index_count(const ffh_elf_index *index) { return index ? index->count : 0; }

size_t ffh_elf_index_entries(const ffh_elf_index *index, size_t start, ffh_elf_entry *entries, uint32_t *hashes,
                             size_t capacity) {
    size_t copied = 0;
    for (size_t position = start; index && position < index->count && copied < capacity; position++, copied++) {
        const ffh_elf_indexed *entry = &index->entries[position];
        entries[copied] = (ffh_elf_entry){.slot = entry->slot,
                                          .kind = (ffh_elf_kind)entry->kind,
                                          .version = ffh_elf_version(&index->dynamic, entry->symbol),
                                          .name = entry->name};
        hashes[copied] = entry->hash;
    }
    return copied;
}

size_t ffh_elf_index_find(const ffh_elf_index *index, const char *symbol, uint32_t hash, ffh_elf_entry *entries,
                          size_t capacity) {
    if (!index || !index->buckets || !symbol) return 0;
    int32_t at = -1;
    for (size_t bucket = hash & index->mask;; bucket = (bucket + 1) & index->mask) {
        int32_t head = index->buckets[bucket];
        if (head < 0) return 0;
        const ffh_elf_indexed *first = &index->entries[head];
        if (first->hash == hash && strcmp(first->name, symbol) == 0) {
            at = head;
            break;
        }
    }
    size_t found = 0;
    for (; at >= 0; at = index->entries[at].next) {
        const ffh_elf_indexed *entry = &index->entries[at];
        if (found < capacity) {
            entries[found] = (ffh_elf_entry){.slot = entry->slot,
                                             .kind = (ffh_elf_kind)entry->kind,
                                             .version = ffh_elf_version(&index->dynamic, entry->symbol),
                                             .name = entry->name};
        }
        found++;
    }
    return found;
}

void ffh_elf_index_free(ffh_elf_index *index) {
    if (!index) return;
    free(index->entries);
    free(index->buckets);
    free(index);
}

// MARK: - The unwind table

/* The encodings of DWARF's exception-handling pointers (the low nibble the format, the high
   one what the value is relative to) that the table's header uses. */
enum {
    FFH_EH_UDATA4 = 0x03,
    FFH_EH_SDATA4 = 0x0b,
    FFH_EH_PCREL = 0x10,
    FFH_EH_DATAREL = 0x30,
};

size_t ffh_elf_unwind_starts(const ffh_elf_object *object, uintptr_t *starts, size_t capacity) {
    const ElfW(Phdr) *headers = object->program_headers;
    const uint8_t *table = NULL;
    size_t size = 0;
    for (uint16_t index = 0; index < object->program_header_count; index++) {
        if (headers[index].p_type == PT_GNU_EH_FRAME) {
            table = (const uint8_t *)(object->base + headers[index].p_vaddr);
            size = headers[index].p_memsz;
        }
    }
    /* The header: version 1, the encodings of the .eh_frame pointer, of the entry count and of
       the entries; the pointer (4 bytes in the linkers' encoding); the count; then the sorted
       entries, each the start of the code a description covers and the description's place,
       both 32-bit offsets from the table's first byte. */
    if (!table || size < 12 || table[0] != 1 || table[2] != FFH_EH_UDATA4 ||
        table[3] != (FFH_EH_DATAREL | FFH_EH_SDATA4) || (table[1] & 0x0f) != FFH_EH_SDATA4 ||
        (table[1] & 0x70) != FFH_EH_PCREL) {
        return 0;
    }
    uint32_t count;
    memcpy(&count, table + 8, sizeof count);
    if (count > (size - 12) / 8) return 0;
    for (uint32_t index = 0; index < count && index < capacity; index++) {
        int32_t offset;
        memcpy(&offset, table + 12 + 8 * (size_t)index, sizeof offset);
        starts[index] = (uintptr_t)table + (uintptr_t)(intptr_t)offset;
    }
    return count;
}

// MARK: - Segments

static int ffh_elf_in_segment(const ffh_elf_object *object, uintptr_t address, int type, int flag) {
    const ElfW(Phdr) *headers = object->program_headers;
    for (uint16_t index = 0; index < object->program_header_count; index++) {
        const ElfW(Phdr) *header = &headers[index];
        if (header->p_type != (ElfW(Word))type || (flag && !(header->p_flags & (ElfW(Word))flag))) continue;
        uintptr_t start = object->base + header->p_vaddr;
        if (address >= start && address - start < header->p_memsz) return 1;
    }
    return 0;
}

int ffh_elf_contains(const ffh_elf_object *object, uintptr_t address) {
    return ffh_elf_in_segment(object, address, PT_LOAD, 0);
}

int ffh_elf_is_in_code(const ffh_elf_object *object, uintptr_t address) {
    return ffh_elf_in_segment(object, address, PT_LOAD, PF_X);
}

int ffh_elf_is_writable_data(const ffh_elf_object *object, uintptr_t address) {
    return ffh_elf_in_segment(object, address, PT_LOAD, PF_W)
        && ffh_elf_in_segment(object, address + sizeof(uintptr_t) - 1, PT_LOAD, PF_W)
        && !ffh_elf_in_segment(object, address, PT_GNU_RELRO, 0)
        && !ffh_elf_in_segment(object, address + sizeof(uintptr_t) - 1, PT_GNU_RELRO, 0);
}

// MARK: - Symbols

static uint32_t ffh_elf_sysv_hash(const char *name) {
    uint32_t hash = 0;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        hash = (hash << 4) + *c;
        uint32_t high = hash & 0xf0000000;
        if (high) hash ^= high >> 24;
        hash &= ~high;
    }
    return hash;
}

/* What the loader's lookup for dlsym does with the dynamic symbol at `index` named like the
   wanted one (glibc's check_match, unversioned, DL_LOOKUP_RETURN_NEWEST): 2 when it takes it
   at once (an unversioned definition), 1 when it is a candidate (a definition of a default,
   non-hidden version; taken when it is the only one), 0 when it skips it. */
static int ffh_elf_match(const ffh_elf_dynamic *dynamic, size_t index, const char *name) {
    const ElfW(Sym) *symbol = &dynamic->symbols[index];
    unsigned type = ELF64_ST_TYPE(symbol->st_info);
    unsigned binding = ELF64_ST_BIND(symbol->st_info);
    unsigned allowed = 1u << STT_NOTYPE | 1u << STT_OBJECT | 1u << STT_FUNC | 1u << STT_COMMON | 1u << STT_TLS
        | 1u << STT_GNU_IFUNC;
    if (symbol->st_shndx == SHN_UNDEF) return 0; /* an import, or a main program's PLT address */
    if (symbol->st_value == 0 && symbol->st_shndx != SHN_ABS && type != STT_TLS) return 0;
    if (type >= 32 || !(allowed & 1u << type)) return 0;
    if (binding != STB_GLOBAL && binding != STB_WEAK && binding != STB_GNU_UNIQUE) return 0;
    if (strcmp(dynamic->strings + symbol->st_name, name) != 0) return 0;
    if (!dynamic->versions) return 2;
    ElfW(Half) version = dynamic->versions[index];
    if ((version & 0x7fff) < 2) return 2; /* VER_NDX_LOCAL, VER_NDX_GLOBAL */
    return (version & 0x8000) ? 0 : 1;
}

static void ffh_elf_fill(const ffh_elf_object *object, const ffh_elf_dynamic *dynamic, size_t index,
                         ffh_elf_symbol *out) {
    const ElfW(Sym) *symbol = &dynamic->symbols[index];
    *out = (ffh_elf_symbol){
        .name = dynamic->strings + symbol->st_name,
        /* An absolute symbol's value is an address already, as the loader takes it. */
        .address = (symbol->st_shndx == SHN_ABS ? 0 : object->base) + symbol->st_value,
        .size = symbol->st_size,
        .type = (uint8_t)ELF64_ST_TYPE(symbol->st_info),
    };
}

int ffh_elf_find_definition(const ffh_elf_object *object, const char *name, ffh_elf_symbol *symbol) {
    ffh_elf_dynamic dynamic;
    if (!ffh_elf_read_dynamic(object, &dynamic)) return 0;
    long candidate = -1;
    size_t candidates = 0;
    if (dynamic.gnu_hash) {
        ffh_gnu_hash_walk walk;
        ffh_gnu_hash_begin(&walk, dynamic.gnu_hash, ffh_gnu_hash(name));
        for (long index; (index = ffh_gnu_hash_next(&walk)) >= 0;) {
            int match = ffh_elf_match(&dynamic, (size_t)index, name);
            if (match == 2) {
                ffh_elf_fill(object, &dynamic, (size_t)index, symbol);
                return 1;
            }
            if (match == 1 && candidates++ == 0) candidate = index;
        }
    } else if (dynamic.sysv_hash) {
        /* nbucket, nchain, the buckets, the chains; index 0 ends a chain. */
        const uint32_t *table = dynamic.sysv_hash;
        uint32_t bucketCount = table[0], chainCount = table[1];
        if (bucketCount == 0) return 0;
        const uint32_t *buckets = table + 2, *chain = buckets + bucketCount;
        for (uint32_t index = buckets[ffh_elf_sysv_hash(name) % bucketCount]; index != 0 && index < chainCount;
             index = chain[index]) {
            int match = ffh_elf_match(&dynamic, index, name);
            if (match == 2) {
                ffh_elf_fill(object, &dynamic, index, symbol);
                return 1;
            }
            if (match == 1 && candidates++ == 0) candidate = index;
        }
    }
    /* Like the loader: one versioned definition and no unversioned one is taken. */
    if (candidates != 1) return 0;
    ffh_elf_fill(object, &dynamic, (size_t)candidate, symbol);
    return 1;
}

/* How many entries the dynamic symbol table has: DT_HASH's chain count, else one past the
   last symbol the GNU hash table's chains reach (symbols below its first are not in it). */
static size_t ffh_elf_symbol_count(const ffh_elf_dynamic *dynamic) {
    if (dynamic->sysv_hash) return dynamic->sysv_hash[1];
    if (!dynamic->gnu_hash) return 0;
    const uint32_t *table = dynamic->gnu_hash;
    uint32_t bucketCount = table[0], offset = table[1], bloomCount = table[2];
    const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(table + 4) + bloomCount);
    const uint32_t *chain = buckets + bucketCount;
    uint32_t last = 0;
    for (uint32_t bucket = 0; bucket < bucketCount; bucket++) {
        if (buckets[bucket] > last) last = buckets[bucket];
    }
    if (last < offset) return offset;
    while (!(chain[last - offset] & 1)) last++;
    return (size_t)last + 1;
}

/* The defined functions of ffh_elf_defined_functions, only those at `only` when it is not 0. */
static size_t ffh_elf_defined_functions_at(const ffh_elf_object *object, uintptr_t only, ffh_elf_function *functions,
                                           size_t capacity) {
    ffh_elf_dynamic dynamic;
    if (!ffh_elf_read_dynamic(object, &dynamic)) return 0;
    size_t count = ffh_elf_symbol_count(&dynamic);
    size_t found = 0;
    for (size_t index = 1; index < count; index++) {
        const ElfW(Sym) *symbol = &dynamic.symbols[index];
        unsigned type = ELF64_ST_TYPE(symbol->st_info);
        unsigned binding = ELF64_ST_BIND(symbol->st_info);
        if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
        if (symbol->st_shndx == SHN_UNDEF || symbol->st_shndx == SHN_ABS || symbol->st_value == 0) continue;
        if (only && object->base + symbol->st_value != only) continue;
        if (binding != STB_GLOBAL && binding != STB_WEAK && binding != STB_GNU_UNIQUE) continue;
        if (ELF64_ST_VISIBILITY(symbol->st_other) != STV_DEFAULT && ELF64_ST_VISIBILITY(symbol->st_other) != STV_PROTECTED) {
            continue;
        }
        if (found < capacity) {
            int hidden = dynamic.versions && (dynamic.versions[index] & 0x8000);
            functions[found] = (ffh_elf_function){
                .symbol = {
                    .name = dynamic.strings + symbol->st_name,
                    .address = object->base + symbol->st_value,
                    .size = symbol->st_size,
                    .type = (uint8_t)type,
                },
                .is_default_version = !hidden,
                .is_weak = binding == STB_WEAK,
            };
        }
        found++;
    }
    return found;
}

size_t ffh_elf_defined_functions(const ffh_elf_object *object, ffh_elf_function *functions, size_t capacity) {
    return ffh_elf_defined_functions_at(object, 0, functions, capacity);
}

size_t ffh_elf_functions_at(const ffh_elf_object *object, uintptr_t address, ffh_elf_function *functions,
                            size_t capacity) {
    return address ? ffh_elf_defined_functions_at(object, address, functions, capacity) : 0;
}

int ffh_elf_symbol_at(uintptr_t address, ffh_elf_symbol *symbol) {
    Dl_info info;
    const ElfW(Sym) *entry = NULL;
    if (!dladdr1((const void *)address, &info, (void **)&entry, RTLD_DL_SYMENT) || !entry || !info.dli_sname) {
        return 0;
    }
    *symbol = (ffh_elf_symbol){
        .name = info.dli_sname,
        .address = (uintptr_t)info.dli_saddr,
        .size = entry->st_size,
        .type = (uint8_t)ELF64_ST_TYPE(entry->st_info),
    };
    return 1;
}

int ffh_elf_object_at(uintptr_t address, uintptr_t *base, uintptr_t *dynamic) {
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1((const void *)address, &info, (void **)&map, RTLD_DL_LINKMAP) || !map) return 0;
    *base = (uintptr_t)map->l_addr;
    *dynamic = (uintptr_t)map->l_ld;
    return 1;
}

int ffh_elf_identify_loaded(const char *name, uintptr_t *base, uintptr_t *dynamic) {
    void *handle = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle) return 0;
    struct link_map *map = NULL;
    int found = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map;
    if (found) {
        *base = (uintptr_t)map->l_addr;
        *dynamic = (uintptr_t)map->l_ld;
    }
    dlclose(handle);
    return found;
}

// MARK: - Binding

static void (*ffh_elf_resolve_observer)(const char *symbol);

void ffh_elf_set_resolve_observer(void (*observer)(const char *symbol)) {
    __atomic_store_n(&ffh_elf_resolve_observer, observer, __ATOMIC_RELEASE);
}

void *ffh_elf_resolve(const char *symbol, void *handle, uintptr_t inside) {
    void (*observer)(const char *) = __atomic_load_n(&ffh_elf_resolve_observer, __ATOMIC_ACQUIRE);
    if (observer) observer(symbol);
#if defined(__x86_64__)
    const void *through = inside ? ffh_return_site(inside) : NULL;
    if (through) {
        void *address =
            (void *)ffh_call_through((const void *)dlsym, through, (uintptr_t)RTLD_DEFAULT, (uintptr_t)symbol, 0, 0);
        if (!address && handle) {
            address = (void *)ffh_call_through((const void *)dlsym, through, (uintptr_t)handle, (uintptr_t)symbol, 0, 0);
        }
        return address;
    }
#else
    (void)inside;
#endif
    void *address = dlsym(RTLD_DEFAULT, symbol);
    if (!address && handle) address = dlsym(handle, symbol);
    return address;
}

void *ffh_elf_resolve_after(const char *symbol, uintptr_t inside) {
#if defined(__x86_64__)
    const void *through = ffh_return_site(inside);
    if (!through) return NULL;
    return (void *)ffh_call_through((const void *)dlsym, through, (uintptr_t)RTLD_NEXT, (uintptr_t)symbol, 0, 0);
#else
    (void)symbol;
    (void)inside;
    return NULL;
#endif
}

uintptr_t ffh_elf_load(uintptr_t slot) { return __atomic_load_n((const uintptr_t *)slot, __ATOMIC_ACQUIRE); }

int ffh_elf_replace(uintptr_t slot, uintptr_t expected, uintptr_t desired) {
    /* Under the fault guard: the object may be unloaded meanwhile. */
    return ffh_exchange_if_writable((void *)slot, expected, desired) > 0;
}

// MARK: - Walk marks

static _Thread_local int ffh_elf_walking;

/* Walks hold the read side while they run; fork's prepare handler takes the write side, for a
   while at most, so that no walk is inside the loader's list (dl_iterate_phdr holds a loader
   lock that glibc does not reset in a child) at the moment of a fork. Readers are preferred
   (glibc's default), so a walk nested in another never waits for a forking writer. */
static pthread_rwlock_t ffh_elf_gate = PTHREAD_RWLOCK_INITIALIZER;
static int ffh_elf_gate_taken;

void ffh_elf_begin_walk(void) {
    if (ffh_elf_walking++ == 0) pthread_rwlock_rdlock(&ffh_elf_gate);
}

void ffh_elf_end_walk(void) {
    if (--ffh_elf_walking == 0) pthread_rwlock_unlock(&ffh_elf_gate);
}

int ffh_elf_is_walking(void) { return ffh_elf_walking > 0; }

static void ffh_elf_fork_prepare(void) {
    /* A walk waiting for a lock the forking thread holds would keep the gate for ever: wait
       100 ms at most, then fork anyway. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 100 * 1000 * 1000;
    if (until.tv_nsec >= 1000 * 1000 * 1000) {
        until.tv_sec += 1;
        until.tv_nsec -= 1000 * 1000 * 1000;
    }
    ffh_elf_gate_taken = ffh_elf_walking == 0 && pthread_rwlock_timedwrlock(&ffh_elf_gate, &until) == 0;
}

static void ffh_elf_fork_parent(void) {
    if (ffh_elf_gate_taken) pthread_rwlock_unlock(&ffh_elf_gate);
    ffh_elf_gate_taken = 0;
}

/* The pages waiting for SlotMemory's restorer, as it notes them (under its lock, which a fork
   holds across): a fork's child has no restorer thread, and gives them their protection back
   itself, as the child handler runs (one thread, so no load or unload beside it; the loader's
   list lock may be held for good there, by a thread of the parent's that was walking it). */
enum { FFH_ELF_WAITING_MAX = 32 };
static struct {
    uintptr_t page;
    size_t length;
    int protection;
    ffh_elf_instance instance;
} ffh_elf_waiting[FFH_ELF_WAITING_MAX];
static unsigned ffh_elf_waiting_count;

int ffh_elf_note_waiting(uintptr_t page, size_t length, int protection, const ffh_elf_instance *instance) {
    unsigned index = 0;
    while (index < ffh_elf_waiting_count && ffh_elf_waiting[index].page != page) index++;
    if (index == FFH_ELF_WAITING_MAX) return 0;
    ffh_elf_waiting[index].page = page;
    ffh_elf_waiting[index].length = length;
    ffh_elf_waiting[index].protection = protection;
    ffh_elf_waiting[index].instance = *instance;
    if (index == ffh_elf_waiting_count) ffh_elf_waiting_count++;
    return 1;
}

void ffh_elf_forget_waiting(uintptr_t page) {
    if (page == 0) {
        ffh_elf_waiting_count = 0;
        return;
    }
    for (unsigned index = 0; index < ffh_elf_waiting_count; index++) {
        if (ffh_elf_waiting[index].page != page) continue;
        ffh_elf_waiting[index] = ffh_elf_waiting[--ffh_elf_waiting_count];
        return;
    }
}

static void ffh_elf_restore_waiting(void) {
    for (unsigned index = 0; index < ffh_elf_waiting_count; index++) {
        (void)ffh_elf_restore_late(ffh_elf_waiting[index].page, ffh_elf_waiting[index].length,
                                   ffh_elf_waiting[index].protection, &ffh_elf_waiting[index].instance);
    }
    ffh_elf_waiting_count = 0;
}

static void ffh_elf_fork_child(void) {
    ffh_elf_restore_waiting();
    /* A fresh gate: walks of threads that are not in the child may still hold the read side,
       and the write side the prepare handler took cannot be given back here (glibc knows its
       writer by the parent's thread ID: an unlock by the child's was taken for a reader's, the
       gate stayed shut, and the child's own fork waited the 100 ms out). The child's thread
       holds the read side again if it forked inside a walk. */
    pthread_rwlock_t fresh = PTHREAD_RWLOCK_INITIALIZER;
    memcpy(&ffh_elf_gate, &fresh, sizeof fresh);
    if (ffh_elf_walking > 0) pthread_rwlock_rdlock(&ffh_elf_gate);
    ffh_elf_gate_taken = 0;
}

int ffh_elf_gate_is_open(void) {
    /* A deadline already past: the lock is taken at once or not at all (no other function
       imported for it). */
    struct timespec past = {0, 0};
    if (ffh_elf_walking > 0 || pthread_rwlock_timedwrlock(&ffh_elf_gate, &past) != 0) return 0;
    pthread_rwlock_unlock(&ffh_elf_gate);
    return 1;
}

void ffh_elf_guard_walks_across_fork(void) {
    static int registered;
    if (__atomic_exchange_n(&registered, 1, __ATOMIC_ACQ_REL)) return;
    pthread_atfork(ffh_elf_fork_prepare, ffh_elf_fork_parent, ffh_elf_fork_child);
}

static _Thread_local int ffh_elf_loading;

void ffh_elf_begin_load(void) { ffh_elf_loading++; }
int ffh_elf_end_load(void) { return --ffh_elf_loading == 0; }

// MARK: - The loader's list lock

/* The mutex dl_iterate_phdr holds while its callbacks run (glibc's `_dl_load_write_lock`, in
   `_rtld_global`), or NULL where it cannot be told. glibc's dlclose holds it from the unmapping
   of each object it unloads to that object's removal from _dl_find_object's data; a dlopen
   cannot map anything at an object's place before that. So while this thread holds it, an
   object that _dl_find_object finds stays mapped, and no other is mapped at its place. */
static pthread_mutex_t *ffh_elf_list_lock;

/* The mutexes of `_rtld_global` that this thread holds, with their counts, seen from inside
   one walk and from inside a walk nested in it: the one whose count grew by one is the walk's. */
typedef struct {
    const unsigned char *global;
    size_t size;
    size_t offsets[8];
    unsigned counts[8];
    size_t found;
} ffh_elf_lock_search;

static size_t ffh_elf_owned_mutexes(ffh_elf_lock_search *search, size_t *offsets, unsigned *counts) {
    pid_t self = (pid_t)ffh_syscall0(SYS_gettid);
    size_t found = 0;
    for (size_t offset = 0; offset + sizeof(pthread_mutex_t) <= search->size && found < 8;
         offset += sizeof(int)) {
        pthread_mutex_t lock;
        memcpy(&lock, search->global + offset, sizeof lock);
        if (lock.__data.__owner == self && lock.__data.__lock != 0 && lock.__data.__count > 0 &&
            lock.__data.__kind == PTHREAD_MUTEX_RECURSIVE_NP) {
            offsets[found] = offset;
            counts[found] = lock.__data.__count;
            found++;
        }
    }
    return found;
}

static int ffh_elf_find_list_lock_inner(struct dl_phdr_info *info, size_t size, void *context) {
    (void)info;
    (void)size;
    ffh_elf_lock_search *search = context;
    size_t offsets[8];
    unsigned counts[8];
    size_t found = ffh_elf_owned_mutexes(search, offsets, counts);
    for (size_t index = 0; index < found; index++) {
        for (size_t before = 0; before < search->found; before++) {
            if (search->offsets[before] == offsets[index] && search->counts[before] + 1 == counts[index]) {
                /* The one that grew; two that grew would tell nothing. */
                if (ffh_elf_list_lock) {
                    ffh_elf_list_lock = NULL;
                    return 1;
                }
                ffh_elf_list_lock = (pthread_mutex_t *)(search->global + offsets[index]);
            }
        }
    }
    return 1;
}

static int ffh_elf_find_list_lock_outer(struct dl_phdr_info *info, size_t size, void *context) {
    (void)info;
    (void)size;
    ffh_elf_lock_search *search = context;
    search->found = ffh_elf_owned_mutexes(search, search->offsets, search->counts);
    if (search->found > 0) dl_iterate_phdr(ffh_elf_find_list_lock_inner, search);
    return 1;
}

/* At load, before any hook: the lock's place, found from inside dl_iterate_phdr. */
__attribute__((constructor)) static void ffh_elf_find_list_lock(void) {
    void *global = dlsym(RTLD_DEFAULT, "_rtld_global");
    Dl_info information;
    const ElfW(Sym) *symbol = NULL;
    if (!global || !dladdr1(global, &information, (void **)&symbol, RTLD_DL_SYMENT) || !symbol ||
        symbol->st_size < sizeof(pthread_mutex_t)) {
        return;
    }
    ffh_elf_lock_search search = {.global = global, .size = symbol->st_size};
    ffh_elf_begin_walk();
    dl_iterate_phdr(ffh_elf_find_list_lock_outer, &search);
    ffh_elf_end_walk();
}

int ffh_elf_knows_list_lock(void) { return ffh_elf_list_lock != NULL; }

int ffh_elf_list_lock_orphaned(void) {
    if (!ffh_elf_list_lock) return 0;
    int word = __atomic_load_n(&ffh_elf_list_lock->__data.__lock, __ATOMIC_RELAXED);
    int owner = __atomic_load_n(&ffh_elf_list_lock->__data.__owner, __ATOMIC_RELAXED);
    if (word == 0 || owner <= 0) return 0;
    /* No thread of this process has that ID (a thread of another process may). */
    return ffh_syscall3(SYS_tgkill, ffh_syscall0(SYS_getpid), owner, 0) == -ESRCH;
}

static int ffh_elf_read_only_by_design(uintptr_t page, size_t length, const ffh_elf_instance *instance);

/* The change itself, with the loader's list lock held (or not known, or in a fork's child).
   `late`: a page lifted some time before, made read-only only where its object's own headers
   map it so (ffh_elf_restore_late). */
static int ffh_elf_protect_held(uintptr_t page, size_t length, int protection, const ffh_elf_instance *instance,
                                int late) {
    ffh_elf_instance holder;
    if (!ffh_elf_settled_object(page, &holder) || holder.map != instance->map || holder.start != instance->start ||
        holder.end != instance->end) {
        return 0;
    }
    if (late && !(protection & PROT_WRITE) && !ffh_elf_read_only_by_design(page, length, &holder)) return 0;
    return ffh_syscall3(SYS_mprotect, (long)page, (long)length, protection) == 0 ? 1 : -1;
}

int ffh_elf_protect_instance(uintptr_t page, size_t length, int protection, const ffh_elf_instance *instance) {
    /* Waits for the lock by trying (50 ms at most): a thread that holds it may wait for a lock
       the caller holds (a dl_iterate_phdr callback that hooks a slot). The walk gate too,
       tried: a fork meanwhile must not find the loader's list locked by this thread. */
    int gate = 0;
    int locked = 0;
    int attempts = 0;
    struct timespec now, until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += 50 * 1000 * 1000;
    if (until.tv_nsec >= 1000 * 1000 * 1000) {
        until.tv_sec += 1;
        until.tv_nsec -= 1000 * 1000 * 1000;
    }
    for (;;) {
        if (!gate) gate = ffh_elf_walking > 0 || pthread_rwlock_tryrdlock(&ffh_elf_gate) == 0;
        if (gate) locked = !ffh_elf_list_lock || pthread_mutex_trylock(ffh_elf_list_lock) == 0;
        if (locked) break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > until.tv_sec || (now.tv_sec == until.tv_sec && now.tv_nsec >= until.tv_nsec)) break;
        /* A walk or an unload takes microseconds: yield at first, then sleep a millisecond. */
        struct timespec pause = {0, 1000 * 1000};
        if (++attempts < 100) {
            ffh_syscall0(SYS_sched_yield);
        } else {
            ffh_syscall3(SYS_nanosleep, (long)&pause, 0, 0);
        }
    }
    int result = -2;
    if (locked) {
        result = ffh_elf_protect_held(page, length, protection, instance, 0);
        if (ffh_elf_list_lock) pthread_mutex_unlock(ffh_elf_list_lock);
    }
    if (gate && ffh_elf_walking == 0) pthread_rwlock_unlock(&ffh_elf_gate);
    return result;
}

void ffh_elf_lock_list(void) {
    if (ffh_elf_walking == 0) pthread_rwlock_rdlock(&ffh_elf_gate);
    if (ffh_elf_list_lock) pthread_mutex_lock(ffh_elf_list_lock);
}

void ffh_elf_unlock_list(void) {
    if (ffh_elf_list_lock) pthread_mutex_unlock(ffh_elf_list_lock);
    if (ffh_elf_walking == 0) pthread_rwlock_unlock(&ffh_elf_gate);
}

/* Whether the object `instance` names (its ELF header at the start of its mapping, its program
   headers in its first page, as every object a linker made maps them) maps the page at `page`
   (`length` bytes, the page size) read-only itself: inside its PT_GNU_RELRO range, which the
   loader made read-only after relocating (rounded down to pages at both ends, as the loader
   rounds), or inside a segment loaded without write permission. 0 when the headers cannot be
   read. */
static int ffh_elf_read_only_by_design(uintptr_t page, size_t length, const ffh_elf_instance *instance) {
    const ElfW(Ehdr) *header = (const ElfW(Ehdr) *)instance->start;
    if (instance->end - instance->start < sizeof *header || memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 ||
        header->e_phentsize != sizeof(ElfW(Phdr))) {
        return 0;
    }
    uintptr_t headers = instance->start + header->e_phoff;
    size_t span = (size_t)header->e_phnum * sizeof(ElfW(Phdr));
    if (header->e_phoff == 0 || headers < instance->start || headers + span > instance->end ||
        headers + span - instance->start > length) {
        return 0;
    }
    const ElfW(Phdr) *phdrs = (const ElfW(Phdr) *)headers;
    const uintptr_t base = (uintptr_t)((const struct link_map *)instance->map)->l_addr;
    const uintptr_t mask = ~(uintptr_t)(length - 1);
    const uintptr_t end = page + length;
    for (uint16_t index = 0; index < header->e_phnum; index++) {
        const ElfW(Phdr) *phdr = &phdrs[index];
        uintptr_t from = base + phdr->p_vaddr, to = from + phdr->p_memsz;
        if (phdr->p_type == PT_GNU_RELRO) {
            if ((from & mask) <= page && end <= (to & mask)) return 1;
        } else if (phdr->p_type == PT_LOAD && !(phdr->p_flags & PF_W)) {
            if ((from & mask) <= page && end <= ((to + length - 1) & mask)) return 1;
        }
    }
    return 0;
}

int ffh_elf_protect_instance_locked(uintptr_t page, size_t length, int protection, const ffh_elf_instance *instance) {
    return ffh_elf_protect_held(page, length, protection, instance, 1);
}

int ffh_elf_restore_late(uintptr_t page, size_t length, int protection, const ffh_elf_instance *instance) {
    ffh_mapping mapping;
    if (ffh_mapping_of(page, &mapping) != 1 || mapping.protection != (protection | PROT_READ | PROT_WRITE)) return 0;
    return ffh_elf_protect_instance_locked(page, length, protection, instance);
}
