#ifndef CTESTPROCESSFIXTURES_H
#define CTESTPROCESSFIXTURES_H

// C helpers of the process-life tests: slots whose originals block, jump or end their
// thread, signal handlers that call through hooked slots, allocating threads, fork and
// dlclose checks. Every slot holds an `int (*)(int)`.

#include <pthread.h>
#include <sys/types.h>

/// The argument that makes pf_hold_original and pf_leave_original block on the hold pipe.
#define PF_HOLD 4242
/// The argument the SIGUSR1 handler passes to the `probe` slot.
#define PF_PROBE_ARGUMENT 41
/// The argument the SIGUSR2 handler passes to the `reenter` slot.
#define PF_REENTER_ARGUMENT 5
/// The size every allocation of the allocating threads asks for.
#define PF_MAGIC_SIZE 4093
/// What pf_caller_join returns when the thread ended in pthread_exit.
#define PF_THREAD_EXITED (-999999)

/// Slots of `int (*)(int)` functions; every original returns value + 1 unless said otherwise.
typedef struct {
    /// Called by the SIGUSR1 handler.
    int (*probe)(int value);
    /// Hooks come and go on it; nothing the tests watch calls it.
    int (*churn)(int value);
    /// Called by the SIGUSR2 handler, from inside one of its own blocks.
    int (*reenter)(int value);
    /// pf_hold_original: blocks on the hold pipe when value == PF_HOLD.
    int (*hold)(int value);
    /// pf_leave_original: when value == PF_HOLD, blocks on the hold pipe, then pthread_exit.
    int (*leave)(int value);
    /// pf_jump_original: longjmp(value) to pf_call_jump's setjmp when value != 0.
    int (*jump)(int value);
} pf_table;

/// The table; pf_reset puts every original back and clears the counters.
pf_table *pf_table_get(void);
void pf_reset(void);

int pf_probe_original(int value);
int pf_churn_original(int value);
int pf_reenter_original(int value);
int pf_hold_original(int value);
int pf_leave_original(int value);
int pf_jump_original(int value);

/// Calls the function held at `slot` with `value`, loading the slot first.
int pf_call_slot(int (**slot)(int), int value);

/// Calls the `jump` slot with `value` under a setjmp: returns what it returned, or minus the
/// value passed to longjmp when it jumped.
int pf_call_jump(int value);

// MARK: - Holding a thread inside a call

/// Creates the hold pipe (once); returns 0 on success.
int pf_hold_init(void);
/// Counts an arrival and blocks until pf_hold_release lets one thread go.
void pf_hold_here(void);
/// How many threads reached pf_hold_here so far.
int pf_hold_arrivals(void);
/// Waits (yielding) until `count` threads reached pf_hold_here.
void pf_hold_wait_arrivals(int count);
/// Lets `count` held threads go.
void pf_hold_release(int count);
/// Makes the calling thread the one pf_hold_resolving holds.
void pf_hold_set_walker(void);
/// A resolve observer (ffh_elf_set_resolve_observer): holds the thread set by
/// pf_hold_set_walker in pf_hold_here, the first time it resolves a symbol.
void pf_hold_resolving(const char *symbol);

/// Runs `argv[0]`, found on the PATH, with `argv` (NULL-terminated) and this process's
/// environment, its standard output discarded; returns its exit status, or -1 when it could
/// not be started or did not exit normally.
int pf_run(char *const argv[]);

/// The modification time of `path` in nanoseconds since the epoch, or -1 when it has none.
long long pf_modified(const char *path);

/// Calls `slot` with `value` from `late` fresh threads at a moment when no new thread record
/// can be mapped: `holders` threads first each make one call through the slot (claiming a
/// record each) and stay alive; then the address-space limit is lowered to what is mapped,
/// so mmap fails; then the late threads, created before, make their first call. Each late
/// result goes to `results`. Returns 0, or -1 when the threads or the limit could not be set
/// up. The limit is restored before it returns.
int pf_call_without_thread_records(int (**slot)(int), int value, int holders, int late, int *results);

/// A thread that calls through a slot once.
typedef struct pf_caller pf_caller;
/// Starts a thread that calls the function at `slot` with `value`; NULL on failure.
pf_caller *pf_caller_start(int (**slot)(int), int value);
/// Joins it and frees it; returns what the call returned, or PF_THREAD_EXITED.
int pf_caller_join(pf_caller *caller);

/// Calls the function at `slot` with 0, 1, … `count - 1`; returns how many calls returned
/// something other than their argument + 1.
long pf_call_slot_repeatedly(int (**slot)(int), int count);
/// Whether the calling thread is inside pf_call_slot_repeatedly.
int pf_is_repeating(void);

/// sched_yield() inside pf_is_repeating's mark.
void pf_yield_repeating(void);
/// A slot of `long long (long long, long long)` (an addition): a result of a word, which a
/// typed after block returns through memory.
long long (**pf_wide_slot(void))(long long, long long);
/// Calls through pf_wide_slot `count` times inside the mark pf_is_repeating reads; returns how
/// many results were not the sum.
long pf_call_wide_slot_repeatedly(int count);
/// Sets whether pf_yield_if_asked yields.
void pf_ask_to_yield(int asked);
/// pf_yield_repeating, when pf_ask_to_yield asked for it: what a block calls that must call
/// nothing of its own in an unoptimised build (a Swift global's read calls the runtime).
void pf_yield_if_asked(void);

/// A thread that calls through a slot in a loop, with an atomic load of the slot each time.
typedef struct pf_spinner pf_spinner;
/// Starts a thread that calls the function at `slot` with `value` until stopped, at least
/// once; NULL on failure.
pf_spinner *pf_spinner_start(int (**slot)(int), int value);
/// Stops and joins it and frees it; returns how many calls returned something other than
/// value + 1, and stores how many calls it made in `calls`.
long pf_spinner_stop(pf_spinner *spinner, long *calls);

// MARK: - Signals

/// Installs the SIGUSR1 handler (SA_RESTART): it calls the `probe` slot with
/// PF_PROBE_ARGUMENT, counts its run, and counts it as matched when the result is the
/// expected one. Also installs the SIGUSR2 handler (SA_RESTART): it calls the `reenter` slot
/// with PF_REENTER_ARGUMENT and records the result. Returns 0 on success.
int pf_signal_install(void);
/// Sets the result the SIGUSR1 handler counts as matched and clears the counters.
void pf_signal_expect(int result);
/// How many times the SIGUSR1 handler ran, and how many of its calls returned the expected result.
unsigned long pf_signal_handled(void);
unsigned long pf_signal_matched(void);
/// Sends SIGUSR1 to `thread` and waits (yielding) until the handler has run `handled` times
/// in all. Returns 0, or -1 when pthread_kill failed.
int pf_signal_send_and_wait(pthread_t thread, unsigned long handled);
/// One round on a fresh thread that has never made a hooked call: the thread allocates and
/// frees in a loop (inside malloc most of the time) until SIGUSR1, sent to it once it runs,
/// has been handled; then it ends and is joined. Returns 0, or -1 when a call failed.
int pf_signal_busy_round(void);
/// Raises SIGUSR2 on the calling thread (its handler runs before this returns).
void pf_signal_raise_reentry(void);
/// How many times the SIGUSR2 handler ran, and the result of its last call.
unsigned long pf_reentry_handled(void);
int pf_reentry_result(void);

// MARK: - Allocating threads

/// Starts `threads` (at most 8) threads that each run iterations of: malloc(PF_MAGIC_SIZE),
/// calloc(1, PF_MAGIC_SIZE), realloc(malloc(24), PF_MAGIC_SIZE), a mark written at the start
/// of each of the three blocks, then free of each. Each runs exactly `minimum` iterations, or
/// with `until_stopped` at least `minimum` and until pf_alloc_stop. The first call each thread
/// makes is that malloc. Returns 0 on success.
int pf_alloc_start(int threads, long minimum, int until_stopped);
/// Waits (yielding) until every started thread has finished one iteration.
void pf_alloc_wait_running(void);
/// Asks the threads to stop, joins them and returns how many iterations they ran in all.
long pf_alloc_stop(void);
/// Whether the block at `address` (which free is about to free) starts with the mark.
int pf_alloc_is_marked(const void *address);

// MARK: - Processes and loaded objects

/// Unblocks SIGALRM, SIGUSR1 and SIGUSR2 in the calling thread (threads it creates later
/// inherit its mask). Test bodies may run on a worker thread that blocks them. Returns 0 on
/// success.
int pf_unblock_test_signals(void);
/// fork(); in the child only the calling thread exists, and the child is killed (SIGKILL) when
/// the parent dies, so that a child a hang left behind does not outlive the test.
pid_t pf_fork(void);
/// waitpid for `pid`, retrying on EINTR; the raw status, or -1.
int pf_wait(pid_t pid);
/// Makes pf_report also append to the file at `path` (created on the first report), in this
/// process and in the children it forks. Returns 0, or -1 when the path is too long.
int pf_report_to(const char *path);
/// Writes `message` and a newline to standard error and to the pf_report_to file (write(2),
/// unbuffered; async-signal-safe).
void pf_report(const char *message);
/// _exit(code): ends a forked child without running exit handlers.
_Noreturn void pf_exit_now(int code);

/// Whether the object at `path` is loaded (dlopen with RTLD_NOLOAD; the reference it takes
/// is given back).
int pf_library_is_loaded(const char *path);
/// Whether the object of a dlopen handle is marked DF_1_NODELETE (never unloaded).
int pf_library_is_nodelete(void *handle);
/// Whether the page holding `address` is mapped.
int pf_address_is_mapped(const void *address);

/// Tells LeakSanitizer, when the tests run under it, not to check this process for leaks at
/// exit: a longjmp over Swift frames skips the releases they would have made.
void pf_expect_leaks(void);

#endif
