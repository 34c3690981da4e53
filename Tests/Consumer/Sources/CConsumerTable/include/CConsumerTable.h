#ifndef CCONSUMERTABLE_H
#define CCONSUMERTABLE_H

// A C struct of callbacks, as a C library keeps one, and the library's calls through it.

typedef struct {
    int (*add)(int a, int b);
    void (*notify)(int value);
} callbacks;

/// The library's table.
callbacks *consumer_table(void);

/// Calls the table's `add`.
int consumer_add(int a, int b);

/// Calls the table's `notify`.
void consumer_notify(int value);

/// getpid(), called through the program's import table.
int consumer_pid(void);

#endif
