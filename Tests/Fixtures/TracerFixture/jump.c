// libjump.so, for the event outputs' longjmp test: a traced function that calls back into the
// program (which leaves it with longjmp), and one that returns.
int jump_call(void (*callback)(void)) {
    callback();
    return 1;
}

int jump_return(int value) { return value + 1; }
