// Part of libtracee.so, built with -O2 apart from tracee.c (so that its calls of tracee.c's
// functions go through the library's PLT entries).
int tracee_add(int a, int b);
long tracee_depth(long depth);

// A tail call (`jmp tracee_add@PLT`), which enters the attached tracee_add while
// tracee_tail's return address, swapped for the tracer's return thunk, is still in place.
int tracee_tail(int value) { return tracee_add(value, 1); }

// One level of tracee_depth's recursion.
long tracee_deeper(long depth) { return 1 + tracee_depth(depth - 1); }
