/* The program's arguments for the Swift runtime linked into the tracer's library.

   The runtime's own source of them on Linux (CommandLine.cpp, for `CommandLine.arguments`)
   comes with a constructor that finds the main thread's stack in /proc/self/maps and reads the
   arguments from there: every process the tracer starts in paid for opening and parsing the
   whole map (160,000 instructions and the kernel's formatting of every mapping), though the
   tracer never asks for its arguments. These two definitions stand for that file: the linker
   takes the runtime's references to them here and leaves the runtime's file out. The loader
   hands a library's constructors the arguments it started the program with; they are kept as
   given. (Should a toolchain's runtime name another symbol of that file, the link fails with
   two definitions of these: that file is then to be left out another way.) */

#include <stddef.h>

static char **fht_arguments;
static int fht_argument_count;
static char **fht_override_arguments;
static int fht_override_count = -1;

__attribute__((constructor)) static void fht_keep_arguments(int count, char **arguments, char **environment) {
    (void)environment;
    fht_argument_count = arguments ? count : 0;
    fht_arguments = arguments;
}

char **_swift_stdlib_getUnsafeArgvArgc(int *outArgLen);
void _swift_stdlib_overrideUnsafeArgvArgc(char **argv, int argc);

char **_swift_stdlib_getUnsafeArgvArgc(int *outArgLen) {
    if (fht_override_count >= 0) {
        *outArgLen = fht_override_count;
        return fht_override_arguments;
    }
    static char *none[] = {NULL};
    if (!fht_arguments) {
        *outArgLen = 0;
        return none;
    }
    *outArgLen = fht_argument_count;
    return fht_arguments;
}

void _swift_stdlib_overrideUnsafeArgvArgc(char **argv, int argc) {
    fht_override_arguments = argv;
    fht_override_count = argc;
}
