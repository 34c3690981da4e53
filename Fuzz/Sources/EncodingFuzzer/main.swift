// Entry point of the encoding fuzzer.

import FuzzKit

runFuzzer(fuzzOneInput)
