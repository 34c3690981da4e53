// A library that opens others by bare name, with dlopen and with dlmopen: linked with a
// DT_RUNPATH of its own ($ORIGIN/deep), which the program that loads it lacks. The loader looks
// for a bare name in the paths of the object that called it.
#define _GNU_SOURCE
#include <dlfcn.h>

void *opener_open(const char *name) { return dlopen(name, RTLD_NOW); }

void *opener_open_apart(const char *name) { return dlmopen(LM_ID_NEWLM, name, RTLD_NOW); }
