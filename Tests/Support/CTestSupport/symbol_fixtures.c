#define _GNU_SOURCE
#include "CTestSymbolFixtures.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

/* Alone in a section whose name is a C identifier, so that the linker defines symbols at its
   start and end. */
__attribute__((noinline, used, section("ct_symbol_static_text"))) static int64_t ct_symbol_static_triple(int64_t a) {
    return a * 3 + 1;
}

extern const char __start_ct_symbol_static_text[];
extern const char __stop_ct_symbol_static_text[];

ct_symbol_unary ct_symbol_static_function(void) { return ct_symbol_static_triple; }

size_t ct_symbol_static_size(void) { return (size_t)(__stop_ct_symbol_static_text - __start_ct_symbol_static_text); }

const void *ct_symbol_static_section_start(void) { return __start_ct_symbol_static_text; }

const char *ct_dladdr_name(const void *address) {
    Dl_info info;
    if (!dladdr(address, &info)) return NULL;
    return info.dli_sname;
}

int ct_dynsym_lookup(const char *object, const char *symbol, uintptr_t *address, uint64_t *size, unsigned char *type) {
    void *handle = dlopen(object, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle) return 0;
    struct link_map *map = NULL;
    int found = 0;
    int descriptor = -1;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map) descriptor = open(map->l_name, O_RDONLY | O_CLOEXEC);
    struct stat status;
    if (descriptor >= 0 && fstat(descriptor, &status) == 0) {
        const unsigned char *file = mmap(NULL, (size_t)status.st_size, PROT_READ, MAP_PRIVATE, descriptor, 0);
        if (file != MAP_FAILED) {
            /* A file of the system's, trusted: no bounds checks. */
            const Elf64_Ehdr *header = (const Elf64_Ehdr *)file;
            const Elf64_Shdr *sections = (const Elf64_Shdr *)(file + header->e_shoff);
            for (int index = 0; index < header->e_shnum && !found; index++) {
                if (sections[index].sh_type != SHT_DYNSYM) continue;
                const Elf64_Sym *symbols = (const Elf64_Sym *)(file + sections[index].sh_offset);
                const char *names = (const char *)(file + sections[sections[index].sh_link].sh_offset);
                for (size_t entry = 0; entry < sections[index].sh_size / sizeof *symbols; entry++) {
                    if (symbols[entry].st_shndx == SHN_UNDEF || strcmp(names + symbols[entry].st_name, symbol) != 0) {
                        continue;
                    }
                    *address = (uintptr_t)map->l_addr + symbols[entry].st_value;
                    *size = symbols[entry].st_size;
                    *type = (unsigned char)ELF64_ST_TYPE(symbols[entry].st_info);
                    found = 1;
                    break;
                }
            }
            munmap((void *)file, (size_t)status.st_size);
        }
    }
    if (descriptor >= 0) close(descriptor);
    dlclose(handle);
    return found;
}

uintptr_t ct_load_bias(const char *object) {
    void *handle = dlopen(object, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle) return 0;
    struct link_map *map = NULL;
    uintptr_t bias = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map ? (uintptr_t)map->l_addr : 0;
    dlclose(handle);
    return bias;
}

#include "../../../Sources/CFFIHookSupport/ffh_return_site.h"

const void *ct_return_site(const void *caller) {
#if defined(__x86_64__)
    return ffh_return_site((uintptr_t)caller);
#else
    (void)caller;
    return NULL;
#endif
}

typedef struct {
    uintptr_t address, start, end;
} ct_segment_search;

static int ct_segment_visit(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    ct_segment_search *search = data;
    for (size_t index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        if (header->p_type != PT_LOAD || !(header->p_flags & PF_X)) continue;
        uintptr_t start = info->dlpi_addr + header->p_vaddr, end = start + header->p_filesz;
        if (search->address >= start && search->address < end) {
            search->start = start;
            search->end = end;
            return 1;
        }
    }
    return 0;
}

int ct_executable_segment(const void *address, uintptr_t *start, uintptr_t *end) {
    ct_segment_search search = {(uintptr_t)address, 0, 0};
    if (!dl_iterate_phdr(ct_segment_visit, &search)) return 0;
    *start = search.start;
    *end = search.end;
    return 1;
}

typedef struct {
    unsigned milliseconds;
    int *inside;
} ct_loader_hold;

static int ct_hold_visit(struct dl_phdr_info *info, size_t size, void *context) {
    (void)info;
    (void)size;
    ct_loader_hold *hold = context;
    __atomic_store_n(hold->inside, 1, __ATOMIC_RELEASE);
    struct timespec pause = {hold->milliseconds / 1000, (long)(hold->milliseconds % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) != 0) {
    }
    return 1;
}

void ct_hold_loader_list(unsigned milliseconds, int *inside) {
    ct_loader_hold hold = {milliseconds, inside};
    dl_iterate_phdr(ct_hold_visit, &hold);
    __atomic_store_n(inside, 2, __ATOMIC_RELEASE);
}

int ct_thread_count(void) {
    int descriptor = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) return -1;
    char text[4096];
    ssize_t length = read(descriptor, text, sizeof text - 1);
    close(descriptor);
    if (length <= 0) return -1;
    text[length] = 0;
    const char *line = strstr(text, "\nThreads:");
    return line ? atoi(line + strlen("\nThreads:")) : -1;
}

const void *ct_main_program_entry(void) { return (const void *)getauxval(AT_ENTRY); }

/* Writable data of the main program's (this file is linked into the test executable). */
static int ct_main_program_marker = 1;

int ct_main_program_range(uintptr_t *start, uintptr_t *end) {
    struct dl_find_object found;
    if (_dl_find_object(&ct_main_program_marker, &found) != 0) return 0;
    *start = (uintptr_t)found.dlfo_map_start;
    *end = (uintptr_t)found.dlfo_map_end;
    return 1;
}
