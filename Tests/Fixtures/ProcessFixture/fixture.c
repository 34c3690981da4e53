#include "CProcessFixture.h"

#include <string.h>
#include <unistd.h>

int cprocessfixture_triple(int value) { return value * 3; }

static cprocessfixture_table table = {cprocessfixture_triple};

cprocessfixture_table *cprocessfixture_table_get(void) { return &table; }

int cprocessfixture_call(int value) { return __atomic_load_n(&table.compute, __ATOMIC_ACQUIRE)(value); }

int cprocessfixture_pid(void) { return (int)getpid(); }

size_t cprocessfixture_length(const char *text) {
    /* Taking strlen's address makes the compiler load it from the GOT (GLOB_DAT); volatile
       keeps the optimiser from turning the call back into a direct PLT call. */
    size_t (*volatile length)(const char *) = strlen;
    return length(text);
}
