/* Hooks with a signature of the loader's functions that read their return address (dlopen,
   dlmopen, dlsym, dlvsym: see call_through_x86_64.S). A hook calls its original from the
   library's code, whose object the loader would take for the caller's: dlopen would look for a
   bare name in the library's paths, not the caller's, and dlsym(RTLD_NEXT) would mean the
   objects after the library. Such an original gets a resolver (ffh_original_resolver, which
   every call of a slot's original consults): it finds a `ret` in the object of the hooked
   call's caller, from the return address above the closure entry's frame, leaves it in the
   thread's record and sends the call to the function's shim (a trampoline to
   ffh_as_caller_common, as_caller_x86_64.S, with the function in %r10), which takes it back
   and calls the function through it. A call whose `ret` a signal handler's own such call took
   meanwhile goes to the function directly, as before. */
#define _GNU_SOURCE
#include "ffh_thread.h"
#include "ffh_call.h"
#include "call_internal.h"
#include "ffh_return_site.h"

#include <stdint.h>
#include <stdlib.h>

#if defined(__x86_64__) && defined(__ELF__)

void ffh_as_caller_common(void);

/* The resolve of a resolver: `context` is the shim. The argument list is the closure entry's
   (the slot's closure enters by its register plan: the Swift side asks for this resolver only
   then), the entry frame's address in the word before it, the call's return address above. */
static uintptr_t ffh_as_caller_resolve(const void *context, void *const *arguments) {
    ffh_thread *thread = ffh_current_thread;
    if (thread) {
        uint64_t caller = entry_stack(entry_frame(arguments))[-1];
        int32_t was = ffh_thread_begin_work(thread);
        thread->as_caller_through = (uintptr_t)ffh_return_site((uintptr_t)caller);
        thread->busy = was;
    }
    return (uintptr_t)context;
}

/* What a shim calls first: the `ret` its call goes through (0: none), the thread's, taken. */
__attribute__((visibility("hidden"))) uintptr_t ffh_as_caller_take(void) {
    ffh_thread *thread = ffh_current_thread;
    if (!thread) return 0;
    uintptr_t through = thread->as_caller_through;
    thread->as_caller_through = 0;
    return through;
}

void ffh_as_caller_write(void *writable, uintptr_t function) {
    ffh_write_trampoline(writable, (const void *)function, (const void *)&ffh_as_caller_common);
}

const ffh_original_resolver *ffh_as_caller_resolver(uintptr_t function, const void *shim) {
    ffh_original_resolver *made = malloc(sizeof *made);
    if (!made) return NULL;
    made->code = function;
    made->resolve = ffh_as_caller_resolve;
    made->context = shim;
    made->lookupSuper = NULL;
    made->superClass = NULL;
    return made;
}

#else

void ffh_as_caller_write(void *writable, uintptr_t function) {
    (void)writable;
    (void)function;
}

const ffh_original_resolver *ffh_as_caller_resolver(uintptr_t function, const void *shim) {
    (void)function;
    (void)shim;
    return NULL;
}

#endif
