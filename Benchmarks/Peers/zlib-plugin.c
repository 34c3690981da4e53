/* A plugin for dlopen-zlib.c: a shared library linked with zlib, so that libz.so.1 is
 * loaded only when the program dlopens this plugin, and its calls go through the
 * plugin's own import table.
 *
 *     cc -O2 -shared -fPIC -o libzlib-plugin.so zlib-plugin.c -lz
 */
#include <zlib.h>

/* Checksums a 256-byte buffer `iterations` times with crc32 and with adler32: exactly
 * `iterations` calls of each, plus one call of zlibVersion. Returns a value that depends
 * on every call, so that none can be left out. */
unsigned long plugin_work(long iterations) {
    unsigned char buffer[256];
    for (int index = 0; index < 256; index++) buffer[index] = (unsigned char)(index * 7 + 1);
    unsigned long crc = crc32(0L, Z_NULL, 0);
    unsigned long adler = adler32(0L, Z_NULL, 0);
    /* The two calls above are counted too: iterations + 1 of each in all. */
    for (long round = 0; round < iterations; round++) {
        crc = crc32(crc, buffer, sizeof buffer);
        adler = adler32(adler, buffer, sizeof buffer);
        buffer[round & 255] ^= (unsigned char)crc;
    }
    return crc ^ adler ^ (unsigned long)zlibVersion()[0];
}
