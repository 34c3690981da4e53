#ifndef CLATERIMPORTFIXTURE_H
#define CLATERIMPORTFIXTURE_H

// A shared library (full RELRO) that the import-table tests open only after a hook that
// follows later loads is installed.

/// atoi(text) + 1, atoi called through the PLT: a JUMP_SLOT entry.
int cimportlater_parse(const char *text);

#endif
