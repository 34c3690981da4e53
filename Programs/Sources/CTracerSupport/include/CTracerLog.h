#ifndef CTRACERLOG_H
#define CTRACERLOG_H

#include "CTracerSupport.h"

#include <stddef.h>
#include <stdint.h>

#pragma clang assume_nonnull begin

// The tracer's call log (prefix fht_log_): one line per traced call, with its thread, start
// time, duration, depth, arguments and result. A call's arguments are formatted as it enters,
// into a frame of the calling thread's own stack of logged calls (strings are read then, before
// the function can change them; a buffer the function fills is read as it returns); its line is
// finished as it returns and written with one
// write(2) system call (an instruction, not libc's write, which may be traced), so lines of
// several threads and processes appending to one file never mix. Nothing here takes a lock,
// allocates after a thread's first call, or calls a libc function: a signal handler's traced
// calls are logged like any other (their frames go above the interrupted one's). Memory is read
// with process_vm_readv on the own process, which fails with EFAULT on a bad address instead of
// faulting.

// MARK: - Descriptions

/// How a value is printed.
enum {
    /// A signed integer of 1, 2, 4 or 8 bytes (``fht_log_value/size``), in decimal.
    FHT_LOG_SIGNED = 1,
    /// An unsigned integer, in decimal.
    FHT_LOG_UNSIGNED = 2,
    /// `_Bool`: `true` or `false`.
    FHT_LOG_BOOL = 3,
    /// A pointer in hexadecimal, `NULL` for 0.
    FHT_LOG_POINTER = 4,
    /// A `char *`: the string, quoted, escaped and cut at 64 bytes; `NULL`; or the address
    /// followed by `<unreadable>`.
    FHT_LOG_STRING = 5,
    /// A `float` (the low 4 bytes of its vector register).
    FHT_LOG_FLOAT = 6,
    /// A `double`.
    FHT_LOG_DOUBLE = 7,
    /// No value: a `void` result, printed `<void>`.
    FHT_LOG_VOID = 8,
    /// A value the log cannot decode (a structure, a `long double`): printed `?`.
    FHT_LOG_UNKNOWN = 9,
    /// A buffer the function fills and whose length in bytes it returns (`read`'s): printed
    /// as the call returns, as a string of that length (cut at 64 bytes) when the result is
    /// positive, as its address otherwise. One such argument a function.
    FHT_LOG_FILLED = 10,
};

/// Where an argument's value is when the function is entered (System V x86-64).
enum {
    /// Integer argument registers 0 to 5: rdi, rsi, rdx, rcx, r8, r9.
    FHT_LOG_INTEGER_REGISTER = 0,
    /// Vector argument registers 0 to 7 (xmm0 to xmm7) are FHT_LOG_VECTOR_REGISTER + index.
    FHT_LOG_VECTOR_REGISTER = 8,
    /// Stack argument words (above the return address) are FHT_LOG_STACK_WORD + index.
    FHT_LOG_STACK_WORD = 16,
};

/// No argument gives a string's length.
#define FHT_LOG_NO_LENGTH 0xFF

/// One argument or result: how to print it and where it is.
typedef struct {
    /// FHT_LOG_SIGNED and the rest.
    uint8_t kind;
    /// For integers, the size in bytes.
    uint8_t size;
    /// Where an argument is (FHT_LOG_INTEGER_REGISTER + index and the rest); unused for a result.
    uint8_t source;
    /// For a string argument: the index of the argument that gives its length in bytes (as
    /// write's third gives its buffer's), or FHT_LOG_NO_LENGTH to read up to its NUL.
    uint8_t length;
} fht_log_value;

/// The most arguments decoded; a function with more prints `...` after them.
#define FHT_LOG_MOST_ARGUMENTS 16

/// What a function's description says of it.
enum {
    /// No signature: the six integer argument registers and rax are printed in hexadecimal.
    FHT_LOG_RAW = 1,
    /// More arguments follow what is decoded (a variadic function's, or arguments after one
    /// the log cannot decode): `, ...` is printed after them.
    FHT_LOG_MORE = 2,
    /// An argument is in a vector register: the enter block passes them.
    FHT_LOG_VECTORS = 4,
    /// The function returns twice (setjmp, vfork): no leave comes, so its line is written at
    /// its entry, ending `<returns twice>`, and it is kept in flight by no frame.
    FHT_LOG_RETURNS_TWICE = 8,
};

/// How one traced function's calls are logged; made once per function and never freed.
typedef struct {
    /// The function's name (not necessarily NUL-terminated) and its length.
    const char *_Nullable name;
    uint32_t name_length;
    /// FHT_LOG_RAW and the rest.
    uint8_t flags;
    /// The arguments decoded.
    uint8_t count;
    /// The result.
    fht_log_value result;
    /// The arguments.
    fht_log_value arguments[FHT_LOG_MOST_ARGUMENTS];
} fht_log_function;

// MARK: - Opening

/// Starts logging to `descriptor` (opened with O_APPEND): `ticks` is the time-stamp counter at
/// the tracer's start (time 0 of the log) and `nanoseconds_per_tick` converts it. `path` is
/// the log's file name with `%p` for the process ID, or NULL when it has none: a forked child
/// then opens a file of its own (created or truncated); otherwise it logs to its parent's.
void fht_log_open(int descriptor, uint64_t ticks, double nanoseconds_per_tick, const char *_Nullable path);

/// Whether calls are being logged.
int fht_log_enabled(void);

// MARK: - Calls

/// Logs a call of `function` entering at stack pointer `sp`, with its six integer argument
/// registers, and its eight vector argument registers' low words when the description has
/// FHT_LOG_VECTORS (NULL otherwise). The tracer's own work is not logged.
void fht_log_enter(
    const fht_log_function *function, uint64_t sp, uint64_t rdi, uint64_t rsi, uint64_t rdx, uint64_t rcx,
    uint64_t r8, uint64_t r9, const uint64_t *_Nullable vectors);

/// Writes the line of the call of `function` entered at stack pointer `sp` that returns with
/// `rax` and `xmm0` (its low word), on kernel thread `thread`.
void fht_log_leave(const fht_log_function *function, uint64_t sp, int32_t thread, uint64_t rax, uint64_t xmm0);

/// The calling thread's kernel ID.
int32_t fht_log_thread(void);

/// Writes a line ending `<no return>` for each call in flight on the calling thread (at exit:
/// `exit` itself, or the calls that led to it).
void fht_log_unfinished(int32_t thread);

/// Writes the calling thread's calls in flight, ending `<no return>`, as it ends (the log's
/// part of ``fht_thread_ends``).
void fht_log_thread_ends(void);

/// What the tracer does on each thread as it ends (the hooking library's exit hook, set when
/// a log or event buffers are asked for): the log writes its calls in flight, the event
/// buffer is marked ended.
void fht_thread_ends(void);

// MARK: - Losses

/// What the log lost.
typedef struct {
    /// Calls not logged because they were nested deeper than the thread's frames go.
    uint64_t too_deep;
    /// Calls not logged because their thread got no frames: 4,096 running threads held them,
    /// or the memory could not be had.
    uint64_t unmapped;
    /// Lines that could not be written (the write failed or was cut short).
    uint64_t unwritten;
    /// The error of the first write that failed (an errno value), 0 if none.
    int32_t first_error;
} fht_log_losses;

/// What the log lost so far.
fht_log_losses fht_log_lost(void);

// MARK: - Memory

/// Copies up to `size` bytes at `address` of this process into `buffer` without faulting:
/// stops at the first byte that cannot be read. Returns the number of bytes copied.
size_t fht_read_memory(uint64_t address, char *buffer, size_t size);

#pragma clang assume_nonnull end

#endif
