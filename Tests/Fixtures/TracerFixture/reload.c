// A program that loads plugin.so (which brings liblate.so and libtracee.so) with dlopen, runs
// it and unloads it, three times: each load is new (at the same address or not). Prints the
// calls of late_square the plugin made, and 1 when every unload did unload liblate.so. With a
// third argument, `pointers`, it calls dlopen and dlclose through the addresses dlsym gives for
// them, as a plugin host or a language runtime may: through no import-table entry; with
// `dlmopen`, it loads with dlmopen into the program's own namespace (LM_ID_BASE).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *open_in_base(const char *file, int mode) { return dlmopen(LM_ID_BASE, file, mode); }

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    void *(*open_object)(const char *, int) = dlopen;
    int (*close_object)(void *) = dlclose;
    if (argc > 3 && strcmp(argv[3], "pointers") == 0) {
        open_object = (void *(*)(const char *, int))dlsym(RTLD_DEFAULT, "dlopen");
        close_object = (int (*)(void *))dlsym(RTLD_DEFAULT, "dlclose");
        if (!open_object || !close_object) return 1;
    }
    if (argc > 3 && strcmp(argv[3], "dlmopen") == 0) open_object = open_in_base;
    int rounds = 3, runs = 10, unloaded = 1;
    for (int round = 0; round < rounds; round++) {
        void *plugin = open_object(argv[1], RTLD_NOW);
        if (!plugin) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        int (*run)(int) = (int (*)(int))dlsym(plugin, "plugin_run");
        if (!run || run(runs) <= 0) return 1;
        close_object(plugin);
        if (dlopen(argv[2], RTLD_NOW | RTLD_NOLOAD)) unloaded = 0;
    }
    printf("%d %d\n", rounds * runs, unloaded);
    return 0;
}
