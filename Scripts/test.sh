#!/usr/bin/env bash
# Runs every check of the package: generated C test sources in step with gcc, the generated
# fixed-arity typed hooks in step with their script, formatting,
# the test suite with warnings as errors, the fault guard's and the library's own functions'
# tests in a release build,
# then the tests under AddressSanitizer (with
# LeakSanitizer) and the concurrency and ABI suites under ThreadSanitizer.
# On a Debian machine with only the Swift toolchain it first installs what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo "== [$(date -u +%H:%M:%S)] $*"; }

packages=(libffi-dev pkg-config gcc gobjc libgnustep-base-dev python3 libsqlite3-dev zlib1g-dev libzydis-dev gdb g++ strace)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    echo "== installing ${missing[*]}"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi

step "generated C test sources match gcc"
python3 Scripts/generate-c-tests.py --check

step "the fixed-arity typed hooks match their generator"
python3 Scripts/generate-typed-arities.py --check

step "swift format lint"
swift format lint --strict --recursive Package.swift Sources Tests Fuzz/Package.swift Fuzz/Sources \
    Benchmarks/Package.swift Benchmarks/Sources Benchmarks/Benchmarks Programs/Package.swift Programs/Sources

step "swift test"
swift test -Xswiftc -warnings-as-errors

# The tracer (Programs/) on a C program whose calls it must count exactly.
step "the tracer's counts"
Scripts/tracer-test.sh

# Again in an optimised build, where the code is what ships: the fault guard, which turns faults
# at its own instructions into errors, and every function the library imports hooked in
# every object (an optimised call path must call none of them; an unoptimised one marks its
# own code instead).
step "swift test, release: the fault guard and the library's own functions hooked"
swift test -c release -Xswiftc -enable-testing --filter "FaultGuardTests|LibraryFunctionHookTests"

# The sanitizer passes skip the exit tests whose child processes stop on purpose, and the
# XCTest runner (the package has no XCTest tests; XCTest itself leaks a few objects at exit).
# The inline corpora are the longest suites there and run one after another: the one-by-one
# corpus (every export of SQLite and zlib, each planned alone) is left to the debug pass, and
# the whole-library corpus takes SQLite and zlib (the batch path on the same code; the C
# library's batch, a minute there on the critical path, is left to the debug pass).
step "address sanitizer and leak check: every test"
FFH_CORPUS_LIBRARIES=libz.so.1,libsqlite3.so.0 ASAN_OPTIONS=detect_leaks=1 \
    swift test --sanitize=address --scratch-path .build-asan --disable-xctest \
    --skip InvocationPreconditionTests --skip ObjCMethodHookTests --skip InlineCorpusTests
# The Objective-C suites on their own: the GNU runtime keeps what class_addMethod allocates
# where the leak checker cannot follow it (GNUstep's own classes show it too), so those
# allocations are suppressed by name, which takes full stack traces (slower, hence apart).
step "address sanitizer and leak check: the Objective-C suites"
ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 LSAN_OPTIONS=suppressions="$PWD/Scripts/objc-runtime.supp" \
    swift test --sanitize=address --scratch-path .build-asan --disable-xctest --filter ObjCMethodHookTests

# The inline corpora (every export of SQLite and zlib planned and patched one by one; every
# export of libswiftCore, libFoundation, libc, SQLite and zlib as one batch each, attached in
# child processes) run in the debug pass, SQLite's and zlib's batches under AddressSanitizer too;
# under ThreadSanitizer they take minutes and add nothing the other inline suites do not
# exercise there.
step "thread sanitizer: the hook engine, inline hooks, the call interfaces and the ABI suites"
swift test --sanitize=thread --scratch-path .build-tsan --disable-xctest \
    --filter "FFIHookTests|FFIHookInlineTests|CallInterfaceTests|CompiledFunctionCallTests|VariadicCallTests|ABIClassificationTests" \
    --skip InvocationPreconditionTests --skip InlineCorpusTests --skip InlineLibraryCorpusTests
