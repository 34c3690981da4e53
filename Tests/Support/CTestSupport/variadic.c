#include "CTestVariadic.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>

long ct_variadic_sum_longs(int count, ...) {
    va_list list;
    va_start(list, count);
    long sum = 0;
    for (int i = 0; i < count; i++) sum += va_arg(list, long);
    va_end(list);
    return sum;
}

double ct_variadic_fold(const char *format, ...) {
    va_list list;
    va_start(list, format);
    double result = 0;
    for (const char *p = format; *p; p++) {
        result *= 3;
        switch (*p) {
        case 'i': result += va_arg(list, int); break;
        case 'l': result += (double)va_arg(list, long); break;
        case 'd': result += va_arg(list, double); break;
        case 'p': result += (double)(uintptr_t)va_arg(list, void *); break;
        case 'D': result += (double)va_arg(list, long double); break;
        default: result = -1; break;
        }
    }
    va_end(list);
    return result;
}

double ct_variadic_sum_doubles(double first, int count, ...) {
    va_list list;
    va_start(list, count);
    double sum = first;
    for (int i = 0; i < count; i++) sum += va_arg(list, double);
    va_end(list);
    return sum;
}

const void *ct_variadic_sum_longs_address(void) { return (const void *)ct_variadic_sum_longs; }
const void *ct_variadic_fold_address(void) { return (const void *)ct_variadic_fold; }
const void *ct_variadic_sum_doubles_address(void) { return (const void *)ct_variadic_sum_doubles; }

ct_variadic_sum_longs_fn *ct_variadic_sum_longs_slot(void) {
    ct_variadic_sum_longs_fn *slot = malloc(sizeof *slot);
    *slot = ct_variadic_sum_longs;
    return slot;
}

ct_variadic_sum_doubles_fn *ct_variadic_sum_doubles_slot(void) {
    ct_variadic_sum_doubles_fn *slot = malloc(sizeof *slot);
    *slot = ct_variadic_sum_doubles;
    return slot;
}

void ct_variadic_free_slot(void *slot) { free(slot); }

long ct_variadic_call_sum_longs2(ct_variadic_sum_longs_fn *slot, long a, long b) { return (*slot)(2, a, b); }

double ct_variadic_call_sum_doubles2(ct_variadic_sum_doubles_fn *slot, double first, double a, double b) {
    return (*slot)(first, 2, a, b);
}
