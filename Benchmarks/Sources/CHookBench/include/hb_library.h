#ifndef HB_LIBRARY_H
#define HB_LIBRARY_H

// The library rows of hookbench: the functions a loaded shared library exports, read from its
// dynamic symbol table without the library under test (so that listing them plans nothing),
// and what the process's memory looks like around the measurement.

#include <stddef.h>
#include <stdint.h>

/// Writes up to `capacity` addresses of the functions (`STT_FUNC`, defined) that the loaded
/// object whose path ends with `name` exports into `addresses`, in its table's order; returns
/// how many there are in all, or -1 when no loaded object has that name.
long hb_library_functions(const char *name, uintptr_t *addresses, size_t capacity);

/// Reads every page of the loaded object whose path ends with `name` once, so that its code is
/// resident before memory is measured; returns how many pages it read.
long hb_library_touch(const char *name);

/// The process's resident memory, in KiB: VmRSS, RssAnon and RssFile of /proc/self/status.
typedef struct {
    long resident;
    long anonymous;
    long file;
} hb_memory;

/// The process's resident memory now; -1 in each field it could not read.
hb_memory hb_memory_now(void);

/// How many mappings /proc/self/maps lists.
long hb_mapping_count(void);

/// Gives the allocator's free memory back to the system (glibc's malloc_trim).
void hb_trim(void);

#endif
