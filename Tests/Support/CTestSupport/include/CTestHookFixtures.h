#ifndef CTESTHOOKFIXTURES_H
#define CTESTHOOKFIXTURES_H

#include <stdint.h>

/// A point passed and returned by value (two doubles: SSE registers).
typedef struct {
    double x;
    double y;
} ct_fix_point;

/// A table of callbacks, as a C library would hold one.
typedef struct {
    int (*add)(int a, int b);
    double (*mix)(int a, double b, float c, long d);
    void (*notify)(int code);
    ct_fix_point (*offset)(ct_fix_point point, double delta);
    signed char (*negate)(signed char value);
    int (*countdown)(int n);
} ct_fix_table;

/// The table the fixtures' callers call through; its fields start at the functions below.
ct_fix_table *ct_fix_table_get(void);
/// Puts every original function back into the table and clears the counters.
void ct_fix_reset(void);

int ct_fix_add(int a, int b);
double ct_fix_mix(int a, double b, float c, long d);
void ct_fix_notify(int code);
ct_fix_point ct_fix_offset(ct_fix_point point, double delta);
signed char ct_fix_negate(signed char value);
/// Counts down to 0 through the table's `countdown` field, returning how many steps ran.
int ct_fix_countdown(int n);

/// C callers: each loads the field from the table and calls it.
int ct_fix_call_add(int a, int b);
double ct_fix_call_mix(int a, double b, float c, long d);
void ct_fix_call_notify(int code);
ct_fix_point ct_fix_call_offset(ct_fix_point point, double delta);
/// Returns the negated value widened to int as a C caller sees it.
int ct_fix_call_negate(signed char value);
int ct_fix_call_countdown(int n);
/// Calls `add` through the table `count` times with arguments (i, 1); returns the sum of results.
long long ct_fix_call_add_repeatedly(long long count);

/// Calls the `int(int, int)` function held at `slot` `count` times with arguments (i, 1),
/// loading the slot before every call; returns the sum of results.
long long ct_fix_call_add_through(int (**slot)(int, int), long long count);

/// A stand-in for another library's function that took over the `add` slot.
int (*ct_fix_negate_add_shim(void))(int, int);

/// Another library's libffi closure of type `int (*)(int, int)` that forwards to
/// ct_fix_add and counts its calls; made once, never freed.
int (*ct_fix_foreign_closure(void))(int, int);
/// How many calls the foreign closure received.
unsigned long long ct_fix_foreign_closure_runs(void);

/// A zlib-style allocator (`alloc_func`) that counts what it hands out, independently of any
/// hook: every block carries its size in a header.
void *ct_fix_zalloc(void *opaque, unsigned items, unsigned size);
/// The matching `free_func`.
void ct_fix_zfree(void *opaque, void *address);
/// Bytes and blocks ct_fix_zalloc handed out and ct_fix_zfree took back since the last reset.
unsigned long long ct_fix_zalloc_bytes(void);
unsigned long long ct_fix_zfree_bytes(void);
unsigned long long ct_fix_zalloc_blocks(void);
void ct_fix_zalloc_reset(void);

/// Turns on the kernel's memory-deny-write-execute policy for this process (irreversible):
/// no mapping may be writable and executable at once. Returns 0 on success, -1 where the
/// kernel lacks it.
int ct_deny_write_execute(void);

/// Calls the function `slot` holds, read with an atomic load (another thread may be writing
/// the slot), with `a` and `b`.
int ct_fix_call_add_slot(int (**slot)(int, int), int a, int b);

/// Returns `value`: an `unsigned char` (an Objective-C `BOOL`, a flag) in and out.
uint8_t ct_fix_byte_identity(uint8_t value);
/// Calls the function `slot` holds with `value`.
uint8_t ct_fix_call_byte_slot(uint8_t (**slot)(uint8_t), uint8_t value);

/// How many times each original ran since the last reset (atomic counters).
unsigned long long ct_fix_add_runs(void);
unsigned long long ct_fix_notify_runs(void);
/// The last code `ct_fix_notify` received.
int ct_fix_last_notified(void);
/// The arguments the last `ct_fix_add` received.
int ct_fix_last_add_a(void);
int ct_fix_last_add_b(void);

/// Two callees that trust their caller to have sign-extended a `signed char` argument to 32
/// bits, as optimizing compilers do (clang reads the whole register or stack word, no
/// `movsbl`): written in assembly so the tests' unoptimized build keeps that trust. On other
/// architectures they are plain C.
int ct_fix_trusting_schar(signed char value);
int ct_fix_trusting_schar_on_stack(long a, long b, long c, long d, long e, long f, signed char value);

/// The slots holding them, and C callers that call through the slots.
void **ct_fix_trusting_schar_slot(void);
void **ct_fix_trusting_schar_on_stack_slot(void);
int ct_fix_call_trusting_schar(signed char value);
int ct_fix_call_trusting_schar_on_stack(signed char value);
/// Narrow and floating-point results of two arguments, for typed after blocks.
signed char ct_fix_schar_difference(signed char a, signed char b);
unsigned short ct_fix_ushort_sum(unsigned short a, unsigned short b);
float ct_fix_float_product(float a, float b);
/// Call through `slot` and return the whole result register (the result as widened).
long long ct_fix_call_schar_difference_word(signed char (**slot)(signed char, signed char), signed char a,
                                            signed char b);
unsigned long long ct_fix_call_ushort_sum_word(unsigned short (**slot)(unsigned short, unsigned short),
                                               unsigned short a, unsigned short b);
float ct_fix_call_float_product(float (**slot)(float, float), float a, float b);

/// A function of twenty arguments, more than a closure lists without a variable-length
/// array: returns a weighted sum of the integers and the doubles, so each position counts.
double ct_fix_twenty(long a1, double d1, long a2, double d2, long a3, double d3, long a4, double d4, long a5,
                     double d5, long a6, double d6, long a7, double d7, long a8, double d8, long a9, double d9,
                     long a10, double d10);
/// Its slot, and a C caller through it with arguments 1...10 and 0.5...5.0.
void **ct_fix_twenty_slot(void);
double ct_fix_call_twenty(void);

/// Functions of one to seven arguments, argument k (from 1) of the k-th of the types
/// signed char, double, unsigned short, float, long long, const char *, int; each returns a
/// mix of its arguments (the void ones store it in `ct_arity_last`). Their callers pass
/// -5, 2.5, 60000, 0.25f, -(1 << 40), `ct_arity_text_address()`, -2000000000.
const char *ct_arity_text_address(void);
extern long long ct_arity_last;
/// The slot of the function of `count` arguments (1...7) that returns the mix, and of the
/// one that returns void.
void **ct_arity_function_slot(int count);
void **ct_arity_void_function_slot(int count);
/// Calls the function of `count` arguments through its slot; returns what it returned, or
/// for the void one what it stored.
long long ct_arity_call(int count);
long long ct_arity_call_void(int count);

#endif
