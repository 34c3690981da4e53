#define _GNU_SOURCE
#include "ffh_attach.h"
#include "ffh_call.h"
#include "ffh_guard.h"
#include "ffh_syscall.h"
#include "ffh_thread.h"

#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#if defined(__x86_64__) && defined(__ELF__)

/* ffh_attach_entry and ffh_attach_return: attach_x86_64.S. */
void ffh_attach_entry(void);
void ffh_attach_return(void);

/* libgcc's registration of unwind information (the package links gcc_s). */
extern void __register_frame_info(const void *begin, void *object);

/* Set in thread.c by ffh_handler_setup: whether readers need a fence of their own. */
extern int ffh_readers_fence __attribute__((visibility("hidden")));

static ffh_attach_dispatch ffh_attach_dispatch_function;
static uint64_t ffh_attach_skipped;
static uint64_t ffh_attach_abandoned;

void ffh_attach_setup(ffh_attach_dispatch dispatch) {
    __atomic_store_n(&ffh_attach_dispatch_function, dispatch, __ATOMIC_RELEASE);
}

int ffh_attach_available(void) { return 1; }

uint64_t ffh_attach_skipped_leaves(void) { return __atomic_load_n(&ffh_attach_skipped, __ATOMIC_RELAXED); }

uint64_t ffh_attach_abandoned_frames(void) { return __atomic_load_n(&ffh_attach_abandoned, __ATOMIC_RELAXED); }

/* One call on a thread's side stack. */
typedef struct {
    /* The real return address and where it was (the stack pointer at the call's entry). */
    uint64_t ret;
    uint64_t sp;
    ffh_attach *record;
    /* The record's epoch when the call entered, and what the enter block left. */
    uintptr_t epoch;
    uint64_t scratch;
    uint64_t function;
} ffh_side_frame;

/* The thunks: a header word (the address of ffh_attach_return) and a 16-byte cell per frame;
   thunk i enters at byte 1 of cell i, so that the unwinder, which looks a return address up
   at the byte before it, finds cell i's row of the unwind information. */
enum {
    FFH_THUNK_HEADER = 16,
    FFH_THUNK_CELL = 16,
    FFH_THUNK_BYTES = FFH_THUNK_HEADER + FFH_THUNK_CELL * FFH_ATTACH_DEPTH,
    /* Per cell: DW_CFA_expression (1), register (1), length (1), DW_OP_addr and its 8 bytes,
       then DW_CFA_advance_loc (1). */
    FFH_EH_ROW = 12,
    FFH_EH_BYTES = 64 + FFH_EH_ROW * FFH_ATTACH_DEPTH + 64,
};

/* A thread record's side stack, mapped on its first attached call and kept with the record
   (records are reused, never freed; so are side stacks, their thunks and their unwind
   information). */
typedef struct ffh_side {
    /* How many frames are in use. */
    uint64_t depth;
    unsigned char *thunks;
    ffh_side_frame frames[FFH_ATTACH_DEPTH];
    /* libgcc's `struct object` for the registration (opaque; it needs less than this). */
    uint64_t object[32];
    unsigned char eh[FFH_EH_BYTES];
} ffh_side;

static inline uint64_t ffh_thunk(const ffh_side *side, uint64_t index) {
    return (uint64_t)(uintptr_t)side->thunks + FFH_THUNK_HEADER + FFH_THUNK_CELL * index + 1;
}

static unsigned char *ffh_put32(unsigned char *at, uint32_t value) {
    memcpy(at, &value, 4);
    return at + 4;
}

static unsigned char *ffh_put64(unsigned char *at, uint64_t value) {
    memcpy(at, &value, 8);
    return at + 8;
}

/* Writes the side stack's unwind information: one CIE and one FDE covering the thunks, whose
   row for cell i says the return address is saved at frames[i].ret and the frame's CFA is the
   stack pointer (the caller's, once the original has returned into the thunk). */
static void ffh_side_write_unwind(ffh_side *side) {
    unsigned char *start = side->eh;
    unsigned char *at = start;
    /* CIE */
    unsigned char *cie = at;
    at += 4;                       /* length, below */
    at = ffh_put32(at, 0);         /* CIE id */
    *at++ = 1;                     /* version */
    *at++ = 'z';
    *at++ = 'R';
    *at++ = 0;
    *at++ = 1;                     /* code alignment */
    *at++ = 0x78;                  /* data alignment -8 */
    *at++ = 16;                    /* return address column: rip */
    *at++ = 1;                     /* augmentation data length */
    *at++ = 0x00;                  /* FDE pointers: DW_EH_PE_absptr */
    *at++ = 0x0c;                  /* DW_CFA_def_cfa rsp, 0 */
    *at++ = 7;
    *at++ = 0;
    while ((at - cie) % 8 != 0) *at++ = 0; /* DW_CFA_nop */
    ffh_put32(cie, (uint32_t)(at - cie - 4));
    /* FDE */
    unsigned char *fde = at;
    at += 4;
    at = ffh_put32(at, (uint32_t)(at - cie)); /* CIE pointer: back to the CIE */
    at = ffh_put64(at, (uint64_t)(uintptr_t)side->thunks + FFH_THUNK_HEADER);
    at = ffh_put64(at, (uint64_t)FFH_THUNK_CELL * FFH_ATTACH_DEPTH);
    *at++ = 0; /* augmentation data length */
    for (unsigned index = 0; index < FFH_ATTACH_DEPTH; index++) {
        *at++ = 0x10; /* DW_CFA_expression rip, [DW_OP_addr &frames[index].ret] */
        *at++ = 16;
        *at++ = 9;
        *at++ = 0x03;
        at = ffh_put64(at, (uint64_t)(uintptr_t)&side->frames[index].ret);
        if (index + 1 < FFH_ATTACH_DEPTH) *at++ = 0x40 | FFH_THUNK_CELL; /* DW_CFA_advance_loc 16 */
    }
    while ((at - fde) % 8 != 0) *at++ = 0;
    ffh_put32(fde, (uint32_t)(at - fde - 4));
    ffh_put32(at, 0); /* the end */
}

/* Maps a side stack and its thunks for `thread`, writes and registers their unwind
   information. NULL when the kernel refuses memory. System calls by instruction: this runs
   on the call path, where the program may have hooked mmap. */
static ffh_side *ffh_side_make(ffh_thread *thread) {
    long memory = ffh_syscall6(SYS_mmap, 0, (long)sizeof(ffh_side), PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory < 0 && memory > -4096) return NULL;
    long code = ffh_syscall6(SYS_mmap, 0, (long)FFH_THUNK_BYTES, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code < 0 && code > -4096) {
        ffh_syscall3(SYS_munmap, memory, (long)sizeof(ffh_side), 0);
        return NULL;
    }
    ffh_side *side = (ffh_side *)memory;
    unsigned char *thunks = (unsigned char *)code;
    side->thunks = thunks;
    uint64_t common = (uint64_t)(uintptr_t)&ffh_attach_return;
    memset(thunks, 0xcc, FFH_THUNK_BYTES);
    memcpy(thunks, &common, 8);
    for (uint32_t index = 0; index < FFH_ATTACH_DEPTH; index++) {
        unsigned char *cell = thunks + FFH_THUNK_HEADER + FFH_THUNK_CELL * index;
        unsigned char *at = cell + 1;
        *at++ = 0x41; /* mov $index, %r11d */
        *at++ = 0xbb;
        memcpy(at, &index, 4);
        at += 4;
        *at++ = 0xff; /* jmp *common(%rip) */
        *at++ = 0x25;
        int32_t displacement = (int32_t)((intptr_t)thunks - (intptr_t)(at + 4));
        memcpy(at, &displacement, 4);
    }
    ffh_syscall3(SYS_mprotect, code, (long)FFH_THUNK_BYTES, PROT_READ | PROT_EXEC);
    ffh_side_write_unwind(side);
    __register_frame_info(side->eh, side->object);
    __atomic_store_n(&thread->side, side, __ATOMIC_RELEASE);
    return side;
}

/* Drops frames of calls that left without returning (a longjmp or an exception past them):
   the top frame while a call enters at or above its stack pointer and its return-address slot
   no longer holds its thunk (read under the fault guard: the slot may be on a stack that is
   gone). A frame on another stack (a signal handler's alternate stack, say) that still holds
   its thunk is kept. */
static void ffh_side_drop_abandoned(ffh_side *side, uint64_t sp) {
    uint64_t depth = side->depth;
    while (depth > 0) {
        const ffh_side_frame *top = &side->frames[depth - 1];
        if (top->sp > sp) break;
        /* A frame whose thunk is still in place is alive, also at the same stack pointer: the
           new call is then a tail call (a jump) from the frame's function, which returns
           through its own thunk after the new one's. */
        uintptr_t value = 0;
        if (ffh_guarded_load((const void *)(uintptr_t)top->sp, &value) == 0 && value == ffh_thunk(side, depth - 1)) {
            break;
        }
        depth--;
        __atomic_fetch_add(&ffh_attach_abandoned, 1, __ATOMIC_RELAXED);
    }
    side->depth = depth;
}

static inline void ffh_attach_begin(ffh_thread *thread, int *outermost) {
    uintptr_t generation = thread->generation;
    *outermost = !(generation & 1);
    if (*outermost) {
        __atomic_store_n(&thread->generation, generation + 1, __ATOMIC_RELAXED);
        if (ffh_readers_fence) {
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
        } else {
            __asm__ __volatile__("" ::: "memory");
        }
    }
}

static inline void ffh_attach_end(ffh_thread *thread, int outermost) {
    if (outermost) {
        uintptr_t inside = thread->generation;
        if (inside & 1) __atomic_store_n(&thread->generation, inside + 1, __ATOMIC_RELEASE);
    }
}

/* Called by ffh_attach_entry; returns the function to jump to. */
__attribute__((visibility("hidden"))) uintptr_t ffh_attach_enter(ffh_attach *record, ffh_attach_enter_frame *frame) {
    uintptr_t original = __atomic_load_n(&record->original, __ATOMIC_ACQUIRE);
    ffh_thread *thread = ffh_thread_current();
    if (!thread || thread->busy) return original;
    ffh_side *side = thread->side;
    if (__builtin_expect(!side, 0)) {
        /* Registering the unwind information calls into libgcc (a lock, perhaps memory): as
           the library's own work, which attached or hooked functions pass through. */
        thread->busy = 1;
        side = ffh_side_make(thread);
        thread->busy = 0;
        if (!side) return original;
    }
    thread->busy = 1;
    int outermost;
    ffh_attach_begin(thread, &outermost);
    uintptr_t epoch = __atomic_load_n(&record->epoch, __ATOMIC_ACQUIRE);
    uintptr_t state = __atomic_load_n(&record->state, __ATOMIC_ACQUIRE);
    uintptr_t flags = __atomic_load_n(&record->flags, __ATOMIC_ACQUIRE);
    ffh_attach_dispatch dispatch = __atomic_load_n(&ffh_attach_dispatch_function, __ATOMIC_ACQUIRE);
    if (state && dispatch && __atomic_load_n(&record->epoch, __ATOMIC_ACQUIRE) == epoch) {
        frame->scratch = 0;
        frame->function = original;
        frame->thread = (uint64_t)(uint32_t)thread->tid;
        if (flags & FFH_ATTACH_ENTERS) dispatch(state, frame, 0);
        if (flags & FFH_ATTACH_LEAVES) {
            uint64_t sp = frame->sp;
            if (side->depth > 0 && side->frames[side->depth - 1].sp <= sp) ffh_side_drop_abandoned(side, sp);
            uint64_t depth = side->depth;
            if (depth < FFH_ATTACH_DEPTH) {
                ffh_side_frame *top = &side->frames[depth];
                top->ret = *(const uint64_t *)(uintptr_t)sp;
                top->sp = sp;
                top->record = record;
                top->epoch = epoch;
                top->scratch = frame->scratch;
                top->function = original;
                /* A signal handler that interrupts from here on sees the frame in place. */
                __asm__ __volatile__("" ::: "memory");
                side->depth = depth + 1;
                __asm__ __volatile__("" ::: "memory");
                *(uint64_t *)(uintptr_t)sp = ffh_thunk(side, depth);
            } else {
                __atomic_fetch_add(&ffh_attach_skipped, 1, __ATOMIC_RELAXED);
            }
        }
    }
    ffh_attach_end(thread, outermost);
    thread->busy = 0;
    return original;
}

/* Ends the process with a message when a return thunk finds no frame of its own: the real
   return address is lost, and returning anywhere would run arbitrary code. Never expected. */
static __attribute__((noreturn, noinline)) void ffh_attach_lost(void) {
    static const char message[] =
        "swift-ffi-hook: an attached call returned, but its thread's side stack no longer holds its frame\n";
    ffh_syscall3(SYS_write, 2, (long)message, (long)sizeof message - 1);
    __builtin_trap();
}

/* Called by ffh_attach_return; returns the real return address. */
__attribute__((visibility("hidden"))) uintptr_t ffh_attach_leave(ffh_attach_leave_frame *frame) {
    ffh_thread *thread = ffh_current_thread;
    ffh_side *side = thread ? thread->side : NULL;
    uint64_t index = frame->index;
    uint64_t sp = (uint64_t)(uintptr_t)frame + sizeof(ffh_attach_leave_frame) - 8;
    if (!side || index >= FFH_ATTACH_DEPTH || side->frames[index].sp != sp) ffh_attach_lost();
    const ffh_side_frame *own = &side->frames[index];
    uint64_t ret = own->ret;
    frame->returnAddress = ret;
    frame->sp = sp;
    frame->scratch = own->scratch;
    frame->function = own->function;
    frame->thread = (uint64_t)(uint32_t)thread->tid;
    ffh_attach *record = own->record;
    uintptr_t epoch = own->epoch;
    /* Frames above this one belong to calls a longjmp left: they go with it. */
    if (side->depth > index + 1) __atomic_fetch_add(&ffh_attach_abandoned, side->depth - index - 1, __ATOMIC_RELAXED);
    __asm__ __volatile__("" ::: "memory");
    side->depth = index;
    __asm__ __volatile__("" ::: "memory");
    if (thread->busy) return ret;
    thread->busy = 1;
    int outermost;
    ffh_attach_begin(thread, &outermost);
    uintptr_t state = __atomic_load_n(&record->state, __ATOMIC_ACQUIRE);
    ffh_attach_dispatch dispatch = __atomic_load_n(&ffh_attach_dispatch_function, __ATOMIC_ACQUIRE);
    if (state && dispatch && __atomic_load_n(&record->epoch, __ATOMIC_ACQUIRE) == epoch) dispatch(state, frame, 1);
    ffh_attach_end(thread, outermost);
    thread->busy = 0;
    return ret;
}

void ffh_attach_write_stub(void *stub, ffh_attach *record) {
    ffh_write_trampoline(stub, record, (const void *)&ffh_attach_entry);
}

uint64_t ffh_attach_depth(void) {
    ffh_thread *thread = ffh_current_thread;
    ffh_side *side = thread ? thread->side : NULL;
    return side ? side->depth : 0;
}

void ffh_attach_thread_released(ffh_thread *thread) {
    ffh_side *side = thread->side;
    if (side) side->depth = 0;
}

#else

void ffh_attach_setup(ffh_attach_dispatch dispatch) { (void)dispatch; }
int ffh_attach_available(void) { return 0; }
uint64_t ffh_attach_skipped_leaves(void) { return 0; }
uint64_t ffh_attach_abandoned_frames(void) { return 0; }
uint64_t ffh_attach_depth(void) { return 0; }
void ffh_attach_write_stub(void *stub, ffh_attach *record) {
    (void)stub;
    (void)record;
}
void ffh_attach_thread_released(ffh_thread *thread) { (void)thread; }

#endif
