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

/// A slot holding a `long (*)(int, ...)`, as a table of callbacks would.
typedef long (*ct_variadic_sum_longs_fn)(int count, ...);
/// A slot holding a `double (*)(double, int, ...)`.
typedef double (*ct_variadic_sum_doubles_fn)(double first, int count, ...);

/// A slot initialised to ct_variadic_sum_longs; the caller frees it.
ct_variadic_sum_longs_fn *ct_variadic_sum_longs_slot(void);
/// A slot initialised to ct_variadic_sum_doubles; the caller frees it.
ct_variadic_sum_doubles_fn *ct_variadic_sum_doubles_slot(void);
/// Frees a slot made by the functions above.
void ct_variadic_free_slot(void *slot);

/// Calls the function in `slot` as a C caller does: `(*slot)(2, a, b)`.
long ct_variadic_call_sum_longs2(ct_variadic_sum_longs_fn *slot, long a, long b);
/// Calls the function in `slot` with two variadic doubles: `(*slot)(first, 2, a, b)`.
double ct_variadic_call_sum_doubles2(ct_variadic_sum_doubles_fn *slot, double first, double a, double b);

#endif
