#include "CTestErrnoFixtures.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

int ct_errno_fail(int value) {
    if (value == 0) return 0;
    errno = value;
    return -1;
}

int (*ct_errno_slot)(int value) = ct_errno_fail;

void *ct_errno_slot_address(void) { return (void *)&ct_errno_slot; }

int ct_errno_call(int before, int value, int *seen) {
    int (*volatile *slot)(int) = &ct_errno_slot;
    errno = before;
    int result = (*slot)(value);
    *seen = errno;
    return result;
}

struct ct_errno_call_args {
    int before, value, seen, result;
};

static void *ct_errno_thread(void *raw) {
    struct ct_errno_call_args *args = raw;
    args->result = ct_errno_call(args->before, args->value, &args->seen);
    return NULL;
}

int ct_errno_call_on_new_thread(int before, int value, int *seen) {
    struct ct_errno_call_args args = {before, value, 0, 0};
    pthread_t thread;
    if (pthread_create(&thread, NULL, ct_errno_thread, &args) != 0) return -2;
    pthread_join(thread, NULL);
    *seen = args.seen;
    return args.result;
}

int ct_errno_call_fsync(int before, int fd, int *seen) {
    errno = before;
    int result = fsync(fd);
    *seen = errno;
    return result;
}

int ct_errno_get(void) { return errno; }

void ct_errno_set(int value) { errno = value; }
