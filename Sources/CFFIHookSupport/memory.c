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
