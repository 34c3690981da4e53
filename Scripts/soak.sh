#!/usr/bin/env bash
# Builds the soak program (ffi-hook-soak, in the Programs/ package) with AddressSanitizer and
# runs it with LeakSanitizer on, for SECONDS (default 60). Further arguments go to the
# program (see --help). Arguments that start with an option instead run the program with
# those alone: the inline soak counts cycles, not seconds.
#
#     Scripts/soak.sh 600 --callers 4 --mutators 2
#     Scripts/soak.sh --inline --cycles 1000
#
# Set SOAK_DEBUG=1 to build in debug mode instead of release (quicker to build, as CI does),
# and SOAK_SCRATCH_PATH to build in another scratch path, relative to the repository's root
# (default Programs/.build-asan: apart from Programs/.build, which `swift run` uses without
# the sanitizer; the debug and release builds share it).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == --* ]]; then
    arguments=("$@")
    what="ffi-hook-soak $*"
else
    seconds="${1:-60}"
    shift || true
    arguments=(--seconds "$seconds" "$@")
    what="for $seconds s"
fi
configuration=release
if [ "${SOAK_DEBUG:-0}" = 1 ]; then configuration=debug; fi
scratch="${SOAK_SCRATCH_PATH:-Programs/.build-asan}"
build=(swift build --package-path Programs -c "$configuration" --sanitize=address --scratch-path "$scratch")

echo "== building ffi-hook-soak ($configuration, address sanitizer)"
"${build[@]}" --product ffi-hook-soak
binary="$("${build[@]}" --show-bin-path)/ffi-hook-soak"

echo "== running $what"
ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" "$binary" "${arguments[@]}"
