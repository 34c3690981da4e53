#define _GNU_SOURCE
#include "CTracerStart.h"

#include <dlfcn.h>
#include <elf.h>
#include <fnmatch.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const int ffi_hook_tracer_preloaded = 1;

/* Read by the Swift driver when it links this library (swift-autolink-extract gathers such
   entries ahead of the Swift runtime on the link line): the runtime it links every library with
   is recorded only if needed, and nothing here needs it. A process that never loads a traced
   library then loads the C library and this one, not the Swift runtime (about 1.7 ms less per
   process). */
__attribute__((section(".swift1_autolink_entries"), used)) static const char fhs_link_as_needed[] = "-Wl,--as-needed";

/* 1 once the tracer is loaded (or could not be): nothing more to look for. */
static int fhs_loaded;
static pthread_mutex_t fhs_lock = PTHREAD_MUTEX_INITIALIZER;
/* 1 on the thread that is loading the tracer: the loader's and the tracer's own calls of
   dlopen meanwhile (it pins objects with dlopen) go straight to the C library's. */
static __thread int fhs_loading;

/* The C library's dlopen, which this library's own shadows. */
typedef void *(*fhs_dlopen_function)(const char *, int);
static fhs_dlopen_function fhs_real_dlopen;

/* Whether `name` (an entry of FFI_HOOK_TRACER_LIBRARIES) names the object with this path and
   soname: the tracer's own rule (TracerConfiguration.libraries(naming:soname:)), the file the
   path leads to after symbolic links included (by its path, any path to it, or its name). */
static int fhs_names(const char *name, const char *path, const char *soname) {
    const char *slash = strrchr(path, '/');
    const char *file = slash ? slash + 1 : path;
    if (!*path) return 0; /* the main program */
    /* A name with a slash is a path or a pattern of paths (/usr/lib/x86_64-linux-gnu/libz.so*). */
    int is_path = strchr(name, '/') != NULL;
    if (strcmp(name, path) == 0 || strcmp(name, file) == 0 || fnmatch(name, file, 0) == 0) return 1;
    if (is_path && fnmatch(name, path, 0) == 0) return 1;
    if (soname && (strcmp(name, soname) == 0 || fnmatch(name, soname, 0) == 0)) return 1;
    char real[PATH_MAX], named[PATH_MAX];
    if (!realpath(path, real)) return 0;
    const char *real_slash = strrchr(real, '/');
    const char *real_file = real_slash ? real_slash + 1 : real;
    if (strcmp(name, real_file) == 0 || fnmatch(name, real_file, 0) == 0) return 1;
    if (is_path && fnmatch(name, real, 0) == 0) return 1;
    return is_path && realpath(name, named) && strcmp(named, real) == 0;
}

/* The object's DT_SONAME, or NULL. */
static const char *fhs_soname(const struct dl_phdr_info *info) {
    const ElfW(Dyn) *dynamic = NULL;
    for (ElfW(Half) index = 0; index < info->dlpi_phnum; index++) {
        if (info->dlpi_phdr[index].p_type == PT_DYNAMIC) {
            dynamic = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[index].p_vaddr);
        }
    }
    if (!dynamic) return NULL;
    uintptr_t strings = 0, soname = 0;
    int has_soname = 0;
    for (const ElfW(Dyn) *entry = dynamic; entry->d_tag != DT_NULL; entry++) {
        if (entry->d_tag == DT_STRTAB) strings = entry->d_un.d_ptr;
        if (entry->d_tag == DT_SONAME) {
            soname = entry->d_un.d_val;
            has_soname = 1;
        }
    }
    if (!strings || !has_soname) return NULL;
    /* The loader rewrites a writable dynamic section's addresses to run-time ones; the vDSO's
       keeps link-time ones. */
    if (strings < info->dlpi_addr) strings += info->dlpi_addr;
    return (const char *)strings + soname;
}

/* Walks the loaded objects for one that an entry of the list names. */
static int fhs_visit(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    const char *list = data;
    const char *path = info->dlpi_name ? info->dlpi_name : "";
    if (!*path) return 0;
    const char *soname = fhs_soname(info);
    char name[1024];
    for (const char *at = list; *at;) {
        size_t length = strcspn(at, ",");
        while (length > 0 && *at == ' ') {
            at++;
            length--;
        }
        size_t kept = length;
        while (kept > 0 && at[kept - 1] == ' ') kept--;
        if (kept > 0 && kept < sizeof name) {
            memcpy(name, at, kept);
            name[kept] = 0;
            if (fhs_names(name, path, soname)) return 1;
        }
        at += length;
        if (*at == ',') at++;
    }
    return 0;
}

/* The signals whose default action the Swift runtime's crash handler takes over when it loads
   (it prints a Swift crash report for any program that crashes, then dies of the signal). */
static const int fhs_crash_signals[] = {SIGQUIT, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGSEGV, SIGTRAP, SIGSYS};
#define FHS_CRASH_SIGNALS (sizeof fhs_crash_signals / sizeof fhs_crash_signals[0])

/* A handler's address, whichever form it takes. */
static void *fhs_handler(const struct sigaction *action) {
    return (action->sa_flags & SA_SIGINFO) ? (void *)action->sa_sigaction : (void *)action->sa_handler;
}

/* Loads the tracer from this library's directory and starts it (its constructor starts it only
   when LD_PRELOAD names it). */
static void fhs_load_tracer(void) {
    Dl_info info;
    if (!dladdr(&ffi_hook_tracer_preloaded, &info) || !info.dli_fname) return;
    const char *slash = strrchr(info.dli_fname, '/');
    size_t directory = slash ? (size_t)(slash - info.dli_fname) : 0;
    static const char file[] = "libFFIHookTracer.so";
    char path[4096];
    if (directory + 1 + sizeof file > sizeof path) return;
    memcpy(path, info.dli_fname, directory);
    path[directory] = '/';
    memcpy(path + directory + 1, file, sizeof file);
    /* The program's signal actions as they are: loading the tracer loads the Swift runtime
       (unless the program uses it already), and the program's crashes stay its own. */
    struct sigaction before[FHS_CRASH_SIGNALS];
    int saved[FHS_CRASH_SIGNALS];
    for (size_t index = 0; index < FHS_CRASH_SIGNALS; index++) {
        saved[index] = sigaction(fhs_crash_signals[index], NULL, &before[index]) == 0;
    }
    void *tracer = fhs_real_dlopen(slash ? path : file, RTLD_NOW | RTLD_GLOBAL);
    for (size_t index = 0; index < FHS_CRASH_SIGNALS; index++) {
        struct sigaction after;
        if (saved[index] && sigaction(fhs_crash_signals[index], NULL, &after) == 0 &&
            fhs_handler(&after) != fhs_handler(&before[index])) {
            sigaction(fhs_crash_signals[index], &before[index], NULL);
        }
    }
    void (*start)(void) = tracer ? (void (*)(void))dlsym(tracer, "ffi_hook_tracer_start") : NULL;
    if (!start) {
        static const char message[] = "ffi-hook-tracer: cannot load libFFIHookTracer.so beside libFFIHookTracerStart.so\n";
        (void)!write(2, message, sizeof message - 1);
        return;
    }
    start();
}

/* Loads the tracer if it is not yet and `now` or a traced library is loaded. */
static void fhs_check(int now) {
    if (fhs_loading || __atomic_load_n(&fhs_loaded, __ATOMIC_ACQUIRE)) return;
    const char *list = getenv("FFI_HOOK_TRACER_LIBRARIES");
    if (!now && (!list || !*list || !dl_iterate_phdr(fhs_visit, (void *)list))) return;
    pthread_mutex_lock(&fhs_lock);
    if (!fhs_loaded) {
        fhs_loading = 1;
        fhs_load_tracer();
        fhs_loading = 0;
        __atomic_store_n(&fhs_loaded, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&fhs_lock);
}

void *dlopen(const char *file, int mode) {
    fhs_dlopen_function real = __atomic_load_n(&fhs_real_dlopen, __ATOMIC_ACQUIRE);
    if (!real) {
        real = (fhs_dlopen_function)dlsym(RTLD_NEXT, "dlopen");
        if (!real) return NULL;
        __atomic_store_n(&fhs_real_dlopen, real, __ATOMIC_RELEASE);
    }
    void *handle = real(file, mode);
    if (handle) fhs_check(0);
    return handle;
}

__attribute__((constructor)) static void fhs_start(void) {
    fhs_real_dlopen = (fhs_dlopen_function)dlsym(RTLD_NEXT, "dlopen");
    if (!fhs_real_dlopen) return;
    /* The program the wrapper started always reports, traced libraries or not. */
    const char *started = getenv("FFI_HOOK_TRACER_PID");
    int isStarted = started && atol(started) == (long)getpid();
    fhs_check(isStarted);
}
