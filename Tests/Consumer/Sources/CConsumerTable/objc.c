// An Objective-C class made at run time in gcc's runtime, opened with dlopen as a plug-in
// would open it (RTLD_LOCAL), for the README's Objective-C example: no Objective-C compiler,
// no link to the runtime.
#include "CConsumerTable.h"

#include <dlfcn.h>
#include <stddef.h>

typedef void *(*lookup_class_t)(const char *);
typedef void *(*allocate_pair_t)(void *, const char *, size_t);
typedef void (*register_pair_t)(void *);
typedef signed char (*add_method_t)(void *, const void *, void *, const char *);
typedef const void *(*register_name_t)(const char *);
typedef void *(*create_instance_t)(void *, size_t);
typedef void *(*msg_lookup_t)(void *, const void *);

static msg_lookup_t consumer_msg_lookup;
static const void *consumer_add_selector;

static int consumer_counter_add(void *self, const void *cmd, int a, int b) {
    (void)self;
    (void)cmd;
    return a + b;
}

void *consumer_objc_make_counter(void) {
    void *runtime = dlopen("libobjc.so.4", RTLD_NOW | RTLD_LOCAL);
    if (runtime == NULL) return NULL;
    lookup_class_t lookup = (lookup_class_t)dlsym(runtime, "objc_lookUpClass");
    allocate_pair_t allocate = (allocate_pair_t)dlsym(runtime, "objc_allocateClassPair");
    register_pair_t register_pair = (register_pair_t)dlsym(runtime, "objc_registerClassPair");
    add_method_t add_method = (add_method_t)dlsym(runtime, "class_addMethod");
    register_name_t register_name = (register_name_t)dlsym(runtime, "sel_registerName");
    create_instance_t create = (create_instance_t)dlsym(runtime, "class_createInstance");
    consumer_msg_lookup = (msg_lookup_t)dlsym(runtime, "objc_msg_lookup");
    if (!lookup || !allocate || !register_pair || !add_method || !register_name || !create || !consumer_msg_lookup)
        return NULL;
    void *cls = lookup("Counter");
    if (cls == NULL) {
        cls = allocate(NULL, "Counter", 0);
        if (cls == NULL) return NULL;
        consumer_add_selector = register_name("add:to:");
        add_method(cls, consumer_add_selector, (void *)consumer_counter_add, "i24@0:8i16i20");
        register_pair(cls);
    }
    return create(cls, 0);
}

int consumer_objc_add(void *object, int a, int b) {
    int (*implementation)(void *, const void *, int, int) =
        (int (*)(void *, const void *, int, int))consumer_msg_lookup(object, consumer_add_selector);
    return implementation(object, consumer_add_selector, a, b);
}
