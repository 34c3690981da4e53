// The tracer's log test: calls of liblogged.so with known arguments (a string with a newline
// and quotes, NULL, an address that cannot be read, a string cut by the end of its memory, a
// long one with an escape character, doubles, a float, stack arguments, a nested call, a call
// on another thread) and of the C library's write, read (its buffer filled), strlen and exit
// (which does not return).
// Prints its process ID and the other thread's ID.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

long logged_call(int number, const char *text, double ratio, long big);
double logged_scale(double value, int times);
float logged_half(float value);
int logged_many(int a, int b, int c, int d, int e, int f, int g, int h);
long logged_outer(int number);
unsigned long logged_raw(unsigned long first, unsigned long second);

static pid_t worker;

static void *work(void *unused) {
    (void)unused;
    worker = gettid();
    logged_call(100, "thread", 1, 1);
    return NULL;
}

int main(void) {
    logged_call(-7, "say \"hi\"\n", 2.5, 1234567890123L);
    logged_call(42, NULL, -0.125, -1);
    logged_call(0, (const char *)1, 1e20, 0);
    // "abc" at the very end of a page whose next page is unmapped: no NUL can be read.
    char *pages = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(pages + 4096, 4096);
    memcpy(pages + 4093, "abc", 3);
    logged_call(1, pages + 4093, 0, 0);
    logged_call(5, "\x1b[1m0123456789012345678901234567890123456789012345678901234567890123456789", 0, 0);
    logged_scale(1.5, 4);
    logged_half(3);
    logged_many(1, 2, 3, 4, 5, 6, 7, 8);
    logged_outer(3);
    logged_raw(0x11, 0x22);
    pthread_t thread;
    pthread_create(&thread, NULL, work, NULL);
    pthread_join(thread, NULL);
    // read's buffer, printed as it returns: what it read, or its address when it failed.
    int ends[2];
    pipe(ends);
    dup2(ends[0], 20);
    dup2(ends[1], 21);
    write(21, "ab\ncd", 5);
    char buffer[64];
    read(20, buffer, sizeof buffer);
    read(-1, buffer, 10);
    write(1, "hello\n", 6);
    volatile size_t length = strlen("twelve chars");
    (void)length;
    printf("%d %d\n", (int)getpid(), (int)worker);
    fflush(stdout);
    exit(0);
}
