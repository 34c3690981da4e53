// liblogged.so: the library whose calls the tracer's log test decodes, with known arguments and
// results (log-program.c makes the calls).
#include <string.h>

long logged_call(int number, const char *text, double ratio, long big) {
    (void)text;
    (void)ratio;
    (void)big;
    return number + 1L;
}

double logged_scale(double value, int times) { return value * times; }

float logged_half(float value) { return value / 2; }

// Eight integer arguments: the last two are on the stack.
int logged_many(int a, int b, int c, int d, int e, int f, int g, int h) { return a + b + c + d + e + f + g + h; }

// A call made inside another: through the library's own PLT entry (built at -O0 with -fPIC), so
// the import-table tracer sees it too.
long logged_outer(int number) { return logged_call(number, "inner", 0.5, number) * 10; }

// Logged without a signature: its registers raw.
unsigned long logged_raw(unsigned long first, unsigned long second) { return first + second; }
