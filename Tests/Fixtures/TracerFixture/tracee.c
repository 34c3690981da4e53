// libtracee.so: the library whose exported functions the tracer test counts.
#include <stdarg.h>

int tracee_add(int a, int b) { return a + b; }

void tracee_nothing(void) {}

// Variadic: the tracer attaches without a signature, so the caller's registers must reach it
// as they came (%al included).
double tracee_sum(int count, ...) {
    va_list arguments;
    va_start(arguments, count);
    double sum = 0;
    for (int index = 0; index < count; index++) sum += va_arg(arguments, double);
    va_end(arguments);
    return sum;
}

long tracee_deeper(long depth);

// Recursion through the library's own PLT entries: tracee_depth and tracee_deeper (tail.c)
// call each other, each level a traced call.
long tracee_depth(long depth) { return depth <= 0 ? 0 : tracee_deeper(depth); }

// Calls the tracer sees only in the library's own code: a local function (only the symbol
// table names it) and a hidden one, both called directly, never through an import table.
static int tracee_square(int value) { return value * value; }

__attribute__((visibility("hidden"))) int tracee_hidden(int value) { return tracee_square(value) + 1; }

int tracee_inner(int value) { return tracee_hidden(value) + tracee_square(value); }
