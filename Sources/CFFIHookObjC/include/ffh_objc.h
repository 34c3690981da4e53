#ifndef FFH_OBJC_H
#define FFH_OBJC_H

// The GNU Objective-C runtime (gcc's libobjc), reached without linking it: every function
// is looked up by name in the process when first needed, so a program without the runtime
// links and runs, and asks `ffh_objc_runtime()` whether one is loaded. The types are this
// shim's own opaque structs, so nothing here clashes with the runtime's headers.

#include <stddef.h>

typedef struct ffh_objc_class *ffh_objc_Class;
typedef struct ffh_objc_instance *ffh_objc_id;
typedef const struct ffh_objc_selector *ffh_objc_SEL;
typedef struct ffh_objc_method *ffh_objc_Method;
typedef void (*ffh_objc_IMP)(void);

/// `struct objc_super` of the GNU runtime: a receiver and the class where lookup starts.
typedef struct ffh_objc_super {
    ffh_objc_id receiver;
    ffh_objc_Class super_class;
} ffh_objc_super;

/// The runtime functions this package uses, as found in the process.
typedef struct ffh_objc_runtime {
    ffh_objc_Class (*objc_lookUpClass)(const char *name);
    ffh_objc_Class (*object_getClass)(ffh_objc_id object);
    ffh_objc_Class (*object_setClass)(ffh_objc_id object, ffh_objc_Class cls);
    ffh_objc_Class (*class_getSuperclass)(ffh_objc_Class cls);
    const char *(*class_getName)(ffh_objc_Class cls);
    signed char (*class_isMetaClass)(ffh_objc_Class cls);
    ffh_objc_Method (*class_getInstanceMethod)(ffh_objc_Class cls, ffh_objc_SEL selector);
    ffh_objc_Method *(*class_copyMethodList)(ffh_objc_Class cls, unsigned int *count);
    signed char (*class_addMethod)(ffh_objc_Class cls, ffh_objc_SEL selector, ffh_objc_IMP imp, const char *types);
    signed char (*class_respondsToSelector)(ffh_objc_Class cls, ffh_objc_SEL selector);
    ffh_objc_SEL (*sel_registerName)(const char *name);
    const char *(*sel_getName)(ffh_objc_SEL selector);
    ffh_objc_SEL (*method_getName)(ffh_objc_Method method);
    const char *(*method_getTypeEncoding)(ffh_objc_Method method);
    ffh_objc_IMP (*method_getImplementation)(ffh_objc_Method method);
    ffh_objc_IMP (*method_setImplementation)(ffh_objc_Method method, ffh_objc_IMP imp);
    ffh_objc_IMP (*objc_msg_lookup)(ffh_objc_id receiver, ffh_objc_SEL selector);
    ffh_objc_IMP (*objc_msg_lookup_super)(ffh_objc_super *super, ffh_objc_SEL selector);
    ffh_objc_Class (*objc_allocateClassPair)(ffh_objc_Class superclass, const char *name, size_t extra);
    void (*objc_registerClassPair)(ffh_objc_Class cls);
    ffh_objc_IMP (*class_getMethodImplementation)(ffh_objc_Class cls, ffh_objc_SEL selector);
    /// The runtime's own refresh of a class's dispatch table and its subclasses' (not part
    /// of the public API; NULL where the runtime does not export it).
    void (*update_dispatch_table)(ffh_objc_Class cls);
    struct ffh_objc_protocol *(*objc_getProtocol)(const char *name);
    struct ffh_objc_method_description *(*protocol_copyMethodDescriptionList)(
        struct ffh_objc_protocol *protocol, signed char required, signed char instance, unsigned int *count);
    /// The runtime's recursive lock (`objc_mutex_lock` and `objc_mutex_unlock` of
    /// `objc/thr.h`) and where the runtime keeps its own (`__objc_runtime_mutex`, held while
    /// it changes classes and while it sends `+initialize`); NULL where not exported.
    int (*objc_mutex_lock)(void *mutex);
    int (*objc_mutex_unlock)(void *mutex);
    void **runtime_mutex;
} ffh_objc_runtime;

/// Takes the runtime's own lock (recursive), where the runtime exports it; returns whether
/// it was taken (pass that to ``ffh_objc_unlock_runtime``).
int ffh_objc_lock_runtime(const ffh_objc_runtime *runtime);

/// Releases the runtime's lock taken by ``ffh_objc_lock_runtime`` (when `taken`).
void ffh_objc_unlock_runtime(const ffh_objc_runtime *runtime, int taken);

/// `struct objc_method_description`: a selector and its types.
typedef struct ffh_objc_method_description {
    ffh_objc_SEL name;
    const char *types;
} ffh_objc_method_description;

/// The names of the required instance methods of the protocol called `name`, as one string
/// of names each followed by a NUL, ending with an empty name (free it with `free`); NULL
/// when no protocol of that name is known.
char *ffh_objc_protocol_selectors(const ffh_objc_runtime *runtime, const char *name);

/// The runtime's functions, or NULL when no Objective-C runtime is loaded in the process
/// (or one lacks a function this package needs). Looked up again on each call until found,
/// so a runtime loaded later with `dlopen` is found then; once found, the same table is
/// returned for the life of the process.
const ffh_objc_runtime *ffh_objc_runtime_functions(void);

/// What a pointer given as a class or an object is, checked with reads that cannot fault.
typedef enum ffh_objc_pointer_kind {
    /// Not readable, or not laid out as a class or an object of the runtime.
    FFH_OBJC_INVALID = 0,
    FFH_OBJC_CLASS = 1,
    FFH_OBJC_METACLASS = 2,
    FFH_OBJC_OBJECT = 3
} ffh_objc_pointer_kind;

ffh_objc_pointer_kind ffh_objc_pointer_kind_of(const ffh_objc_runtime *runtime, const void *pointer);

/// Whether `method` is one of the methods `cls` itself defines (not one it inherits).
int ffh_objc_class_defines(const ffh_objc_runtime *runtime, ffh_objc_Class cls, ffh_objc_Method method);

// MARK: - Methods that send each message on to the superclass

/// The implementation of a method that sends each message on to `super_class`'s
/// implementation of the same selector as it is at that moment (as `[super ...]` does), for
/// any signature: a stub of the attach entry (ffh_attach.h, FFH_ATTACH_RESOLVES) that finds the
/// implementation and jumps there with the registers and stack as they arrived, the one
/// register-saving entry that attach uses too. `returns_in_memory` says the
/// method returns a struct through a hidden pointer (the receiver and selector then arrive
/// one register later). NULL where it cannot be made (not x86-64, or libffi hands out no
/// writable closure memory); the module then uses a libffi closure instead. Never freed.
/// `resolver`, when not NULL, receives the trampoline's `ffh_original_resolver` (ffh_thread.h):
/// what hooked calls use in its place, the same lookup made from the call's argument list,
/// whose first two entries point at the receiver and the selector.
void *ffh_objc_forwarder_make(ffh_objc_Class super_class, int returns_in_memory, const void **resolver);

// MARK: - Classes made for per-instance hooks

/// Records `cls` as a class made for per-instance hooks whose instances report `reported`
/// as their class. Append-only; read without a lock by the methods below.
void ffh_objc_instance_class_register(ffh_objc_Class cls, ffh_objc_Class reported);

/// The nearest class made for per-instance hooks on `cls`'s superclass chain (`cls` itself
/// included), or NULL.
ffh_objc_Class ffh_objc_instance_class_find(const ffh_objc_runtime *runtime, ffh_objc_Class cls);

/// Moves `object` to `desired` if its class is still `expected`, in one atomic step on the
/// object's class word (the first word of every object of gcc's runtime, which
/// `object_setClass` stores alone): 1 when it did, 0 when another thread (key-value observing
/// starting or ending) set another class meanwhile.
int ffh_objc_exchange_class(ffh_objc_id object, ffh_objc_Class expected, ffh_objc_Class desired);

/// The implementation of `-class` in those classes: the class the object reported before it
/// was moved to one of them.
ffh_objc_Class ffh_objc_instance_class_method(ffh_objc_id self, ffh_objc_SEL selector);

/// The implementation of `-superclass` in those classes: the superclass of the class the
/// object reports.
ffh_objc_Class ffh_objc_instance_superclass_method(ffh_objc_id self, ffh_objc_SEL selector);

/// The implementation of `-dealloc` in those classes: calls the handler set with
/// `ffh_objc_instance_set_dealloc_handler` (which forgets the object's hooks), then the
/// superclass's `-dealloc`.
void ffh_objc_instance_dealloc_method(ffh_objc_id self, ffh_objc_SEL selector);

/// Sets the handler `ffh_objc_instance_dealloc_method` calls first.
void ffh_objc_instance_set_dealloc_handler(void (*handler)(ffh_objc_id object));

/// Counts one change of the runtime's classes made on the calling thread.
void ffh_objc_count_change(void);

/// How many changes of the runtime's classes the calling thread has made (tests read it:
/// a count per thread is not disturbed by tests running on other threads).
unsigned long ffh_objc_changes_on_this_thread(void);

#endif
