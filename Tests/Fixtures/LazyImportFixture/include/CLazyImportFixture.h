#ifndef CLAZYIMPORTFIXTURE_H
#define CLAZYIMPORTFIXTURE_H

// A shared library linked with lazy binding and partial RELRO (-z relro -z lazy): its PLT
// entries point at the PLT's own resolver stubs until the first call through them. The
// import-table tests open it with dlopen and look its functions up with dlsym.

/// atol(text), called through the PLT: a JUMP_SLOT entry, bound at the first call.
long cimportlazy_parse(const char *text);

/// Calls setjmp (the C library's _setjmp, through the PLT) and, on its first return, longjmps
/// back to it: 100 times the number of returns plus the second return's value (207).
int cimportlazy_setjmp_twice(void);

/// A stand-in for atol compiled into this library (strtol, plus 1000): a replacement of the
/// library's own atol entry that leads into its own code, as the entry does until it is bound.
long cimportlazy_own_atol(const char *text);

#endif
