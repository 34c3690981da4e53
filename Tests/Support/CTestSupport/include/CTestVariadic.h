#ifndef CTESTVARIADIC_H
#define CTESTVARIADIC_H

/// Sums `count` variadic `long` arguments.
long ct_variadic_sum_longs(int count, ...);

/// Reads variadic arguments as `format` says ('i' int, 'l' long, 'd' double, 'p' pointer,
/// 'D' long double) and folds them into one checksum; the same fold runs in the tests.
double ct_variadic_fold(const char *format, ...);

/// Sums a fixed double and `count` variadic doubles (they arrive in SSE registers).
double ct_variadic_sum_doubles(double first, int count, ...);

/// The address of ct_variadic_sum_longs (Swift does not import variadic C functions).
const void *ct_variadic_sum_longs_address(void);
/// The address of ct_variadic_fold.
const void *ct_variadic_fold_address(void);
/// The address of ct_variadic_sum_doubles.
const void *ct_variadic_sum_doubles_address(void);

#endif
