#include "CTestHookFixtures.h"

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

unsigned long long ct_fix_add_runs(void) { return __atomic_load_n(&add_runs, __ATOMIC_RELAXED); }
unsigned long long ct_fix_notify_runs(void) { return __atomic_load_n(&notify_runs, __ATOMIC_RELAXED); }
int ct_fix_last_notified(void) { return __atomic_load_n(&last_notified, __ATOMIC_RELAXED); }
int ct_fix_last_add_a(void) { return last_add_a; }
int ct_fix_last_add_b(void) { return last_add_b; }

static int other_library_add(int a, int b) { return -(a + b); }
int (*ct_fix_negate_add_shim(void))(int, int) { return other_library_add; }
