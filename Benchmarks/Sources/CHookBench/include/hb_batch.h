#ifndef HB_BATCH_H
#define HB_BATCH_H

// A thousand small C functions for the inline batch rows: hb_batch_000 ... hb_batch_999, each
// `int (int a, int b)` returning a + b + 1000 + its number (distinct bodies, so that the
// compiler folds none into another), called directly by threads while a batch of inline hooks
// on all of them is installed and removed.

#include <stdint.h>

/// How many batch functions there are.
#define HB_BATCH_COUNT 1000

/// The address of batch function `index` (0 to 999).
void *hb_batch_function(int index);

/// Starts `threads` threads (at most 16) that call every batch function directly, in order,
/// again and again, and check each result. 0 on success.
int hb_batch_callers_start(int threads);

/// Stops them; returns how many calls they made and stores how many returned a wrong result.
int64_t hb_batch_callers_stop(int64_t *wrong);

/// Calls every batch function once directly; returns how many returned a wrong result.
int64_t hb_batch_check(void);

#endif
