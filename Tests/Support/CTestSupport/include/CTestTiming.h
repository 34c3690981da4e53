#ifndef CTESTTIMING_H
#define CTESTTIMING_H

/// Returns a + b (wrapping). Never inlined, so every call is a real call.
int ct_add_ints(int a, int b);

/// The address of a slot holding a function pointer of type `int (*)(int, int)`, initially
/// ct_add_ints; a hook replaces it.
void **ct_add_slot(void);

/// Calls the function in ct_add_slot() `iterations` times from C, reading the slot anew each
/// time, with arguments (i, 3 * i + 1) for i = 0 ..< iterations (each converted to int), and
/// returns the sum of the results (each widened to long long; the sum wraps).
long long ct_call_add_slot_loop(long long iterations);

/// Nanoseconds per call of `iterations` calls from C through a raw libffi closure of type
/// `int (*)(int, int)` whose handler forwards every call to ct_add_ints with ffi_call: the
/// cost of a minimal hook. A negative value when libffi cannot make the closure.
double ct_raw_closure_ns_per_call(long long iterations);

/// Nanoseconds per call of `iterations` calls from C to ct_add_ints through a function pointer
/// read anew each time, as ct_raw_closure_ns_per_call calls its closure.
double ct_direct_ns_per_call(long long iterations);

#endif
