#include "CSoakSupport.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t original_calls[SOAK_SLOT_COUNT];
static int drop_next_add_count;

static void count(int slot) { __atomic_add_fetch(&original_calls[slot], 1, __ATOMIC_RELAXED); }

// MARK: - Originals

static int32_t soak_add(int32_t a, int32_t b) {
    if (__atomic_exchange_n(&drop_next_add_count, 0, __ATOMIC_RELAXED) == 0) count(SOAK_ADD);
    return a + b;
}

static double soak_fadd(double x, double y) {
    count(SOAK_FADD);
    return x + y;
}

static soak_pair soak_mix(soak_pair pair, int32_t k) {
    count(SOAK_MIX);
    soak_pair result = {pair.tag + k, pair.value + (double)k};
    return result;
}

static soak_triple soak_shift(soak_triple triple, int32_t k) {
    count(SOAK_SHIFT);
    soak_triple result = {triple.a + k, triple.b + 1, triple.c + 2};
    return result;
}

static int64_t soak_wide(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, int64_t f, int64_t g, float h) {
    count(SOAK_WIDE);
    return a + b + c + d + e + f + g + (int64_t)h;
}

static soak_table table = {soak_add, soak_fadd, soak_mix, soak_shift, soak_wide};

soak_table *soak_table_pointer(void) { return &table; }

int soak_table_differences(void) {
    int bits = 0;
    if (__atomic_load_n(&table.add, __ATOMIC_ACQUIRE) != soak_add) bits |= 1 << SOAK_ADD;
    if (__atomic_load_n(&table.fadd, __ATOMIC_ACQUIRE) != soak_fadd) bits |= 1 << SOAK_FADD;
    if (__atomic_load_n(&table.mix, __ATOMIC_ACQUIRE) != soak_mix) bits |= 1 << SOAK_MIX;
    if (__atomic_load_n(&table.shift, __ATOMIC_ACQUIRE) != soak_shift) bits |= 1 << SOAK_SHIFT;
    if (__atomic_load_n(&table.wide, __ATOMIC_ACQUIRE) != soak_wide) bits |= 1 << SOAK_WIDE;
    return bits;
}

uint64_t soak_original_calls(int slot) {
    if (slot < 0 || slot >= SOAK_SLOT_COUNT) return 0;
    return __atomic_load_n(&original_calls[slot], __ATOMIC_ACQUIRE);
}

void soak_drop_next_add_count(void) { __atomic_store_n(&drop_next_add_count, 1, __ATOMIC_RELAXED); }

// MARK: - Calls through the table

int32_t soak_call_add(int32_t a, int32_t b) { return __atomic_load_n(&table.add, __ATOMIC_ACQUIRE)(a, b); }

double soak_call_fadd(double x, double y) { return __atomic_load_n(&table.fadd, __ATOMIC_ACQUIRE)(x, y); }

soak_pair soak_call_mix(soak_pair pair, int32_t k) { return __atomic_load_n(&table.mix, __ATOMIC_ACQUIRE)(pair, k); }

soak_triple soak_call_shift(soak_triple triple, int32_t k) {
    return __atomic_load_n(&table.shift, __ATOMIC_ACQUIRE)(triple, k);
}

int64_t soak_call_wide(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, int64_t f, int64_t g, float h) {
    return __atomic_load_n(&table.wide, __ATOMIC_ACQUIRE)(a, b, c, d, e, f, g, h);
}

// MARK: - Memory

uint64_t soak_resident_bytes(void) {
    FILE *file = fopen("/proc/self/statm", "r");
    if (!file) return 0;
    unsigned long long size = 0, resident = 0;
    int read = fscanf(file, "%llu %llu", &size, &resident);
    fclose(file);
    if (read != 2) return 0;
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

extern size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));

uint64_t soak_heap_bytes(const char **source) {
    if (__sanitizer_get_current_allocated_bytes) {
        if (source) *source = "sanitizer allocator";
        return __sanitizer_get_current_allocated_bytes();
    }
    // Valgrind preloads its own allocator, which keeps no mallinfo figures.
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload")) {
        if (source) *source = "none under valgrind";
        return 0;
    }
    struct mallinfo2 info = mallinfo2();
    if (source) *source = "mallinfo2";
    return (uint64_t)info.uordblks + (uint64_t)info.hblkhd;
}
