/* The report of the started process while the tracer is not loaded in it (light_report.c). */
#ifndef FHS_LIGHT_REPORT_H
#define FHS_LIGHT_REPORT_H

#include <stddef.h>
#include <stdint.h>

/* Whether the report of the process the wrapper started can be made without the tracer while
   no traced library is loaded: the table alone is asked for (no JSON, timeline, flame graph or
   log file, no output file of a join) and every setting is one the tracer accepts (else the
   tracer is loaded at start, as it says what it cannot use). Reads the environment. */
__attribute__((visibility("hidden"))) int fhs_light_applies(void);

/* Starts standing in for the tracer's report: keeps a duplicate of standard error, as the
   tracer keeps one (a program may close its own at exit). */
__attribute__((visibility("hidden"))) void fhs_light_begin(void);

/* Stops standing in (the tracer is being loaded, which reports itself): closes the duplicate. */
__attribute__((visibility("hidden"))) void fhs_light_end(void);

/* Whether the light report stands in for the tracer's now. */
__attribute__((visibility("hidden"))) int fhs_light_active(void);

/* FFI_HOOK_TRACER_LIBRARIES as the process started with it (a program may change its
   environment; the tracer reads the settings it started with), NULL when unset: start.c's. */
__attribute__((visibility("hidden"))) const char *fhs_libraries(void);

/* Notes a loaded object by its path and soname (NULL: none) as one the process loaded: the
   report suggests the names closest to a `--library` that matched none. The caller leaves this
   library out. */
__attribute__((visibility("hidden"))) void fhs_light_note_name(const char *path, const char *soname);

/* Claims the light report for the calling thread: 1 once, in the process the wrapper started
   (not a forked child, nor a vfork child), while the light report stands in; 0 otherwise. */
__attribute__((visibility("hidden"))) int fhs_light_claim(void);

/* Writes the report the tracer would write for a process that traced nothing (once claimed): a
   line for each `--library` name, with the three loaded objects closest to it, then the empty
   table, its heading naming `signal` when one ends the process (0: an exit). `matched`: bit N
   set when the Nth name of the list (empty ones not counted) answers to an object loaded now:
   no line for it. System calls alone, for a signal handler. */
__attribute__((visibility("hidden"))) void fhs_light_report(int signal, uint64_t matched);

#endif
