/* The wrapper's entry point (fast.c): the common run made before the C library starts. */
#pragma once

/* Runs the common run from the kernel's initial stack, or returns for main.c to run. */
void fhw_fast(long *stack);
