#include "ffh_call.h"
#include "call_internal.h"
#include "ffh_thread.h"

#include <string.h>

static __thread int ffh_plans_off __attribute__((tls_model("initial-exec")));

int ffh_plans_off_here(void) { return ffh_plans_off; }

void ffh_set_plans_off_here(int off) { ffh_plans_off = off; }

#if defined(__x86_64__) || defined(__aarch64__)

int ffh_register_calls_available(void) { return 1; }

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

__attribute__((noinline, visibility("hidden"))) void ffh_forward_fixups(const ffh_sysv_plan *plan, entry_frame_t *frame) {
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

__attribute__((noinline, visibility("hidden"))) void ffh_forward_through_frame(const ffh_sysv_plan *plan,
                                                                              const void *function,
                                                                              entry_frame_t *frame, void *returnValue) {
    sysv_call_frame(plan, &frame->call, entry_stack(frame), function, returnValue);
}

void ffh_forward_sysv(const void *plan, const void *function, void *const *arguments, void *returnValue) {
    ffh_forward_sysv_inline(NULL, plan, function, arguments, returnValue);
}

void ffh_forward_original(ffh_thread *thread, const void *plan, const void *function, void *const *arguments,
                          void *returnValue) {
    ffh_forward_sysv_inline(thread, plan, function, arguments, returnValue);
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
