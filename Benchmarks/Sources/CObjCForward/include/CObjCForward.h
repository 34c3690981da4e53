#ifndef COBJCFORWARD_H
#define COBJCFORWARD_H

#include <stdint.h>

#include "CHookBench.h"

/// The methods of the Objective-C class `HBTarget` (GNU runtime, GNUstep Base), one per C
/// signature of CHookBench: `-add:to:` is `int (int, int)`, `-next:` takes and returns the
/// 40-byte `hb_record`, and so on. Each calls the same C original as the signature's slot,
/// directly. Every mechanism measured on a method (a plain message, this library's hook, a
/// forwarding hook) works on the class's own method, installed and removed in turn.
///
/// The forwarding hook is the one Aspects installs: the method's implementation is replaced
/// with an entry into the runtime's message forwarding, and the class's `forwardInvocation:`
/// runs a before block, invokes the original through the `NSInvocation` under an aliased
/// selector, and runs an after block.
///
/// Prepares the class: the aliased selectors, `forwardInvocation:` and
/// `methodSignatureForSelector:`, and the receiver, then checks every method with and without
/// the forwarding hook. Returns 0 on success, or a negative number when the runtime refuses a
/// step; `objcfwd_error()` then says which. Call once, before anything else here.
int objcfwd_prepare(void);

/// What went wrong in `objcfwd_prepare()`, or an empty string.
const char *objcfwd_error(void);

/// The name of the class, `HBTarget`.
const char *objcfwd_class_name(void);

/// The selector of the method of `signature` (`add:to:` for `int (int, int)`).
const char *objcfwd_selector_name(hb_signature signature);

/// Hooks the method of `signature` through forwarding. Returns 0, or -1 when its
/// implementation is not the compiled one (something else has hooked it).
int objcfwd_install(hb_signature signature);

/// Gives the method of `signature` its compiled implementation back, if the forwarding hook
/// is installed.
void objcfwd_remove(hb_signature signature);

/// What the method of a signature runs now.
typedef enum objcfwd_state {
    /// The compiled implementation.
    OBJCFWD_ORIGINAL = 0,
    /// The entry into message forwarding (`objcfwd_install`).
    OBJCFWD_FORWARDING = 1,
    /// Another implementation: someone else's hook.
    OBJCFWD_OTHER = 2
} objcfwd_state;

/// What the method of `signature` runs now.
objcfwd_state objcfwd_method_state(hb_signature signature);

/// Sends the message of `signature` `iterations` times to one instance of the class, from a
/// loop compiled as ordinary message sends (`[target add:x to:7]`), and returns the elapsed
/// nanoseconds. An autorelease pool is drained every 256 messages, inside the timed region,
/// as a run loop would.
uint64_t objcfwd_time_calls(hb_signature signature, int64_t iterations);

/// Sends the message of `signature` `iterations` times to the same instance as
/// ``objcfwd_time_calls``, untimed and without an autorelease pool (the messages autorelease
/// nothing): an ``hb_call_loop`` for threads that GNUstep did not start.
void objcfwd_thread_loop(hb_signature signature, int64_t iterations);

/// Sends the message of `signature` once and reports whether the result is the original's.
int objcfwd_send_once(hb_signature signature);

/// The instance the messages go to (an `id`), for hooks of that one object; NULL before
/// the class is set up.
void *objcfwd_receiver(void);

/// The name of the class the runtime dispatches the receiver's messages through.
const char *objcfwd_receiver_dispatch_class(void);

/// How many times the forwarding hook's before and after blocks have run, together.
uint64_t objcfwd_block_runs(void);

#endif
