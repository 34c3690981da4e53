#ifndef CIMPORTFIXTURE_H
#define CIMPORTFIXTURE_H

// A shared library linked with full RELRO (-z relro -z now) whose functions call the C
// library, so that libc symbols appear in its import table. The import-table tests open it
// with dlopen and look its functions up with dlsym.

#include <stddef.h>

/// strlen(text), called through the PLT: a JUMP_SLOT entry, bound at load time.
size_t cimportfixture_length(const char *text);

/// atoi(text), called through a pointer loaded from the GOT: a GLOB_DAT entry.
int cimportfixture_parse(const char *text);

/// dlopen(path, flags), called through the PLT: a library that loads another.
void *cimportfixture_open(const char *path, int flags);

/// open(path, O_CREAT | O_WRONLY, 0600), called through the PLT: a variadic function
/// called with its third argument. Returns the descriptor or -1.
int cimportfixture_create(const char *path);

/// fcntl(descriptor, F_SETFD, FD_CLOEXEC), called through the PLT: a variadic function
/// called with an int third argument. Returns what fcntl returns.
int cimportfixture_set_close_on_exec(int descriptor);

/// ioctl(descriptor, FIONREAD, &count), called through the PLT: a variadic function called
/// with a pointer third argument. Returns how many bytes wait to be read, or -1.
int cimportfixture_pending_bytes(int descriptor);

/// snprintf(buffer, size, "%d %.2f", number, value), called through the PLT: a variadic
/// function called with an int and a double (in a vector register, counted in %al).
int cimportfixture_format(char *buffer, size_t size, int number, double value);

#endif
