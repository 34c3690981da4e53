#ifndef CTRACERSTART_H
#define CTRACERSTART_H

// The tracer's start library (prefix fhs_), what ffi-hook-tracer preloads: a few kilobytes of
// C that load the tracer itself (libFFIHookTracer.so, beside it, with the Swift runtime linked
// in) only once a library it is to trace is loaded, so that a process in which none ever
// is (a shell, a version manager's shim) pays for little more than this library.
//
// It loads the tracer in any process where a traced library (FFI_HOOK_TRACER_LIBRARIES: names
// or shell patterns, compared with each loaded object's soname and file name) is loaded at
// start; otherwise after the `dlopen` that brings one: the library defines `dlopen`, which
// the program's calls reach first (it is preloaded), and looks at the loaded objects after each.
// The process the wrapper started (FFI_HOOK_TRACER_PID) always reports: until the tracer is
// loaded there, this library writes that report itself (light_report.c), in the tracer's words;
// when a file is asked for (JSON, the event outputs, the log), the tracer is loaded at once.
//
// Once the tracer is loaded (or while this library reports for it), it has the report made
// when a signal ends the process: a handler
// where the program leaves a deadly signal's action at the default (the program is still told
// the default: the library defines `sigaction` and `signal` too), and a thread that makes the
// report when the handler wakes it (start.c says how).

/// A symbol the tracer looks up to find this library's file (to leave it out of the program's
/// objects). Always 1.
extern const int ffi_hook_tracer_preloaded;

#endif
