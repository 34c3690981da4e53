#!/usr/bin/env bash
# Builds the soak executable with AddressSanitizer and runs it with LeakSanitizer on, for
# SECONDS (default 60). Further arguments go to the executable (see --help).
#
#     Scripts/soak.sh 600 --callers 4 --mutators 2
#
# Set SOAK_DEBUG=1 to build in debug mode instead of release, and SOAK_SCRATCH_PATH to build
# in another scratch path (default .build-soak-asan; the AddressSanitizer test build in
# .build-asan already holds the library's debug modules, which CI reuses).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true
configuration=release
if [ "${SOAK_DEBUG:-0}" = 1 ]; then configuration=debug; fi
scratch="${SOAK_SCRATCH_PATH:-.build-soak-asan}"

echo "== building ffi-hook-soak ($configuration, address sanitizer)"
swift build -c "$configuration" --sanitize=address --scratch-path "$scratch" --product ffi-hook-soak
binary="$(swift build -c "$configuration" --sanitize=address --scratch-path "$scratch" --show-bin-path)/ffi-hook-soak"

echo "== running for $seconds s"
ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" "$binary" --seconds "$seconds" "$@"
