// Entry point of the hook-sequence fuzzer.

import FuzzKit

runFuzzer(fuzzOneInput)
