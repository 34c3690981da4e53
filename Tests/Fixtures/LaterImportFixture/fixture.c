#include "CLaterImportFixture.h"

#include <stdlib.h>

int cimportlater_parse(const char *text) { return atoi(text) + 1; }
