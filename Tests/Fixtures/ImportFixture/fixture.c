#include "CImportFixture.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

size_t cimportfixture_length(const char *text) { return strlen(text); }

int cimportfixture_parse(const char *text) {
    /* Taking atoi's address makes the compiler load it from the GOT (GLOB_DAT); volatile
       keeps the optimiser from turning the call back into a direct PLT call. */
    int (*volatile parse)(const char *) = atoi;
    return parse(text);
}

void *cimportfixture_open(const char *path, int flags) { return dlopen(path, flags); }

int cimportfixture_create(const char *path) { return open(path, O_CREAT | O_WRONLY, 0600); }

int cimportfixture_set_close_on_exec(int descriptor) { return fcntl(descriptor, F_SETFD, FD_CLOEXEC); }

int cimportfixture_pending_bytes(int descriptor) {
    int count = -1;
    if (ioctl(descriptor, FIONREAD, &count) != 0) return -1;
    return count;
}

int cimportfixture_format(char *buffer, size_t size, int number, double value) {
    return snprintf(buffer, size, "%d %.2f", number, value);
}
