#include "CHookBench.h"

#include <stddef.h>

// The originals do a little arithmetic so that the result depends on every argument.

__attribute__((noinline)) int hb_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }

static volatile unsigned hb_tick_count;

__attribute__((noinline)) void hb_tick(void) { hb_tick_count = hb_tick_count + 1; }

unsigned hb_tick_calls(void) { return hb_tick_count; }

__attribute__((noinline)) double hb_mix(double a, double b) { return a * 0.5 + b; }

__attribute__((noinline)) int hb_sum6(int a, int b, int c, int d, int e, int f) {
    return (int)((unsigned)a + (unsigned)b + (unsigned)c + (unsigned)d + (unsigned)e + (unsigned)f);
}

__attribute__((noinline)) double hb_point_sum(hb_point point) { return point.x + point.y; }

__attribute__((noinline)) hb_record hb_record_next(hb_record record) {
    hb_record next = { record.b, record.c, record.d, record.e, record.a + 1 };
    return next;
}

__attribute__((noinline)) int hb_add_padded(int a, int b) {
    // No-ops that the processor skips but a patcher can move: frida-gum overwrites a
    // function's first 16 bytes with a jump, and hb_add is 4 bytes long.
    __asm__ volatile(".nops 16");
    return (int)((unsigned)a + (unsigned)b);
}

void *hb_direct_function(void) { return (void *)hb_add_padded; }

// Read with a relaxed load on every call: the original is stored once the replacement is
// installed (the replacement's token gives it), and a plain load is what a user's C
// replacement that keeps its original in a global does.
static void *hb_replacement_original;

__attribute__((noinline)) int hb_add_replacement(int a, int b) {
    return ((int (*)(int, int))__atomic_load_n(&hb_replacement_original, __ATOMIC_RELAXED))(a, b);
}

__attribute__((noinline)) void hb_empty_attach_function(void *context, void *frame) {
    (void)context;
    (void)frame;
    __asm__ __volatile__("" ::: "memory");
}

void hb_set_replacement_original(void *original) {
    __atomic_store_n(&hb_replacement_original, original, __ATOMIC_RELEASE);
}

static void *hb_slots[HB_SIGNATURE_COUNT] = {
    (void *)hb_add, (void *)hb_tick, (void *)hb_mix, (void *)hb_sum6, (void *)hb_point_sum, (void *)hb_record_next,
};

static void *hb_originals[HB_SIGNATURE_COUNT] = {
    (void *)hb_add, (void *)hb_tick, (void *)hb_mix, (void *)hb_sum6, (void *)hb_point_sum, (void *)hb_record_next,
};

static const char *const hb_encodings[HB_SIGNATURE_COUNT] = {
    "iii", "v", "ddd", "iiiiiii", "d{hb_point=dd}", "{hb_record=qqqqq}{hb_record=qqqqq}",
};

const char *hb_encoding(hb_signature signature) { return hb_encodings[signature]; }

void **hb_slot(hb_signature signature) { return &hb_slots[signature]; }

void *hb_original(hb_signature signature) { return hb_originals[signature]; }

void hb_use_padded_int_int(void) {
    hb_originals[HB_INT_INT] = (void *)hb_add_padded;
    __atomic_store_n(&hb_slots[HB_INT_INT], (void *)hb_add_padded, __ATOMIC_RELEASE);
}

void hb_slot_restore(hb_signature signature) {
    __atomic_store_n(&hb_slots[signature], hb_originals[signature], __ATOMIC_RELEASE);
}
