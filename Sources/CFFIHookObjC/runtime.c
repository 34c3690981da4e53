#define _GNU_SOURCE
#include "ffh_objc.h"

#include "ffh_attach.h"
#include "ffh_call.h"
#include "ffh_memory.h"
#include "ffh_thread.h"

#include <dlfcn.h>
#include <ffi.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The runtime's shared object, as Debian's libobjc4 names it: where it was opened without
// RTLD_GLOBAL (a plug-in that links it, opened with RTLD_LOCAL), the global scope does not
// see its symbols, but opening it by name with RTLD_NOLOAD finds it without loading it.
static const char *const ffh_objc_libraries[] = {"libobjc.so.4", "libobjc.so"};

static ffh_objc_runtime ffh_objc_table;
static _Atomic(const ffh_objc_runtime *) ffh_objc_found;

// The runtime's header defines object_getClass inline (the library exports no symbol for
// it): an object's first word is its class. Read atomically: the module moves objects between
// classes with an atomic exchange of that word (ffh_objc_exchange_class) while other threads
// send them messages, whose dispatch reads it here (`-class` of a subclass made for hooks).
static ffh_objc_Class ffh_objc_object_getClass(ffh_objc_id object) {
    return object == NULL ? NULL : __atomic_load_n((ffh_objc_Class *)(void *)object, __ATOMIC_RELAXED);
}

/// Fills `table` from `handle`; 1 when every function was found.
static int ffh_objc_fill(ffh_objc_runtime *table, void *handle) {
#define FFH_OBJC_BIND(name)                                                                                            \
    do {                                                                                                               \
        void *symbol = dlsym(handle, #name);                                                                 \
        if (symbol == NULL) return 0;                                                                                  \
        *(void **)&table->name = symbol;                                                                               \
    } while (0)
    FFH_OBJC_BIND(objc_lookUpClass);
    FFH_OBJC_BIND(object_setClass);
    FFH_OBJC_BIND(class_getSuperclass);
    FFH_OBJC_BIND(class_getName);
    FFH_OBJC_BIND(class_isMetaClass);
    FFH_OBJC_BIND(class_getInstanceMethod);
    FFH_OBJC_BIND(class_copyMethodList);
    FFH_OBJC_BIND(class_addMethod);
    FFH_OBJC_BIND(class_respondsToSelector);
    FFH_OBJC_BIND(sel_registerName);
    FFH_OBJC_BIND(sel_getName);
    FFH_OBJC_BIND(method_getName);
    FFH_OBJC_BIND(method_getTypeEncoding);
    FFH_OBJC_BIND(method_getImplementation);
    FFH_OBJC_BIND(method_setImplementation);
    FFH_OBJC_BIND(objc_msg_lookup);
    FFH_OBJC_BIND(objc_msg_lookup_super);
    FFH_OBJC_BIND(objc_allocateClassPair);
    FFH_OBJC_BIND(objc_registerClassPair);
    FFH_OBJC_BIND(class_getMethodImplementation);
    FFH_OBJC_BIND(objc_getProtocol);
    FFH_OBJC_BIND(protocol_copyMethodDescriptionList);
#undef FFH_OBJC_BIND
    *(void **)&table->update_dispatch_table = dlsym(handle, "__objc_update_dispatch_table_for_class");
    *(void **)&table->objc_mutex_lock = dlsym(handle, "objc_mutex_lock");
    *(void **)&table->objc_mutex_unlock = dlsym(handle, "objc_mutex_unlock");
    table->runtime_mutex = dlsym(handle, "__objc_runtime_mutex");
    table->object_getClass = ffh_objc_object_getClass;
    return 1;
}

int ffh_objc_lock_runtime(const ffh_objc_runtime *runtime) {
    if (runtime->objc_mutex_lock == NULL || runtime->objc_mutex_unlock == NULL || runtime->runtime_mutex == NULL) {
        return 0;
    }
    void *mutex = *runtime->runtime_mutex;
    if (mutex == NULL) return 0;
    return runtime->objc_mutex_lock(mutex) >= 0;
}

void ffh_objc_unlock_runtime(const ffh_objc_runtime *runtime, int taken) {
    if (taken) runtime->objc_mutex_unlock(*runtime->runtime_mutex);
}

static void ffh_objc_fork_take(void *runtime) { (void)ffh_objc_lock_runtime(runtime); }
static void ffh_objc_fork_give(void *runtime) {
    const ffh_objc_runtime *table = runtime;
    ffh_objc_unlock_runtime(table, *table->runtime_mutex != NULL);
}

const ffh_objc_runtime *ffh_objc_runtime_functions(void) {
    const ffh_objc_runtime *found = atomic_load_explicit(&ffh_objc_found, memory_order_acquire);
    if (found != NULL) return found;
    ffh_objc_runtime table;
    int complete = ffh_objc_fill(&table, RTLD_DEFAULT);
    for (size_t index = 0; !complete && index < sizeof ffh_objc_libraries / sizeof *ffh_objc_libraries; index++) {
        void *handle = dlopen(ffh_objc_libraries[index], RTLD_LAZY | RTLD_NOLOAD);
        if (handle == NULL) continue;
        complete = ffh_objc_fill(&table, handle);
        // The runtime stays loaded: classes and methods point into it. The reference this
        // dlopen took is kept for the same reason.
    }
    if (!complete) return NULL;
    // Threads that race here fill the same values; the first to publish wins, and every
    // caller gets the published table.
    static atomic_flag claimed = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set_explicit(&claimed, memory_order_acq_rel)) {
        // The runtime frees a dispatch table it replaces (a method added, an implementation
        // changed and the tables refreshed) at once while it counts one thread, and counts
        // only the threads it was told of: threads made with pthread_create directly, which
        // send messages all the same, would read freed tables. Counting one more thread, for
        // good, makes it keep replaced tables until no other thread can be reading them, that
        // is for the life of the process. The module replaces tables once per method (its
        // first hook, an overriding method added, a class made for per-instance hooks) and
        // at each restore call, never per install or removal, so what is kept is bounded by
        // the methods hooked; without the count each of those changes would free a table
        // that another thread may be reading.
        void (*thread_add)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "objc_thread_add");
        if (thread_add == NULL) {
            void *handle = dlopen("libobjc.so.4", RTLD_LAZY | RTLD_NOLOAD);
            if (handle != NULL) thread_add = (void (*)(void))dlsym(handle, "objc_thread_add");
        }
        if (thread_add != NULL) thread_add();
        ffh_objc_table = table;
        // The runtime's lock, held across fork by nothing: taken before every fork, ahead of
        // this package's locks (which are taken inside it), and given back on both sides.
        if (ffh_objc_table.objc_mutex_lock != NULL && ffh_objc_table.objc_mutex_unlock != NULL
            && ffh_objc_table.runtime_mutex != NULL) {
            (void)ffh_fork_protect_with(ffh_objc_fork_take, ffh_objc_fork_give, &ffh_objc_table, 10);
        }
        atomic_store_explicit(&ffh_objc_found, &ffh_objc_table, memory_order_release);
        return &ffh_objc_table;
    }
    while ((found = atomic_load_explicit(&ffh_objc_found, memory_order_acquire)) == NULL) {
    }
    return found;
}

char *ffh_objc_protocol_selectors(const ffh_objc_runtime *runtime, const char *name) {
    struct ffh_objc_protocol *protocol = runtime->objc_getProtocol(name);
    if (protocol == NULL) return NULL;
    unsigned int count = 0;
    ffh_objc_method_description *methods = runtime->protocol_copyMethodDescriptionList(protocol, 1, 1, &count);
    size_t length = 1;
    for (unsigned int index = 0; index < count; index++) {
        length += strlen(runtime->sel_getName(methods[index].name)) + 1;
    }
    char *names = malloc(length);
    if (names == NULL) {
        free(methods);
        return NULL;
    }
    char *cursor = names;
    for (unsigned int index = 0; index < count; index++) {
        const char *selector = runtime->sel_getName(methods[index].name);
        size_t size = strlen(selector) + 1;
        memcpy(cursor, selector, size);
        cursor += size;
    }
    *cursor = 0;
    free(methods);
    return names;
}

/* Whether the words of a class structure up to its method lists (class pointer, superclass,
   name, version, info, instance size, ivars, methods) can be read at `cls`. */
static int ffh_objc_readable_class(const void *cls) {
    uintptr_t word;
    for (int index = 0; index < 8; index++) {
        if (ffh_read_word((const unsigned char *)cls + index * sizeof(void *), &word) != 0) return 0;
    }
    return 1;
}

ffh_objc_pointer_kind ffh_objc_pointer_kind_of(const ffh_objc_runtime *runtime, const void *pointer) {
    uintptr_t isa = 0;
    if (pointer == NULL || ffh_read_word(pointer, &isa) != 0 || isa == 0) return FFH_OBJC_INVALID;
    if (!ffh_objc_readable_class((const void *)isa)) return FFH_OBJC_INVALID;
    if (runtime->class_isMetaClass((ffh_objc_Class)isa)) {
        /* A class's class pointer is its metaclass; a metaclass's is the root metaclass. */
        if (!ffh_objc_readable_class(pointer)) return FFH_OBJC_INVALID;
        return runtime->class_isMetaClass((ffh_objc_Class)pointer) ? FFH_OBJC_METACLASS : FFH_OBJC_CLASS;
    }
    /* An object's class pointer is a class, whose own class pointer is a metaclass. */
    uintptr_t meta = 0;
    if (ffh_read_word((const void *)isa, &meta) != 0 || meta == 0) return FFH_OBJC_INVALID;
    if (!ffh_objc_readable_class((const void *)meta)) return FFH_OBJC_INVALID;
    return runtime->class_isMetaClass((ffh_objc_Class)meta) ? FFH_OBJC_OBJECT : FFH_OBJC_INVALID;
}

int ffh_objc_class_defines(const ffh_objc_runtime *runtime, ffh_objc_Class cls, ffh_objc_Method method) {
    unsigned int count = 0;
    ffh_objc_Method *methods = runtime->class_copyMethodList(cls, &count);
    int defines = 0;
    for (unsigned int index = 0; index < count && !defines; index++) {
        defines = methods[index] == method;
    }
    free(methods);
    return defines;
}

// MARK: - Classes made for per-instance hooks

typedef struct ffh_objc_instance_class {
    ffh_objc_Class cls;
    ffh_objc_Class reported;
    struct ffh_objc_instance_class *next;
} ffh_objc_instance_class;

static _Atomic(ffh_objc_instance_class *) ffh_objc_instance_classes;
static _Atomic(void (*)(ffh_objc_id)) ffh_objc_dealloc_handler;

void ffh_objc_instance_class_register(ffh_objc_Class cls, ffh_objc_Class reported) {
    ffh_objc_instance_class *entry = malloc(sizeof *entry);
    if (entry == NULL) abort();
    entry->cls = cls;
    entry->reported = reported;
    entry->next = atomic_load_explicit(&ffh_objc_instance_classes, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(
        &ffh_objc_instance_classes, &entry->next, entry, memory_order_release, memory_order_relaxed)) {
    }
}

static ffh_objc_instance_class *ffh_objc_instance_entry(ffh_objc_Class cls) {
    for (ffh_objc_instance_class *entry = atomic_load_explicit(&ffh_objc_instance_classes, memory_order_acquire);
         entry != NULL; entry = entry->next) {
        if (entry->cls == cls) return entry;
    }
    return NULL;
}

ffh_objc_Class ffh_objc_instance_class_find(const ffh_objc_runtime *runtime, ffh_objc_Class cls) {
    for (; cls != NULL; cls = runtime->class_getSuperclass(cls)) {
        if (ffh_objc_instance_entry(cls) != NULL) return cls;
    }
    return NULL;
}

ffh_objc_Class ffh_objc_instance_class_method(ffh_objc_id self, ffh_objc_SEL selector) {
    (void)selector;
    const ffh_objc_runtime *runtime = ffh_objc_runtime_functions();
    ffh_objc_Class cls = ffh_objc_object_getClass(self);
    for (ffh_objc_Class walk = cls; walk != NULL; walk = runtime->class_getSuperclass(walk)) {
        ffh_objc_instance_class *entry = ffh_objc_instance_entry(walk);
        if (entry != NULL) return entry->reported;
    }
    return cls;
}

ffh_objc_Class ffh_objc_instance_superclass_method(ffh_objc_id self, ffh_objc_SEL selector) {
    const ffh_objc_runtime *runtime = ffh_objc_runtime_functions();
    ffh_objc_Class reported = ffh_objc_instance_class_method(self, selector);
    return reported != NULL ? runtime->class_getSuperclass(reported) : NULL;
}

void ffh_objc_instance_set_dealloc_handler(void (*handler)(ffh_objc_id object)) {
    atomic_store_explicit(&ffh_objc_dealloc_handler, handler, memory_order_release);
}

void ffh_objc_instance_dealloc_method(ffh_objc_id self, ffh_objc_SEL selector) {
    const ffh_objc_runtime *runtime = ffh_objc_runtime_functions();
    void (*handler)(ffh_objc_id) = atomic_load_explicit(&ffh_objc_dealloc_handler, memory_order_acquire);
    if (handler != NULL) handler(self);
    typedef void (*dealloc_function)(ffh_objc_id, ffh_objc_SEL);
    ffh_objc_Class made = ffh_objc_instance_class_find(runtime, ffh_objc_object_getClass(self));
    if (made == NULL) {
        /* The object left the class while its deallocation was under way (a hook on -dealloc
           removed the object's last hook, which gives it its class back): its class's own
           -dealloc goes on with it. */
        dealloc_function dealloc = (dealloc_function)runtime->objc_msg_lookup(self, selector);
        if (dealloc != NULL && dealloc != ffh_objc_instance_dealloc_method) dealloc(self, selector);
        return;
    }
    ffh_objc_super target = {self, runtime->class_getSuperclass(made)};
    if (target.super_class == NULL) return;
    dealloc_function dealloc = (dealloc_function)runtime->objc_msg_lookup_super(&target, selector);
    dealloc(self, selector);
}

// MARK: - Methods that send each message on to the superclass

/* A forwarder: the method's implementation is a stub of the attach entry (ffh_attach.h) that
   only forwards, through `resolver`; hooks whose original the stub is call `resolver` themselves
   (ffh_original_resolver). */
typedef struct ffh_objc_forwarder {
    ffh_objc_Class super_class;
    /* The runtime's objc_msg_lookup_super, read once when the forwarder is made. */
    ffh_objc_IMP (*lookup_super)(ffh_objc_super *super, ffh_objc_SEL selector);
    /* The stub's record: FFH_ATTACH_RESOLVES, `state` the resolver. */
    ffh_attach record;
    ffh_original_resolver resolver;
    /* Every forwarder is kept in a list: trampolines in closure memory are its only other
       reference, which leak checkers do not read. */
    struct ffh_objc_forwarder *next;
} ffh_objc_forwarder;

static _Atomic(ffh_objc_forwarder *) ffh_objc_forwarders;

#if defined(__x86_64__) && defined(__ELF__)
/* The superclass's implementation for a call's receiver and selector, the first two entries
   of `arguments` (after a hidden result pointer, if any). */
static uintptr_t ffh_objc_forwarder_resolve(const void *context, void *const *arguments) {
    const ffh_objc_forwarder *forwarder = context;
    ffh_objc_super target;
    memcpy(&target.receiver, arguments[0], sizeof target.receiver);
    target.super_class = forwarder->super_class;
    ffh_objc_SEL selector;
    memcpy(&selector, arguments[1], sizeof selector);
    return (uintptr_t)forwarder->lookup_super(&target, selector);
}

void *ffh_objc_forwarder_make(ffh_objc_Class super_class, int returns_in_memory, const void **resolver) {
    // A libffi built with static trampolines hands out code that is not ours to write.
    if (sizeof(ffi_closure) < FFH_ENTRY_TRAMPOLINE_SIZE || dlsym(RTLD_DEFAULT, "ffi_tramp_is_present") != NULL) return NULL;
    if (atomic_load_explicit(&ffh_objc_found, memory_order_acquire) == NULL) return NULL;
    ffh_objc_forwarder *forwarder = malloc(sizeof *forwarder);
    if (forwarder == NULL) return NULL;
    forwarder->super_class = super_class;
    forwarder->lookup_super = atomic_load_explicit(&ffh_objc_found, memory_order_acquire)->objc_msg_lookup_super;
    void *code = NULL;
    void *writable = ffi_closure_alloc(sizeof(ffi_closure), &code);
    if (writable == NULL || code == NULL) {
        free(forwarder);
        return NULL;
    }
    forwarder->resolver.code = (uintptr_t)code;
    forwarder->resolver.resolve = ffh_objc_forwarder_resolve;
    forwarder->resolver.context = forwarder;
    forwarder->resolver.lookupSuper = (void *(*)(const void *, const void *))forwarder->lookup_super;
    forwarder->resolver.superClass = super_class;
    forwarder->record.original = 0;
    forwarder->record.state = (uintptr_t)&forwarder->resolver;
    forwarder->record.epoch = 0;
    forwarder->record.flags = FFH_ATTACH_RESOLVES | (returns_in_memory ? FFH_ATTACH_RESULT_IN_MEMORY : 0);
    ffh_attach_write_stub(writable, &forwarder->record);
    __builtin___clear_cache((char *)code, (char *)code + FFH_ENTRY_TRAMPOLINE_SIZE);
    if (resolver) *resolver = &forwarder->resolver;
    forwarder->next = atomic_load_explicit(&ffh_objc_forwarders, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(
        &ffh_objc_forwarders, &forwarder->next, forwarder, memory_order_release, memory_order_relaxed)) {
    }
    return code;
}
#else
void *ffh_objc_forwarder_make(ffh_objc_Class super_class, int returns_in_memory, const void **resolver) {
    (void)super_class;
    (void)returns_in_memory;
    (void)resolver;
    return NULL;
}
#endif

static __thread unsigned long ffh_objc_changes __attribute__((tls_model("initial-exec")));

void ffh_objc_count_change(void) { ffh_objc_changes++; }

unsigned long ffh_objc_changes_on_this_thread(void) { return ffh_objc_changes; }

int ffh_objc_exchange_class(ffh_objc_id object, ffh_objc_Class expected, ffh_objc_Class desired) {
    if (!object) return 0;
    ffh_objc_Class *word = (ffh_objc_Class *)(void *)object;
    return __atomic_compare_exchange_n(word, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
