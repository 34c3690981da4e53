// Objective-C classes of GNUstep Base, built by gcc for the GNU runtime, and C functions
// that send them messages as compiled code does: the methods the Objective-C hook tests hook
// and the calls that must reach them byte for byte.

#import <Foundation/Foundation.h>

#include <objc/runtime.h>
#include <stdarg.h>
#include <string.h>

typedef struct {
    double x, y, width, height;
} OFXRect;

typedef struct {
    long long key;
    double value;
} OFXPair;

typedef struct {
    long long values[5];
} OFXBig;

@interface OFXCounter : NSObject {
  @public
    int ticks;
}
- (int)add:(int)a to:(int)b;
- (signed char)negateChar:(signed char)c;
- (unsigned short)twiceShort:(unsigned short)s;
- (long long)multiply:(long long)a by:(long long)b;
- (unsigned int)complement:(unsigned int)x;
- (BOOL)isPositive:(int)x;
- (float)halfOf:(float)x;
- (double)mix:(double)a with:(double)b;
- (long double)scale:(long double)x by:(int)k;
- (const char *)skipFirst:(const char *)text;
- (SEL)echoSelector:(SEL)selector;
- (id)echoObject:(id)object;
- (OFXRect)inset:(OFXRect)rect by:(double)amount;
- (OFXPair)swapPair:(OFXPair)pair;
- (OFXBig)bigFrom:(long long)seed;
- (void)tick;
- (int)ticks;
+ (int)classAdd:(int)a to:(int)b;
@end

@implementation OFXCounter
- (int)add:(int)a to:(int)b { return a + b; }
- (signed char)negateChar:(signed char)c { return (signed char)-c; }
- (unsigned short)twiceShort:(unsigned short)s { return (unsigned short)(s * 2); }
- (long long)multiply:(long long)a by:(long long)b { return a * b; }
- (unsigned int)complement:(unsigned int)x { return ~x; }
- (BOOL)isPositive:(int)x { return x > 0 ? YES : NO; }
- (float)halfOf:(float)x { return x / 2; }
- (double)mix:(double)a with:(double)b { return a * 3 + b; }
- (long double)scale:(long double)x by:(int)k { return x * k; }
- (const char *)skipFirst:(const char *)text { return text + 1; }
- (SEL)echoSelector:(SEL)selector { return selector; }
- (id)echoObject:(id)object { return object; }
- (OFXRect)inset:(OFXRect)rect by:(double)amount {
    OFXRect result = {rect.x + amount, rect.y + amount, rect.width - 2 * amount, rect.height - 2 * amount};
    return result;
}
- (OFXPair)swapPair:(OFXPair)pair {
    OFXPair result = {(long long)pair.value, (double)pair.key};
    return result;
}
- (OFXBig)bigFrom:(long long)seed {
    OFXBig result;
    for (int index = 0; index < 5; index++) result.values[index] = seed * (index + 1);
    return result;
}
- (void)tick { ticks += 1; }
- (int)ticks { return ticks; }
+ (int)classAdd:(int)a to:(int)b { return 10 * a + b; }
@end

// Inherits every method.
@interface OFXDerived : OFXCounter
@end
@implementation OFXDerived
@end

// Inherits from a class that inherits.
@interface OFXLeaf : OFXDerived
@end
@implementation OFXLeaf
@end

// Overrides add:to: and calls the superclass's.
@interface OFXOverrider : OFXCounter
@end
@implementation OFXOverrider
- (int)add:(int)a to:(int)b { return [super add:a to:b] + 1000; }
@end

// A class that nothing else hooks, for tests that need a method of their own.
@interface OFXPlain : NSObject
- (int)identity:(int)x;
@end
@implementation OFXPlain
- (int)identity:(int)x { return x; }
@end

// A class whose method another swizzler changes while hooks come and go.
@interface OFXSwizzled : NSObject
- (int)value:(int)x;
@end
@implementation OFXSwizzled
- (int)value:(int)x { return x; }
@end

// MARK: - Sending messages as compiled code does

id ofx_new(const char *name) { return [[objc_getClass(name) alloc] init]; }
void ofx_release(id object) { [object release]; }
int ofx_add(id object, int a, int b) { return [object add:a to:b]; }
signed char ofx_negate_char(id object, signed char c) { return [object negateChar:c]; }
unsigned short ofx_twice_short(id object, unsigned short s) { return [object twiceShort:s]; }
long long ofx_multiply(id object, long long a, long long b) { return [object multiply:a by:b]; }
unsigned int ofx_complement(id object, unsigned int x) { return [object complement:x]; }
BOOL ofx_is_positive(id object, int x) { return [object isPositive:x]; }
float ofx_half_of(id object, float x) { return [object halfOf:x]; }
double ofx_mix(id object, double a, double b) { return [object mix:a with:b]; }
void ofx_scale(id object, const long double *x, int k, long double *result) { *result = [object scale:*x by:k]; }
const char *ofx_skip_first(id object, const char *text) { return [object skipFirst:text]; }
SEL ofx_echo_selector(id object, SEL selector) { return [object echoSelector:selector]; }
id ofx_echo_object(id object, id other) { return [object echoObject:other]; }
void ofx_inset(id object, const OFXRect *rect, double amount, OFXRect *result) {
    *result = [object inset:*rect by:amount];
}
void ofx_swap_pair(id object, const OFXPair *pair, OFXPair *result) { *result = [object swapPair:*pair]; }
void ofx_big_from(id object, long long seed, OFXBig *result) { *result = [object bigFrom:seed]; }
void ofx_tick(id object) { [object tick]; }
int ofx_ticks(id object) { return [object ticks]; }
int ofx_class_add(const char *name, int a, int b) { return [objc_getClass(name) classAdd:a to:b]; }
int ofx_identity(id object, int x) { return [object identity:x]; }
int ofx_value(id object, int x) { return [object value:x]; }
SEL ofx_selector(const char *name) { return sel_registerName(name); }

// MARK: - The runtime, as other code in the process uses it

/// The implementation the runtime dispatches `selector` of `name` (or of its metaclass) to.
IMP ofx_implementation(const char *name, const char *selector, int class_method) {
    Class cls = objc_getClass(name);
    if (class_method) cls = object_getClass(cls);
    return class_getMethodImplementation(cls, sel_registerName(selector));
}

/// The implementation `name`'s own or inherited method for `selector` holds (which the
/// dispatch tables may not show yet).
IMP ofx_method_implementation(const char *name, const char *selector) {
    return method_getImplementation(class_getInstanceMethod(objc_getClass(name), sel_registerName(selector)));
}

/// The dispatch table of `name` (or of its metaclass): the runtime's class structure keeps it
/// in its ninth word (`struct objc_class` of gcc's libobjc, not in its public headers). The
/// runtime replaces it whenever it refreshes the class's table.
void *ofx_dispatch_table(const char *name, int class_method) {
    Class cls = objc_getClass(name);
    if (class_method) cls = object_getClass(cls);
    return ((void **)cls)[8];
}

static int ofx_foreign_value_a(id self, SEL _cmd, int x) { return x + 1000; }
static int ofx_foreign_value_b(id self, SEL _cmd, int x) { return x + 2000; }

/// What another swizzler does, over and over: gives -[OFXSwizzled value:] an implementation
/// that adds 1000 (`which` 0) or 2000 (1) to its argument, replacing whatever it held.
void ofx_swizzle_value(int which) {
    Method method = class_getInstanceMethod(objc_getClass("OFXSwizzled"), sel_registerName("value:"));
    method_setImplementation(method, which ? (IMP)ofx_foreign_value_b : (IMP)ofx_foreign_value_a);
}

/// What another swizzler does: sets the implementation of `name`'s own or inherited method
/// for `selector` with method_setImplementation; returns the one it replaced.
IMP ofx_set_implementation(const char *name, const char *selector, IMP implementation) {
    Method method = class_getInstanceMethod(objc_getClass(name), sel_registerName(selector));
    return method_setImplementation(method, implementation);
}

/// Another swizzler's add:to: that calls what it replaced (ofx_chained_original) plus 100.
static IMP ofx_chained_original;
static int ofx_chained_add(id self, SEL _cmd, int a, int b) {
    return ((int (*)(id, SEL, int, int))ofx_chained_original)(self, _cmd, a, b) + 100;
}

/// Installs ofx_chained_add as `name`'s add:to:, chaining to what the method held.
void ofx_swizzle_add(const char *name) {
    ofx_chained_original = ofx_set_implementation(name, "add:to:", (IMP)ofx_chained_add);
}

/// A class made with objc_allocateClassPair and never registered.
Class ofx_unregistered_class(void) {
    static Class made;
    if (made == Nil) made = objc_allocateClassPair(objc_getClass("OFXPlain"), "OFXUnregistered", 0);
    return made;
}

/// The metaclass of `name`.
Class ofx_metaclass(const char *name) { return object_getClass(objc_getClass(name)); }

/// A selector's name: the runtime's selectors are typed, so the one a compiled send passes
/// need not be the pointer sel_registerName returns for the same name.
const char *ofx_selector_name(SEL selector) { return sel_getName(selector); }

// MARK: - Key-value observing

// A class with one observable property.
@interface OFXObserved : NSObject {
    int level;
}
- (int)level;
- (void)setLevel:(int)value;
@end
@implementation OFXObserved
- (int)level { return level; }
- (void)setLevel:(int)value { level = value; }
@end

// Counts the change notifications it receives and keeps the last new value.
@interface OFXObserver : NSObject {
  @public
    int notifications;
    int lastValue;
}
@end
@implementation OFXObserver
- (void)observeValueForKeyPath:(NSString *)keyPath
                      ofObject:(id)object
                        change:(NSDictionary *)change
                       context:(void *)context {
    notifications += 1;
    lastValue = [[change objectForKey:NSKeyValueChangeNewKey] intValue];
}
@end

// Each call that makes autoreleased objects (keys, change dictionaries, exceptions) drains
// a pool of its own, as a run loop would.
void ofx_observe(id object, id observer, const char *key) {
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    [object addObserver:observer
             forKeyPath:[NSString stringWithUTF8String:key]
                options:NSKeyValueObservingOptionNew
                context:NULL];
    [pool drain];
}
void ofx_unobserve(id object, id observer, const char *key) {
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    [object removeObserver:observer forKeyPath:[NSString stringWithUTF8String:key]];
    [pool drain];
}
int ofx_notifications(OFXObserver *observer) { return observer->notifications; }
int ofx_last_value(OFXObserver *observer) { return observer->lastValue; }
void ofx_set_level(OFXObserved *object, int value) {
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    [object setLevel:value];
    [pool drain];
}
int ofx_level(OFXObserved *object) { return [object level]; }
/// The name of the class the object reports.
const char *ofx_reported_class(id object) { return class_getName([object class]); }
/// The name of the class the runtime dispatches the object's messages through.
const char *ofx_dispatch_class(id object) { return class_getName(object_getClass(object)); }

// MARK: - Classes no message reaches before their tests

// Each pair is hooked by one test before anything sends it a message, so that the runtime
// has built no dispatch table for it yet.
@interface OFXFreshBase : NSObject
+ (int)value;
- (int)twice:(int)x;
@end
@implementation OFXFreshBase
+ (int)value { return 41; }
- (int)twice:(int)x { return 2 * x; }
@end
@interface OFXFreshSub : OFXFreshBase
@end
@implementation OFXFreshSub
@end
int ofx_fresh_value(const char *name) { return [objc_getClass(name) value]; }
int ofx_twice(id object, int x) { return [object twice:x]; }

// Subclasses messaged before a hook is installed on their superclass's own method. The
// subclass overrides a method the superclass also has, so that its dispatch table holds its
// own copy of part of the table rather than sharing the superclass's.
@interface OFXStaleBase : NSObject
- (int)triple:(int)x;
- (int)staleSeven;
- (int)staleWho;
- (int)staleCallsWho;
@end
@implementation OFXStaleBase
- (int)triple:(int)x { return 3 * x; }
- (int)staleSeven { return 7; }
- (int)staleWho { return 1; }
- (int)staleCallsWho { return [self staleWho] * 100; }
@end
@interface OFXStaleSub : OFXStaleBase
@end
@implementation OFXStaleSub
- (int)staleWho { return [super staleWho] + 10; }
@end
@interface OFXStaleLeaf : OFXStaleSub
@end
@implementation OFXStaleLeaf
@end
int ofx_triple(id object, int x) { return [object triple:x]; }

// MARK: - Types an encoding cannot describe

typedef struct __attribute__((packed)) {
    char c;
    double d;
} OFXPacked;

@interface OFXOdd : NSObject
- (int)packedSum:(OFXPacked)packed;
@end
@implementation OFXOdd
- (int)packedSum:(OFXPacked)packed { return packed.c + (int)packed.d; }
@end

// MARK: - Exceptions

@interface OFXThrower : NSObject
- (int)maybeThrow:(int)x;
@end
@implementation OFXThrower
- (int)maybeThrow:(int)x {
    if (x != 0) [NSException raise:@"OFXBoom" format:@"thrown for %d", x];
    return 1;
}
@end

/// Sends maybeThrow: inside @try: the result, or -2 when an exception was caught.
int ofx_try_throw(id object, int x) {
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    int result;
    @try {
        result = [object maybeThrow:x];
    } @catch (NSException *exception) {
        result = -2;
    }
    [pool drain];
    return result;
}

// MARK: - Lifecycle dispatch

// What the lifecycle methods did, in order: one letter per call (the delegate's is D).
static char ofx_event_log[256];
static int ofx_event_count;
static void ofx_event(char tag) {
    if (ofx_event_count < (int)sizeof ofx_event_log - 1) ofx_event_log[ofx_event_count++] = tag;
}
const char *ofx_events(void) {
    ofx_event_log[ofx_event_count] = 0;
    return ofx_event_log;
}
void ofx_events_reset(void) { ofx_event_count = 0; }

@protocol OFXLifecycle
- (void)didLaunch:(int)code;
@optional
- (void)willTerminate;
@end

@interface OFXApp : NSObject {
    id delegate;
}
- (void)setDelegate:(id)newDelegate;
- (id)delegate;
@end
@implementation OFXApp
- (void)setDelegate:(id)newDelegate { delegate = newDelegate; }
- (id)delegate { return delegate; }
@end

@interface OFXAppDelegate : NSObject <OFXLifecycle>
- (void)didLaunch:(int)code;
- (void)willTerminate;
@end
@implementation OFXAppDelegate
- (void)didLaunch:(int)code { ofx_event('D'); }
- (void)willTerminate { ofx_event('d'); }
@end

// A component: logs its tag, counts its launches (atomically: threads send at once) and
// keeps the last code it was given.
@interface OFXComponent : NSObject {
  @public
    char tag;
    int launches;
    int lastCode;
}
- (void)didLaunch:(int)code;
@end
@implementation OFXComponent
- (void)didLaunch:(int)code {
    if (tag) ofx_event(tag);
    __atomic_add_fetch(&launches, 1, __ATOMIC_RELAXED);
    lastCode = code;
}
@end

// Implements didLaunch: with other types.
@interface OFXOddComponent : NSObject
- (void)didLaunch:(double)code;
@end
@implementation OFXOddComponent
- (void)didLaunch:(double)code { (void)code; }
@end

id ofx_component_new(char tag) {
    OFXComponent *component = [OFXComponent new];
    component->tag = tag;
    return component;
}
int ofx_component_launches(OFXComponent *component) { return __atomic_load_n(&component->launches, __ATOMIC_RELAXED); }
int ofx_component_last_code(OFXComponent *component) { return component->lastCode; }
void ofx_did_launch(id<OFXLifecycle> delegate, int code) { [delegate didLaunch:code]; }
void ofx_will_terminate(id delegate) { [delegate willTerminate]; }
void ofx_app_set_delegate(id app, id newDelegate) { [app setDelegate:newDelegate]; }

// MARK: - Classes other code makes at run time

@interface OFXSolo : NSObject
- (int)solo:(int)x;
@end
@implementation OFXSolo
- (int)solo:(int)x { return x; }
@end

static int ofx_other_solo(id self, SEL _cmd, int x) { return 7000 + x; }

/// What another library does: makes and registers a subclass of `base` called `name`, which
/// overrides solo: when `overrides` is set, and moves `object` to it.
void ofx_move_to_new_subclass(id object, const char *base, const char *name, int overrides) {
    Class made = objc_allocateClassPair(objc_getClass(base), name, 0);
    if (overrides) class_addMethod(made, @selector(solo:), (IMP)ofx_other_solo, "i20@0:8i16");
    objc_registerClassPair(made);
    object_setClass(object, made);
}
int ofx_solo(id object, int x) { return [object solo:x]; }

// MARK: - +initialize that calls back

static void (*ofx_initialize_callback)(Class);

/// Sets what the +initialize of classes made by ofx_make_initializing_class calls.
void ofx_set_initialize_callback(void (*callback)(Class)) { ofx_initialize_callback = callback; }

static void ofx_initialize(id self, SEL _cmd) {
    (void)_cmd;
    if (ofx_initialize_callback) ofx_initialize_callback((Class)self);
}

/// Makes and registers a subclass of OFXPlain called `name` whose +initialize calls the
/// callback; the runtime sends it with the class's first message.
Class ofx_make_initializing_class(const char *name) {
    Class made = objc_allocateClassPair(objc_getClass("OFXPlain"), name, 0);
    if (made == Nil) return Nil;
    class_addMethod(object_getClass((id)made), @selector(initialize), (IMP)ofx_initialize, "v16@0:8");
    objc_registerClassPair(made);
    return made;
}

/// Sends the class its first message.
id ofx_new_of(Class cls) { return [[cls alloc] init]; }

// MARK: - Deallocation, counted

static int ofx_counted_deallocations;

@interface OFXCounted : NSObject
@end
@implementation OFXCounted
- (void)dealloc {
    __atomic_add_fetch(&ofx_counted_deallocations, 1, __ATOMIC_RELAXED);
    [super dealloc];
}
@end

/// How many OFXCounted objects ran their -dealloc to the end.
int ofx_counted_deallocation_count(void) { return __atomic_load_n(&ofx_counted_deallocations, __ATOMIC_RELAXED); }

// MARK: - A variadic method

@interface OFXVariadic : NSObject
- (int)sumOf:(int)count, ...;
@end
@implementation OFXVariadic
- (int)sumOf:(int)count, ... {
    va_list list;
    va_start(list, count);
    int sum = 0;
    for (int index = 0; index < count; index++) sum += va_arg(list, int);
    va_end(list);
    return sum;
}
@end

/// [object sumOf:7, 1, 2, ..., 7]: ten arguments with self and _cmd, four on the stack.
int ofx_sum_of_seven(id object) { return [object sumOf:7, 1, 2, 3, 4, 5, 6, 7]; }

// MARK: - Descriptions

/// `[object description]` as a C string the caller frees: what GNUstep prints for the object.
char *ofx_description(id object) {
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    char *text = strdup([[object description] UTF8String]);
    [pool release];
    return text;
}
