#include "CFuzzSupport.h"

#include <pthread.h>
#include <string.h>

// MARK: - Call probe

static cfuzz_probe_registers probe_seen;
static uint64_t probe_result;
static int probe_calls;

static uint64_t bits_of(double value) {
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static void probe_record(
    uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3, uint64_t g4, uint64_t g5, double f0, double f1, double f2,
    double f3, double f4, double f5, double f6, double f7) {
    const uint64_t general[6] = {g0, g1, g2, g3, g4, g5};
    const double floating[8] = {f0, f1, f2, f3, f4, f5, f6, f7};
    for (int i = 0; i < 6; i++) probe_seen.general[i] = general[i];
    for (int i = 0; i < 8; i++) probe_seen.floating[i] = bits_of(floating[i]);
    probe_calls++;
}

__attribute__((noinline)) uint64_t cfuzz_probe_integer(
    uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3, uint64_t g4, uint64_t g5, double f0, double f1, double f2,
    double f3, double f4, double f5, double f6, double f7) {
    probe_record(g0, g1, g2, g3, g4, g5, f0, f1, f2, f3, f4, f5, f6, f7);
    return probe_result;
}

__attribute__((noinline)) double cfuzz_probe_floating(
    uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3, uint64_t g4, uint64_t g5, double f0, double f1, double f2,
    double f3, double f4, double f5, double f6, double f7) {
    probe_record(g0, g1, g2, g3, g4, g5, f0, f1, f2, f3, f4, f5, f6, f7);
    double result;
    memcpy(&result, &probe_result, sizeof result);
    return result;
}

const void *cfuzz_probe_address(int floating) {
    return floating ? (const void *)cfuzz_probe_floating : (const void *)cfuzz_probe_integer;
}

void cfuzz_probe_prepare(uint64_t result) {
    memset(&probe_seen, 0, sizeof probe_seen);
    probe_result = result;
    probe_calls = 0;
}

int cfuzz_probe_collect(cfuzz_probe_registers *registers) {
    *registers = probe_seen;
    return probe_calls;
}

// MARK: - Hooked functions

static int32_t binary_add(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
static int32_t binary_multiply(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }
static int32_t binary_subtract(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }

const void *cfuzz_binary_function(int index) {
    switch (index) {
    case 0: return (const void *)binary_add;
    case 1: return (const void *)binary_multiply;
    case 2: return (const void *)binary_subtract;
    default: return 0;
    }
}

int32_t cfuzz_call_slot(void *const *slot, int32_t a, int32_t b, int *called) {
    int32_t (*function)(int32_t, int32_t) = __atomic_load_n((int32_t(*const *)(int32_t, int32_t))slot, __ATOMIC_ACQUIRE);
    if (!function) {
        *called = 0;
        return 0;
    }
    *called = 1;
    return function(a, b);
}

static _Thread_local int is_fuzzing_thread;

void cfuzz_mark_fuzzing_thread(void) { is_fuzzing_thread = 1; }

int cfuzz_is_fuzzing_thread(void) { return is_fuzzing_thread; }

static void *thread_main(void *body) {
    ((void (*)(void))body)();
    return 0;
}

int cfuzz_start_thread(void (*body)(void)) {
    pthread_t thread;
    int status = pthread_create(&thread, 0, thread_main, (void *)body);
    if (status == 0) pthread_detach(thread);
    return status;
}
