// Calls neither malloc nor free (nor any other function of the C library's allocator): every
// such call a tracer counts in it is the tracer's own. With "wait", it writes its process ID
// and waits for signals until one ends it; else it returns at once.
#include <string.h>
#include <unistd.h>

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
    return write(1, "", 0) < 0;
}
