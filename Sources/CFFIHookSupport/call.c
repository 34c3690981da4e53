#include "ffh_call.h"
#include "call_internal.h"
#include "ffh_thread.h"

#include <string.h>

static __thread int ffh_plans_off __attribute__((tls_model("initial-exec")));

int ffh_plans_off_here(void) { return ffh_plans_off; }

void ffh_set_plans_off_here(int off) { ffh_plans_off = off; }

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

/* Calls `function` with the registers `r` holds (the floating-point bank only when
   `floating`), and stores a result of kind `result` as ffi_call does. */
static inline __attribute__((always_inline)) void call_registers(const ffh_registers *r, int floating,
                                                                 ffh_value_kind result, const void *function,
                                                                 void *returnValue) {
    uint64_t bits;
    switch (result) {
    case FFH_VALUE_VOID:
        if (floating) {
            ((void_function)function)(GENERAL_ARGUMENTS(r), FLOATING_ARGUMENTS(r));
        } else {
            ((general_void_function)function)(GENERAL_ARGUMENTS(r));
        }
        return;
    case FFH_VALUE_FLOAT:
    case FFH_VALUE_DOUBLE: {
        double value = floating ? ((floating_function)function)(GENERAL_ARGUMENTS(r), FLOATING_ARGUMENTS(r))
                                : ((general_floating_function)function)(GENERAL_ARGUMENTS(r));
        if (returnValue == NULL) return;
        if (result == FFH_VALUE_FLOAT) {
            memcpy(returnValue, &value, sizeof(float));
        } else {
            memcpy(returnValue, &value, sizeof value);
        }
        return;
    }
    default:
        bits = floating ? ((integer_function)function)(GENERAL_ARGUMENTS(r), FLOATING_ARGUMENTS(r))
                        : ((general_integer_function)function)(GENERAL_ARGUMENTS(r));
        break;
    }
    if (returnValue == NULL) return;
    store_integer_result(result, bits, returnValue);
}

void ffh_call_plan(const void *opaquePlan, const void *function, void *const *arguments, void *returnValue) {
    const ffh_plan *plan = opaquePlan;
    /* Registers no argument fills are passed as zero: never read, but defined. The floating
       bank is passed, and so cleared, only when an argument uses it. */
    ffh_registers registers;
    ffh_zero(registers.general, sizeof registers.general);
    if (plan->usesFloatingRegisters) ffh_zero(registers.floating, sizeof registers.floating);
    for (uint32_t index = 0; index < plan->count; index++) {
        const ffh_plan_step step = plan->steps[index];
        uint64_t bits = plan_load(step.kind, arguments[step.argument]);
        if (step.kind == FFH_VALUE_FLOAT || step.kind == FFH_VALUE_DOUBLE) {
            registers.floating[step.reg] = bits;
        } else {
            registers.general[step.reg] = bits;
        }
    }
    call_registers(&registers, plan->usesFloatingRegisters, plan->result, function, returnValue);
}

#if defined(__x86_64__)

/* Completes `frame` (argument registers filled, `stack` holding the stack arguments) as `plan`
   says, makes the call, and stores the result in `returnValue`. */
static void sysv_call_frame(const ffh_sysv_plan *plan, sysv_frame *frame, const uint64_t *stack, const void *function,
                            void *returnValue) {
    if (plan->returnsInMemory) frame->words[0] = (uint64_t)(uintptr_t)returnValue;
    frame->stack = stack;
    frame->stackBytes = (uint64_t)plan->stackWords * 8;
    frame->sseCount = plan->sseCount;
    frame->x87Count = plan->x87Count;
    ffh_sysv_invoke(frame, function);
    if (returnValue == NULL || plan->returnsInMemory) return;
    sysv_store_result(plan, frame, returnValue);
}

void ffh_call_sysv(const void *opaquePlan, const void *function, void *const *arguments, void *returnValue) {
    const ffh_sysv_plan *plan = opaquePlan;
    sysv_frame frame;
    /* Registers no argument fills are passed as zero: never read, but defined. */
    ffh_zero(frame.words, sizeof frame.words);
    uint64_t stack[plan->stackWords > 0 ? plan->stackWords : 1];
    for (uint32_t index = 0; index < plan->moveCount; index++) {
        const ffh_sysv_move *move = &plan->moves[index];
        const unsigned char *source = (const unsigned char *)arguments[move->argument] + move->offset;
        uint64_t *target = move->word < FFH_SYSV_FIRST_STACK_WORD ? &frame.words[move->word]
                                                                  : &stack[move->word - FFH_SYSV_FIRST_STACK_WORD];
        if (move->kind == FFH_VALUE_BYTES) {
            /* A partial last word is zero beyond the value: padding, but defined. */
            if (move->size % 8 != 0) target[move->size / 8] = 0;
            ffh_copy(target, source, move->size);
        } else {
            *target = plan_load(move->kind, source);
        }
    }
    sysv_call_frame(plan, &frame, stack, function, returnValue);
}

_Static_assert(sizeof(ffh_registers) == FFH_SYSV_FIRST_STACK_WORD * 8, "the call frame's words are registers");

/* Redoes a plan's fixups in a forwarded call's frame (see ffh_sysv_plan.fixups). */
static __attribute__((noinline)) void forward_fixups(const ffh_sysv_plan *plan, entry_frame_t *frame) {
    for (uint32_t index = 0; index < plan->fixupCount; index++) {
        const ffh_sysv_move *fixup = &plan->fixups[index];
        uint64_t *target = fixup->word < FFH_SYSV_FIRST_STACK_WORD
                               ? &frame->call.words[fixup->word]
                               : entry_stack(frame) + (fixup->word - FFH_SYSV_FIRST_STACK_WORD);
        if (fixup->kind == FFH_VALUE_BYTES) {
            memcpy(target, (unsigned char *)frame + fixup->offset, 8);
        } else {
            *target = plan_load(fixup->kind, target);
        }
    }
}

/* A forwarded call that needs the assembly routine: stack arguments, an aggregate or x87
   result, a hidden result pointer, or a variadic callee. */
static __attribute__((noinline)) void forward_through_frame(const ffh_sysv_plan *plan, const void *function,
                                                            entry_frame_t *frame, void *returnValue) {
    sysv_call_frame(plan, &frame->call, entry_stack(frame), function, returnValue);
}

/* A forwarded call (ffh_forward_sysv); `thread`, when not NULL, is marked running the
   library's own code, and is not for the length of the original alone. */
static inline __attribute__((always_inline)) void forward_sysv(ffh_thread *thread, const void *opaquePlan,
                                                               const void *function, void *const *arguments,
                                                               void *returnValue) {
    const ffh_sysv_plan *plan = opaquePlan;
    entry_frame_t *frame = entry_frame(arguments);
    if (plan->fixupCount > 0) forward_fixups(plan, frame);
    if (thread) ffh_thread_set_busy(thread, 0);
    if (plan->registerResult == FFH_VALUE_BYTES) {
        forward_through_frame(plan, function, frame, returnValue);
    } else {
        /* Registers only and a scalar or no result: a plain C call with the frame's words. */
        call_registers((const ffh_registers *)(const void *)frame->call.words, plan->sseCount > 0,
                       plan->registerResult, function, returnValue);
    }
    if (thread) ffh_thread_set_busy(thread, 1);
}

void ffh_forward_sysv(const void *plan, const void *function, void *const *arguments, void *returnValue) {
    forward_sysv(NULL, plan, function, arguments, returnValue);
}

void ffh_forward_original(ffh_thread *thread, const void *plan, const void *function, void *const *arguments,
                          void *returnValue) {
    forward_sysv(thread, plan, function, arguments, returnValue);
}

#endif

#else

int ffh_register_calls_available(void) { return 0; }
void ffh_call_plan(const void *plan, const void *function, void *const *arguments, void *returnValue) {
    (void)plan;
    (void)function;
    (void)arguments;
    (void)returnValue;
}

#endif
