#ifndef CCONSUMERGREETER_H
#define CCONSUMERGREETER_H

// A GNUstep class, Greeter (a subclass of NSObject), compiled for gcc's Objective-C runtime.
// Swift reads this header as C: the class's @interface stays in greeter.m, and objects cross
// over as untyped pointers.

/// A new Greeter, which the caller releases with greeter_release.
void *greeter_new(void);

/// `[greeter greet:times]`, sent as compiled code sends it: how many greetings the greeter
/// has made in all.
int greeter_greet(void *greeter, int times);

/// `[object description]`, copied into a C string the caller frees.
char *greeter_description(void *object);

/// `[greeter salutation]`, a constant string (`@"hello"`), copied into a C string the
/// caller frees.
char *greeter_salutation(void *greeter);

/// `[object release]`.
void greeter_release(void *object);

/// `[greeter refuse]`, which raises an NSException named GreeterRefusal, inside `@try`: 1 when
/// the `@catch` caught it.
int greeter_refusal_caught(void *greeter);

#endif
