#define _GNU_SOURCE
#include "CTestProcessFixtures.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static pf_table table;

#define LOAD(slot) __atomic_load_n(slot, __ATOMIC_ACQUIRE)

int pf_probe_original(int value) { return value + 1; }
int pf_churn_original(int value) { return value + 1; }
int pf_reenter_original(int value) { return value + 1; }

int pf_hold_original(int value) {
    if (value == PF_HOLD) pf_hold_here();
    return value + 1;
}

int pf_leave_original(int value) {
    if (value == PF_HOLD) {
        pf_hold_here();
        pthread_exit(NULL);
    }
    return value + 1;
}

static _Thread_local jmp_buf jump_target;

int pf_jump_original(int value) {
    if (value != 0) longjmp(jump_target, value);
    return value + 1;
}

pf_table *pf_table_get(void) { return &table; }

static unsigned long signal_handled;
static unsigned long signal_matched;
static int signal_expected;
static unsigned long reentry_handled;
static int reentry_result;

void pf_reset(void) {
    table.probe = pf_probe_original;
    table.churn = pf_churn_original;
    table.reenter = pf_reenter_original;
    table.hold = pf_hold_original;
    table.leave = pf_leave_original;
    table.jump = pf_jump_original;
    __atomic_store_n(&signal_handled, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&signal_matched, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&reentry_handled, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&reentry_result, 0, __ATOMIC_RELAXED);
}

int pf_call_slot(int (**slot)(int), int value) { return LOAD(slot)(value); }

int pf_call_jump(int value) {
    int jumped = setjmp(jump_target);
    if (jumped != 0) return -jumped;
    return LOAD(&table.jump)(value);
}

// MARK: - Holding a thread inside a call

static int hold_pipe[2] = {-1, -1};
static int hold_arrivals;

int pf_hold_init(void) {
    if (hold_pipe[0] >= 0) return 0;
    return pipe(hold_pipe);
}

void pf_hold_here(void) {
    __atomic_add_fetch(&hold_arrivals, 1, __ATOMIC_RELEASE);
    char byte;
    while (read(hold_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
}

static pthread_t hold_walker;
static int hold_walker_set;
static int hold_walker_held;

void pf_hold_set_walker(void) {
    hold_walker = pthread_self();
    __atomic_store_n(&hold_walker_held, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hold_walker_set, 1, __ATOMIC_RELEASE);
}

void pf_hold_resolving(const char *symbol) {
    (void)symbol;
    if (!__atomic_load_n(&hold_walker_set, __ATOMIC_ACQUIRE) || !pthread_equal(hold_walker, pthread_self())) return;
    if (__atomic_exchange_n(&hold_walker_held, 1, __ATOMIC_ACQ_REL)) return;
    pf_hold_here();
}

int pf_hold_arrivals(void) { return __atomic_load_n(&hold_arrivals, __ATOMIC_ACQUIRE); }

void pf_hold_wait_arrivals(int count) {
    while (pf_hold_arrivals() < count) sched_yield();
}

void pf_hold_release(int count) {
    for (int i = 0; i < count; i++) {
        char byte = 1;
        while (write(hold_pipe[1], &byte, 1) < 0 && errno == EINTR) {
        }
    }
}

struct pf_caller {
    pthread_t thread;
    int (**slot)(int);
    int value;
    int result;
};

static void *caller_main(void *context) {
    pf_caller *caller = context;
    caller->result = LOAD(caller->slot)(caller->value);
    return caller;
}

pf_caller *pf_caller_start(int (**slot)(int), int value) {
    pf_caller *caller = calloc(1, sizeof *caller);
    if (!caller) return NULL;
    caller->slot = slot;
    caller->value = value;
    if (pthread_create(&caller->thread, NULL, caller_main, caller) != 0) {
        free(caller);
        return NULL;
    }
    return caller;
}

int pf_caller_join(pf_caller *caller) {
    void *returned = NULL;
    pthread_join(caller->thread, &returned);
    int result = returned == caller ? caller->result : PF_THREAD_EXITED;
    free(caller);
    return result;
}

static __thread int repeating;

long pf_call_slot_repeatedly(int (**slot)(int), int count) {
    long wrong = 0;
    repeating = 1;
    for (int value = 0; value < count; value++) wrong += LOAD(slot)(value) != value + 1;
    repeating = 0;
    return wrong;
}

int pf_is_repeating(void) { return repeating; }

void pf_yield_repeating(void) {
    repeating = 1;
    sched_yield();
    repeating = 0;
}

static long long wide_add(long long a, long long b) { return a + b; }
static long long (*wide_slot)(long long, long long) = wide_add;

long long (**pf_wide_slot(void))(long long, long long) { return &wide_slot; }

long pf_call_wide_slot_repeatedly(int count) {
    long wrong = 0;
    repeating = 1;
    for (long long value = 0; value < count; value++) {
        wrong += __atomic_load_n(&wide_slot, __ATOMIC_ACQUIRE)(value << 33, 1) != (value << 33) + 1;
    }
    repeating = 0;
    return wrong;
}

static int yield_asked;

void pf_ask_to_yield(int asked) { __atomic_store_n(&yield_asked, asked, __ATOMIC_RELAXED); }

void pf_yield_if_asked(void) {
    if (__atomic_load_n(&yield_asked, __ATOMIC_RELAXED)) pf_yield_repeating();
}

struct pf_spinner {
    pthread_t thread;
    int (**slot)(int);
    int value;
    int stop;
    long calls;
    long wrong;
};

static void *spinner_main(void *context) {
    pf_spinner *spinner = context;
    do {
        if (LOAD(spinner->slot)(spinner->value) != spinner->value + 1) spinner->wrong++;
        spinner->calls++;
    } while (!__atomic_load_n(&spinner->stop, __ATOMIC_ACQUIRE));
    return spinner;
}

pf_spinner *pf_spinner_start(int (**slot)(int), int value) {
    pf_spinner *spinner = calloc(1, sizeof *spinner);
    if (!spinner) return NULL;
    spinner->slot = slot;
    spinner->value = value;
    if (pthread_create(&spinner->thread, NULL, spinner_main, spinner) != 0) {
        free(spinner);
        return NULL;
    }
    return spinner;
}

long pf_spinner_stop(pf_spinner *spinner, long *calls) {
    __atomic_store_n(&spinner->stop, 1, __ATOMIC_RELEASE);
    pthread_join(spinner->thread, NULL);
    long wrong = spinner->wrong;
    *calls = spinner->calls;
    free(spinner);
    return wrong;
}

// MARK: - Signals

static void probe_handler(int signal) {
    (void)signal;
    int saved = errno;
    int result = LOAD(&table.probe)(PF_PROBE_ARGUMENT);
    if (result == __atomic_load_n(&signal_expected, __ATOMIC_RELAXED))
        __atomic_add_fetch(&signal_matched, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&signal_handled, 1, __ATOMIC_RELEASE);
    errno = saved;
}

static void reentry_handler(int signal) {
    (void)signal;
    int saved = errno;
    __atomic_store_n(&reentry_result, LOAD(&table.reenter)(PF_REENTER_ARGUMENT), __ATOMIC_RELAXED);
    __atomic_add_fetch(&reentry_handled, 1, __ATOMIC_RELEASE);
    errno = saved;
}

int pf_signal_install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    action.sa_handler = probe_handler;
    if (sigaction(SIGUSR1, &action, NULL) != 0) return -1;
    action.sa_handler = reentry_handler;
    return sigaction(SIGUSR2, &action, NULL);
}

void pf_signal_expect(int result) {
    __atomic_store_n(&signal_expected, result, __ATOMIC_RELAXED);
    __atomic_store_n(&signal_handled, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&signal_matched, 0, __ATOMIC_RELAXED);
}

unsigned long pf_signal_handled(void) { return __atomic_load_n(&signal_handled, __ATOMIC_ACQUIRE); }
unsigned long pf_signal_matched(void) { return __atomic_load_n(&signal_matched, __ATOMIC_ACQUIRE); }

int pf_signal_send_and_wait(pthread_t thread, unsigned long handled) {
    if (pthread_kill(thread, SIGUSR1) != 0) return -1;
    while (pf_signal_handled() < handled) sched_yield();
    return 0;
}

static _Thread_local void *volatile busy_sink;
static int busy_running;
static int busy_stop;

static void *busy_main(void *unused) {
    (void)unused;
    for (unsigned i = 0; !__atomic_load_n(&busy_stop, __ATOMIC_ACQUIRE); i++) {
        /* Sizes past the thread cache, so that malloc and free take the arena's lock. */
        busy_sink = malloc(1100 + (i * 7919u) % 60000u);
        free(busy_sink);
        if (i == 0) __atomic_store_n(&busy_running, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

int pf_signal_busy_round(void) {
    __atomic_store_n(&busy_running, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&busy_stop, 0, __ATOMIC_RELAXED);
    unsigned long handled = pf_signal_handled();
    pthread_t thread;
    if (pthread_create(&thread, NULL, busy_main, NULL) != 0) return -1;
    while (!__atomic_load_n(&busy_running, __ATOMIC_ACQUIRE)) sched_yield();
    int status = pf_signal_send_and_wait(thread, handled + 1);
    __atomic_store_n(&busy_stop, 1, __ATOMIC_RELEASE);
    pthread_join(thread, NULL);
    return status;
}

void pf_signal_raise_reentry(void) { pthread_kill(pthread_self(), SIGUSR2); }
unsigned long pf_reentry_handled(void) { return __atomic_load_n(&reentry_handled, __ATOMIC_ACQUIRE); }
int pf_reentry_result(void) { return __atomic_load_n(&reentry_result, __ATOMIC_RELAXED); }

// MARK: - Allocating threads

#define ALLOC_MAX_THREADS 8
static const uint64_t alloc_mark = 0x5046414C4C4F4321ull;

static pthread_t alloc_threads[ALLOC_MAX_THREADS];
static int alloc_thread_count;
static long alloc_minimum;
static int alloc_stop;
static int alloc_running;
static long alloc_iterations;
static _Thread_local void *volatile alloc_sink;

static void *alloc_main(void *unused) {
    (void)unused;
    long iterations = 0;
    while (iterations < alloc_minimum || !__atomic_load_n(&alloc_stop, __ATOMIC_ACQUIRE)) {
        void *blocks[3];
        blocks[0] = malloc(PF_MAGIC_SIZE);
        blocks[1] = calloc(1, PF_MAGIC_SIZE);
        blocks[2] = realloc(malloc(24), PF_MAGIC_SIZE);
        for (int i = 0; i < 3; i++) {
            if (!blocks[i]) abort();
            memcpy(blocks[i], &alloc_mark, sizeof alloc_mark);
            /* The block escapes through a volatile store: the compiler cannot elide the pair. */
            alloc_sink = blocks[i];
            free(alloc_sink);
        }
        if (iterations == 0) __atomic_add_fetch(&alloc_running, 1, __ATOMIC_RELEASE);
        iterations++;
    }
    __atomic_add_fetch(&alloc_iterations, iterations, __ATOMIC_RELAXED);
    return NULL;
}

int pf_alloc_start(int threads, long minimum, int until_stopped) {
    if (threads < 1 || threads > ALLOC_MAX_THREADS) return -1;
    alloc_minimum = minimum;
    __atomic_store_n(&alloc_stop, until_stopped ? 0 : 1, __ATOMIC_RELAXED);
    __atomic_store_n(&alloc_running, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&alloc_iterations, 0, __ATOMIC_RELAXED);
    alloc_thread_count = 0;
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&alloc_threads[i], NULL, alloc_main, NULL) != 0) return -1;
        alloc_thread_count++;
    }
    return 0;
}

void pf_alloc_wait_running(void) {
    while (__atomic_load_n(&alloc_running, __ATOMIC_ACQUIRE) < alloc_thread_count) sched_yield();
}

long pf_alloc_stop(void) {
    __atomic_store_n(&alloc_stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < alloc_thread_count; i++) pthread_join(alloc_threads[i], NULL);
    alloc_thread_count = 0;
    return __atomic_load_n(&alloc_iterations, __ATOMIC_RELAXED);
}

int pf_alloc_is_marked(const void *address) {
    /* Blocks shorter than the mark cannot hold it (and AddressSanitizer reports a read past
       their end). */
    if (!address || malloc_usable_size((void *)address) < sizeof(uint64_t)) return 0;
    uint64_t value;
    memcpy(&value, address, sizeof value);
    return value == alloc_mark;
}

// MARK: - Processes and loaded objects

int pf_unblock_test_signals(void) {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGALRM);
    sigaddset(&signals, SIGUSR1);
    sigaddset(&signals, SIGUSR2);
    return pthread_sigmask(SIG_UNBLOCK, &signals, NULL);
}

pid_t pf_fork(void) {
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(99);  // the parent died before the request took effect
    }
    return child;
}

int pf_wait(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    return status;
}

static char report_path[4096];

int pf_report_to(const char *path) {
    if (strlen(path) >= sizeof report_path) return -1;
    strcpy(report_path, path);
    return 0;
}

static void write_fully(int file, const char *bytes, size_t length) {
    while (length > 0) {
        ssize_t written = write(file, bytes, length);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return;
        bytes += written;
        length -= (size_t)written;
    }
}

void pf_report(const char *message) {
    write_fully(2, message, strlen(message));
    write_fully(2, "\n", 1);
    if (report_path[0] == 0) return;
    int file = open(report_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (file < 0) return;
    write_fully(file, message, strlen(message));
    write_fully(file, "\n", 1);
    close(file);
}

void pf_exit_now(int code) { _exit(code); }

int pf_library_is_loaded(const char *path) {
    void *handle = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle) return 0;
    dlclose(handle);
    return 1;
}

int pf_library_is_nodelete(void *handle) {
    struct link_map *map = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map) return -1;
    for (const ElfW(Dyn) *entry = map->l_ld; entry->d_tag != DT_NULL; entry++) {
        if (entry->d_tag == DT_FLAGS_1) return (entry->d_un.d_val & DF_1_NODELETE) != 0;
    }
    return 0;
}

int pf_address_is_mapped(const void *address) {
    long page = sysconf(_SC_PAGESIZE);
    void *start = (void *)((uintptr_t)address & ~(uintptr_t)(page - 1));
    return msync(start, (size_t)page, MS_ASYNC) == 0 || errno != ENOMEM;
}

// MARK: - Leak checking

static int pf_leaks_expected;

void pf_expect_leaks(void) { pf_leaks_expected = 1; }

/* LeakSanitizer calls this at exit, where the process runs under it: nonzero skips the check. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return pf_leaks_expected; }

// MARK: - Calls that get no thread record

struct recordless_run {
    int (**slot)(int);
    int value;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int called;  /* threads that made their call */
    int turn;    /* the index of the late thread that may call now, or past the last */
    int done;    /* threads may exit */
};

struct recordless_thread {
    struct recordless_run *run;
    int index;
    int result;
};

/* Makes the call, counts it, and stays alive until told to end: a record the thread got is
   not freed for another thread meanwhile. */
static void recordless_call(struct recordless_thread *thread) {
    struct recordless_run *run = thread->run;
    thread->result = LOAD(run->slot)(run->value);
    pthread_mutex_lock(&run->lock);
    run->called++;
    pthread_cond_broadcast(&run->changed);
    while (!run->done) pthread_cond_wait(&run->changed, &run->lock);
    pthread_mutex_unlock(&run->lock);
}

static void *recordless_holder(void *context) {
    recordless_call(context);
    return NULL;
}

static void *recordless_late(void *context) {
    struct recordless_thread *thread = context;
    struct recordless_run *run = thread->run;
    pthread_mutex_lock(&run->lock);
    while (run->turn != thread->index) pthread_cond_wait(&run->changed, &run->lock);
    pthread_mutex_unlock(&run->lock);
    recordless_call(thread);
    return NULL;
}

/* The process's mapped size in bytes (the first field of /proc/self/statm, in pages). */
static long mapped_bytes(void) {
    int file = open("/proc/self/statm", O_RDONLY);
    if (file < 0) return -1;
    char text[128] = {0};
    ssize_t length = read(file, text, sizeof text - 1);
    close(file);
    if (length <= 0) return -1;
    return strtol(text, NULL, 10) * sysconf(_SC_PAGESIZE);
}

/* Maps pages while the address-space limit allows, into `room` from `taken` on; returns the
   new count (`capacity` when the room never ran out). */
static int take_room(void **room, int taken, int capacity) {
    long page = sysconf(_SC_PAGESIZE);
    while (taken < capacity) {
        void *memory = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (memory == MAP_FAILED) break;
        room[taken++] = memory;
    }
    return taken;
}

static void wait_for_calls(struct recordless_run *run, int count) {
    pthread_mutex_lock(&run->lock);
    while (run->called < count) pthread_cond_wait(&run->changed, &run->lock);
    pthread_mutex_unlock(&run->lock);
}

int pf_call_without_thread_records(int (**slot)(int), int value, int holders, int late, int *results) {
    enum { most = 256, most_pages = 4096 };
    if (holders < 0 || late < 0 || holders + late > most) return -1;
    static struct recordless_thread threads[most];
    static pthread_t ids[most];
    static void *room[most_pages];
    struct recordless_run run = {slot, value, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, -1, 0};
    int started = 0;
    int status = 0;
    for (; started < holders + late; started++) {
        threads[started] = (struct recordless_thread){&run, started - holders, 0};
        void *(*body)(void *) = started < holders ? recordless_holder : recordless_late;
        if (pthread_create(&ids[started], NULL, body, &threads[started]) != 0) {
            status = -1;
            break;
        }
        /* One holder at a time: threads that find no free record at the same moment would
           each map a page of records, leaving many free. */
        if (started < holders) wait_for_calls(&run, started + 1);
    }
    int holding = started < holders ? started : holders;

    /* Lower the address-space limit to what is mapped, then take what room is left page by
       page (again before each late call: other threads may unmap meanwhile). */
    struct rlimit saved;
    int limited = 0;
    long mapped = mapped_bytes();
    if (status == 0 && mapped > 0 && getrlimit(RLIMIT_AS, &saved) == 0) {
        struct rlimit tight = saved;
        tight.rlim_cur = (rlim_t)mapped;
        limited = setrlimit(RLIMIT_AS, &tight) == 0;
    }
    if (!limited) status = -1;
    int taken = 0;
    for (int index = 0; index < started - holding; index++) {
        if (limited) taken = take_room(room, taken, most_pages);
        if (taken == most_pages) status = -1;
        pthread_mutex_lock(&run.lock);
        run.turn = index;
        pthread_cond_broadcast(&run.changed);
        pthread_mutex_unlock(&run.lock);
        wait_for_calls(&run, holding + index + 1);
    }
    for (int index = 0; index < taken; index++) munmap(room[index], (size_t)sysconf(_SC_PAGESIZE));
    if (limited) setrlimit(RLIMIT_AS, &saved);
    pthread_mutex_lock(&run.lock);
    run.done = 1;
    pthread_cond_broadcast(&run.changed);
    pthread_mutex_unlock(&run.lock);
    for (int index = 0; index < started; index++) pthread_join(ids[index], NULL);
    for (int index = holding; index < started; index++) results[index - holding] = threads[index].result;
    return status;
}

// MARK: - Building fixture libraries

extern char **environ;

int pf_run(char *const argv[]) {
    posix_spawn_file_actions_t actions;
    if (posix_spawn_file_actions_init(&actions) != 0) return -1;
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    pid_t child;
    int started = posix_spawnp(&child, argv[0], &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (started != 0) return -1;
    int status = 0;
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

long long pf_modified(const char *path) {
    struct stat info;
    if (stat(path, &info) != 0) return -1;
    return (long long)info.st_mtim.tv_sec * 1000000000LL + info.st_mtim.tv_nsec;
}
