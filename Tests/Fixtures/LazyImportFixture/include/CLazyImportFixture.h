#ifndef CLAZYIMPORTFIXTURE_H
#define CLAZYIMPORTFIXTURE_H

// A shared library linked with lazy binding and partial RELRO (-z relro -z lazy): its PLT
// entries point at the PLT's own resolver stubs until the first call through them. The
// import-table tests open it with dlopen and look its functions up with dlsym.

/// atol(text), called through the PLT: a JUMP_SLOT entry, bound at the first call.
long cimportlazy_parse(const char *text);

#endif
