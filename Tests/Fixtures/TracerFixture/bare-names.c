// Opens libraries by bare name, which the loader looks for in the paths of the object that
// called it: libnear.so through the program's own DT_RUNPATH ($ORIGIN/near), from the program
// and from code in an anonymous mapping (the loader takes the main program for a caller it
// cannot place); libdeep.so through libopener.so's DT_RUNPATH ($ORIGIN/deep), with dlopen and
// with dlmopen into a namespace of its own. Each is then called `calls` times through dlsym's
// address; prints the calls of deep_value made in the program's namespace, or why it failed.
// With "loop": opens and closes libdeep.so through libopener.so until killed.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void *opener_open(const char *name);
void *opener_open_apart(const char *name);

static int call(void *library, const char *symbol, int calls, int expected) {
    int (*function)(void) = (int (*)(void))dlsym(library, symbol);
    if (!function) {
        fprintf(stderr, "no %s: %s\n", symbol, dlerror());
        exit(1);
    }
    for (int index = 0; index < calls; index++) {
        if (function() != expected) exit(2);
    }
    return calls;
}

static void *opened(void *library, const char *how) {
    if (!library) {
        fprintf(stderr, "%s: %s\n", how, dlerror());
        exit(1);
    }
    return library;
}

int main(int count, char **arguments) {
    if (count > 1 && strcmp(arguments[1], "loop") == 0) {
        // Opens and closes libdeep.so by bare name from libopener.so until killed; exits 3 at
        // the first open that fails.
        for (;;) {
            void *library = opener_open("libdeep.so");
            if (!library) {
                fprintf(stderr, "dlopen from libopener.so: %s\n", dlerror());
                return 3;
            }
            dlclose(library);
            usleep(200);
        }
    }
    int calls = count > 1 ? atoi(arguments[1]) : 10;
    call(opened(dlopen("libnear.so", RTLD_NOW), "dlopen from the program"), "near_value", calls, 7);
    int deep = call(opened(opener_open("libdeep.so"), "dlopen from libopener.so"), "deep_value", calls, 11);
    void *apart = opened(opener_open_apart("libdeep.so"), "dlmopen from libopener.so");
    Lmid_t namespace = LM_ID_BASE;
    if (dlinfo(apart, RTLD_DI_LMID, &namespace) != 0 || namespace == LM_ID_BASE) {
        fprintf(stderr, "dlmopen(LM_ID_NEWLM) loaded into the program's namespace\n");
        return 1;
    }
    call(apart, "deep_value", calls, 11);
    // sub rsp, 8; movabs rax, dlopen; call rax; add rsp, 8; ret
    unsigned char code[] = {0x48, 0x83, 0xec, 0x08, 0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0,
                            0xff, 0xd0, 0x48, 0x83, 0xc4, 0x08, 0xc3};
    void *(*open)(const char *, int) = dlopen;
    memcpy(code + 6, &open, sizeof open);
    void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return 1;
    memcpy(page, code, sizeof code);
    if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0) return 1;
    void *(*generated)(const char *, int) = (void *(*)(const char *, int))page;
    void *again = opened(generated("libnear.so", RTLD_NOW | RTLD_NOLOAD), "dlopen from generated code, loaded");
    dlclose(again);
    call(opened(generated("libnear2.so", RTLD_NOW), "dlopen from generated code"), "near_value", calls, 7);
    printf("%d\n", deep);
    return 0;
}
