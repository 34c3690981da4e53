#include "CLazyImportFixture.h"

#include <stdlib.h>

long cimportlazy_parse(const char *text) { return atol(text); }
