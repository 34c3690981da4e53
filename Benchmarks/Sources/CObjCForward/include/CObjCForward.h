#ifndef COBJCFORWARD_H
#define COBJCFORWARD_H

#include <stdint.h>

#include "CHookBench.h"

/// Hooks the methods of an Objective-C class the way Aspects does, on the GNU runtime and
/// GNUstep Base: each hooked method's implementation is moved to an aliased selector and
/// replaced with an entry into the runtime's message forwarding, and the class's
/// `forwardInvocation:` runs a before block, invokes the original through the
/// `NSInvocation` under the aliased selector, and runs an after block.
///
/// The methods mirror the C signatures of CHookBench (`-add:to:` is `int (int, int)`, and
/// so on) and call the same C originals. Returns 0 on success, or a negative number when
/// the runtime refuses a step; `objcfwd_error()` then says which. Call once, before timing.
int objcfwd_prepare(void);

/// What went wrong in `objcfwd_prepare()`, or an empty string.
const char *objcfwd_error(void);

/// Sends the message of `signature` `iterations` times and returns the elapsed
/// nanoseconds: to the hooked object when `forwarded` is nonzero (every message goes through
/// forwarding), to an unhooked instance of the same class otherwise (a plain message send).
/// An autorelease pool is drained every 256 messages, inside the timed region, as a run
/// loop would.
uint64_t objcfwd_time_calls(hb_signature signature, int64_t iterations, int forwarded);

/// Sends the message of `signature` once to the hooked object and reports whether the
/// result is the original's and both blocks ran.
int objcfwd_check(hb_signature signature);

#endif
