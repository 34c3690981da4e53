#ifndef FFH_GNU_HASH_H
#define FFH_GNU_HASH_H

// The GNU hash table of an object's dynamic symbols (DT_GNU_HASH), walked the same way by the
// library's lookups and by the tracer's start library, which shares this header without
// linking the library. The table: the bucket count, the first symbol it covers, the bloom
// filter's word count and shift; the bloom filter (address-sized words); the buckets; one
// chain word per symbol from the first it covers on, its low bit marking a chain's end.

#include <stdint.h>

/// The GNU hash of a symbol's name.
static inline uint32_t ffh_gnu_hash(const char *name) {
    uint32_t hash = 5381;
    for (const unsigned char *byte = (const unsigned char *)name; *byte; byte++) hash = hash * 33 + *byte;
    return hash;
}

/// A walk of the symbols whose hashes match one in the table: a lookup's candidates, whose
/// names are still to compare.
typedef struct {
    const uint32_t *chain;
    uint32_t first;
    uint32_t index;
    uint32_t hash;
    int done;
} ffh_gnu_hash_walk;

/// Starts a walk of the symbols of `table` whose hash may be `hash`.
static inline void ffh_gnu_hash_begin(ffh_gnu_hash_walk *walk, const uint32_t *table, uint32_t hash) {
    uint32_t buckets = table[0], first = table[1], words = table[2];
    walk->hash = hash;
    walk->first = first;
    walk->done = 1;
    if (buckets == 0) return;
    const uint32_t *bucket = (const uint32_t *)((const uintptr_t *)(table + 4) + words);
    walk->chain = bucket + buckets;
    walk->index = bucket[hash % buckets];
    walk->done = walk->index < first;
}

/// The next candidate's index in the dynamic symbol table, -1 when there is none.
static inline long ffh_gnu_hash_next(ffh_gnu_hash_walk *walk) {
    while (!walk->done) {
        uint32_t index = walk->index++;
        uint32_t entry = walk->chain[index - walk->first];
        if (entry & 1) walk->done = 1;
        if ((entry | 1) == (walk->hash | 1)) return index;
    }
    return -1;
}

#endif
