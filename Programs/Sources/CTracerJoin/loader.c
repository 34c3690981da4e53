#define _GNU_SOURCE
#include "join.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* One object mapped in the process, as /proc/PID/maps lists it: its lowest mapping at file
   offset 0, the range of that mapping, and the file's device and inode. */
typedef struct {
    uint64_t start, end;
    unsigned major, minor;
    uint64_t inode;
    char path[512];
} fhj_mapping;

int fhj_each_mapping(pid_t pid, int (*visit)(const fhj_map_line *line, void *context), void *context) {
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *maps = fopen(path, "re");
    if (!maps) return 0;
    while (fgets(text, sizeof text, maps)) {
        fhj_map_line line = {0};
        int consumed = 0;
        if (sscanf(text, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n", &line.start, &line.end,
                   line.permissions, &line.offset, &line.major, &line.minor, &line.inode, &consumed) < 7 ||
            consumed == 0) {
            continue;
        }
        text[strcspn(text, "\n")] = 0;
        line.path = text + consumed;
        const char *slash = strrchr(line.path, '/');
        line.file = slash ? slash + 1 : line.path;
        if (visit(&line, context)) break;
    }
    fclose(maps);
    return 1;
}

/* What fhj_find_mapping looks for, and what it found. */
typedef struct {
    const char *name;
    fhj_mapping *found;
    int seen;
} fhj_mapping_search;

static int fhj_match_mapping(const fhj_map_line *line, void *context) {
    fhj_mapping_search *search = context;
    if (line->offset != 0 || line->inode == 0) return 0;
    size_t length = strlen(search->name);
    /* "libc.so.6" or "libc.so.6 (deleted)" (the file was replaced since it was mapped). */
    if (strncmp(line->file, search->name, length) != 0 || (line->file[length] != 0 && line->file[length] != ' ')) {
        return 0;
    }
    if (!search->seen || line->start < search->found->start) {
        fhj_mapping *found = search->found;
        *found = (fhj_mapping){line->start, line->end, line->major, line->minor, line->inode, {0}};
        snprintf(found->path, sizeof found->path, "%s", line->path);
    }
    search->seen = 1;
    return 0;
}

/* The object whose path's file name is `name` (libc.so.6, libdl.so.2); 0 when none is mapped. */
static int fhj_find_mapping(pid_t pid, const char *name, fhj_mapping *found) {
    fhj_mapping_search search = {name, found, 0};
    fhj_each_mapping(pid, fhj_match_mapping, &search);
    return search.seen;
}

/* The mapped file itself: by its path when that still names the same device and inode, else
   through /proc/PID/map_files. */
static int fhj_open_mapped(pid_t pid, const fhj_mapping *mapping) {
    char path[600];
    snprintf(path, sizeof path, "%s", mapping->path);
    char *deleted = strstr(path, " (deleted)");
    if (deleted) *deleted = 0;
    int descriptor = deleted ? -1 : open(path, O_RDONLY | O_CLOEXEC);
    struct stat status;
    if (descriptor >= 0 && fstat(descriptor, &status) == 0 && status.st_ino == mapping->inode &&
        major(status.st_dev) == mapping->major && minor(status.st_dev) == mapping->minor) {
        return descriptor;
    }
    if (descriptor >= 0) close(descriptor);
    snprintf(path, sizeof path, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, mapping->start, mapping->end);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* The values of `names` (count of them) among the file's dynamic symbols, defined and of the
   default version; each 0 when absent. Also the first loadable segment's address, which the
   load bias is counted from. Returns 0 when the file is not a 64-bit x86 ELF object. */
static int fhj_read_symbols(int descriptor, const char *const *names, uint64_t *values, size_t count,
                            uint64_t *first_segment) {
    struct stat status;
    if (fstat(descriptor, &status) != 0 || (size_t)status.st_size < sizeof(Elf64_Ehdr)) return 0;
    size_t size = (size_t)status.st_size;
    const unsigned char *file = mmap(NULL, size, PROT_READ, MAP_PRIVATE, descriptor, 0);
    if (file == MAP_FAILED) return 0;
    int good = 0;
    const Elf64_Ehdr *header = (const Elf64_Ehdr *)file;
    if (memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 || header->e_ident[EI_CLASS] != ELFCLASS64 ||
        header->e_machine != EM_X86_64 || header->e_shoff == 0 || header->e_shentsize != sizeof(Elf64_Shdr) ||
        header->e_shoff + (uint64_t)header->e_shnum * sizeof(Elf64_Shdr) > size ||
        header->e_phoff + (uint64_t)header->e_phnum * sizeof(Elf64_Phdr) > size) {
        goto done;
    }
    *first_segment = 0;
    const Elf64_Phdr *segments = (const Elf64_Phdr *)(file + header->e_phoff);
    for (size_t index = 0; index < header->e_phnum; index++) {
        if (segments[index].p_type == PT_LOAD) {
            *first_segment = segments[index].p_vaddr & ~(uint64_t)0xfff;
            break;
        }
    }
    const Elf64_Shdr *sections = (const Elf64_Shdr *)(file + header->e_shoff);
    const Elf64_Shdr *symbols = NULL, *versions = NULL;
    for (size_t index = 0; index < header->e_shnum; index++) {
        if (sections[index].sh_type == SHT_DYNSYM) symbols = &sections[index];
        if (sections[index].sh_type == SHT_GNU_versym) versions = &sections[index];
    }
    if (!symbols || symbols->sh_link >= header->e_shnum || symbols->sh_entsize != sizeof(Elf64_Sym)) goto done;
    const Elf64_Shdr *strings = &sections[symbols->sh_link];
    if (symbols->sh_offset + symbols->sh_size > size || strings->sh_offset + strings->sh_size > size) goto done;
    size_t symbol_count = symbols->sh_size / sizeof(Elf64_Sym);
    if (versions && (versions->sh_offset + symbol_count * sizeof(Elf64_Half) > size)) versions = NULL;
    const Elf64_Sym *table = (const Elf64_Sym *)(file + symbols->sh_offset);
    const char *names_table = (const char *)(file + strings->sh_offset);
    const Elf64_Half *version = versions ? (const Elf64_Half *)(file + versions->sh_offset) : NULL;
    for (size_t wanted = 0; wanted < count; wanted++) values[wanted] = 0;
    for (size_t index = 1; index < symbol_count; index++) {
        const Elf64_Sym *symbol = &table[index];
        if (symbol->st_shndx == SHN_UNDEF || symbol->st_name >= strings->sh_size) continue;
        if (version && (version[index] & 0x8000)) continue; /* a hidden, older version */
        const char *name = names_table + symbol->st_name;
        for (size_t wanted = 0; wanted < count; wanted++) {
            if (strcmp(name, names[wanted]) == 0) values[wanted] = symbol->st_value;
        }
    }
    good = 1;
done:
    munmap((void *)file, size);
    return good;
}

int fhj_wait_for_libc(pid_t pid, int limit_ms) {
    fhj_mapping mapping;
    if (!fhj_find_mapping(pid, "ld-linux-x86-64.so.2", &mapping)) return 1; /* static, or another loader's */
    for (int waited = 0;; waited += 5) {
        if (fhj_find_mapping(pid, "libc.so.6", &mapping)) return 1;
        if (waited >= limit_ms || kill(pid, 0) != 0) return 0;
        usleep(5000);
    }
}

fhj_status fhj_find_loader(pid_t pid, fhj_loader *loader, char *message, size_t size) {
    static const char *const objects[] = {"libc.so.6", "libdl.so.2"};
    /* mmap and munmap are the C library's (the first object), found with the rest. */
    static const char *const names[] = {"dlopen", "dlsym", "dlerror", "mmap", "munmap"};
    int has_libc = 0;
    loader->mmap = loader->munmap = 0;
    for (size_t object = 0; object < sizeof objects / sizeof objects[0]; object++) {
        fhj_mapping mapping;
        if (!fhj_find_mapping(pid, objects[object], &mapping)) continue;
        if (object == 0) has_libc = 1;
        int descriptor = fhj_open_mapped(pid, &mapping);
        if (descriptor < 0) {
            fhj_say(message, size, "cannot read %s, which process %d maps: %s", mapping.path, (int)pid,
                    strerror(errno));
            return FHJ_FAILED;
        }
        uint64_t values[5], first_segment = 0;
        int good = fhj_read_symbols(descriptor, names, values, 5, &first_segment);
        close(descriptor);
        if (!good) {
            fhj_say(message, size, "process %d's %s is not a 64-bit x86 ELF object; only x86-64 processes can be joined",
                    (int)pid, mapping.path);
            return FHJ_NO_LOADER;
        }
        uint64_t bias = mapping.start - first_segment;
        if (object == 0 && values[3] && values[4]) {
            loader->mmap = bias + values[3];
            loader->munmap = bias + values[4];
        }
        if (!values[0] || !values[1] || !values[2]) continue;
        loader->dlopen = bias + values[0];
        loader->dlsym = bias + values[1];
        loader->dlerror = bias + values[2];
        return FHJ_OK;
    }
    if (!has_libc) {
        fhj_say(message, size,
                "process %d has no libc.so.6 mapped (a static program, or one built on another C library than "
                "glibc); the tracer library can only be loaded into a process that uses glibc",
                (int)pid);
    } else {
        fhj_say(message, size,
                "process %d's libc.so.6 has no dlopen (glibc before 2.34 keeps it in libdl.so.2, which the process "
                "has not loaded); the tracer library cannot be loaded into it",
                (int)pid);
    }
    return FHJ_NO_LOADER;
}

/* What fhj_file_span extends. */
typedef struct {
    const fhj_mapping *file;
    uint64_t *low, *high;
} fhj_span_search;

static int fhj_extend_span(const fhj_map_line *line, void *context) {
    fhj_span_search *search = context;
    if (line->inode == search->file->inode && line->major == search->file->major &&
        line->minor == search->file->minor) {
        if (line->start < *search->low) *search->low = line->start;
        if (line->end > *search->high) *search->high = line->end;
    }
    return 0;
}

/* The range every mapping of the file with this device and inode spans in the process. */
static void fhj_file_span(pid_t pid, const fhj_mapping *mapping, uint64_t *low, uint64_t *high) {
    *low = mapping->start;
    *high = mapping->end;
    fhj_span_search search = {mapping, low, high};
    fhj_each_mapping(pid, fhj_extend_span, &search);
}

/* Where the loader's lock (`_dl_load_lock`, which dlopen and dlclose hold) lies in
   `_rtld_global`, found in this process: dl_iterate_phdr holds the lock declared right after it
   (`_dl_load_write_lock`, both recursive mutexes, in that order in every glibc since 2.13), so
   the one mutex of `_rtld_global` that this thread owns during the walk is that one, and the
   loader's lock the mutex before it. -1 when that cannot be seen. */
static long fhj_scanned_offset = -1;
static const unsigned char *fhj_scanned_global;
static size_t fhj_scanned_size;

static int fhj_scan_global(struct dl_phdr_info *information, size_t size, void *context) {
    (void)information;
    (void)size;
    (void)context;
    pid_t self = (pid_t)syscall(SYS_gettid);
    for (size_t offset = sizeof(pthread_mutex_t); offset + sizeof(pthread_mutex_t) <= fhj_scanned_size;
         offset += sizeof(int)) {
        pthread_mutex_t lock;
        memcpy(&lock, fhj_scanned_global + offset, sizeof lock);
        if (lock.__data.__owner == self && lock.__data.__lock != 0 && lock.__data.__count == 1 &&
            lock.__data.__kind == PTHREAD_MUTEX_RECURSIVE_NP) {
            pthread_mutex_t before;
            memcpy(&before, fhj_scanned_global + offset - sizeof before, sizeof before);
            if (before.__data.__kind == PTHREAD_MUTEX_RECURSIVE_NP) {
                fhj_scanned_offset = (long)(offset - sizeof before);
            }
            break;
        }
    }
    return 1; /* one object is enough: the lock is held from the first */
}

static void fhj_find_load_lock_offset(void) {
    void *global = dlsym(RTLD_DEFAULT, "_rtld_global");
    Dl_info information;
    const ElfW(Sym) *symbol = NULL;
    if (!global || !dladdr1(global, &information, (void **)&symbol, RTLD_DL_SYMENT) || !symbol ||
        symbol->st_size < 2 * sizeof(pthread_mutex_t)) {
        return;
    }
    fhj_scanned_global = global;
    fhj_scanned_size = symbol->st_size;
    dl_iterate_phdr(fhj_scan_global, NULL);
}

static long fhj_load_lock_offset(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fhj_find_load_lock_offset);
    return fhj_scanned_offset;
}

/* Whether the file named `file` (a path's last component) is one of the runtime libraries. The
   tracer's own libraries count as one: they carry the Swift and C++ runtimes, whose locks a
   thread stopped in them may hold; and once a join has left, the return addresses into them
   that its calls left on a thread's stack are stale (a run to one never arrives). */
static int fhj_is_runtime(const char *file) {
    static const char *const names[] = {"libc.so.6",      "libgcc_s.so.1",       "libstdc++.so.6",
                                        "libdispatch.so", "libffi.so",           "libBlocksRuntime.so",
                                        "libZydis.so",    "libFFIHookTracer"};
    for (size_t index = 0; index < sizeof names / sizeof names[0]; index++) {
        if (strncmp(file, names[index], strlen(names[index])) == 0) return 1;
    }
    return strncmp(file, "libswift", 8) == 0 || strncmp(file, "libFoundation", 13) == 0;
}

/* Adds an executable mapping of a runtime library to the loader's list. */
static int fhj_add_runtime(const fhj_map_line *line, void *context) {
    fhj_dynamic_loader *loader = context;
    if (line->permissions[2] != 'x' || !strchr(line->path, '/') || !fhj_is_runtime(line->file)) return 0;
    loader->runtime[loader->runtime_count].start = line->start;
    loader->runtime[loader->runtime_count].end = line->end;
    loader->runtime_count++;
    return loader->runtime_count == (int)(sizeof loader->runtime / sizeof loader->runtime[0]);
}

int fhj_in_runtime(const fhj_dynamic_loader *loader, uint64_t address) {
    for (int index = 0; index < loader->runtime_count; index++) {
        if (address >= loader->runtime[index].start && address < loader->runtime[index].end) return 1;
    }
    return 0;
}

void fhj_find_dynamic_loader(pid_t pid, fhj_dynamic_loader *loader) {
    *loader = (fhj_dynamic_loader){0};
    fhj_each_mapping(pid, fhj_add_runtime, loader);
    fhj_mapping mapping;
    if (!fhj_find_mapping(pid, "ld-linux-x86-64.so.2", &mapping)) return;
    int descriptor = fhj_open_mapped(pid, &mapping);
    if (descriptor < 0) return;
    static const char *const names[] = {"_r_debug", "_rtld_global"};
    uint64_t values[2] = {0}, first_segment = 0;
    int good = fhj_read_symbols(descriptor, names, values, 2, &first_segment);
    close(descriptor);
    if (!good || !values[0]) return;
    fhj_file_span(pid, &mapping, &loader->low, &loader->high);
    uint64_t bias = mapping.start - first_segment;
    loader->r_debug = bias + values[0];
    /* The lock's place is known only when the process runs the very loader this one does. */
    fhj_mapping own;
    long offset = fhj_load_lock_offset();
    if (values[1] && offset >= 0 && fhj_find_mapping(getpid(), "ld-linux-x86-64.so.2", &own) &&
        own.inode == mapping.inode && own.major == mapping.major && own.minor == mapping.minor) {
        loader->load_lock = bias + values[1] + (uint64_t)offset;
    }
}

/* What fhj_maps_code looks for, and whether it found it. */
typedef struct {
    uint64_t address;
    const char *path;
    int found;
} fhj_code_search;

static int fhj_match_code(const fhj_map_line *line, void *context) {
    fhj_code_search *search = context;
    if (search->address < line->start || search->address >= line->end || line->permissions[2] != 'x') return 0;
    /* The path, or the path and " (deleted)": the file was replaced or removed since the join
       mapped it (a rebuild of the tracer while it traced), and the mapping is still that file. */
    size_t length = strlen(search->path);
    search->found = strncmp(line->path, search->path, length) == 0 &&
                    (line->path[length] == 0 || strcmp(line->path + length, " (deleted)") == 0);
    return search->found;
}

int fhj_maps_code(pid_t pid, uint64_t address, const char *path) {
    fhj_code_search search = {address, path, 0};
    fhj_each_mapping(pid, fhj_match_code, &search);
    return search.found;
}

/* What fhj_spare_code looks through, and what it found. */
typedef struct {
    pid_t pid;
    /* The file name looked for in this pass, NULL for any; or the address whose mapping is. */
    const char *name;
    uint64_t within;
    fhj_spare *found;
    int count, capacity;
} fhj_spare_search;

static int fhj_match_spare(const fhj_map_line *line, void *context) {
    fhj_spare_search *search = context;
    if (line->permissions[2] != 'x' || line->inode == 0 || line->path[0] != '/') return 0;
    if (search->name && strncmp(line->file, search->name, strlen(search->name)) != 0) return 0;
    if (!search->name && !search->within &&
        (strncmp(line->file, "ld-linux-x86-64.so.2", 20) == 0 || strncmp(line->file, "libc.so.6", 9) == 0)) {
        return 0; /* listed by the passes before */
    }
    if (search->within && (search->within < line->start || search->within >= line->end)) return 0;
    fhj_mapping mapping = {line->start, line->end, line->major, line->minor, line->inode, {0}};
    snprintf(mapping.path, sizeof mapping.path, "%s", line->path);
    int descriptor = fhj_open_mapped(search->pid, &mapping);
    if (descriptor < 0) return 0;
    Elf64_Ehdr header;
    Elf64_Phdr segments[64];
    long page = sysconf(_SC_PAGESIZE);
    uint64_t mask = (uint64_t)page - 1;
    if (pread(descriptor, &header, sizeof header, 0) == (ssize_t)sizeof header &&
        memcmp(header.e_ident, ELFMAG, SELFMAG) == 0 && header.e_ident[EI_CLASS] == ELFCLASS64 &&
        header.e_machine == EM_X86_64 && header.e_phentsize == sizeof(Elf64_Phdr) && header.e_phnum <= 64 &&
        pread(descriptor, segments, header.e_phnum * sizeof(Elf64_Phdr), (off_t)header.e_phoff) ==
            (ssize_t)(header.e_phnum * sizeof(Elf64_Phdr))) {
        for (size_t index = 0; index < header.e_phnum; index++) {
            const Elf64_Phdr *segment = &segments[index];
            /* The executable segment this mapping starts: mapped from its page-rounded offset. */
            if (segment->p_type != PT_LOAD || !(segment->p_flags & PF_X) ||
                (segment->p_offset & ~mask) != line->offset || segment->p_filesz != segment->p_memsz) {
                continue;
            }
            uint64_t bias = line->start - (segment->p_vaddr & ~mask);
            uint64_t end = bias + segment->p_vaddr + segment->p_memsz;
            uint64_t page_end = (end + mask) & ~mask;
            uint64_t place = (end + 63) & ~(uint64_t)63;
            if (page_end <= line->end && place < page_end) {
                search->found[search->count++] = (fhj_spare){place, page_end};
            }
            break;
        }
    }
    close(descriptor);
    return search->count == search->capacity;
}

int fhj_spare_code(pid_t pid, uint64_t within, fhj_spare *found, int capacity) {
    if (capacity <= 0) return 0;
    if (within) {
        fhj_spare_search search = {pid, NULL, within, found, 0, 1};
        fhj_each_mapping(pid, fhj_match_spare, &search);
        return search.count;
    }
    static const char *const preferred[] = {"ld-linux-x86-64.so.2", "libc.so.6", NULL};
    int count = 0;
    for (size_t pass = 0; pass < sizeof preferred / sizeof preferred[0] && count < capacity; pass++) {
        fhj_spare_search search = {pid, preferred[pass], 0, found + count, 0, capacity - count};
        fhj_each_mapping(pid, fhj_match_spare, &search);
        count += search.count;
    }
    return count;
}
