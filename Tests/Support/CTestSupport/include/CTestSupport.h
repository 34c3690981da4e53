#ifndef CTESTSUPPORT_H
#define CTESTSUPPORT_H

#include <stddef.h>

#include "CTestAttachFixtures.h"
#include "CTestErrnoFixtures.h"
#include "CTestFaultFixtures.h"
#include "CTestHookFixtures.h"
#include "CTestHookLock.h"
#include "CTestInlineFixtures.h"
#include "CTestProcessFixtures.h"
#include "CTestSymbolFixtures.h"
#include "CTestThreadFixtures.h"
#include "CTestTiming.h"
#include "CTestVariadic.h"
#include "CTestVectorFixtures.h"

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
    /// Writes the alternate value of argument `index` into `buffer` (argument_sizes[index] bytes):
    /// what a hook writes in place of the value fill_argument writes. It differs from that value
    /// in every member: integers and floating point in every stored byte (bit-fields in every 8
    /// bits of their value), data pointers in their low 6 bytes, _Bool by negation, an enum by
    /// its enumerator, a function pointer by its function.
    void (*fill_alternate_argument)(int index, void *buffer);
    /// Returns 0 when `buffer` holds exactly the alternate return value (every significant byte).
    /// Always 0 for a void function.
    int (*check_alternate_return)(const void *buffer);
    /// Writes the alternate return value into `buffer` (return_size bytes; nothing for void).
    void (*fill_alternate_return)(void *buffer);
    /// Writes the value the function returns into `buffer` (return_size bytes; nothing for void).
    void (*fill_return)(void *buffer);
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

/// Expectation bit: the callee compares its arguments with the alternate values (a hook has
/// rewritten every argument before the call).
#define CT_EXPECT_ALTERNATE_ARGUMENTS 1
/// Expectation bit: ct_call_through_slot compares the return value with the alternate one
/// (a hook has replaced the return value). Callees always return their primary value.
#define CT_EXPECT_ALTERNATE_RETURN 2

/// Sets what this thread's callees expect (CT_EXPECT_* bits; 0: the primary values, the
/// initial state) for calls that do not go through ct_call_through_slot.
void ct_set_expectation(int expectation);

/// The address of the slot of entry `index`: a function pointer that ct_call_through_slot
/// calls the entry through, initially the entry's function; a hook replaces it.
/// NULL when `index` is out of range.
void **ct_slot_at(int index);
/// Writes the entry's function back into slot `index`.
void ct_reset_slot(int index);

/// Calls the function in slot `index` from C, with the entry's exact function type and its
/// primary argument values, and checks the value it returns. `expectation` (CT_EXPECT_* bits)
/// holds for this call only; this thread's expectation is 0 afterwards. Returns 0 when the
/// return value is the expected one (always for a void function), nonzero otherwise, -1 when
/// `index` is out of range. The callee's report is left for ct_take_report.
int ct_call_through_slot(int index, int expectation);

#endif
