// Entry point of the call-interface fuzzer.

import FuzzKit

runFuzzer(fuzzOneInput)
