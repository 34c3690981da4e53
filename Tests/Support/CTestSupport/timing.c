#include "CTestTiming.h"

#include <ffi.h>
#include <time.h>

typedef int (*ct_add_function)(int, int);

__attribute__((noinline)) int ct_add_ints(int a, int b) {
    return (int)((unsigned)a + (unsigned)b);
}

static void *ct_add_slot_storage = (void *)ct_add_ints;

void **ct_add_slot(void) { return &ct_add_slot_storage; }

long long ct_call_add_slot_loop(long long iterations) {
    unsigned long long sum = 0;
    for (long long i = 0; i < iterations; i++) {
        // Volatile and atomic: read anew every time, and a hook may be installed from another thread.
        void *slot = __atomic_load_n((void *const volatile *)&ct_add_slot_storage, __ATOMIC_ACQUIRE);
        ct_add_function function = (ct_add_function)slot;
        sum += (unsigned long long)(long long)function((int)i, (int)(3 * i + 1));
    }
    return (long long)sum;
}

static double ct_now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e9 + (double)now.tv_nsec;
}

// Calls `function` `iterations` times through a volatile pointer; returns nanoseconds per call.
static double ct_time_calls(ct_add_function function, long long iterations) {
    if (iterations <= 0) return 0;
    ct_add_function volatile pointer = function;
    unsigned sum = 0;
    double start = ct_now_ns();
    for (long long i = 0; i < iterations; i++) {
        sum += (unsigned)pointer((int)i, 7);
    }
    double end = ct_now_ns();
    unsigned volatile sink = sum;
    (void)sink;
    return (end - start) / (double)iterations;
}

// The closure's handler: calls the original (its user data) with the arguments it received,
// as a hook that only forwards does.
static void ct_forward_to_add(ffi_cif *cif, void *result, void **arguments, void *user_data) {
    ffi_call(cif, FFI_FN(user_data), result, arguments);
}

double ct_raw_closure_ns_per_call(long long iterations) {
    ffi_type *argument_types[2] = { &ffi_type_sint, &ffi_type_sint };
    ffi_cif cif;
    if (ffi_prep_cif(&cif, FFI_DEFAULT_ABI, 2, &ffi_type_sint, argument_types) != FFI_OK) return -1;
    void *code = NULL;
    ffi_closure *closure = ffi_closure_alloc(sizeof(ffi_closure), &code);
    if (closure == NULL) return -1;
    if (ffi_prep_closure_loc(closure, &cif, ct_forward_to_add, (void *)ct_add_ints, code) != FFI_OK) {
        ffi_closure_free(closure);
        return -1;
    }
    ct_add_function function = (ct_add_function)code;
    double result = function(40, 2) == 42 ? ct_time_calls(function, iterations) : -1;
    ffi_closure_free(closure);
    return result;
}

double ct_direct_ns_per_call(long long iterations) { return ct_time_calls(ct_add_ints, iterations); }
