#define _GNU_SOURCE
#include "CTracerLog.h"
/* (Header-only: the hooking library's system calls by instruction.) */
#include "../../../Sources/CFFIHookSupport/include/ffh_syscall.h"
#include "../../../Sources/CFFIHookSupport/include/ffh_thread.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>

// Everything here runs inside the blocks of traced calls, maybe in a signal handler, maybe
// while libc itself is traced in its own code: no libc call (system calls are made by
// instruction), no lock, and no loop the compiler may turn into a call of memcpy or memset
// (no_builtin).
#define FHT_PLAIN __attribute__((no_builtin))

// MARK: - System calls

// MARK: - State

/* The log's descriptor (-1: not logging), the clock's origin and rate (nanoseconds per tick in
   32.32 fixed point), the process ID (for process_vm_readv), and the file name with %p. */
static int fht_log_descriptor = -1;
static uint64_t fht_log_origin;
static uint64_t fht_log_rate;
static long fht_log_pid;
static char fht_log_path[4096];
/* Whether the log is a pipe or a socket, whose reader may go away. */
static int fht_log_is_pipe;

/* What the log lost (see fht_log_losses). */
static uint64_t fht_log_too_deep, fht_log_unmapped, fht_log_unwritten;
static int32_t fht_log_first_error;

/* How deep a thread's logged calls in flight go, and the text kept for each one's name and
   arguments (a line is at most this plus its prefix and result). */
enum { FHT_LOG_FRAMES = 256, FHT_LOG_TEXT = 1000 };

/* A logged call in flight: its stack pointer at entry (UINT64_MAX while it is written), its
   function, when it began, and its name and arguments formatted. */
typedef struct {
    uint64_t sp;
    const fht_log_function *function;
    uint64_t ticks;
    uint32_t length;
    /* Where in the text the buffer that the function fills goes (UINT32_MAX: it has none), and
       its address. */
    uint32_t filled_at;
    uint64_t filled;
    char text[FHT_LOG_TEXT];
} fht_log_frame;

/* A thread's logged calls in flight, outermost first. */
typedef struct {
    uint64_t depth;
    fht_log_frame frames[FHT_LOG_FRAMES];
} fht_log_stack;

/* The calling thread's frames (NULL before its first logged call). */
static __thread fht_log_stack *fht_log_mine __attribute__((tls_model("initial-exec")));

int fht_log_enabled(void) { return __atomic_load_n(&fht_log_descriptor, __ATOMIC_ACQUIRE) >= 0; }

fht_log_losses fht_log_lost(void) {
    fht_log_losses losses;
    losses.too_deep = __atomic_load_n(&fht_log_too_deep, __ATOMIC_RELAXED);
    losses.unmapped = __atomic_load_n(&fht_log_unmapped, __ATOMIC_RELAXED);
    losses.unwritten = __atomic_load_n(&fht_log_unwritten, __ATOMIC_RELAXED);
    losses.first_error = __atomic_load_n(&fht_log_first_error, __ATOMIC_RELAXED);
    return losses;
}

// MARK: - Text

/* A line being built in a fixed buffer (`capacity` bytes, `used` so far); what does not fit
   is cut. */
typedef struct {
    char *bytes;
    size_t used;
    size_t capacity;
} fht_text;

/* Adds a byte. */
FHT_PLAIN static void fht_put(fht_text *text, char byte) {
    if (text->used < text->capacity) text->bytes[text->used++] = byte;
}

/* Adds `count` bytes. */
FHT_PLAIN static void fht_put_bytes(fht_text *text, const char *bytes, size_t count) {
    size_t room = text->capacity - text->used;
    if (count > room) count = room;
    char *to = text->bytes + text->used;
    for (size_t index = 0; index < count; index++) to[index] = bytes[index];
    text->used += count;
}

/* Adds a NUL-terminated string of the tracer's own. */
FHT_PLAIN static void fht_put_string(fht_text *text, const char *string) {
    while (*string) fht_put(text, *string++);
}

/* Adds an unsigned number in decimal. */
FHT_PLAIN static void fht_put_unsigned(fht_text *text, uint64_t value) {
    char digits[20];
    int count = 0;
    do {
        digits[count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value > 0);
    while (count > 0) fht_put(text, digits[--count]);
}

/* `width` digits at least, with leading zeros. */
FHT_PLAIN static void fht_put_padded(fht_text *text, uint64_t value, int width) {
    char digits[20];
    int count = 0;
    do {
        digits[count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value > 0 || count < width);
    while (count > 0) fht_put(text, digits[--count]);
}

/* Adds a signed number in decimal. */
FHT_PLAIN static void fht_put_signed(fht_text *text, int64_t value) {
    if (value < 0) {
        fht_put(text, '-');
        fht_put_unsigned(text, (uint64_t)0 - (uint64_t)value);
    } else {
        fht_put_unsigned(text, (uint64_t)value);
    }
}

/* Adds a number in hexadecimal, with 0x. */
FHT_PLAIN static void fht_put_hex(fht_text *text, uint64_t value) {
    static const char hex[] = "0123456789abcdef";
    char digits[16];
    int count = 0;
    do {
        digits[count++] = hex[value & 15];
        value >>= 4;
    } while (value > 0);
    fht_put(text, '0');
    fht_put(text, 'x');
    while (count > 0) fht_put(text, digits[--count]);
}

/* A double as C's %g would roughly print it: up to 6 decimals without trailing zeros between
   1e-4 and 1e15, otherwise a mantissa with 6 decimals and an exponent. */
FHT_PLAIN static void fht_put_double(fht_text *text, double value) {
    if (value != value) {
        fht_put_string(text, "nan");
        return;
    }
    if (value < 0 || (value == 0 && 1 / value < 0)) {
        fht_put(text, '-');
        value = -value;
    }
    if (value > 1.7976931348623157e308) {
        fht_put_string(text, "inf");
        return;
    }
    int exponent = 0;
    if (value != 0 && (value < 1e-4 || value >= 1e15)) {
        while (value >= 10) {
            value /= 10;
            exponent++;
        }
        while (value < 1) {
            value *= 10;
            exponent--;
        }
    }
    uint64_t millionths = (uint64_t)(value * 1e6 + 0.5);
    uint64_t whole = millionths / 1000000, fraction = millionths % 1000000;
    fht_put_unsigned(text, whole);
    if (fraction) {
        int digits = 6;
        while (fraction % 10 == 0) {
            fraction /= 10;
            digits--;
        }
        fht_put(text, '.');
        fht_put_padded(text, fraction, digits);
    }
    if (exponent != 0) {
        fht_put(text, 'e');
        fht_put(text, exponent < 0 ? '-' : '+');
        fht_put_padded(text, (uint64_t)(exponent < 0 ? -exponent : exponent), 2);
    }
}

// MARK: - Memory

size_t fht_read_memory(uint64_t address, char *buffer, size_t size) {
    /* The first page and the kernel's half are never the process's: no system call for them. */
    if (address < 4096 || address >= (UINT64_C(1) << 63)) return 0;
    size_t done = 0;
    /* A page at a time: a read stops at the first page it cannot read. */
    while (done < size) {
        uint64_t at = address + done;
        size_t chunk = 4096 - (size_t)(at & 4095);
        if (chunk > size - done) chunk = size - done;
        struct iovec local = {buffer + done, chunk};
        struct iovec remote = {(void *)(uintptr_t)at, chunk};
        long copied = ffh_syscall6(SYS_process_vm_readv, fht_log_pid, (long)&local, 1, (long)&remote, 1, 0);
        if (copied <= 0) break;
        done += (size_t)copied;
        if ((size_t)copied < chunk) break;
    }
    return done;
}

/* The longest part of a string printed. */
enum { FHT_LOG_STRING_BYTES = 64 };

/* A string argument: NULL, the address and <unreadable>, or the first 64 bytes quoted and
   escaped, then ... when there are more. `length` is its length when an argument gives it, or
   UINT64_MAX to read up to its NUL. */
FHT_PLAIN static void fht_put_c_string(fht_text *text, uint64_t address, uint64_t length) {
    if (address == 0) {
        fht_put_string(text, "NULL");
        return;
    }
    char bytes[FHT_LOG_STRING_BYTES + 1];
    size_t wanted = length <= FHT_LOG_STRING_BYTES ? (size_t)length : FHT_LOG_STRING_BYTES + 1;
    size_t read = fht_read_memory(address, bytes, wanted);
    if (read == 0 && wanted > 0) {
        fht_put_hex(text, address);
        fht_put_string(text, " <unreadable>");
        return;
    }
    size_t shown = 0;
    int ended = length != UINT64_MAX && length <= FHT_LOG_STRING_BYTES && read == wanted;
    while (shown < read && shown < FHT_LOG_STRING_BYTES) {
        if (length == UINT64_MAX && bytes[shown] == 0) {
            ended = 1;
            break;
        }
        shown++;
    }
    /* Cut by the memory's end (the rest cannot be read), or by the bound. */
    int unreadable = !ended && read < wanted;
    static const char hex[] = "0123456789abcdef";
    fht_put(text, '"');
    for (size_t index = 0; index < shown; index++) {
        unsigned char byte = (unsigned char)bytes[index];
        switch (byte) {
        case '\n': fht_put_string(text, "\\n"); break;
        case '\t': fht_put_string(text, "\\t"); break;
        case '\r': fht_put_string(text, "\\r"); break;
        case '"': fht_put_string(text, "\\\""); break;
        case '\\': fht_put_string(text, "\\\\"); break;
        default:
            if (byte < 0x20 || byte >= 0x7f) {
                fht_put(text, '\\');
                fht_put(text, 'x');
                fht_put(text, hex[byte >> 4]);
                fht_put(text, hex[byte & 15]);
            } else {
                fht_put(text, (char)byte);
            }
        }
    }
    fht_put(text, '"');
    if (!ended) fht_put_string(text, unreadable ? "<unreadable>" : "...");
}

// MARK: - Values

/* An integer of `size` bytes from a register's or a stack word's 64 bits. */
FHT_PLAIN static uint64_t fht_unsigned_value(uint64_t bits, uint8_t size) {
    return size >= 8 ? bits : bits & ((UINT64_C(1) << (size * 8)) - 1);
}

/* The same, sign-extended. */
FHT_PLAIN static int64_t fht_signed_value(uint64_t bits, uint8_t size) {
    if (size >= 8) return (int64_t)bits;
    unsigned shift = 64 - size * 8u;
    return (int64_t)(bits << shift) >> shift;
}

/* A value whose bits are `bits` (for a string with a length argument, `length` is its length). */
FHT_PLAIN static void fht_put_value(fht_text *text, const fht_log_value *value, uint64_t bits, uint64_t length) {
    switch (value->kind) {
    case FHT_LOG_SIGNED: fht_put_signed(text, fht_signed_value(bits, value->size)); break;
    case FHT_LOG_UNSIGNED: fht_put_unsigned(text, fht_unsigned_value(bits, value->size)); break;
    case FHT_LOG_BOOL: fht_put_string(text, (bits & 0xff) ? "true" : "false"); break;
    case FHT_LOG_POINTER:
        if (bits == 0) {
            fht_put_string(text, "NULL");
        } else {
            fht_put_hex(text, bits);
        }
        break;
    case FHT_LOG_STRING: fht_put_c_string(text, bits, length); break;
    case FHT_LOG_FLOAT: {
        union {
            uint32_t bits;
            float value;
        } single = {.bits = (uint32_t)bits};
        fht_put_double(text, (double)single.value);
        break;
    }
    case FHT_LOG_DOUBLE: {
        union {
            uint64_t bits;
            double value;
        } wide = {.bits = bits};
        fht_put_double(text, wide.value);
        break;
    }
    case FHT_LOG_VOID: fht_put_string(text, "<void>"); break;
    default: fht_put(text, '?'); break;
    }
}

/* The bits of the argument at `source`. */
FHT_PLAIN static uint64_t fht_argument_bits(
    uint8_t source, const uint64_t *integers, const uint64_t *_Nullable vectors, uint64_t sp) {
    if (source < FHT_LOG_VECTOR_REGISTER) return integers[source];
    if (source < FHT_LOG_STACK_WORD) return vectors ? vectors[source - FHT_LOG_VECTOR_REGISTER] : 0;
    uint64_t word = 0;
    /* The caller's stack: readable, but read as any other memory, without trusting it. */
    fht_read_memory(sp + 8 + 8 * (uint64_t)(source - FHT_LOG_STACK_WORD), (char *)&word, sizeof word);
    return word;
}

/* `name(arguments)` of a call: decoded by the description, or the six registers raw. A buffer
   the function fills is left out: its place and address go to `frame`, for the return. */
FHT_PLAIN static void fht_put_call(
    fht_text *text, fht_log_frame *frame, const fht_log_function *function, const uint64_t *integers,
    const uint64_t *_Nullable vectors, uint64_t sp) {
    frame->filled_at = UINT32_MAX;
    if (function->name) fht_put_bytes(text, function->name, function->name_length);
    fht_put(text, '(');
    if (function->flags & FHT_LOG_RAW) {
        for (int index = 0; index < 6; index++) {
            if (index > 0) fht_put_string(text, ", ");
            fht_put_hex(text, integers[index]);
        }
    } else {
        for (int index = 0; index < function->count; index++) {
            const fht_log_value *argument = &function->arguments[index];
            if (index > 0) fht_put_string(text, ", ");
            if (argument->kind == FHT_LOG_FILLED) {
                frame->filled_at = (uint32_t)text->used;
                frame->filled = fht_argument_bits(argument->source, integers, vectors, sp);
                continue;
            }
            uint64_t length = UINT64_MAX;
            if (argument->kind == FHT_LOG_STRING && argument->length < function->count) {
                const fht_log_value *counter = &function->arguments[argument->length];
                length = fht_unsigned_value(fht_argument_bits(counter->source, integers, vectors, sp), counter->size);
            }
            fht_put_value(text, argument, fht_argument_bits(argument->source, integers, vectors, sp), length);
        }
        if (function->flags & FHT_LOG_MORE) fht_put_string(text, function->count > 0 ? ", ..." : "...");
    }
    fht_put(text, ')');
}

// MARK: - Frames

/* The most threads that hold frames at once: a program that starts thread after thread reuses
   the frames of threads that ended (found dead by the kernel when all are taken), so their
   memory stays bounded; past that, calls of further threads are not logged (and are counted). */
enum { FHT_LOG_MOST_STACKS = 4096 };

/* Every thread's frames, and the kernel ID of the thread that holds them (0: none). */
typedef struct {
    fht_log_stack *_Nullable stack;
    int32_t owner;
} fht_log_slot;
static fht_log_slot fht_log_slots[FHT_LOG_MOST_STACKS];
static uint32_t fht_log_slot_count;

/* Takes the frames of `slot` for thread `me` if it holds those of no thread, or of a thread
   that ended (`ended`: asked of the kernel). */
FHT_PLAIN static fht_log_stack *_Nullable fht_log_claim(fht_log_slot *slot, int32_t me, int ended) {
    fht_log_stack *stack = __atomic_load_n(&slot->stack, __ATOMIC_ACQUIRE);
    int32_t owner = __atomic_load_n(&slot->owner, __ATOMIC_RELAXED);
    if (!stack || owner == me) return NULL;
    if (owner != 0 && (!ended || ffh_syscall3(SYS_tgkill, fht_log_pid, owner, 0) != -ESRCH)) return NULL;
    if (!__atomic_compare_exchange_n(&slot->owner, &owner, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return NULL;
    return stack;
}

/* The calling thread's frames, on its first logged call: frames given back, else new ones,
   else (4,096 threads hold frames) those of a thread that ended. A signal handler that logs
   while they are being found finds its own; the first one set is kept, the other given back. */
FHT_PLAIN static fht_log_stack *_Nullable fht_log_frames(void) {
    fht_log_stack *stack = fht_log_mine;
    if (__builtin_expect(stack != NULL, 1)) return stack;
    if (fht_first_call_is_own()) return NULL;
    int32_t me = (int32_t)ffh_syscall3(SYS_gettid, 0, 0, 0);
    fht_log_slot *slot = NULL;
    for (int ended = 0; ended < 2 && !stack; ended++) {
        uint32_t count = __atomic_load_n(&fht_log_slot_count, __ATOMIC_ACQUIRE);
        if (count > FHT_LOG_MOST_STACKS) count = FHT_LOG_MOST_STACKS;
        for (uint32_t index = 0; index < count && !stack; index++) {
            slot = &fht_log_slots[index];
            stack = fht_log_claim(slot, me, ended);
        }
        if (stack || ended) break;
        uint32_t index = __atomic_fetch_add(&fht_log_slot_count, 1, __ATOMIC_ACQ_REL);
        if (index >= FHT_LOG_MOST_STACKS) continue; /* all taken: look for a thread that ended */
        long memory = ffh_syscall6(SYS_mmap, 0, sizeof(fht_log_stack), PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (memory < 0 && memory > -4096) break;
        slot = &fht_log_slots[index];
        __atomic_store_n(&slot->owner, me, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->stack, (fht_log_stack *)memory, __ATOMIC_RELEASE);
        stack = (fht_log_stack *)memory;
    }
    if (!stack) {
        __atomic_fetch_add(&fht_log_unmapped, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    if (fht_log_mine) {
        __atomic_store_n(&slot->owner, 0, __ATOMIC_RELEASE);
        return fht_log_mine;
    }
    stack->depth = 0;
    fht_log_mine = stack;
    return stack;
}

static void fht_log_line(
    const fht_log_frame *frame, uint64_t depth, int32_t thread, uint64_t now, const fht_log_value *_Nullable result,
    uint64_t bits, const char *ending);

/* Forgets the frames of calls that a longjmp or an exception left: those deeper on the stack
   than a call at `sp`, and, for a call entering, at `sp` unless the call was tail-called (see
   fht_drop_abandoned). Each gets the line its return would have written, without a result,
   and with no time: when it was left is not known. */
FHT_PLAIN static void fht_log_drop_abandoned(fht_log_stack *stack, uint64_t sp, int entering) {
    uint64_t depth = stack->depth;
    int32_t thread = 0;
    while (depth > 0 && stack->frames[depth - 1].sp <= sp) {
        if (stack->frames[depth - 1].sp == sp && (!entering || fht_tail_called(sp))) break;
        const fht_log_frame *left = &stack->frames[depth - 1];
        if (thread == 0) thread = (int32_t)ffh_syscall3(SYS_gettid, 0, 0, 0);
        fht_log_line(left, depth - 1, thread, left->ticks, NULL, 0, " <left: longjmp or an exception>");
        depth--;
    }
    stack->depth = depth;
}

void fht_log_enter(
    const fht_log_function *function, uint64_t sp, uint64_t rdi, uint64_t rsi, uint64_t rdx, uint64_t rcx,
    uint64_t r8, uint64_t r9, const uint64_t *vectors) {
    if (fht_ignored() || __atomic_load_n(&fht_log_descriptor, __ATOMIC_RELAXED) < 0) return;
    fht_log_stack *stack = fht_log_frames();
    if (!stack) return;
    fht_log_drop_abandoned(stack, sp, 1);
    uint64_t depth = stack->depth;
    if (depth >= FHT_LOG_FRAMES) {
        __atomic_fetch_add(&fht_log_too_deep, 1, __ATOMIC_RELAXED);
        return;
    }
    /* Taken before it is written: a signal handler's calls go above it. */
    fht_log_frame *frame = &stack->frames[depth];
    frame->sp = UINT64_MAX;
    __asm__ volatile("" ::: "memory");
    stack->depth = depth + 1;
    __asm__ volatile("" ::: "memory");
    frame->sp = UINT64_MAX;
    uint64_t integers[6] = {rdi, rsi, rdx, rcx, r8, r9};
    fht_text text = {frame->text, 0, FHT_LOG_TEXT};
    fht_put_call(&text, frame, function, integers, vectors, sp);
    frame->length = (uint32_t)text.used;
    frame->function = function;
    frame->ticks = fht_ticks();
    __asm__ volatile("" ::: "memory");
    frame->sp = sp;
    if (function->flags & FHT_LOG_RETURNS_TWICE) {
        /* No leave comes: the line now, and no frame left in flight to hold later calls. */
        fht_log_line(frame, depth, (int32_t)ffh_syscall3(SYS_gettid, 0, 0, 0), frame->ticks, NULL, 0,
                     " <returns twice>");
        __asm__ volatile("" ::: "memory");
        stack->depth = depth;
    }
}

/* Nanoseconds from the log's origin to `ticks` (0 before it). */
FHT_PLAIN static uint64_t fht_log_nanoseconds(uint64_t ticks) {
    if (ticks <= fht_log_origin) return 0;
    return (uint64_t)(((unsigned __int128)(ticks - fht_log_origin) * fht_log_rate) >> 32);
}

/* Seconds with six decimals. */
FHT_PLAIN static void fht_put_seconds(fht_text *text, uint64_t nanoseconds) {
    uint64_t microseconds = (nanoseconds + 500) / 1000;
    fht_put_unsigned(text, microseconds / 1000000);
    fht_put(text, '.');
    fht_put_padded(text, microseconds % 1000000, 6);
}

/* Writes `count` bytes of one line with one system call (a cut-short write is finished, but
   then counted as a failure: the line may have mixed with another). */
/* A write to a pipe or socket whose reader went away: SIGPIPE is blocked around it (it would end
   the program) and the one it raised taken, and logging stops. */
FHT_PLAIN static long fht_log_write_pipe(int descriptor, const char *bytes, size_t count) {
    uint64_t pipe = UINT64_C(1) << (SIGPIPE - 1), old = 0;
    ffh_syscall6(SYS_rt_sigprocmask, SIG_BLOCK, (long)&pipe, (long)&old, 8, 0, 0);
    long written = ffh_syscall3(SYS_write, descriptor, (long)bytes, (long)count);
    if (written == -EPIPE) {
        if (!(old & pipe)) {
            struct timespec now = {0, 0};
            ffh_syscall6(SYS_rt_sigtimedwait, (long)&pipe, 0, (long)&now, 8, 0, 0);
        }
        __atomic_store_n(&fht_log_descriptor, -1, __ATOMIC_RELEASE);
    }
    if (!(old & pipe)) ffh_syscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, 8, 0, 0);
    return written;
}

FHT_PLAIN static void fht_log_write(const char *bytes, size_t count) {
    int descriptor = __atomic_load_n(&fht_log_descriptor, __ATOMIC_RELAXED);
    if (descriptor < 0) return;
    size_t done = 0;
    int failed = 0;
    while (done < count) {
        long written = fht_log_is_pipe ? fht_log_write_pipe(descriptor, bytes + done, count - done)
                                       : ffh_syscall3(SYS_write, descriptor, (long)(bytes + done), (long)(count - done));
        if (written == -EINTR) continue;
        if (written <= 0) {
            int32_t none = 0;
            __atomic_compare_exchange_n(&fht_log_first_error, &none, written < 0 ? (int32_t)-written : ENOSPC, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED);
            failed = 1;
            break;
        }
        done += (size_t)written;
        if (done < count) failed = 1;
    }
    if (failed) __atomic_fetch_add(&fht_log_unwritten, 1, __ATOMIC_RELAXED);
}

/* The line of the call in `frame` at `depth` on `thread`, ending with `result` text. */
FHT_PLAIN static void fht_log_line(
    const fht_log_frame *frame, uint64_t depth, int32_t thread, uint64_t now, const fht_log_value *_Nullable result,
    uint64_t bits, const char *ending) {
    char line[FHT_LOG_TEXT + 256];
    fht_text text = {line, 0, sizeof line - 1};
    fht_put_signed(&text, thread);
    fht_put(&text, ' ');
    fht_put_seconds(&text, fht_log_nanoseconds(frame->ticks));
    fht_put_string(&text, " +");
    fht_put_seconds(&text, now > frame->ticks ? fht_log_nanoseconds(fht_log_origin + (now - frame->ticks)) : 0);
    fht_put(&text, ' ');
    for (uint64_t level = 0; level < depth && level < 32; level++) fht_put_string(&text, "  ");
    if (frame->filled_at <= frame->length) {
        /* The buffer the function filled: as many bytes as it returned. */
        fht_put_bytes(&text, frame->text, frame->filled_at);
        int64_t filled = result ? (int64_t)bits : -1;
        if (filled > 0) {
            fht_put_c_string(&text, frame->filled, (uint64_t)filled);
        } else if (frame->filled) {
            fht_put_hex(&text, frame->filled);
        } else {
            fht_put_string(&text, "NULL");
        }
        fht_put_bytes(&text, frame->text + frame->filled_at, frame->length - frame->filled_at);
    } else {
        fht_put_bytes(&text, frame->text, frame->length);
    }
    if (result) {
        fht_put_string(&text, " = ");
        if (frame->function->flags & FHT_LOG_RAW) {
            fht_put_hex(&text, bits);
        } else {
            fht_put_value(&text, result, bits, UINT64_MAX);
        }
    } else {
        fht_put_string(&text, ending);
    }
    text.capacity++;
    fht_put(&text, '\n');
    fht_log_write(line, text.used);
}

void fht_log_leave(const fht_log_function *function, uint64_t sp, int32_t thread, uint64_t rax, uint64_t xmm0) {
    if (fht_ignored()) return;
    uint64_t now = fht_ticks();
    fht_log_stack *stack = fht_log_mine;
    if (!stack || __atomic_load_n(&fht_log_descriptor, __ATOMIC_RELAXED) < 0) return;
    fht_log_drop_abandoned(stack, sp, 0);
    uint64_t depth = stack->depth;
    /* A call with no frame: entered before logging began, or deeper than the frames go. */
    if (depth == 0 || stack->frames[depth - 1].sp != sp || stack->frames[depth - 1].function != function) return;
    const fht_log_frame *frame = &stack->frames[depth - 1];
    uint8_t kind = function->result.kind;
    uint64_t bits = kind == FHT_LOG_FLOAT || kind == FHT_LOG_DOUBLE ? xmm0 : rax;
    fht_log_line(frame, depth - 1, thread, now, &function->result, bits, "");
    __asm__ volatile("" ::: "memory");
    stack->depth = depth - 1;
}

int32_t fht_log_thread(void) { return (int32_t)ffh_syscall3(SYS_gettid, 0, 0, 0); }

void fht_log_unfinished(int32_t thread) {
    fht_log_stack *stack = fht_log_mine;
    if (!stack || !fht_log_enabled()) return;
    uint64_t now = fht_ticks();
    for (uint64_t depth = 0; depth < stack->depth; depth++) {
        const fht_log_frame *frame = &stack->frames[depth];
        if (frame->sp == UINT64_MAX) continue;
        fht_log_line(frame, depth, thread, now, NULL, 0, " <no return>");
    }
}

// MARK: - Opening

/* `fht_log_path` with each %p replaced by `pid`, into `buffer`. */
static void fht_log_name(char *buffer, size_t size, long pid) {
    fht_text text = {buffer, 0, size - 1};
    for (const char *at = fht_log_path; *at; at++) {
        if (at[0] == '%' && at[1] == 'p') {
            fht_put_unsigned(&text, (uint64_t)pid);
            at++;
        } else {
            fht_put(&text, *at);
        }
    }
    buffer[text.used] = 0;
}

/* In a forked child: the process ID changed; a log whose name has %p gets a file of its own,
   and the environment says this process opened it (FFI_HOOK_TRACER_LOG_OPENED, ten characters
   that CallLog set, written over in place: no allocation here), so that the program the child
   may exec appends to it instead of making it anew. */
static void fht_log_forked(void) {
    fht_log_pid = ffh_syscall3(SYS_getpid, 0, 0, 0);
    char *opened = getenv("FFI_HOOK_TRACER_LOG_OPENED");
    if (opened && fht_log_path[0] && strlen(opened) == 10) {
        char digits[10];
        int count = 0;
        for (long value = fht_log_pid; value > 0 && count < 10; value /= 10) digits[count++] = (char)('0' + value % 10);
        for (int index = 0; index < 10; index++) opened[index] = index < count ? digits[count - 1 - index] : ' ';
    }
    /* The child has one thread: every other thread's frames are free, its own are its own. */
    uint32_t count = __atomic_load_n(&fht_log_slot_count, __ATOMIC_ACQUIRE);
    for (uint32_t index = 0; index < count && index < FHT_LOG_MOST_STACKS; index++) {
        fht_log_slot *slot = &fht_log_slots[index];
        slot->owner = slot->stack && slot->stack == fht_log_mine ? (int32_t)fht_log_pid : 0;
    }
    if (!fht_log_path[0] || fht_log_descriptor < 0) return;
    char name[sizeof fht_log_path + 32];
    fht_log_name(name, sizeof name, fht_log_pid);
    long descriptor = ffh_syscall3(SYS_open, (long)name, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (descriptor < 0) return; /* logs on to the parent's file */
    /* Out of the program's way, as the parent's (see CallLog). */
    long high = ffh_syscall3(SYS_fcntl, descriptor, F_DUPFD_CLOEXEC, fht_high_descriptor_floor());
    if (high >= 0) {
        ffh_syscall3(SYS_close, descriptor, 0, 0);
        descriptor = high;
    }
    int old = fht_log_descriptor;
    __atomic_store_n(&fht_log_descriptor, (int)descriptor, __ATOMIC_RELEASE);
    ffh_syscall3(SYS_close, old, 0, 0);
}

/* On a thread as it ends (the hooking library's thread-exit hook): its calls still in flight
   (a traced function that called pthread_exit) are written, ending <no return>, as the exiting
   thread's are at exit; its frames are then empty for the thread that takes them next. */
void fht_log_thread_ends(void) {
    fht_log_stack *stack = fht_log_mine;
    if (!stack || stack->depth == 0) return;
    fht_log_unfinished(fht_log_thread());
    stack->depth = 0;
}

void fht_thread_ends(void) {
    fht_log_thread_ends();
    fht_events_thread_ends();
}

void fht_log_open(int descriptor, uint64_t ticks, double nanoseconds_per_tick, const char *path) {
    fht_log_origin = ticks;
    fht_log_rate = (uint64_t)(nanoseconds_per_tick * 4294967296.0);
    fht_log_pid = ffh_syscall3(SYS_getpid, 0, 0, 0);
    fht_log_path[0] = 0;
    if (path) {
        size_t length = 0;
        while (path[length] && length < sizeof fht_log_path - 1) {
            fht_log_path[length] = path[length];
            length++;
        }
        fht_log_path[length] = 0;
    }
    struct stat status;
    if (ffh_syscall3(SYS_fstat, descriptor, (long)&status, 0) == 0) {
        fht_log_is_pipe = S_ISFIFO(status.st_mode) || S_ISSOCK(status.st_mode);
    }
    pthread_atfork(NULL, NULL, fht_log_forked);
    ffh_thread_set_exit_hook(fht_thread_ends);
    __atomic_store_n(&fht_log_descriptor, descriptor, __ATOMIC_RELEASE);
}
