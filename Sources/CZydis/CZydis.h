#ifndef CZYDIS_H
#define CZYDIS_H

// Debian's libzydis-dev (Zydis 4.0.0): the decoder and the formatter.
#include <Zydis/Zydis.h>

#endif
