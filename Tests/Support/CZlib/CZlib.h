#ifndef CZLIB_H
#define CZLIB_H

#include <zlib.h>

/// `deflateInit` is a macro over deflateInit_, which Swift cannot import.
static inline int CZlib_deflateInit(z_streamp stream, int level) { return deflateInit(stream, level); }
/// `inflateInit` is a macro over inflateInit_, which Swift cannot import.
static inline int CZlib_inflateInit(z_streamp stream) { return inflateInit(stream); }

#endif
