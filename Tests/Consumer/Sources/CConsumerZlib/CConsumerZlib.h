#ifndef CCONSUMERZLIB_H
#define CCONSUMERZLIB_H

#include <zlib.h>

/// `deflateInit` is a macro over deflateInit_, which Swift cannot import.
static inline int CConsumerZlib_deflateInit(z_streamp stream, int level) { return deflateInit(stream, level); }

#endif
