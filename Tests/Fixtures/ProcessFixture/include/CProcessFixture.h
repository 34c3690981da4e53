#ifndef CPROCESSFIXTURE_H
#define CPROCESSFIXTURE_H

// A shared library that the process-life tests open with dlopen, hook, and unload with
// dlclose before removing the hooks. Linked with lazy binding and partial RELRO, and without
// the Swift startup object (-nostartfiles), so that nothing keeps it loaded or points into it
// once it is closed.

#include <stddef.h>

/// A table of callbacks in the library's writable data, as a C library keeps one.
typedef struct {
    /// Initially cprocessfixture_triple.
    int (*compute)(int value);
} cprocessfixture_table;

/// The library's table (its first field is at the table's address).
cprocessfixture_table *cprocessfixture_table_get(void);

/// The table's original function: value * 3.
int cprocessfixture_triple(int value);

/// Calls the table's `compute` field with `value`, loading the field first.
int cprocessfixture_call(int value);

/// getpid(), called through the PLT: a JUMP_SLOT entry, writable under lazy binding.
int cprocessfixture_pid(void);

/// strlen(text), called through a pointer loaded from the GOT: a GLOB_DAT entry, read-only
/// once relocated (partial RELRO).
size_t cprocessfixture_length(const char *text);

#endif
