// The event outputs' longjmp test: JUMPS times, the program calls jump_call from inside run(),
// and jump_call's callback leaves it with longjmp back into run(), so jump_call never returns;
// then main sleeps a millisecond (no traced call) and calls jump_return, from a frame above the
// one jump_call was called from.
#include <setjmp.h>
#include <stdio.h>
#include <unistd.h>

int jump_call(void (*callback)(void));
int jump_return(int value);

enum { JUMPS = 10 };

static jmp_buf back;

static void leave(void) { longjmp(back, 1); }

__attribute__((noinline)) static int run(void) {
    if (setjmp(back) == 0) return jump_call(leave);
    return 0;
}

int main(void) {
    int returned = 0;
    for (int index = 0; index < JUMPS; index++) {
        returned += run();
        usleep(1000);
        returned += jump_return(index) - index - 1;
    }
    printf("%d\n", returned);
    return 0;
}
