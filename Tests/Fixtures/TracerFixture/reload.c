// A program that loads plugin.so (which brings liblate.so and libtracee.so) with dlopen, runs
// it and unloads it, three times: each load is new (at the same address or not). Prints the
// calls of late_square the plugin made, and 1 when every unload did unload liblate.so.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int rounds = 3, runs = 10, unloaded = 1;
    for (int round = 0; round < rounds; round++) {
        void *plugin = dlopen(argv[1], RTLD_NOW);
        if (!plugin) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        int (*run)(int) = (int (*)(int))dlsym(plugin, "plugin_run");
        if (!run || run(runs) <= 0) return 1;
        dlclose(plugin);
        if (dlopen(argv[2], RTLD_NOW | RTLD_NOLOAD)) unloaded = 0;
    }
    printf("%d %d\n", rounds * runs, unloaded);
    return 0;
}
