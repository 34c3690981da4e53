#define _GNU_SOURCE
#include "CElfImports.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#define CELFIMPORTS_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define CELFIMPORTS_R_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define CELFIMPORTS_R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define CELFIMPORTS_R_GLOB_DAT R_AARCH64_GLOB_DAT
#else
#define CELFIMPORTS_R_JUMP_SLOT (-1)
#define CELFIMPORTS_R_GLOB_DAT (-1)
#endif

// MARK: - Loaded objects

typedef struct {
    celfimports_object *objects;
    size_t count;
    size_t capacity;
    int failed;
} celfimports_snapshot;

/* Runs with the loader's list locked: copies, never calls back into Swift. */
static int celfimports_collect(struct dl_phdr_info *info, size_t size, void *context) {
    (void)size;
    celfimports_snapshot *snapshot = context;
    if (snapshot->count == snapshot->capacity) {
        size_t capacity = snapshot->capacity ? snapshot->capacity * 2 : 32;
        celfimports_object *grown = realloc(snapshot->objects, capacity * sizeof *grown);
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
    snapshot->objects[snapshot->count++] = (celfimports_object){
        .path = path,
        .base = (uintptr_t)info->dlpi_addr,
        .program_headers = info->dlpi_phdr,
        .program_header_count = info->dlpi_phnum,
    };
    return 0;
}

celfimports_object *celfimports_objects(size_t *count) {
    celfimports_snapshot snapshot = {0};
    dl_iterate_phdr(celfimports_collect, &snapshot);
    if (snapshot.failed) {
        celfimports_free_objects(snapshot.objects, snapshot.count);
        *count = 0;
        return NULL;
    }
    *count = snapshot.count;
    return snapshot.objects;
}

void celfimports_free_objects(celfimports_object *objects, size_t count) {
    for (size_t index = 0; index < count; index++) free(objects[index].path);
    free(objects);
}

void *celfimports_pin(const celfimports_object *object) {
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

void celfimports_unpin(void *handle) {
    if (handle) dlclose(handle);
}

// MARK: - Dynamic section

/* The loader rewrites the address entries of a writable dynamic section to run-time
   addresses; a read-only one (the vDSO's, or under other loaders) keeps link-time ones. */
static uintptr_t celfimports_address(const celfimports_object *object, uintptr_t value) {
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
} celfimports_dynamic;

static int celfimports_read_dynamic(const celfimports_object *object, celfimports_dynamic *out) {
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
        case DT_SYMTAB: out->symbols = (const ElfW(Sym) *)celfimports_address(object, value); break;
        case DT_STRTAB: out->strings = (const char *)celfimports_address(object, value); break;
        case DT_JMPREL: out->plt = (const ElfW(Rela) *)celfimports_address(object, value); break;
        case DT_PLTRELSZ: out->plt_size = dynamic->d_un.d_val; break;
        case DT_PLTREL: out->plt_is_rela = dynamic->d_un.d_val == DT_RELA; break;
        case DT_RELA: out->rela = (const ElfW(Rela) *)celfimports_address(object, value); break;
        case DT_RELASZ: out->rela_size = dynamic->d_un.d_val; break;
        case DT_RELAENT: out->rela_entry = dynamic->d_un.d_val ? dynamic->d_un.d_val : sizeof(ElfW(Rela)); break;
        case DT_SONAME:
            out->soname = dynamic->d_un.d_val;
            out->has_soname = 1;
            break;
        default: break;
        }
    }
    return out->symbols && out->strings;
}

const char *celfimports_soname(const celfimports_object *object) {
    celfimports_dynamic dynamic;
    if (!celfimports_read_dynamic(object, &dynamic) || !dynamic.has_soname) return NULL;
    return dynamic.strings + dynamic.soname;
}

/* Appends the entries of one RELA table whose relocation is a JUMP_SLOT or GLOB_DAT of
   `symbol`; returns the new total. */
static size_t celfimports_scan(
    const celfimports_object *object, const celfimports_dynamic *dynamic, const ElfW(Rela) *table, size_t size,
    size_t entry_size, const char *symbol, celfimports_entry *entries, size_t capacity, size_t found) {
    if (!table || entry_size == 0) return found;
    for (size_t offset = 0; offset + entry_size <= size; offset += entry_size) {
        const ElfW(Rela) *relocation = (const ElfW(Rela) *)((const char *)table + offset);
        long type = (long)ELF64_R_TYPE(relocation->r_info);
        celfimports_kind kind;
        if (type == CELFIMPORTS_R_JUMP_SLOT) {
            kind = CELFIMPORTS_JUMP_SLOT;
        } else if (type == CELFIMPORTS_R_GLOB_DAT) {
            kind = CELFIMPORTS_GLOBAL_DATA;
        } else {
            continue;
        }
        size_t index = ELF64_R_SYM(relocation->r_info);
        if (index == 0) continue;
        const char *name = dynamic->strings + dynamic->symbols[index].st_name;
        if (strcmp(name, symbol) != 0) continue;
        if (found < capacity) {
            entries[found] = (celfimports_entry){.slot = object->base + relocation->r_offset, .kind = kind};
        }
        found++;
    }
    return found;
}

size_t celfimports_find_entries(
    const celfimports_object *object, const char *symbol, celfimports_entry *entries, size_t capacity) {
    celfimports_dynamic dynamic;
    if (!celfimports_read_dynamic(object, &dynamic)) return 0;
    size_t found = 0;
    if (dynamic.plt_is_rela) {
        found = celfimports_scan(
            object, &dynamic, dynamic.plt, dynamic.plt_size, sizeof(ElfW(Rela)), symbol, entries, capacity, found);
    }
    return celfimports_scan(
        object, &dynamic, dynamic.rela, dynamic.rela_size, dynamic.rela_entry, symbol, entries, capacity, found);
}

// MARK: - Segments

static int celfimports_in_segment(const celfimports_object *object, uintptr_t address, int type, int flag) {
    const ElfW(Phdr) *headers = object->program_headers;
    for (uint16_t index = 0; index < object->program_header_count; index++) {
        const ElfW(Phdr) *header = &headers[index];
        if (header->p_type != (ElfW(Word))type || (flag && !(header->p_flags & (ElfW(Word))flag))) continue;
        uintptr_t start = object->base + header->p_vaddr;
        if (address >= start && address - start < header->p_memsz) return 1;
    }
    return 0;
}

int celfimports_is_in_code(const celfimports_object *object, uintptr_t address) {
    return celfimports_in_segment(object, address, PT_LOAD, PF_X);
}

int celfimports_is_writable_data(const celfimports_object *object, uintptr_t address) {
    return celfimports_in_segment(object, address, PT_LOAD, PF_W)
        && celfimports_in_segment(object, address + sizeof(uintptr_t) - 1, PT_LOAD, PF_W)
        && !celfimports_in_segment(object, address, PT_GNU_RELRO, 0)
        && !celfimports_in_segment(object, address + sizeof(uintptr_t) - 1, PT_GNU_RELRO, 0);
}

// MARK: - Binding

void *celfimports_resolve(const char *symbol, void *handle) {
    void *address = dlsym(RTLD_DEFAULT, symbol);
    if (!address && handle) address = dlsym(handle, symbol);
    return address;
}

uintptr_t celfimports_load(uintptr_t slot) { return __atomic_load_n((const uintptr_t *)slot, __ATOMIC_ACQUIRE); }

int celfimports_replace(uintptr_t slot, uintptr_t expected, uintptr_t desired) {
    return __atomic_compare_exchange_n(
        (uintptr_t *)slot, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

// MARK: - Walk marks

static _Thread_local int celfimports_walking;

/* Walks hold the read side while they run; fork's prepare handler takes the write side, for a
   while at most, so that no walk is inside the loader's list (dl_iterate_phdr holds a loader
   lock that glibc does not reset in a child) at the moment of a fork. Readers are preferred
   (glibc's default), so a walk nested in another never waits for a forking writer. */
static pthread_rwlock_t celfimports_gate = PTHREAD_RWLOCK_INITIALIZER;
static int celfimports_gate_taken;

void celfimports_begin_walk(void) {
    if (celfimports_walking++ == 0) pthread_rwlock_rdlock(&celfimports_gate);
}

void celfimports_end_walk(void) {
    if (--celfimports_walking == 0) pthread_rwlock_unlock(&celfimports_gate);
}

int celfimports_is_walking(void) { return celfimports_walking > 0; }

static void celfimports_fork_prepare(void) {
    /* A walk waiting for a lock the forking thread holds would keep the gate for ever: wait
       100 ms at most, then fork anyway. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 100 * 1000 * 1000;
    if (until.tv_nsec >= 1000 * 1000 * 1000) {
        until.tv_sec += 1;
        until.tv_nsec -= 1000 * 1000 * 1000;
    }
    celfimports_gate_taken = celfimports_walking == 0 && pthread_rwlock_timedwrlock(&celfimports_gate, &until) == 0;
}

static void celfimports_fork_parent(void) {
    if (celfimports_gate_taken) pthread_rwlock_unlock(&celfimports_gate);
    celfimports_gate_taken = 0;
}

static void celfimports_fork_child(void) {
    if (celfimports_gate_taken) {
        pthread_rwlock_unlock(&celfimports_gate);
    } else if (celfimports_walking == 0) {
        /* Walks of threads that are not in the child may still hold the read side. */
        pthread_rwlock_t fresh = PTHREAD_RWLOCK_INITIALIZER;
        memcpy(&celfimports_gate, &fresh, sizeof fresh);
    }
    celfimports_gate_taken = 0;
}

void celfimports_guard_walks_across_fork(void) {
    static int registered;
    if (__atomic_exchange_n(&registered, 1, __ATOMIC_ACQ_REL)) return;
    pthread_atfork(celfimports_fork_prepare, celfimports_fork_parent, celfimports_fork_child);
}

static _Thread_local int celfimports_loading;

void celfimports_begin_load(void) { celfimports_loading++; }
int celfimports_end_load(void) { return --celfimports_loading == 0; }
