/* A program that loads zlib after it has started: it does not link zlib; it dlopens a
 * plugin (zlib-plugin.c, which does) and calls it, so libz.so.1 arrives with dlopen.
 *
 *     cc -O2 -o dlopen-zlib dlopen-zlib.c -ldl
 *     ./dlopen-zlib PLUGIN ITERATIONS
 *
 * Calls zlib's crc32 and adler32 ITERATIONS + 1 times each and zlibVersion once, through
 * the plugin's import table; ITERATIONS 0 is an idle run (the load, three calls). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s PLUGIN ITERATIONS\n", argv[0]);
        return 2;
    }
    void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (plugin == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    unsigned long (*work)(long) = (unsigned long (*)(long))dlsym(plugin, "plugin_work");
    if (work == NULL) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 1;
    }
    printf("%lx\n", work(atol(argv[2])));
    return 0;
}
