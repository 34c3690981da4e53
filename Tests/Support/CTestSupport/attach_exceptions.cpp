// A C++ exception thrown inside an attached function and caught by its caller: the unwinder
// goes through the attach's return thunk in both of its phases (the search for the handler,
// then the unwinding to it).
#include "CTestAttachFixtures.h"

extern "C" void at_throw(long value) {
    if (value != 0) throw value;
}

// Calls thrower(value) in a `try` that catches a `long`.
static long at_catching(void (*thrower)(long), long value) {
    try {
        thrower(value);
    } catch (long caught) {
        return caught + 1000;
    }
    return -1;
}

extern "C" long at_call_catching(long value) { return at_catching(at_table.thrower, value); }

extern "C" long at_call_catching_through_tail(long value) { return at_catching(at_table.tail_thrower, value); }
