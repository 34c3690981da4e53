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

/// value * 10.
int consumer_scale(int value);

/// consumer_scale(a) + consumer_scale(b), called directly (no pointer, no import entry).
int consumer_scale_sum(int a, int b);

/// An attach's enter function written in C (the README's `count_enter`): adds one to the
/// `long` that `context` points at, and the first argument (at byte 0 of the frame) to the one
/// after it.
void consumer_count_enter(void *context, void *frame);

/// Opens gcc's Objective-C runtime with dlopen (RTLD_LOCAL), makes and registers a root class
/// `Counter` with `-(int)add:(int)a to:(int)b` the first time, and returns a new instance
/// (NULL when the runtime is not installed).
void *consumer_objc_make_counter(void);

/// Sends `add:to:` to `object` as compiled code does (objc_msg_lookup, then the call).
int consumer_objc_add(void *object, int a, int b);

#endif
