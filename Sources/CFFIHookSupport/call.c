#include "ffh_call.h"

#include <string.h>

#if defined(__x86_64__) || defined(__aarch64__)

#if defined(__x86_64__)
#define GENERAL_PARAMETERS uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t
#define GENERAL_ARGUMENTS(r) r->general[0], r->general[1], r->general[2], r->general[3], r->general[4], r->general[5]
#else
#define GENERAL_PARAMETERS uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t
#define GENERAL_ARGUMENTS(r)                                                                                    \
    r->general[0], r->general[1], r->general[2], r->general[3], r->general[4], r->general[5], r->general[6], \
        r->general[7]
#endif

#define FLOATING_PARAMETERS double, double, double, double, double, double, double, double

static inline double as_double(uint64_t bits) {
    double value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

#define FLOATING_ARGUMENTS(r)                                                                                  \
    as_double(r->floating[0]), as_double(r->floating[1]), as_double(r->floating[2]), as_double(r->floating[3]), \
        as_double(r->floating[4]), as_double(r->floating[5]), as_double(r->floating[6]), as_double(r->floating[7])

typedef uint64_t (*integer_function)(GENERAL_PARAMETERS, FLOATING_PARAMETERS);
typedef double (*floating_function)(GENERAL_PARAMETERS, FLOATING_PARAMETERS);
typedef void (*void_function)(GENERAL_PARAMETERS, FLOATING_PARAMETERS);

int ffh_register_calls_available(void) { return 1; }

uint64_t ffh_call_returning_integer(const void *function, const ffh_registers *r) {
    return ((integer_function)function)(GENERAL_ARGUMENTS(r), FLOATING_ARGUMENTS(r));
}

uint64_t ffh_call_returning_floating(const void *function, const ffh_registers *r) {
    double result = ((floating_function)function)(GENERAL_ARGUMENTS(r), FLOATING_ARGUMENTS(r));
    uint64_t bits;
    memcpy(&bits, &result, sizeof bits);
    return bits;
}

void ffh_call_returning_void(const void *function, const ffh_registers *r) {
    ((void_function)function)(GENERAL_ARGUMENTS(r), FLOATING_ARGUMENTS(r));
}

#else

int ffh_register_calls_available(void) { return 0; }
uint64_t ffh_call_returning_integer(const void *function, const ffh_registers *r) {
    (void)function;
    (void)r;
    return 0;
}
uint64_t ffh_call_returning_floating(const void *function, const ffh_registers *r) {
    (void)function;
    (void)r;
    return 0;
}
void ffh_call_returning_void(const void *function, const ffh_registers *r) {
    (void)function;
    (void)r;
}

#endif
