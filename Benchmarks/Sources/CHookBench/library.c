#define _GNU_SOURCE
#include "hb_library.h"

#include <elf.h>
#include <link.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    uintptr_t *addresses;
    size_t capacity;
    long found;
    long pages;
    int touch;
} hb_walk;

static int hb_ends_with(const char *path, const char *name) {
    size_t length = strlen(path), wanted = strlen(name);
    return length >= wanted && strcmp(path + length - wanted, name) == 0;
}

/* The dynamic symbol table's size: DT_HASH's chain count, else past the last GNU hash chain. */
static size_t hb_symbol_count(const ElfW(Word) *sysv, const uint32_t *gnu) {
    if (sysv) return sysv[1];
    if (!gnu) return 0;
    uint32_t buckets = gnu[0], offset = gnu[1], blooms = gnu[2];
    const uint32_t *bucket = (const uint32_t *)((const ElfW(Addr) *)(gnu + 4) + blooms);
    const uint32_t *chain = bucket + buckets;
    uint32_t last = 0;
    for (uint32_t index = 0; index < buckets; index++) {
        if (bucket[index] > last) last = bucket[index];
    }
    if (last < offset) return offset;
    while (!(chain[last - offset] & 1)) last++;
    return last + 1;
}

static int hb_visit(struct dl_phdr_info *info, size_t size, void *context) {
    (void)size;
    hb_walk *walk = context;
    if (!info->dlpi_name || !hb_ends_with(info->dlpi_name, walk->name)) return 0;
    walk->found = 0;
    const ElfW(Dyn) *dynamic = NULL;
    for (int index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        if (header->p_type == PT_DYNAMIC) dynamic = (const ElfW(Dyn) *)(info->dlpi_addr + header->p_vaddr);
        if (walk->touch && header->p_type == PT_LOAD) {
            volatile const char *start = (const char *)(info->dlpi_addr + header->p_vaddr);
            for (size_t offset = 0; offset < header->p_filesz; offset += 4096) {
                (void)start[offset];
                walk->pages++;
            }
        }
    }
    if (walk->touch || !dynamic) return 1;
    const ElfW(Sym) *symbols = NULL;
    const ElfW(Word) *sysv = NULL;
    const uint32_t *gnu = NULL;
    for (; dynamic->d_tag != DT_NULL; dynamic++) {
        if (dynamic->d_tag == DT_SYMTAB) symbols = (const ElfW(Sym) *)dynamic->d_un.d_ptr;
        if (dynamic->d_tag == DT_HASH) sysv = (const ElfW(Word) *)dynamic->d_un.d_ptr;
        if (dynamic->d_tag == DT_GNU_HASH) gnu = (const uint32_t *)dynamic->d_un.d_ptr;
    }
    if (!symbols) return 1;
    size_t count = hb_symbol_count(sysv, gnu);
    for (size_t index = 1; index < count; index++) {
        const ElfW(Sym) *symbol = &symbols[index];
        if (ELF64_ST_TYPE(symbol->st_info) != STT_FUNC || symbol->st_shndx == SHN_UNDEF || symbol->st_value == 0) {
            continue;
        }
        if ((size_t)walk->found < walk->capacity) walk->addresses[walk->found] = info->dlpi_addr + symbol->st_value;
        walk->found++;
    }
    return 1;
}

long hb_library_functions(const char *name, uintptr_t *addresses, size_t capacity) {
    hb_walk walk = {name, addresses, capacity, -1, 0, 0};
    dl_iterate_phdr(hb_visit, &walk);
    return walk.found;
}

long hb_library_touch(const char *name) {
    hb_walk walk = {name, NULL, 0, -1, 0, 1};
    dl_iterate_phdr(hb_visit, &walk);
    return walk.pages;
}

static long hb_status_field(const char *text, const char *key) {
    const char *found = strstr(text, key);
    long value = -1;
    if (found) sscanf(found + strlen(key), " %ld", &value);
    return value;
}

hb_memory hb_memory_now(void) {
    hb_memory memory = {-1, -1, -1};
    FILE *file = fopen("/proc/self/status", "r");
    if (!file) return memory;
    char text[8192];
    size_t length = fread(text, 1, sizeof text - 1, file);
    fclose(file);
    text[length] = 0;
    memory.resident = hb_status_field(text, "VmRSS:");
    memory.anonymous = hb_status_field(text, "RssAnon:");
    memory.file = hb_status_field(text, "RssFile:");
    return memory;
}

long hb_mapping_count(void) {
    FILE *file = fopen("/proc/self/maps", "r");
    if (!file) return -1;
    long lines = 0;
    int character;
    while ((character = fgetc(file)) != EOF) lines += character == '\n';
    fclose(file);
    return lines;
}

void hb_trim(void) { (void)malloc_trim(0); }
