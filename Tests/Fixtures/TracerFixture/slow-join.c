// A stand-in for the tracer library, for held.c: its join entry says it has started (it creates
// the file HELD_MARKER names) and sleeps a second, time for the test to kill the joiner while
// the call runs; its leave does nothing.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int ffi_hook_tracer_join(const char *configuration) {
    (void)configuration;
    const char *marker = getenv("HELD_MARKER");
    if (marker) {
        int descriptor = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (descriptor >= 0) close(descriptor);
    }
    usleep(1000000);
    return 0;
}

int ffi_hook_tracer_leave(const char *configuration) {
    (void)configuration;
    return 0;
}
