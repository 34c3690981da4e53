#include "CConsumerTable.h"

#include <unistd.h>

static int add(int a, int b) { return a + b; }
static void notify(int value) { (void)value; }

static callbacks table = {add, notify};

callbacks *consumer_table(void) { return &table; }

int consumer_add(int a, int b) { return __atomic_load_n(&table.add, __ATOMIC_ACQUIRE)(a, b); }

void consumer_notify(int value) { __atomic_load_n(&table.notify, __ATOMIC_ACQUIRE)(value); }

int consumer_pid(void) { return (int)getpid(); }

__attribute__((noinline)) int consumer_scale(int value) { return value * 10; }

int consumer_scale_sum(int a, int b) { return consumer_scale(a) + consumer_scale(b); }

void consumer_count_enter(void *context, void *frame) {
    long *counts = context;
    long first;
    __builtin_memcpy(&first, frame, sizeof first);
    __atomic_add_fetch(&counts[0], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&counts[1], (long)(int)first, __ATOMIC_RELAXED);
}
