#ifndef FHJ_JOIN_H
#define FHJ_JOIN_H

// What the files of CTracerJoin share: the process's description read from /proc, the
// explanation of a refusal, and the loader's functions found in its memory.

#include "CTracerJoin.h"

#include <stdarg.h>
#include <stdint.h>

/// What /proc/PID/status says of a process.
typedef struct {
    /// Its command name (`comm`).
    char name[64];
    /// Its state letter (R, S, D, T, t, Z, X).
    char state;
    /// Its real, effective, saved and file-system user IDs.
    uid_t uids[4];
    /// The process tracing it, 0 for none.
    pid_t tracer;
} fhj_process;

/// Reads /proc/PID/status (for a thread, /proc/PID/task/TID/status); 0 when it cannot.
int fhj_read_process(pid_t pid, pid_t tid, fhj_process *process);

/// Writes a sentence to `message` as snprintf does.
void fhj_say(char *message, size_t size, const char *format, ...) __attribute__((format(printf, 3, 4)));

/// Explains why ptrace refused process `pid` with `error` (EPERM or another errno): the
/// users, Yama's ptrace_scope and what its value means, a non-dumpable process.
fhj_status fhj_explain_refusal(pid_t pid, int error, char *message, size_t size);

/// One line of /proc/PID/maps: a mapping's range, permissions ("r-xp"), file offset, the
/// file's device and inode (0 for memory of no file) and path (empty for none, "[vdso]" and
/// the like for the kernel's), and the path's last component.
typedef struct {
    uint64_t start, end;
    char permissions[8];
    uint64_t offset;
    unsigned major, minor;
    uint64_t inode;
    const char *path;
    const char *file;
} fhj_map_line;

/// Calls `visit` with each mapping of process `pid`, in order, until it returns nonzero (the
/// line is valid during the call only); 0 when /proc/PID/maps cannot be read.
int fhj_each_mapping(pid_t pid, int (*visit)(const fhj_map_line *line, void *context), void *context);

/// The loader's functions in the process's memory, and the C library's mmap and munmap (0
/// when they were not found).
typedef struct {
    uint64_t dlopen;
    uint64_t dlsym;
    uint64_t dlerror;
    uint64_t mmap;
    uint64_t munmap;
} fhj_loader;

/// Waits, `limit_ms` at most, while process `pid` maps the dynamic loader but not the C library
/// yet (a program just started, its loader still loading its libraries): 1 once it maps the C
/// library, or at once when it has no such loader (a static program); 0 when the time ran out.
int fhj_wait_for_libc(pid_t pid, int limit_ms);

/// Finds dlopen, dlsym and dlerror in the process (and mmap and munmap, in its libc.so.6): in
/// its libc.so.6 (glibc 2.34 and later), else in its libdl.so.2, each at the object's load address plus the symbol's value read from
/// the object's file (the very file mapped, checked by device and inode).
fhj_status fhj_find_loader(pid_t pid, fhj_loader *loader, char *message, size_t size);

/// The dynamic loader in the process: the range its mappings span, its `_r_debug` (whose
/// r_state says whether a load or an unload is under way) and its lock (`_dl_load_lock`, two
/// recursive mutexes: it and the one after it, `_dl_load_write_lock`); each 0 when it was not
/// found (the lock's place only when the process runs the very loader the tracer does). Also
/// the code of the runtime libraries the tracer's own library uses (the C library, the Swift
/// runtime, the C++ runtime and unwinder, libdispatch, libffi, Zydis) and of the tracer's own
/// libraries (left loaded by an earlier join), whose locks the tracer's calls may take: a
/// thread stopped in their code may hold one.
typedef struct {
    uint64_t low, high;
    uint64_t r_debug;
    uint64_t load_lock;
    int runtime_count;
    struct {
        uint64_t start, end;
    } runtime[48];
} fhj_dynamic_loader;

/// Whether `address` is in the code of one of the runtime libraries (see ``fhj_dynamic_loader``).
int fhj_in_runtime(const fhj_dynamic_loader *loader, uint64_t address);

/// Finds the dynamic loader (ld-linux-x86-64.so.2) and the runtime libraries in the process.
void fhj_find_dynamic_loader(pid_t pid, fhj_dynamic_loader *loader);

/// Spare bytes in the process's code where the join may write code of its own: from the end of
/// an object's executable segment (rounded up to 64 bytes) to the end of the last page its
/// mapping covers (the file's padding, which no code of the object's reaches).
typedef struct {
    uint64_t start, end;
} fhj_spare;

/// Lists in `found` (`capacity` at most) the spare bytes of the segment mapped at `within`
/// when it is not 0, else of the dynamic loader, then the C library, then every other object,
/// in that order; returns how many.
int fhj_spare_code(pid_t pid, uint64_t within, fhj_spare *found, int capacity);

/// Whether `address` is in an executable mapping of the file at `path` in the process.
int fhj_maps_code(pid_t pid, uint64_t address, const char *path);

#endif
