#ifndef CTESTSYMBOLFIXTURES_H
#define CTESTSYMBOLFIXTURES_H

// C helpers of the symbol resolver's tests (symbol_fixtures.c): a `static` function, which
// only the full symbol table (.symtab) names, and answers taken from the loader and from an
// object's file by other means than the resolver's own.

#include <stddef.h>
#include <stdint.h>

/// A function of signature (int64_t) -> int64_t.
typedef int64_t (*ct_symbol_unary)(int64_t);

/// The `static` function a * 3 + 1 (no dynamic symbol names it).
ct_symbol_unary ct_symbol_static_function(void);

/// The static function's size as the compiler emitted it: it is alone in its section, which the
/// linker's __start_/__stop_ symbols bound.
size_t ct_symbol_static_size(void);

/// Where the static function's section starts (the function itself, at offset 0 of it).
const void *ct_symbol_static_section_start(void);

/// The symbol name dladdr gives for `address`, or NULL when it gives none.
const char *ct_dladdr_name(const void *address);

/// Looks `symbol` up by a linear scan of the SHT_DYNSYM section of the file of the loaded
/// object `object` (a name dlopen(RTLD_NOLOAD) accepts): stores its load bias plus st_value in
/// `address`, its st_size in `size` and its ELF64_ST_TYPE in `type`; returns 1, or 0 when not
/// found.
int ct_dynsym_lookup(const char *object, const char *symbol, uintptr_t *address, uint64_t *size, unsigned char *type);

/// The load bias (link_map's l_addr) of the loaded object `object`, the main program's when
/// NULL; 0 when it is not loaded.
uintptr_t ct_load_bias(const char *object);

/// The `ret` that the library's calls to the loader go through for a call from `caller`
/// (ffh_return_site), NULL when none.
const void *ct_return_site(const void *caller);

/// The executable segment that holds `address`: its start and end into `start` and `end`; 0
/// when no loaded object's executable segment holds it.
int ct_executable_segment(const void *address, uintptr_t *start, uintptr_t *end);

/// Holds the loader's list of objects (inside a `dl_iterate_phdr` callback, as a profiler or
/// an unwinder walking it would) for `milliseconds`, setting `*inside` to 1 once inside and
/// to 2 when leaving it.
void ct_hold_loader_list(unsigned milliseconds, int *inside);

/// The process's threads, as /proc/self/status counts them (system calls alone, for a child
/// of a fork); -1 when it cannot be read.
int ct_thread_count(void);

/// The main program's entry point (AT_ENTRY).
const void *ct_main_program_entry(void);

/// The range the loader's lookup of finished objects (`_dl_find_object`) gives for the main
/// program (the test executable, which holds this file's writable data): 1 with `start` and
/// `end`, 0 when it finds none.
int ct_main_program_range(uintptr_t *start, uintptr_t *end);

#endif
