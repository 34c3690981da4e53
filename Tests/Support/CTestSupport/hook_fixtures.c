#include "CTestHookFixtures.h"

#include <ffi.h>
#include <stdlib.h>
#include <sys/prctl.h>

static ct_fix_table table;
static unsigned long long add_runs;
static unsigned long long notify_runs;
static int last_notified;
static _Thread_local int last_add_a;
static _Thread_local int last_add_b;

int ct_fix_add(int a, int b) {
    __atomic_add_fetch(&add_runs, 1, __ATOMIC_RELAXED);
    last_add_a = a;
    last_add_b = b;
    return a + b;
}

double ct_fix_mix(int a, double b, float c, long d) { return a * 1000.0 + b * 100.0 + c * 10.0 + (double)d; }

void ct_fix_notify(int code) {
    __atomic_add_fetch(&notify_runs, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&last_notified, code, __ATOMIC_RELAXED);
}

ct_fix_point ct_fix_offset(ct_fix_point point, double delta) {
    ct_fix_point result = {point.x + delta, point.y - delta};
    return result;
}

signed char ct_fix_negate(signed char value) { return (signed char)-value; }

int ct_fix_countdown(int n) {
    if (n <= 0) return 0;
    int (*volatile next)(int) = table.countdown;
    return 1 + next(n - 1);
}

ct_fix_table *ct_fix_table_get(void) { return &table; }

void ct_fix_reset(void) {
    table.add = ct_fix_add;
    table.mix = ct_fix_mix;
    table.notify = ct_fix_notify;
    table.offset = ct_fix_offset;
    table.negate = ct_fix_negate;
    table.countdown = ct_fix_countdown;
    __atomic_store_n(&add_runs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&notify_runs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&last_notified, 0, __ATOMIC_RELAXED);
}

#define LOAD(field) __atomic_load_n(&table.field, __ATOMIC_ACQUIRE)

int ct_fix_call_add(int a, int b) { return LOAD(add)(a, b); }
double ct_fix_call_mix(int a, double b, float c, long d) { return LOAD(mix)(a, b, c, d); }
void ct_fix_call_notify(int code) { LOAD(notify)(code); }
ct_fix_point ct_fix_call_offset(ct_fix_point point, double delta) { return LOAD(offset)(point, delta); }
int ct_fix_call_negate(signed char value) { return LOAD(negate)(value); }
int ct_fix_call_countdown(int n) { return LOAD(countdown)(n); }

long long ct_fix_call_add_repeatedly(long long count) {
    long long sum = 0;
    for (long long i = 0; i < count; i++) sum += LOAD(add)((int)(i & 0xFFFF), 1);
    return sum;
}

long long ct_fix_call_add_through(int (**slot)(int, int), long long count) {
    long long sum = 0;
    for (long long i = 0; i < count; i++) sum += __atomic_load_n(slot, __ATOMIC_ACQUIRE)((int)(i & 0xFFFF), 1);
    return sum;
}

int ct_fix_call_add_slot(int (**slot)(int, int), int a, int b) {
    return __atomic_load_n(slot, __ATOMIC_ACQUIRE)(a, b);
}

uint8_t ct_fix_byte_identity(uint8_t value) { return value; }

uint8_t ct_fix_call_byte_slot(uint8_t (**slot)(uint8_t), uint8_t value) {
    return __atomic_load_n(slot, __ATOMIC_ACQUIRE)(value);
}

unsigned long long ct_fix_add_runs(void) { return __atomic_load_n(&add_runs, __ATOMIC_RELAXED); }
unsigned long long ct_fix_notify_runs(void) { return __atomic_load_n(&notify_runs, __ATOMIC_RELAXED); }
int ct_fix_last_notified(void) { return __atomic_load_n(&last_notified, __ATOMIC_RELAXED); }
int ct_fix_last_add_a(void) { return last_add_a; }
int ct_fix_last_add_b(void) { return last_add_b; }

static int other_library_add(int a, int b) { return -(a + b); }
int (*ct_fix_negate_add_shim(void))(int, int) { return other_library_add; }

int ct_deny_write_execute(void) {
    /* PR_SET_MDWE and PR_MDWE_REFUSE_EXEC_GAIN (Linux 6.3), spelled out for older headers. */
    return prctl(65, 1UL, 0UL, 0UL, 0UL) == 0 ? 0 : -1;
}

static unsigned long long foreign_runs;

static void foreign_forward(ffi_cif *cif, void *result, void **arguments, void *user_data) {
    (void)user_data;
    __atomic_add_fetch(&foreign_runs, 1, __ATOMIC_RELAXED);
    ffi_call(cif, (void (*)(void))ct_fix_add, result, arguments);
}

int (*ct_fix_foreign_closure(void))(int, int) {
    static ffi_cif cif;
    static ffi_type *arguments[2];
    static void *code;
    if (code) return (int (*)(int, int))code;
    arguments[0] = &ffi_type_sint32;
    arguments[1] = &ffi_type_sint32;
    if (ffi_prep_cif(&cif, FFI_DEFAULT_ABI, 2, &ffi_type_sint32, arguments) != FFI_OK) return 0;
    ffi_closure *closure = ffi_closure_alloc(sizeof(ffi_closure), &code);
    if (!closure || ffi_prep_closure_loc(closure, &cif, foreign_forward, 0, code) != FFI_OK) return 0;
    return (int (*)(int, int))code;
}

unsigned long long ct_fix_foreign_closure_runs(void) { return __atomic_load_n(&foreign_runs, __ATOMIC_RELAXED); }

static unsigned long long zalloc_bytes;
static unsigned long long zfree_bytes;
static unsigned long long zalloc_blocks;

void *ct_fix_zalloc(void *opaque, unsigned items, unsigned size) {
    (void)opaque;
    size_t bytes = (size_t)items * size;
    size_t *block = malloc(sizeof(size_t) * 2 + bytes);
    if (!block) return 0;
    block[0] = bytes;
    __atomic_add_fetch(&zalloc_bytes, bytes, __ATOMIC_RELAXED);
    __atomic_add_fetch(&zalloc_blocks, 1, __ATOMIC_RELAXED);
    return block + 2;
}

void ct_fix_zfree(void *opaque, void *address) {
    (void)opaque;
    if (!address) return;
    size_t *block = (size_t *)address - 2;
    __atomic_add_fetch(&zfree_bytes, block[0], __ATOMIC_RELAXED);
    free(block);
}

unsigned long long ct_fix_zalloc_bytes(void) { return __atomic_load_n(&zalloc_bytes, __ATOMIC_RELAXED); }
unsigned long long ct_fix_zfree_bytes(void) { return __atomic_load_n(&zfree_bytes, __ATOMIC_RELAXED); }
unsigned long long ct_fix_zalloc_blocks(void) { return __atomic_load_n(&zalloc_blocks, __ATOMIC_RELAXED); }
void ct_fix_zalloc_reset(void) {
    __atomic_store_n(&zalloc_bytes, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&zfree_bytes, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&zalloc_blocks, 0, __ATOMIC_RELAXED);
}

#if defined(__x86_64__)
__attribute__((naked)) int ct_fix_trusting_schar(signed char value) {
    __asm__("movl %edi, %eax\n\tret");
}
__attribute__((naked)) int ct_fix_trusting_schar_on_stack(long a, long b, long c, long d, long e, long f,
                                                          signed char value) {
    __asm__("movl 8(%rsp), %eax\n\tret");
}
#else
int ct_fix_trusting_schar(signed char value) { return value; }
int ct_fix_trusting_schar_on_stack(long a, long b, long c, long d, long e, long f, signed char value) {
    (void)a, (void)b, (void)c, (void)d, (void)e, (void)f;
    return value;
}
#endif

static void *trusting_schar_slot = (void *)ct_fix_trusting_schar;
static void *trusting_schar_on_stack_slot = (void *)ct_fix_trusting_schar_on_stack;

void **ct_fix_trusting_schar_slot(void) { return &trusting_schar_slot; }
void **ct_fix_trusting_schar_on_stack_slot(void) { return &trusting_schar_on_stack_slot; }

int ct_fix_call_trusting_schar(signed char value) {
    int (*function)(signed char) = (int (*)(signed char))__atomic_load_n(&trusting_schar_slot, __ATOMIC_ACQUIRE);
    return function(value);
}

int ct_fix_call_trusting_schar_on_stack(signed char value) {
    int (*function)(long, long, long, long, long, long, signed char) =
        (int (*)(long, long, long, long, long, long, signed char))__atomic_load_n(&trusting_schar_on_stack_slot,
                                                                                  __ATOMIC_ACQUIRE);
    return function(1, 2, 3, 4, 5, 6, value);
}

double ct_fix_twenty(long a1, double d1, long a2, double d2, long a3, double d3, long a4, double d4, long a5,
                     double d5, long a6, double d6, long a7, double d7, long a8, double d8, long a9, double d9,
                     long a10, double d10) {
    long integers[] = {a1, a2, a3, a4, a5, a6, a7, a8, a9, a10};
    double doubles[] = {d1, d2, d3, d4, d5, d6, d7, d8, d9, d10};
    double sum = 0;
    for (int index = 0; index < 10; index++) sum += (index + 1) * (integers[index] * 1000.0 + doubles[index]);
    return sum;
}

static void *twenty_slot = (void *)ct_fix_twenty;

void **ct_fix_twenty_slot(void) { return &twenty_slot; }

double ct_fix_call_twenty(void) {
    double (*function)(long, double, long, double, long, double, long, double, long, double, long, double, long,
                       double, long, double, long, double, long, double) =
        (double (*)(long, double, long, double, long, double, long, double, long, double, long, double, long, double,
                    long, double, long, double, long, double))__atomic_load_n(&twenty_slot, __ATOMIC_ACQUIRE);
    return function(1, 0.5, 2, 1.0, 3, 1.5, 4, 2.0, 5, 2.5, 6, 3.0, 7, 3.5, 8, 4.0, 9, 4.5, 10, 5.0);
}

/* Functions of one to seven arguments of mixed types, for the typed hooks of every arity:
 * argument k (from 1) has the k-th of these types, and each caller passes the same values. */
static const char ct_arity_text[] = "arity";
const char *ct_arity_text_address(void) { return ct_arity_text; }

static long long ct_arity_mix(int count, signed char a1, double a2, unsigned short a3, float a4, long long a5,
                              const char *a6, int a7) {
    long long mix = a1;
    if (count >= 2) mix = mix * 31 + (long long)(a2 * 8);
    if (count >= 3) mix = mix * 31 + a3;
    if (count >= 4) mix = mix * 31 + (long long)(a4 * 64);
    if (count >= 5) mix = mix * 31 + a5;
    if (count >= 6) mix = mix * 31 + (a6 == ct_arity_text ? 6 : -6);
    if (count >= 7) mix = mix * 31 + a7;
    return mix;
}

long long ct_arity_last;

#define CT_ARITY_LIST(...) __VA_ARGS__
#define CT_ARITY_FUNCTIONS(n, params, args, call_args)                                                               \
    long long ct_arity_##n params { return ct_arity_mix(n, CT_ARITY_LIST args); }                                    \
    void ct_arity_void_##n params { ct_arity_last = ct_arity_mix(n, CT_ARITY_LIST args); }                           \
    static void *ct_arity_slot_##n = (void *)ct_arity_##n;                                                           \
    static void *ct_arity_void_slot_##n = (void *)ct_arity_void_##n;                                                 \
    static long long ct_arity_call_##n(void) {                                                                       \
        long long(*function) params = (long long(*) params)__atomic_load_n(&ct_arity_slot_##n, __ATOMIC_ACQUIRE);    \
        return function call_args;                                                                                   \
    }                                                                                                                \
    static void ct_arity_call_void_##n(void) {                                                                       \
        void(*function) params = (void(*) params)__atomic_load_n(&ct_arity_void_slot_##n, __ATOMIC_ACQUIRE);         \
        function call_args;                                                                                          \
    }

CT_ARITY_FUNCTIONS(1, (signed char a1), (a1, 0, 0, 0, 0, 0, 0), (-5))
CT_ARITY_FUNCTIONS(2, (signed char a1, double a2), (a1, a2, 0, 0, 0, 0, 0), (-5, 2.5))
CT_ARITY_FUNCTIONS(3, (signed char a1, double a2, unsigned short a3), (a1, a2, a3, 0, 0, 0, 0), (-5, 2.5, 60000))
CT_ARITY_FUNCTIONS(4, (signed char a1, double a2, unsigned short a3, float a4), (a1, a2, a3, a4, 0, 0, 0),
                   (-5, 2.5, 60000, 0.25f))
CT_ARITY_FUNCTIONS(5, (signed char a1, double a2, unsigned short a3, float a4, long long a5),
                   (a1, a2, a3, a4, a5, 0, 0), (-5, 2.5, 60000, 0.25f, -(1LL << 40)))
CT_ARITY_FUNCTIONS(6, (signed char a1, double a2, unsigned short a3, float a4, long long a5, const char *a6),
                   (a1, a2, a3, a4, a5, a6, 0), (-5, 2.5, 60000, 0.25f, -(1LL << 40), ct_arity_text))
CT_ARITY_FUNCTIONS(7,
                   (signed char a1, double a2, unsigned short a3, float a4, long long a5, const char *a6, int a7),
                   (a1, a2, a3, a4, a5, a6, a7), (-5, 2.5, 60000, 0.25f, -(1LL << 40), ct_arity_text, -2000000000))

void **ct_arity_function_slot(int count) {
    void **slots[] = {&ct_arity_slot_1, &ct_arity_slot_2, &ct_arity_slot_3, &ct_arity_slot_4,
                      &ct_arity_slot_5, &ct_arity_slot_6, &ct_arity_slot_7};
    return count >= 1 && count <= 7 ? slots[count - 1] : 0;
}

void **ct_arity_void_function_slot(int count) {
    void **slots[] = {&ct_arity_void_slot_1, &ct_arity_void_slot_2, &ct_arity_void_slot_3, &ct_arity_void_slot_4,
                      &ct_arity_void_slot_5, &ct_arity_void_slot_6, &ct_arity_void_slot_7};
    return count >= 1 && count <= 7 ? slots[count - 1] : 0;
}

long long ct_arity_call(int count) {
    switch (count) {
    case 1: return ct_arity_call_1();
    case 2: return ct_arity_call_2();
    case 3: return ct_arity_call_3();
    case 4: return ct_arity_call_4();
    case 5: return ct_arity_call_5();
    case 6: return ct_arity_call_6();
    default: return ct_arity_call_7();
    }
}

long long ct_arity_call_void(int count) {
    ct_arity_last = 0;
    switch (count) {
    case 1: ct_arity_call_void_1(); break;
    case 2: ct_arity_call_void_2(); break;
    case 3: ct_arity_call_void_3(); break;
    case 4: ct_arity_call_void_4(); break;
    case 5: ct_arity_call_void_5(); break;
    case 6: ct_arity_call_void_6(); break;
    default: ct_arity_call_void_7(); break;
    }
    return ct_arity_last;
}

signed char ct_fix_schar_difference(signed char a, signed char b) { return (signed char)(a - b); }
unsigned short ct_fix_ushort_sum(unsigned short a, unsigned short b) { return (unsigned short)(a + b); }
float ct_fix_float_product(float a, float b) { return a * b; }

long long ct_fix_call_schar_difference_word(signed char (**slot)(signed char, signed char), signed char a,
                                            signed char b) {
    /* The whole result register, as a caller that trusts a callee to widen its result reads it. */
    long long (*function)(signed char, signed char) =
        (long long (*)(signed char, signed char))__atomic_load_n(slot, __ATOMIC_ACQUIRE);
    return function(a, b);
}

unsigned long long ct_fix_call_ushort_sum_word(unsigned short (**slot)(unsigned short, unsigned short),
                                               unsigned short a, unsigned short b) {
    unsigned long long (*function)(unsigned short, unsigned short) =
        (unsigned long long (*)(unsigned short, unsigned short))__atomic_load_n(slot, __ATOMIC_ACQUIRE);
    return function(a, b);
}

float ct_fix_call_float_product(float (**slot)(float, float), float a, float b) {
    return __atomic_load_n(slot, __ATOMIC_ACQUIRE)(a, b);
}
