#define _GNU_SOURCE
#include "ffh_memory.h"

#include "ffh_guard.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "ffh_syscall.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>

/* System calls by instruction (ffh_syscall.h): libc's syscall() may be hooked. */
int ffh_membarrier_register(void) {
    return ffh_syscall3(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 0 : -1;
}

int ffh_membarrier(void) { return ffh_syscall3(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0 ? 0 : -1; }

/* Registers for membarrier as the library loads, where the process has one thread: the kernel
   then registers it at once (a few microseconds), where with a second thread it waits for an
   RCU grace period first (10 to 15 ms, which a program's first hook paid). A later
   registration returns at once, and fork keeps it. A library loaded into a process that has
   threads already (dlopen) leaves it to the first hook. */
__attribute__((constructor)) static void ffh_membarrier_early(void) {
    if (__libc_single_threaded) (void)ffh_membarrier_register();
}

/* The kernel copies the word, so an unmapped address is an error (EFAULT), not a fault. */
int ffh_copy_word(const void *address, uintptr_t *value) {
    struct iovec local = {value, sizeof *value};
    struct iovec remote = {(void *)address, sizeof *value};
    /* Straight to the kernel, not through libc's getpid and process_vm_readv: a program may
       have hooked or replaced those in its own import table, which is where this library's
       calls go when it is linked into the program. */
    long pid = ffh_syscall0(SYS_getpid);
    return ffh_syscall6(SYS_process_vm_readv, pid, (long)&local, 1, (long)&remote, 1, 0) == (long)sizeof *value ? 0 : -1;
}

int ffh_is_mapped(const void *address) {
    /* mincore fails with ENOMEM only where no mapping covers the page, whatever the page's
       protection (PROT_NONE included). 4 KiB is the smallest page size: the page-aligned
       address below `address` starts a page on every kernel. */
    unsigned char resident[1];
    uintptr_t page = (uintptr_t)address & ~(uintptr_t)4095;
    return ffh_syscall3(SYS_mincore, (long)page, 1, (long)resident) != -ENOMEM;
}

/* Reads the line of /proc/self/maps that covers `address` with system calls only, through a
   buffer on the stack: no function a program may hook, and no allocation. */
int ffh_maps_open(void) {
    long file = ffh_syscall6(SYS_openat, AT_FDCWD, (long)"/proc/self/maps", O_RDONLY | O_CLOEXEC, 0, 0, 0);
    return file < 0 ? -1 : (int)file;
}

void ffh_maps_close(int descriptor) {
    if (descriptor >= 0) ffh_syscall3(SYS_close, descriptor, 0, 0);
}

/* The request's layout and number, as the kernel's <linux/fs.h> gives them since 6.11 (older
   headers lack them): the kernel reads `size` to learn which fields the caller knows. */
struct ffh_procmap_query {
    uint64_t size;
    uint64_t query_flags;
    uint64_t query_addr;
    uint64_t vma_start;
    uint64_t vma_end;
    uint64_t vma_flags;
    uint64_t vma_page_size;
    uint64_t vma_offset;
    uint64_t inode;
    uint32_t dev_major;
    uint32_t dev_minor;
    uint32_t vma_name_size;
    uint32_t build_id_size;
    uint64_t vma_name_addr;
    uint64_t build_id_addr;
};
_Static_assert(sizeof(struct ffh_procmap_query) == 104, "struct procmap_query");
enum {
    FFH_PROCMAP_QUERY = (int)0xC0686611u, /* _IOWR('f', 17, struct procmap_query) */
    FFH_PROCMAP_READABLE = 0x01,
    FFH_PROCMAP_WRITABLE = 0x02,
    FFH_PROCMAP_EXECUTABLE = 0x04,
};

int ffh_mapping_query(int descriptor, uintptr_t address, ffh_mapping *mapping) {
    if (descriptor < 0) return -1;
    struct ffh_procmap_query query = {.size = sizeof query, .query_addr = address};
    long result;
    do {
        result = ffh_syscall3(SYS_ioctl, descriptor, (long)(unsigned)FFH_PROCMAP_QUERY, (long)&query);
    } while (result == -EINTR);
    if (result == -ENOENT) return 0;
    if (result != 0) return -1; /* ENOTTY: a kernel before the request */
    mapping->start = (uintptr_t)query.vma_start;
    mapping->end = (uintptr_t)query.vma_end;
    mapping->protection = ((query.vma_flags & FFH_PROCMAP_READABLE) ? PROT_READ : 0) |
                          ((query.vma_flags & FFH_PROCMAP_WRITABLE) ? PROT_WRITE : 0) |
                          ((query.vma_flags & FFH_PROCMAP_EXECUTABLE) ? PROT_EXEC : 0);
    mapping->file_backed = query.inode != 0;
    return 1;
}

int ffh_mapping_of(uintptr_t address, ffh_mapping *mapping) {
    long file = ffh_syscall6(SYS_openat, AT_FDCWD, (long)"/proc/self/maps", O_RDONLY | O_CLOEXEC, 0, 0, 0);
    if (file < 0) return -1;
    /* Asked where the kernel can answer: the whole file read only where it cannot. */
    int asked = ffh_mapping_query((int)file, address, mapping);
    if (asked >= 0) {
        ffh_syscall3(SYS_close, file, 0, 0);
        return asked;
    }
    char buffer[4096];
    size_t held = 0;
    int result = 0;
    for (;;) {
        long got = ffh_syscall3(SYS_read, file, (long)(buffer + held), (long)(sizeof buffer - held));
        if (got < 0 && got == -EINTR) continue;
        if (got <= 0) {
            if (got < 0) result = -1;
            break;
        }
        held += (size_t)got;
        size_t line = 0;
        for (size_t end = 0; end < held; end++) {
            if (buffer[end] != '\n') continue;
            /* start-end perms offset dev:ice inode [path] */
            const char *at = buffer + line;
            const char *stop = buffer + end;
            uintptr_t fields[2] = {0, 0};
            for (int field = 0; field < 2; field++) {
                while (at < stop && *at != '-' && *at != ' ') {
                    char digit = *at++;
                    fields[field] = fields[field] << 4 |
                                    (uintptr_t)(digit <= '9' ? digit - '0' : (digit | 0x20) - 'a' + 10);
                }
                at++;
            }
            if (address >= fields[0] && address < fields[1] && at + 4 <= stop) {
                mapping->start = fields[0];
                mapping->end = fields[1];
                mapping->protection = (at[0] == 'r' ? PROT_READ : 0) | (at[1] == 'w' ? PROT_WRITE : 0) |
                                      (at[2] == 'x' ? PROT_EXEC : 0);
                /* Past the permissions, the offset and the device: the inode, 0 for memory of no file. */
                int spaces = 0;
                while (at < stop && spaces < 3) spaces += *at++ == ' ';
                mapping->file_backed = at < stop && *at != '0';
                result = 1;
                break;
            }
            line = end + 1;
        }
        if (result) break;
        if (line == 0 && held == sizeof buffer) {
            result = -1; /* a line longer than the buffer: not a maps line */
            break;
        }
        held -= line;
        for (size_t index = 0; index < held; index++) buffer[index] = buffer[line + index];
    }
    ffh_syscall3(SYS_close, file, 0, 0);
    return result;
}

int ffh_is_writable(void *address) {
    uint32_t unused = 0;
    long woken = ffh_syscall6(
        __NR_futex, (long)&unused, FUTEX_WAKE_OP | FUTEX_PRIVATE_FLAG, 0, 0, (long)address,
        FUTEX_OP(FUTEX_OP_OR, 0, FUTEX_OP_CMP_EQ, 0));
    return woken >= 0;
}
#else
int ffh_is_mapped(const void *address) {
    (void)address;
    return 1;
}
int ffh_membarrier_register(void) { return -1; }
int ffh_membarrier(void) { return -1; }
int ffh_copy_word(const void *address, uintptr_t *value) {
    *value = *(const uintptr_t *)address;
    return 0;
}
int ffh_is_writable(void *address) {
    (void)address;
    return 1;
}
int ffh_maps_open(void) { return -1; }
void ffh_maps_close(int descriptor) { (void)descriptor; }
int ffh_mapping_query(int descriptor, uintptr_t address, ffh_mapping *mapping) {
    (void)descriptor;
    (void)address;
    (void)mapping;
    return -1;
}
int ffh_mapping_of(uintptr_t address, ffh_mapping *mapping) {
    (void)address;
    (void)mapping;
    return -1;
}
#endif

#if defined(__GLIBC__)
#include <malloc.h>
void ffh_release_free_memory(void) { (void)malloc_trim(0); }
#else
void ffh_release_free_memory(void) {}
#endif

/* Under the fault guard where there is one (ffh_guard.h), else copied by the kernel. */
int ffh_read_word(const void *address, uintptr_t *value) {
    int result = ffh_guarded_load(address, value);
    return result == FFH_GUARD_UNAVAILABLE ? ffh_copy_word(address, value) : result;
}

/* Under the fault guard where there is one (ffh_guard.h), else the kernel is asked whether the
   word can be written and the exchange follows at once (an unmap between the two still
   faults). */
int ffh_exchange_if_writable(void *address, uintptr_t expected, uintptr_t desired) {
    int result = ffh_guarded_exchange(address, expected, desired);
    if (result != FFH_GUARD_UNAVAILABLE) return result;
    if (!ffh_is_writable(address)) return -1;
    return __atomic_compare_exchange_n((uintptr_t *)address, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
               ? 1
               : 0;
}
