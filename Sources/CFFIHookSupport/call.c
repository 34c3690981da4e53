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

/* An integer result as `ffi_call` stores it: widened to 64 bits by its kind. */
static inline void store_integer_result(ffh_value_kind kind, uint64_t bits, void *returnValue) {
    uint64_t widened;
    switch (kind) {
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
    store_integer_result(plan->result, bits, returnValue);
}


#if defined(__x86_64__)

/* The frame `ffh_sysv_invoke` (call_x86_64.S) reads and writes; the offsets are fixed there. */
typedef struct {
    uint64_t words[FFH_SYSV_FIRST_STACK_WORD]; /* 0: rdi..r9, then xmm0..xmm7 */
    const uint64_t *stack;                     /* 112 */
    uint64_t stackBytes;                       /* 120 */
    uint64_t sseCount;                         /* 128 */
    uint64_t x87Count;                         /* 136 */
    uint64_t rax, rdx, xmm0, xmm1;             /* 144, 152, 160, 168 */
    unsigned char x87[2][16];                  /* 176, 192 */
} sysv_frame;

_Static_assert(__builtin_offsetof(sysv_frame, stack) == 112, "frame layout");
_Static_assert(__builtin_offsetof(sysv_frame, rax) == 144, "frame layout");
_Static_assert(__builtin_offsetof(sysv_frame, x87) == 176, "frame layout");

/* Loads the argument registers from `frame`, copies the stack area below the stack
   pointer, calls `function`, and stores the result registers (and as many x87 values as
   `frame->x87Count` says) back into `frame`. */
void ffh_sysv_invoke(sysv_frame *frame, const void *function);

void ffh_call_sysv(const ffh_sysv_plan *plan, const void *function, void *const *arguments, void *returnValue) {
    sysv_frame frame;
    /* Registers no argument fills are passed as zero: never read, but defined. */
    memset(frame.words, 0, sizeof frame.words);
    uint64_t stack[plan->stackWords > 0 ? plan->stackWords : 1];
    if (plan->returnsInMemory) frame.words[0] = (uint64_t)(uintptr_t)returnValue;
    for (uint32_t index = 0; index < plan->moveCount; index++) {
        const ffh_sysv_move *move = &plan->moves[index];
        const unsigned char *source = (const unsigned char *)arguments[move->argument] + move->offset;
        uint64_t *target = move->word < FFH_SYSV_FIRST_STACK_WORD ? &frame.words[move->word]
                                                                  : &stack[move->word - FFH_SYSV_FIRST_STACK_WORD];
        if (move->kind == FFH_VALUE_BYTES) {
            /* A partial last word is zero beyond the value: padding, but defined. */
            if (move->size % 8 != 0) target[move->size / 8] = 0;
            memcpy(target, source, move->size);
        } else {
            *target = plan_load(move->kind, source);
        }
    }
    frame.stack = stack;
    frame.stackBytes = (uint64_t)plan->stackWords * 8;
    frame.sseCount = plan->sseCount;
    frame.x87Count = plan->x87Count;
    ffh_sysv_invoke(&frame, function);
    if (returnValue == NULL || plan->returnsInMemory) return;
    for (uint32_t index = 0; index < plan->resultCount; index++) {
        const ffh_sysv_result_piece piece = plan->result[index];
        const void *source;
        switch (piece.source) {
        case FFH_SYSV_RAX: source = &frame.rax; break;
        case FFH_SYSV_RDX: source = &frame.rdx; break;
        case FFH_SYSV_XMM0: source = &frame.xmm0; break;
        case FFH_SYSV_XMM1: source = &frame.xmm1; break;
        case FFH_SYSV_ST0: source = frame.x87[0]; break;
        default: source = frame.x87[1]; break;
        }
        unsigned char *target = (unsigned char *)returnValue + piece.offset;
        switch (piece.kind) {
        case FFH_VALUE_BYTES: memcpy(target, source, piece.size); break;
        case FFH_VALUE_FLOAT: memcpy(target, source, sizeof(float)); break;
        default: {
            uint64_t bits;
            memcpy(&bits, source, sizeof bits);
            store_integer_result(piece.kind, bits, target);
            break;
        }
        }
    }
}

#endif
#else

int ffh_register_calls_available(void) { return 0; }
void ffh_call_plan(const ffh_plan *plan, const void *function, void *const *arguments, void *returnValue) {
    (void)plan;
    (void)function;
    (void)arguments;
    (void)returnValue;
}

#endif
