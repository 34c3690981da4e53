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
typedef uint64_t (*general_integer_function)(GENERAL_PARAMETERS);
typedef double (*general_floating_function)(GENERAL_PARAMETERS);
typedef void (*general_void_function)(GENERAL_PARAMETERS);

int ffh_register_calls_available(void) { return 1; }

/* The value at `address` as its register holds it; memcpy because libffi's argument list
   promises no alignment (it compiles to one load). */
static inline uint64_t plan_load(ffh_value_kind kind, const void *address) {
    switch (kind) {
    case FFH_VALUE_SIGNED_8: {
        int8_t value;
        memcpy(&value, address, sizeof value);
        return (uint64_t)(int64_t)value;
    }
    case FFH_VALUE_SIGNED_16: {
        int16_t value;
        memcpy(&value, address, sizeof value);
        return (uint64_t)(int64_t)value;
    }
    case FFH_VALUE_SIGNED_32: {
        int32_t value;
        memcpy(&value, address, sizeof value);
        return (uint64_t)(int64_t)value;
    }
    case FFH_VALUE_UNSIGNED_8: {
        uint8_t value;
        memcpy(&value, address, sizeof value);
        return value;
    }
    case FFH_VALUE_UNSIGNED_16: {
        uint16_t value;
        memcpy(&value, address, sizeof value);
        return value;
    }
    case FFH_VALUE_UNSIGNED_32:
    case FFH_VALUE_FLOAT: {
        uint32_t value;
        memcpy(&value, address, sizeof value);
        return value;
    }
    default: {
        uint64_t value;
        memcpy(&value, address, sizeof value);
        return value;
    }
    }
}

void ffh_call_plan(const ffh_plan *plan, const void *function, void *const *arguments, void *returnValue) {
    /* Registers no argument fills are passed as zero: never read, but defined. The floating
       bank is passed, and so cleared, only when an argument uses it. */
    ffh_registers registers;
    memset(registers.general, 0, sizeof registers.general);
    if (plan->usesFloatingRegisters) memset(registers.floating, 0, sizeof registers.floating);
    for (uint32_t index = 0; index < plan->count; index++) {
        const ffh_plan_step step = plan->steps[index];
        uint64_t bits = plan_load(step.kind, arguments[step.argument]);
        if (step.kind == FFH_VALUE_FLOAT || step.kind == FFH_VALUE_DOUBLE) {
            registers.floating[step.reg] = bits;
        } else {
            registers.general[step.reg] = bits;
        }
    }
    const ffh_registers *r = &registers;
    const int floating = plan->usesFloatingRegisters;
    uint64_t bits;
    switch (plan->result) {
    case FFH_VALUE_VOID:
        if (floating) {
            ((void_function)function)(GENERAL_ARGUMENTS(r), FLOATING_ARGUMENTS(r));
        } else {
            ((general_void_function)function)(GENERAL_ARGUMENTS(r));
        }
        return;
    case FFH_VALUE_FLOAT:
    case FFH_VALUE_DOUBLE: {
        double result = floating ? ((floating_function)function)(GENERAL_ARGUMENTS(r), FLOATING_ARGUMENTS(r))
                                 : ((general_floating_function)function)(GENERAL_ARGUMENTS(r));
        if (returnValue == NULL) return;
        if (plan->result == FFH_VALUE_FLOAT) {
            memcpy(returnValue, &result, sizeof(float));
        } else {
            memcpy(returnValue, &result, sizeof result);
        }
        return;
    }
    default:
        bits = floating ? ((integer_function)function)(GENERAL_ARGUMENTS(r), FLOATING_ARGUMENTS(r))
                        : ((general_integer_function)function)(GENERAL_ARGUMENTS(r));
        break;
    }
    if (returnValue == NULL) return;
    uint64_t widened;
    switch (plan->result) {
    case FFH_VALUE_SIGNED_8: widened = (uint64_t)(int64_t)(int8_t)bits; break;
    case FFH_VALUE_SIGNED_16: widened = (uint64_t)(int64_t)(int16_t)bits; break;
    case FFH_VALUE_SIGNED_32: widened = (uint64_t)(int64_t)(int32_t)bits; break;
    case FFH_VALUE_UNSIGNED_8: widened = (uint8_t)bits; break;
    case FFH_VALUE_UNSIGNED_16: widened = (uint16_t)bits; break;
    case FFH_VALUE_UNSIGNED_32: widened = (uint32_t)bits; break;
    default: widened = bits; break;
    }
    memcpy(returnValue, &widened, sizeof widened);
}

#else

int ffh_register_calls_available(void) { return 0; }
void ffh_call_plan(const ffh_plan *plan, const void *function, void *const *arguments, void *returnValue) {
    (void)plan;
    (void)function;
    (void)arguments;
    (void)returnValue;
}

#endif
