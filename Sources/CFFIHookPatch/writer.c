#define _GNU_SOURCE
#include "ffh_patch.h"

#if defined(__linux__) && defined(__x86_64__)

#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "ffh_syscall.h"
#include "stop.h"

/* No sanitizer instruments this file (see stop.c). */
#if defined(__clang__) && __has_attribute(disable_sanitizer_instrumentation)
#pragma clang attribute push(__attribute__((disable_sanitizer_instrumentation)), apply_to = function)
#define FFH_WRITER_PRAGMA_PUSHED 1
#endif

// The writer: stops the other threads once (stop.c), checks where each one is against every
// request of the batch, writes the requests no thread is in the way of, sets the moves of the
// written ones, and releases the threads. Nothing here calls libc (see stop.h).

static void ffh_clear(void *memory, size_t length) {
    volatile uint8_t *bytes = memory;
    for (size_t index = 0; index < length; index++) bytes[index] = 0;
}

// MARK: - Serialising every processor

/* Whether the process is registered for membarrier's core-serialising command: 1 yes, -1 no,
   0 not asked yet. */
static int ffh_sync_core_registered;

/* Registers the process for MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE where the kernel has it
   (Linux 4.16), once. */
static void ffh_sync_core_register(void) {
    if (__atomic_load_n(&ffh_sync_core_registered, __ATOMIC_ACQUIRE) != 0) return;
    long commands = ffh_syscall3(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    int available = commands > 0 && (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) &&
                    ffh_syscall3(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0;
    __atomic_store_n(&ffh_sync_core_registered, available ? 1 : -1, __ATOMIC_RELEASE);
}

/* Makes every processor that runs a thread of the process, this one included, serialise its
   instruction stream before that thread runs on: code written through another mapping (the
   kernel's, for /proc/self/mem) is then fetched anew everywhere. Where the kernel cannot, this
   processor serialises with cpuid (the others' threads were stopped in the kernel). */
static void ffh_sync_cores(void) {
    if (__atomic_load_n(&ffh_sync_core_registered, __ATOMIC_ACQUIRE) == 1 &&
        ffh_syscall3(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0) {
        return;
    }
    uint32_t eax = 0, ebx, ecx = 0, edx;
    __asm__ __volatile__("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx)::"memory");
}

// MARK: - Writing bytes

/* Writes through /proc/self/mem: the kernel writes the page as a debugger does (a private copy
   of a file's page, as any write makes), whatever its protection, so no mapping changes
   protection or splits in two. `memory` is the open file, or -1 when the kernel refuses it;
   then the page is made writable and executable for the moment of the write. */
typedef struct {
    long memory;
} ffh_writer;

static ffh_patch_status ffh_write_through_memory(
    ffh_writer *writer, ffh_patch_request *request, uint8_t *current, size_t length) {
    long got = ffh_syscall6(SYS_pread64, writer->memory, (long)current, (long)length, (long)request->address, 0, 0);
    if (got != (long)length) return FFH_PATCH_UNMAPPED;
    for (size_t index = 0; index < length; index++) {
        if (current[index] != request->expected[index]) return FFH_PATCH_CHANGED;
    }
    long written =
        ffh_syscall6(SYS_pwrite64, writer->memory, (long)request->bytes, (long)length, (long)request->address, 0, 0);
    if (written == (long)length) return FFH_PATCH_DONE;
    /* Refused, the memory being readable (a kernel built or booted to forbid writes through
       /proc/self/mem to memory that is not writable): this write and every later one use
       mprotect. */
    ffh_syscall6(SYS_close, writer->memory, 0, 0, 0, 0, 0);
    writer->memory = -1;
    return FFH_PATCH_UNSUPPORTED;
}

static ffh_patch_status ffh_write_through_protection(ffh_patch_request *request, int32_t *error) {
    uintptr_t page = 4096;
    uintptr_t first = (uintptr_t)request->address & ~(page - 1);
    uintptr_t end = ((uintptr_t)request->address + request->length + page - 1) & ~(page - 1);
    long changed = ffh_syscall3(SYS_mprotect, (long)first, (long)(end - first), PROT_READ | PROT_WRITE | PROT_EXEC);
    if (changed == -ENOMEM) return FFH_PATCH_UNMAPPED;
    if (changed != 0) {
        *error = (int32_t)-changed;
        return FFH_PATCH_PROTECTION;
    }
    ffh_patch_status status = FFH_PATCH_DONE;
    volatile uint8_t *code = request->address;
    for (size_t index = 0; index < request->length; index++) {
        if (code[index] != request->expected[index]) status = FFH_PATCH_CHANGED;
    }
    if (status == FFH_PATCH_DONE) {
        for (size_t index = 0; index < request->length; index++) code[index] = request->bytes[index];
    }
    ffh_syscall3(SYS_mprotect, (long)first, (long)(end - first), request->protection);
    return status;
}

/* The longest write the /proc/self/mem path compares before writing (patches are a few bytes;
   a longer one goes through mprotect). */
#define FFH_WRITE_COMPARED 64

static ffh_patch_status ffh_write(ffh_writer *writer, ffh_patch_request *request) {
    if (writer->memory >= 0 && request->length <= FFH_WRITE_COMPARED) {
        uint8_t current[FFH_WRITE_COMPARED];
        ffh_patch_status status = ffh_write_through_memory(writer, request, current, request->length);
        if (status != FFH_PATCH_UNSUPPORTED) return status;
    }
    return ffh_write_through_protection(request, &request->error);
}

// MARK: - Windows of requests

/* A whole library's patches lie a few hundred bytes apart: the requests to write that follow
   one another in the batch in ascending order of address, without overlapping, and fit in one
   window of FFH_WRITE_WINDOW bytes are read with one pread and written with one pwrite of
   /proc/self/mem (a page's private copy is made once either way). The bytes between them are
   written back as they were read, every other thread being stopped; a request left out (a
   thread inside it) keeps its bytes the same way. */
#define FFH_WRITE_WINDOW 4096

/* The end (exclusive index) of the window that begins with requests[first], which is to be
   written: the requests after it that may share its read and write. */
static size_t ffh_window_end(ffh_patch_request *requests, size_t count, size_t first) {
    uintptr_t start = (uintptr_t)requests[first].address;
    uintptr_t reach = start + requests[first].length;
    if (requests[first].length > FFH_WRITE_COMPARED || reach < start) return first + 1;
    size_t index = first + 1;
    for (; index < count; index++) {
        ffh_patch_request *request = &requests[index];
        uintptr_t address = (uintptr_t)request->address;
        if (request->length > FFH_WRITE_COMPARED || address < reach) break;
        uintptr_t end = address + request->length;
        if (end < address || end - start > FFH_WRITE_WINDOW) break;
        if (request->status == FFH_PATCH_DONE) reach = end;
    }
    /* Requests not to be written at the window's end are not part of it. */
    while (index > first + 1 && requests[index - 1].status != FFH_PATCH_DONE) index--;
    return index;
}

/* Writes the requests [first, end) to be written (see ffh_window_end) with one read and one
   write; each request is compared with what it expects as alone. A window that cannot be read
   whole (part of it unmapped) or written whole goes request by request. Returns whether any
   request was written. */
static int ffh_write_window(ffh_writer *writer, ffh_patch_request *requests, size_t first, size_t end) {
    uint8_t window[FFH_WRITE_WINDOW];
    uintptr_t start = (uintptr_t)requests[first].address;
    uintptr_t last = (uintptr_t)requests[end - 1].address + requests[end - 1].length;
    size_t length = (size_t)(last - start);
    long got = ffh_syscall6(SYS_pread64, writer->memory, (long)window, (long)length, (long)start, 0, 0);
    if (got == (long)length) {
        /* The bytes each request wants where it finds what it expects. */
        uintptr_t written_start = 0, written_end = 0;
        for (size_t index = first; index < end; index++) {
            ffh_patch_request *request = &requests[index];
            if (request->status != FFH_PATCH_DONE) continue;
            uint8_t *current = window + ((uintptr_t)request->address - start);
            for (size_t byte = 0; byte < request->length; byte++) {
                if (current[byte] != request->expected[byte]) request->status = FFH_PATCH_CHANGED;
            }
            if (request->status != FFH_PATCH_DONE) continue;
            for (size_t byte = 0; byte < request->length; byte++) current[byte] = request->bytes[byte];
            if (written_end == 0) written_start = (uintptr_t)request->address;
            written_end = (uintptr_t)request->address + request->length;
        }
        if (written_end == 0) return 0;
        size_t span = (size_t)(written_end - written_start);
        long written = ffh_syscall6(
            SYS_pwrite64, writer->memory, (long)(window + (written_start - start)), (long)span, (long)written_start,
            0, 0);
        if (written == (long)span) return 1;
        /* Refused (see ffh_write_through_memory): the requests that were to be written go
           through mprotect, as every later one. A write cut short left the requests wholly
           before the cut written. */
        uintptr_t cut = written_start + (written > 0 ? (uintptr_t)written : 0);
        if (written < 0) {
            ffh_syscall6(SYS_close, writer->memory, 0, 0, 0, 0, 0);
            writer->memory = -1;
        }
        int any = 0;
        for (size_t index = first; index < end; index++) {
            ffh_patch_request *request = &requests[index];
            if (request->status != FFH_PATCH_DONE) continue;
            if ((uintptr_t)request->address + request->length <= cut) {
                any = 1;
                continue;
            }
            request->status = ffh_write(writer, request);
            any |= request->status == FFH_PATCH_DONE;
        }
        return any;
    }
    /* Part of the window is not mapped (or the read was refused): request by request, each
       then says which it is. */
    int any = 0;
    for (size_t index = first; index < end; index++) {
        ffh_patch_request *request = &requests[index];
        if (request->status != FFH_PATCH_DONE) continue;
        request->status = ffh_write(writer, request);
        any |= request->status == FFH_PATCH_DONE;
    }
    return any;
}

// MARK: - Batches

/* The request whose watched range holds `pc`, or NULL; `sorted` when the requests are in
   ascending order of watch_start (then searched by halves). */
static ffh_patch_request *ffh_watching(ffh_patch_request *requests, size_t count, int sorted, uintptr_t pc) {
    if (sorted) {
        size_t low = 0, high = count;
        while (low < high) {
            size_t middle = low + (high - low) / 2;
            if (requests[middle].watch_start <= pc) low = middle + 1;
            else high = middle;
        }
        if (low == 0) return NULL;
        ffh_patch_request *request = &requests[low - 1];
        return pc < request->watch_end ? request : NULL;
    }
    for (size_t index = 0; index < count; index++) {
        if (pc >= requests[index].watch_start && pc < requests[index].watch_end) return &requests[index];
    }
    return NULL;
}

ffh_patch_status ffh_patch_write_batch(ffh_patch_request *requests, size_t count, ffh_patch_result *result) {
    ffh_clear(result, sizeof *result);
    int sorted = 1;
    for (size_t index = 0; index < count; index++) {
        ffh_patch_request *request = &requests[index];
        request->status = FFH_PATCH_DONE;
        request->thread = 0;
        request->pc = 0;
        request->error = 0;
        request->moved = 0;
        if (index > 0 && requests[index - 1].watch_start > request->watch_start) sorted = 0;
    }
    ffh_sync_core_register();
    ffh_stop stop;
    ffh_patch_status status = ffh_stop_world(&stop, result);
    result->stopped = stop.stopped;
    if (status != FFH_PATCH_DONE) {
        for (size_t index = 0; index < count; index++) requests[index].status = status;
        ffh_release_world(&stop);
        result->status = status;
        return status;
    }
    /* Where each thread is: inside a watched range only at a place a move names. */
    for (size_t index = 0; index < stop.limit; index++) {
        int32_t thread = 0;
        uintptr_t pc = 0;
        ffh_stopped_kind kind = ffh_stop_thread(&stop, index, &thread, &pc);
        if (kind == FFH_STOPPED_NONE) continue;
        ffh_patch_request *request = ffh_watching(requests, count, sorted, pc);
        if (request == NULL || request->status != FFH_PATCH_DONE) continue;
        int movable = 0;
        if (kind == FFH_STOPPED_PARKED) {
            for (size_t move = 0; move < request->move_count; move++) {
                if (request->moves[move].from == pc) movable = 1;
            }
        }
        if (!movable) {
            request->status = FFH_PATCH_THREAD_INSIDE;
            request->thread = thread;
            request->pc = pc;
        }
    }
    ffh_writer writer = {
        ffh_syscall6(SYS_openat, AT_FDCWD, (long)"/proc/self/mem", O_RDWR | O_CLOEXEC, 0, 0, 0)};
    int wrote = 0;
    for (size_t index = 0; index < count;) {
        ffh_patch_request *request = &requests[index];
        if (request->status != FFH_PATCH_DONE) {
            index++;
            continue;
        }
        size_t end = ffh_window_end(requests, count, index);
        if (writer.memory >= 0 && end - index > 1) {
            wrote |= ffh_write_window(&writer, requests, index, end);
            index = end;
            continue;
        }
        request->status = ffh_write(&writer, request);
        wrote |= request->status == FFH_PATCH_DONE;
        index++;
    }
    if (writer.memory >= 0) ffh_syscall6(SYS_close, writer.memory, 0, 0, 0, 0, 0);
    if (wrote) ffh_sync_cores();
    /* The moves of the requests written; nobody moves for a request left alone. */
    for (size_t index = 0; index < stop.limit; index++) {
        int32_t thread = 0;
        uintptr_t pc = 0;
        if (ffh_stop_thread(&stop, index, &thread, &pc) != FFH_STOPPED_PARKED) continue;
        ffh_patch_request *request = ffh_watching(requests, count, sorted, pc);
        if (request == NULL || request->status != FFH_PATCH_DONE) continue;
        for (size_t move = 0; move < request->move_count; move++) {
            if (request->moves[move].from != pc) continue;
            ffh_stop_move(&stop, index, request->moves[move].to);
            request->moved++;
            result->moved++;
            break;
        }
    }
    ffh_release_world(&stop);
    result->status = FFH_PATCH_DONE;
    return FFH_PATCH_DONE;
}

ffh_patch_status ffh_patch_write(
    void *address, const uint8_t *expected, const uint8_t *bytes, size_t length, int protection,
    uintptr_t watch_start, uintptr_t watch_end, const ffh_patch_move *moves, size_t move_count,
    ffh_patch_result *result) {
    ffh_patch_request request = {address, expected, bytes, length, protection, watch_start, watch_end, moves,
                                 move_count};
    ffh_patch_status status = ffh_patch_write_batch(&request, 1, result);
    if (status == FFH_PATCH_DONE) status = request.status;
    result->status = status;
    if (status != FFH_PATCH_DONE) {
        result->thread = request.thread;
        result->pc = request.pc;
        result->error = request.error;
    }
    return status;
}

int ffh_patch_write_code(void *address, const void *bytes, size_t length, void *area, size_t area_length) {
    long memory = ffh_syscall6(SYS_openat, AT_FDCWD, (long)"/proc/self/mem", O_RDWR | O_CLOEXEC, 0, 0, 0);
    if (memory >= 0) {
        long written = ffh_syscall6(SYS_pwrite64, memory, (long)bytes, (long)length, (long)address, 0, 0);
        ffh_syscall6(SYS_close, memory, 0, 0, 0, 0, 0);
        if (written == (long)length) return 0;
    }
    long changed = ffh_syscall3(SYS_mprotect, (long)area, (long)area_length, PROT_READ | PROT_WRITE | PROT_EXEC);
    if (changed != 0) return (int)-changed;
    volatile uint8_t *code = address;
    const uint8_t *source = bytes;
    for (size_t index = 0; index < length; index++) code[index] = source[index];
    changed = ffh_syscall3(SYS_mprotect, (long)area, (long)area_length, PROT_READ | PROT_EXEC);
    return changed == 0 ? 0 : (int)-changed;
}

int ffh_patch_sample(uintptr_t *pcs, size_t capacity, ffh_patch_result *result) {
    ffh_clear(result, sizeof *result);
    ffh_stop stop;
    ffh_patch_status status = ffh_stop_world(&stop, result);
    int count = 0;
    if (status == FFH_PATCH_DONE) {
        for (size_t index = 0; index < stop.limit; index++) {
            int32_t thread = 0;
            uintptr_t pc = 0;
            if (ffh_stop_thread(&stop, index, &thread, &pc) != FFH_STOPPED_PARKED) continue;
            if ((size_t)count < capacity) pcs[count] = pc;
            count++;
        }
    }
    ffh_release_world(&stop);
    result->status = status;
    result->stopped = count;
    return status == FFH_PATCH_DONE ? count : -1;
}

#ifdef FFH_WRITER_PRAGMA_PUSHED
#pragma clang attribute pop
#endif

#else

ffh_patch_status ffh_patch_write_batch(ffh_patch_request *requests, size_t count, ffh_patch_result *result) {
    for (size_t index = 0; index < count; index++) requests[index].status = FFH_PATCH_UNSUPPORTED;
    result->status = FFH_PATCH_UNSUPPORTED;
    return FFH_PATCH_UNSUPPORTED;
}

ffh_patch_status ffh_patch_write(
    void *address, const uint8_t *expected, const uint8_t *bytes, size_t length, int protection,
    uintptr_t watch_start, uintptr_t watch_end, const ffh_patch_move *moves, size_t move_count,
    ffh_patch_result *result) {
    (void)address, (void)expected, (void)bytes, (void)length, (void)protection, (void)watch_start;
    (void)watch_end, (void)moves, (void)move_count;
    result->status = FFH_PATCH_UNSUPPORTED;
    return FFH_PATCH_UNSUPPORTED;
}

int ffh_patch_write_code(void *address, const void *bytes, size_t length, void *area, size_t area_length) {
    (void)address, (void)bytes, (void)length, (void)area, (void)area_length;
    return 38; /* ENOSYS */
}

int ffh_patch_sample(uintptr_t *pcs, size_t capacity, ffh_patch_result *result) {
    (void)pcs, (void)capacity;
    result->status = FFH_PATCH_UNSUPPORTED;
    return -1;
}

#endif
