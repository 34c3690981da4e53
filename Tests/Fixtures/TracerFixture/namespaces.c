// A program that loads libz in a link-map namespace of its own (dlmopen) and calls its crc32
// through a pointer from dlsym: a tracer that sees the default namespace alone must say that
// the library it was asked for is loaded only elsewhere.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int main(void) {
    void *library = dlmopen(LM_ID_NEWLM, "libz.so.1", RTLD_NOW);
    if (!library) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    unsigned long (*crc)(unsigned long, const unsigned char *, unsigned) =
        (unsigned long (*)(unsigned long, const unsigned char *, unsigned))dlsym(library, "crc32");
    if (!crc) return 1;
    printf("%lx\n", crc(0, (const unsigned char *)"abc", 3));
    return 0;
}
