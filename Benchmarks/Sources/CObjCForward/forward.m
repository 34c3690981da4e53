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

/// The hooked class: a subclass, so the unhooked superclass stays available as a baseline.
@interface HBHookedTarget : HBTarget
@end

@implementation HBHookedTarget
@end

// MARK: - Hook state

static const char *const objcfwd_selector_names[HB_SIGNATURE_COUNT] = {
    "add:to:", "tick", "mix:with:", "sum::::::", "sumOfPoint:", "next:",
};

static SEL objcfwd_selectors[HB_SIGNATURE_COUNT];
/// The original implementations, moved under `objcfwd_original_<name>`.
static SEL objcfwd_aliases[HB_SIGNATURE_COUNT];
/// Selectors no class implements, with the hooked methods' types: looking one up yields the
/// runtime's forwarding entry for that method type.
static SEL objcfwd_unimplemented[HB_SIGNATURE_COUNT];

static HBTarget *objcfwd_plain;
static HBHookedTarget *objcfwd_hooked;
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

/// `forwardInvocation:` of the hooked class: before block, original, after block.
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

/// `methodSignatureForSelector:` of the hooked class: a hooked selector has the signature of
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
    if (objcfwd_hooked != nil) return 0;
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    Class hooked = [HBHookedTarget class];
    for (int index = 0; index < HB_SIGNATURE_COUNT; index++) {
        const char *name = objcfwd_selector_names[index];
        SEL selector = sel_registerName(name);
        Method method = class_getInstanceMethod(hooked, selector);
        if (method == NULL) return objcfwd_fail(-1, "no method", name);
        const char *types = method_getTypeEncoding(method);
        char alias[128];
        char unimplemented[128];
        snprintf(alias, sizeof alias, "objcfwd_original_%s", name);
        snprintf(unimplemented, sizeof unimplemented, "objcfwd_unimplemented_%s", name);
        objcfwd_selectors[index] = selector;
        objcfwd_aliases[index] = sel_registerTypedName(alias, types);
        objcfwd_unimplemented[index] = sel_registerTypedName(unimplemented, types);
        if (!class_addMethod(hooked, objcfwd_aliases[index], method_getImplementation(method), types)) {
            return objcfwd_fail(-2, "cannot alias", name);
        }
        // Added to the subclass, the replacement overrides the superclass's implementation.
        if (!class_addMethod(hooked, selector, objcfwd_replacements[index], types)) {
            return objcfwd_fail(-3, "cannot replace", name);
        }
    }
    class_replaceMethod(hooked, @selector(forwardInvocation:), (IMP)objcfwd_forward_invocation, "v@:@");
    class_replaceMethod(hooked, @selector(methodSignatureForSelector:), (IMP)objcfwd_method_signature, "@@::");
    objcfwd_plain = [HBTarget new];
    objcfwd_hooked = [HBHookedTarget new];
    [pool drain];
    for (int index = 0; index < HB_SIGNATURE_COUNT; index++) {
        if (!objcfwd_check((hb_signature)index)) {
            return objcfwd_fail(-4, "wrong result through forwarding for", objcfwd_selector_names[index]);
        }
    }
    objcfwd_message[0] = 0;
    return 0;
}

const char *objcfwd_error(void) { return objcfwd_message; }

// MARK: - Timing

static volatile uint64_t objcfwd_sink;

/// Sends `iterations` messages of `signature` to `target`, draining a pool every 256.
static void objcfwd_send(HBTarget *target, hb_signature signature, int64_t iterations) {
    uint64_t sum = 0;
    hb_record record = { 1, 2, 3, 4, 5 };
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
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
        if ((i & 255) == 255) {
            [pool drain];
            pool = [NSAutoreleasePool new];
        }
    }
    [pool drain];
    objcfwd_sink += sum + (uint64_t)(record.a + record.e);
}

uint64_t objcfwd_time_calls(hb_signature signature, int64_t iterations, int forwarded) {
    HBTarget *target = forwarded ? objcfwd_hooked : objcfwd_plain;
    if (target == nil) return 0;
    uint64_t start = hb_now_ns();
    objcfwd_send(target, signature, iterations);
    return hb_now_ns() - start;
}

int objcfwd_check(hb_signature signature) {
    uint64_t before = objcfwd_before_runs;
    uint64_t after = objcfwd_after_runs;
    int correct = 0;
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    switch (signature) {
    case HB_INT_INT: correct = [objcfwd_hooked add:40 to:2] == 42; break;
    case HB_VOID: [objcfwd_hooked tick]; correct = 1; break;
    case HB_DOUBLE: correct = [objcfwd_hooked mix:3.0 with:0.5] == 2.0; break;
    case HB_SIX_INTS: correct = [objcfwd_hooked sum:1 :2 :3 :4 :5 :6] == 21; break;
    case HB_STRUCT16: correct = [objcfwd_hooked sumOfPoint:(hb_point){ 1.25, 2.5 }] == 3.75; break;
    case HB_STRUCT40: {
        hb_record next = [objcfwd_hooked next:(hb_record){ 1, 2, 3, 4, 5 }];
        correct = next.a == 2 && next.b == 3 && next.c == 4 && next.d == 5 && next.e == 2;
        break;
    }
    default: break;
    }
    [pool drain];
    return correct && objcfwd_before_runs == before + 1 && objcfwd_after_runs == after + 1;
}
