// Calls neither malloc nor free (nor any other function of the C library's allocator): every
// such call a tracer counts in it is the tracer's own. With "wait", it writes its process ID
// and waits for signals until one ends it; with "threads", it starts four threads that do
// nothing, joins them and returns (the C library allocates and frees for them); else it
// returns at once.
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static void *nothing(void *argument) { return argument; }

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "wait") == 0) {
        /* The process ID in decimal, by hand: printf's buffer would come from malloc. */
        char text[16];
        size_t at = sizeof text;
        text[--at] = '\n';
        for (int pid = (int)getpid(); pid > 0; pid /= 10) text[--at] = (char)('0' + pid % 10);
        if (write(1, text + at, sizeof text - at) < 0) return 1;
        for (;;) pause();
    }
    if (argc > 1 && strcmp(argv[1], "threads") == 0) {
        /* All four at once: a thread that ended leaves its stack to the next (the C library's
           cache of stacks), whose start then frees a block for each object with thread-local
           storage, the tracer's too. */
        pthread_t threads[4];
        for (int index = 0; index < 4; index++) {
            if (pthread_create(&threads[index], NULL, nothing, NULL) != 0) return 1;
        }
        for (int index = 0; index < 4; index++) {
            if (pthread_join(threads[index], NULL) != 0) return 1;
        }
    }
    return write(1, "", 0) < 0;
}
