#ifndef FFH_MEMORY_H
#define FFH_MEMORY_H

// Memory barriers for reclamation, and reads, writes and writability checks that never fault.

#include <stdint.h>

// MARK: - Memory barriers for reclamation

/// Registers the process for expedited private memory barriers (Linux membarrier);
/// returns 0 when they are available.
int ffh_membarrier_register(void);

/// Makes every running thread of the process execute a full memory barrier before it
/// returns, so readers can do without one; returns 0 on success.
int ffh_membarrier(void);

/// Keeps the compiler from moving memory accesses across this point (no instruction is
/// emitted). Swift has no signal fence; a reader whose hardware barrier is supplied by
/// ffh_membarrier still needs this one.
static inline void ffh_compiler_barrier(void) { __asm__ __volatile__("" ::: "memory"); }

/// Gives the allocator's free memory back to the system where it can (glibc's `malloc_trim`):
/// after work that allocated and freed a lot at once (planning thousands of functions), so
/// that its peak does not stay in the process's resident memory. Does nothing elsewhere.
void ffh_release_free_memory(void);

// MARK: - Safe memory access

/// Reads the machine word at `address` into `value` without faulting: returns 0 on success,
/// -1 when the address is not readable in this process. Under the fault guard on Linux x86-64
/// (see ffh_guard.h: one instruction, and one system call to check the guard), elsewhere as
/// ``ffh_copy_word``.
int ffh_read_word(const void *address, uintptr_t *value);

/// Whether a mapping covers the page holding `address`, whatever its protection (a page
/// made inaccessible with PROT_NONE is mapped): 1 or 0, asked of the kernel (mincore).
int ffh_is_mapped(const void *address);

/// Reads the machine word at `address` into `value` by asking the kernel to copy it
/// (`process_vm_readv` on this process), which needs no fault guard and costs two system
/// calls: 0 on success, -1 when it is not readable.
int ffh_copy_word(const void *address, uintptr_t *value);

/// Whether the 32-bit word at `address` (4-byte aligned) can be written, asked of the kernel
/// without changing it (an atomic OR with 0 through `FUTEX_WAKE_OP`, which fails with EFAULT
/// on memory that is unmapped or not writable): 1 when writable, 0 when not.
int ffh_is_writable(void *address);

/// A mapping of the process: its range, its protection (`PROT_*`) and whether a file backs it.
typedef struct {
    uintptr_t start;
    uintptr_t end;
    int protection;
    int file_backed;
} ffh_mapping;

/// The mapping that covers `address`, read from /proc/self/maps with system calls alone (no
/// function a program may hook, no allocation): 1 with `*mapping`, 0 when none covers it, -1
/// when the file cannot be read (or on a platform without it).
int ffh_mapping_of(uintptr_t address, ffh_mapping *mapping);

/// /proc/self/maps opened for ``ffh_mapping_query`` (by system call, close-on-exec): its
/// descriptor, or -1. It answers for this process's memory as it was opened: a child of a fork
/// opens its own.
int ffh_maps_open(void);

/// Closes what ``ffh_maps_open`` opened.
void ffh_maps_close(int descriptor);

/// The mapping that covers `address`, asked of the kernel through the memory map's
/// PROCMAP_QUERY request (Linux 6.11): one system call, no text made or read, where reading
/// the file costs in proportion to every mapping of the process. 1 with `*mapping`, 0 when
/// none covers it, -1 when the kernel has no such request (or on a platform without it).
int ffh_mapping_query(int descriptor, uintptr_t address, ffh_mapping *mapping);

/// Replaces the machine word at `address` (aligned) with `desired` if it holds `expected`,
/// without faulting even when another thread unmaps or protects the memory meanwhile: 1 when
/// replaced, 0 when the word held something else, -1 when it cannot be written (unmapped or
/// read-only). On Linux x86-64 the exchange runs under the fault guard (ffh_guard.h);
/// elsewhere the kernel is asked first (as ``ffh_is_writable``), which leaves a window in
/// which an unmap makes the exchange fault.
int ffh_exchange_if_writable(void *address, uintptr_t expected, uintptr_t desired);

#endif
