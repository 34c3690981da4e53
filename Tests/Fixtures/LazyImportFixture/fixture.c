#include "CLazyImportFixture.h"

#include <setjmp.h>
#include <stdlib.h>

long cimportlazy_parse(const char *text) { return atol(text); }

long cimportlazy_own_atol(const char *text) { return strtol(text, NULL, 10) + 1000; }

static jmp_buf cimportlazy_buffer;
int cimportlazy_setjmp_twice(void) {
    volatile int returns = 0;
    int value = setjmp(cimportlazy_buffer);
    returns = returns + 1;
    if (value == 0) longjmp(cimportlazy_buffer, 7);
    return returns * 100 + value;
}
