// The tracer's log test for programs that start thread after thread: 6,000 threads, 100 at a
// time, each making one call of liblogged.so; more than the 4,096 threads that hold log frames
// at once, so later threads must reuse the frames of threads that ended.
#include <pthread.h>

long logged_call(int number, const char *text, double ratio, long big);

static void *work(void *number) {
    logged_call((int)(long)number, "thread", 1, 2);
    return NULL;
}

int main(void) {
    for (int round = 0; round < 60; round++) {
        pthread_t threads[100];
        for (int index = 0; index < 100; index++) {
            pthread_create(&threads[index], NULL, work, (void *)(long)(round * 100 + index));
        }
        for (int index = 0; index < 100; index++) pthread_join(threads[index], NULL);
    }
    return 0;
}
