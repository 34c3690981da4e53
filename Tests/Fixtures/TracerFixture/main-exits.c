// A program whose main thread ends with pthread_exit while another thread works on: the process
// ends, with status 0, when that thread returns (the C library calls exit(0) as the last of the
// program's threads ends). A tracer's threads of its own must not keep it alive.
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

int tracee_add(int a, int b);

static void *work(void *argument) {
    (void)argument;
    usleep(100000);
    int sum = 0;
    for (int index = 0; index < 1000; index++) sum = tracee_add(sum, 1);
    printf("worker made %d calls\n", sum);
    return NULL;
}

int main(void) {
    pthread_t thread;
    pthread_create(&thread, NULL, work, NULL);
    tracee_add(0, 0);
    pthread_exit(NULL);
}
