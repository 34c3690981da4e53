#import <Foundation/Foundation.h>

#include <objc/message.h>
#include <objc/runtime.h>
#include <stdio.h>
#include <string.h>

#include "CObjCForward.h"

// MARK: - The class under test

@interface HBTarget : NSObject
- (int)add:(int)a to:(int)b;
- (void)tick;
- (double)mix:(double)a with:(double)b;
- (int)sum:(int)a :(int)b :(int)c :(int)d :(int)e :(int)f;
- (double)sumOfPoint:(hb_point)point;
- (hb_record)next:(hb_record)record;
@end

@implementation HBTarget
- (int)add:(int)a to:(int)b { return hb_add(a, b); }
- (void)tick { hb_tick(); }
- (double)mix:(double)a with:(double)b { return hb_mix(a, b); }
- (int)sum:(int)a :(int)b :(int)c :(int)d :(int)e :(int)f { return hb_sum6(a, b, c, d, e, f); }
- (double)sumOfPoint:(hb_point)point { return hb_point_sum(point); }
- (hb_record)next:(hb_record)record { return hb_record_next(record); }
@end

// MARK: - Hook state

static const char *const objcfwd_selector_names[HB_SIGNATURE_COUNT] = {
    "add:to:", "tick", "mix:with:", "sum::::::", "sumOfPoint:", "next:",
};

static SEL objcfwd_selectors[HB_SIGNATURE_COUNT];
/// The methods under test, the class's own.
static Method objcfwd_methods[HB_SIGNATURE_COUNT];
/// Their compiled implementations.
static IMP objcfwd_originals[HB_SIGNATURE_COUNT];
/// Selectors under which the class also answers with the compiled implementations
/// (`objcfwd_original_<name>`): the forwarding hook invokes the original through them.
static SEL objcfwd_aliases[HB_SIGNATURE_COUNT];
/// Selectors no class implements, with the hooked methods' types: looking one up yields the
/// runtime's forwarding entry for that method type.
static SEL objcfwd_unimplemented[HB_SIGNATURE_COUNT];

/// The receiver of every message.
static HBTarget *objcfwd_target;
static char objcfwd_message[256];

static volatile uint64_t objcfwd_before_runs;
static volatile uint64_t objcfwd_after_runs;

// The blocks: no-ops that see the invocation, called through pointers the compiler cannot
// see through, as block calls would be.
static void objcfwd_before_block(NSInvocation *invocation) {
    (void)invocation;
    objcfwd_before_runs = objcfwd_before_runs + 1;
}

static void objcfwd_after_block(NSInvocation *invocation) {
    (void)invocation;
    objcfwd_after_runs = objcfwd_after_runs + 1;
}

static void (*volatile objcfwd_before)(NSInvocation *) = objcfwd_before_block;
static void (*volatile objcfwd_after)(NSInvocation *) = objcfwd_after_block;

static int objcfwd_index(SEL selector) {
    for (int index = 0; index < HB_SIGNATURE_COUNT; index++) {
        if (sel_isEqual(selector, objcfwd_selectors[index])) return index;
    }
    return -1;
}

// MARK: - Forwarding

/// `forwardInvocation:` of the class: before block, original, after block.
static void objcfwd_forward_invocation(id self, SEL command, NSInvocation *invocation) {
    int index = objcfwd_index([invocation selector]);
    if (index < 0) {
        [self doesNotRecognizeSelector:[invocation selector]];
        return;
    }
    objcfwd_before(invocation);
    [invocation setSelector:objcfwd_aliases[index]];
    [invocation invoke];
    [invocation setSelector:objcfwd_selectors[index]];
    objcfwd_after(invocation);
}

/// `methodSignatureForSelector:` of the class: a hooked selector has the signature of
/// its original.
static NSMethodSignature *objcfwd_method_signature(id self, SEL command, SEL selector) {
    int index = objcfwd_index(selector);
    Method method = class_getInstanceMethod(object_getClass(self), index >= 0 ? objcfwd_aliases[index] : selector);
    if (method == NULL) return nil;
    return [NSMethodSignature signatureWithObjCTypes:method_getTypeEncoding(method)];
}

// The replacement implementations. The GNU runtime has no `_objc_msgForward` to install as
// an implementation: it makes a forwarding entry for each message it cannot look up (that
// is GNUstep's `__objc_msg_forward2` hook, an `NSInvocation`-building libffi closure). So
// the replacement looks up a selector nobody implements, which yields that entry, and
// calls it with the real selector, exactly as a send of an unimplemented message does.
#define OBJCFWD_FORWARD_IMP(self, index) objc_msg_lookup(self, objcfwd_unimplemented[index])

static int objcfwd_forward_add(id self, SEL command, int a, int b) {
    return ((int (*)(id, SEL, int, int))OBJCFWD_FORWARD_IMP(self, HB_INT_INT))(self, command, a, b);
}

static void objcfwd_forward_tick(id self, SEL command) {
    ((void (*)(id, SEL))OBJCFWD_FORWARD_IMP(self, HB_VOID))(self, command);
}

static double objcfwd_forward_mix(id self, SEL command, double a, double b) {
    return ((double (*)(id, SEL, double, double))OBJCFWD_FORWARD_IMP(self, HB_DOUBLE))(self, command, a, b);
}

static int objcfwd_forward_sum(id self, SEL command, int a, int b, int c, int d, int e, int f) {
    typedef int (*function)(id, SEL, int, int, int, int, int, int);
    return ((function)OBJCFWD_FORWARD_IMP(self, HB_SIX_INTS))(self, command, a, b, c, d, e, f);
}

static double objcfwd_forward_point(id self, SEL command, hb_point point) {
    return ((double (*)(id, SEL, hb_point))OBJCFWD_FORWARD_IMP(self, HB_STRUCT16))(self, command, point);
}

static hb_record objcfwd_forward_next(id self, SEL command, hb_record record) {
    return ((hb_record (*)(id, SEL, hb_record))OBJCFWD_FORWARD_IMP(self, HB_STRUCT40))(self, command, record);
}

static IMP const objcfwd_replacements[HB_SIGNATURE_COUNT] = {
    (IMP)objcfwd_forward_add, (IMP)objcfwd_forward_tick, (IMP)objcfwd_forward_mix,
    (IMP)objcfwd_forward_sum, (IMP)objcfwd_forward_point, (IMP)objcfwd_forward_next,
};

// MARK: - Setup

static int objcfwd_fail(int code, const char *what, const char *name) {
    snprintf(objcfwd_message, sizeof objcfwd_message, "%s %s", what, name);
    return code;
}

int objcfwd_prepare(void) {
    if (objcfwd_target != nil) return 0;
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    Class target = [HBTarget class];
    for (int index = 0; index < HB_SIGNATURE_COUNT; index++) {
        const char *name = objcfwd_selector_names[index];
        SEL selector = sel_registerName(name);
        Method method = class_getInstanceMethod(target, selector);
        if (method == NULL) return objcfwd_fail(-1, "no method", name);
        const char *types = method_getTypeEncoding(method);
        char alias[128];
        char unimplemented[128];
        snprintf(alias, sizeof alias, "objcfwd_original_%s", name);
        snprintf(unimplemented, sizeof unimplemented, "objcfwd_unimplemented_%s", name);
        objcfwd_selectors[index] = selector;
        objcfwd_methods[index] = method;
        objcfwd_originals[index] = method_getImplementation(method);
        objcfwd_aliases[index] = sel_registerTypedName(alias, types);
        objcfwd_unimplemented[index] = sel_registerTypedName(unimplemented, types);
        if (!class_addMethod(target, objcfwd_aliases[index], objcfwd_originals[index], types)) {
            return objcfwd_fail(-2, "cannot alias", name);
        }
    }
    // Only messages sent to a forwarding entry reach these two; while no method is hooked
    // through forwarding, nothing does.
    class_replaceMethod(target, @selector(forwardInvocation:), (IMP)objcfwd_forward_invocation, "v@:@");
    class_replaceMethod(target, @selector(methodSignatureForSelector:), (IMP)objcfwd_method_signature, "@@::");
    objcfwd_target = [HBTarget new];
    [pool drain];
    for (int index = 0; index < HB_SIGNATURE_COUNT; index++) {
        hb_signature signature = (hb_signature)index;
        if (!objcfwd_send_once(signature)) {
            return objcfwd_fail(-4, "wrong result from", objcfwd_selector_names[index]);
        }
        uint64_t runs = objcfwd_block_runs();
        if (objcfwd_install(signature) != 0) return objcfwd_fail(-3, "cannot hook", objcfwd_selector_names[index]);
        int forwarded = objcfwd_send_once(signature) && objcfwd_block_runs() == runs + 2;
        objcfwd_remove(signature);
        if (!forwarded) {
            const char *name = objcfwd_selector_names[index];
            return objcfwd_fail(-5, "wrong result or blocks not run through forwarding for", name);
        }
    }
    objcfwd_message[0] = 0;
    return 0;
}

int objcfwd_install(hb_signature signature) {
    if (objcfwd_target == nil || signature < 0 || signature >= HB_SIGNATURE_COUNT) return -1;
    if (method_getImplementation(objcfwd_methods[signature]) != objcfwd_originals[signature]) return -1;
    method_setImplementation(objcfwd_methods[signature], objcfwd_replacements[signature]);
    return 0;
}

void objcfwd_remove(hb_signature signature) {
    if (objcfwd_target == nil || signature < 0 || signature >= HB_SIGNATURE_COUNT) return;
    if (method_getImplementation(objcfwd_methods[signature]) == objcfwd_replacements[signature]) {
        method_setImplementation(objcfwd_methods[signature], objcfwd_originals[signature]);
    }
}

objcfwd_state objcfwd_method_state(hb_signature signature) {
    if (objcfwd_target == nil || signature < 0 || signature >= HB_SIGNATURE_COUNT) return OBJCFWD_OTHER;
    IMP implementation = method_getImplementation(objcfwd_methods[signature]);
    if (implementation == objcfwd_originals[signature]) return OBJCFWD_ORIGINAL;
    if (implementation == objcfwd_replacements[signature]) return OBJCFWD_FORWARDING;
    return OBJCFWD_OTHER;
}

const char *objcfwd_class_name(void) { return "HBTarget"; }

const char *objcfwd_selector_name(hb_signature signature) {
    if (signature < 0 || signature >= HB_SIGNATURE_COUNT) return "";
    return objcfwd_selector_names[signature];
}

const char *objcfwd_error(void) { return objcfwd_message; }

// MARK: - Timing

static volatile uint64_t objcfwd_sink;

/// Sends `iterations` messages of `signature` to `target`, draining a pool every 256 when
/// `pooled` (no pool otherwise). Inlined into each caller, whose constant `pooled` leaves
/// no test in the loop that does not use it.
static inline __attribute__((always_inline)) void objcfwd_send(HBTarget *target, hb_signature signature,
                                                                int64_t iterations, int pooled) {
    uint64_t sum = 0;
    hb_record record = { 1, 2, 3, 4, 5 };
    NSAutoreleasePool *pool = pooled ? [NSAutoreleasePool new] : nil;
    for (int64_t i = 0; i < iterations; i++) {
        int x = (int)i;
        switch (signature) {
        case HB_INT_INT: sum += (unsigned)[target add:x to:7]; break;
        case HB_VOID: [target tick]; break;
        case HB_DOUBLE: sum += (uint64_t)[target mix:(double)i with:0.25]; break;
        case HB_SIX_INTS: sum += (unsigned)[target sum:x :1 :2 :3 :4 :x]; break;
        case HB_STRUCT16: sum += (uint64_t)[target sumOfPoint:(hb_point){ (double)i, 1.5 }]; break;
        case HB_STRUCT40: record = [target next:record]; break;
        default: break;
        }
        if (pooled && (i & 255) == 255) {
            [pool drain];
            pool = [NSAutoreleasePool new];
        }
    }
    if (pooled) [pool drain];
    objcfwd_sink += sum + (uint64_t)(record.a + record.e);
}

uint64_t objcfwd_time_calls(hb_signature signature, int64_t iterations) {
    if (objcfwd_target == nil) return 0;
    uint64_t start = hb_now_ns();
    objcfwd_send(objcfwd_target, signature, iterations, 1);
    return hb_now_ns() - start;
}

void objcfwd_thread_loop(hb_signature signature, int64_t iterations) {
    if (objcfwd_target == nil) return;
    objcfwd_send(objcfwd_target, signature, iterations, 0);
}

uint64_t objcfwd_block_runs(void) { return objcfwd_before_runs + objcfwd_after_runs; }

int objcfwd_send_once(hb_signature signature) {
    HBTarget *target = objcfwd_target;
    int correct = 0;
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    unsigned ticks = hb_tick_calls();
    switch (signature) {
    case HB_INT_INT: correct = [target add:40 to:2] == 42; break;
    case HB_VOID: [target tick]; correct = hb_tick_calls() == ticks + 1; break;
    case HB_DOUBLE: correct = [target mix:3.0 with:0.5] == 2.0; break;
    case HB_SIX_INTS: correct = [target sum:1 :2 :3 :4 :5 :6] == 21; break;
    case HB_STRUCT16: correct = [target sumOfPoint:(hb_point){ 1.25, 2.5 }] == 3.75; break;
    case HB_STRUCT40: {
        hb_record next = [target next:(hb_record){ 1, 2, 3, 4, 5 }];
        correct = next.a == 2 && next.b == 3 && next.c == 4 && next.d == 5 && next.e == 2;
        break;
    }
    default: break;
    }
    [pool drain];
    return correct;
}

void *objcfwd_receiver(void) { return (void *)objcfwd_target; }

const char *objcfwd_receiver_dispatch_class(void) {
    return objcfwd_target == nil ? "" : class_getName(object_getClass(objcfwd_target));
}
