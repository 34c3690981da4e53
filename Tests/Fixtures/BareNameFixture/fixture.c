// A library that only the tests of the loader's functions that read their return address
// load: libImportFixture.so, whose DT_RUNPATH is its own directory ($ORIGIN), opens it as
// "libBareNameFixture.so", which the loader finds there only if it sees that
// libImportFixture.so called it; and its own dlsym(RTLD_NEXT), which finds cnext_value (in
// libNextFixture.so, which it links with and nothing else loads) only if the loader sees it as
// the caller: the objects after another caller are others.
#define _GNU_SOURCE
#include <dlfcn.h>

int cnext_value(void);

int cbarename_value(void) { return 31; }

void *cbarename_next(const char *name) { return dlsym(RTLD_NEXT, name); }

int cbarename_next_value(void) { return cnext_value(); }
