#ifndef CTESTSUPPORT_H
#define CTESTSUPPORT_H

#include <stddef.h>

#include "CTestVariadic.h"

/// One C type as gcc sees it: its spelling, its `@encode` string, `sizeof` and `_Alignof`.
typedef struct {
    const char *declaration;
    const char *encoding;
    size_t size;
    size_t alignment;
} ct_layout;

/// The number of entries in the layout table.
int ct_layout_count(void);
/// The layout table entry at `index` (0 ..< ct_layout_count()).
const ct_layout *ct_layout_at(int index);

/// One compiler-built function with the data to call it and check the call.
typedef struct {
    /// The C name of the function.
    const char *name;
    /// The return type's encoding followed by each argument type's encoding (gcc `@encode`).
    const char *encoding;
    /// The function itself.
    const void *function;
    /// How many arguments it takes.
    int argument_count;
    /// `sizeof` of each argument.
    const size_t *argument_sizes;
    /// `sizeof` of the return type, 0 for void.
    size_t return_size;
    /// Writes the value the callee expects for argument `index` into `buffer` (argument_sizes[index] bytes).
    void (*fill_argument)(int index, void *buffer);
    /// Returns 0 when `buffer` holds exactly the value the function returns (every significant byte).
    int (*check_return)(const void *buffer);
} ct_call;

/// The number of entries in the call table.
int ct_call_count(void);
/// The call table entry at `index` (0 ..< ct_call_count()).
const ct_call *ct_call_at(int index);

/// What the last callee on this thread saw.
typedef struct {
    /// How many times a table function ran on this thread since the last take.
    int calls;
    /// 0 when every argument arrived byte-exact, otherwise 1 + the index of the first wrong argument.
    int failed_argument;
} ct_report;

/// Returns this thread's report and clears it.
ct_report ct_take_report(void);

#endif
