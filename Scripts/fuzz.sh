#!/usr/bin/env bash
# Builds the type-encoding fuzzer (Fuzz/, release, AddressSanitizer and coverage) and runs it.
#
#   Scripts/fuzz.sh [RUNS] [EXTRA LIBFUZZER FLAGS...]
#
# RUNS defaults to 1000000. The fuzzer works on a copy of Fuzz/Corpus in a temporary
# directory, so the checked-in seeds stay as they are. Crash, leak and timeout reproducers
# are written to the directory named by FUZZ_ARTIFACTS (default: Fuzz/.build-fuzz/artifacts).
# Exits non-zero if the build fails or libFuzzer finds a crash, leak or timeout.
#
# Reproduce a saved input with: Fuzz/.build-fuzz/release/EncodingFuzzer <reproducer file>
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fuzz_dir="$root/Fuzz"
scratch="$fuzz_dir/.build-fuzz"

runs="${1:-1000000}"
[[ $# -gt 0 ]] && shift
if ! [[ "$runs" =~ ^[0-9]+$ ]]; then
    echo "usage: $0 [RUNS] [EXTRA LIBFUZZER FLAGS...]" >&2
    exit 2
fi

# The toolchain is the one whose swiftc is on PATH; libFuzzer ships with its clang runtime.
swiftc_path="$(command -v swiftc || true)"
if [[ -z "$swiftc_path" ]]; then
    echo "fuzz.sh: swiftc is not on PATH" >&2
    exit 1
fi
toolchain="$(cd "$(dirname "$(readlink -f "$swiftc_path")")/.." && pwd)"
case "$(uname -m)" in
    x86_64 | amd64) arch=x86_64 ;;
    aarch64 | arm64) arch=aarch64 ;;
    *) arch="$(uname -m)" ;;
esac
fuzzer_lib=""
for candidate in "$toolchain"/lib/clang/*/lib/linux/libclang_rt.fuzzer_no_main-"$arch".a; do
    [[ -f "$candidate" ]] && fuzzer_lib="$candidate"
done
if [[ -z "$fuzzer_lib" ]]; then
    echo "fuzz.sh: no libclang_rt.fuzzer_no_main-$arch.a under $toolchain/lib/clang" >&2
    exit 1
fi

echo "== building the fuzzer (release, address sanitizer, coverage)"
build_start=$(date +%s)
swift build \
    --package-path "$fuzz_dir" \
    --scratch-path "$scratch" \
    -c release \
    --product EncodingFuzzer \
    -Xswiftc -sanitize-coverage=edge,trace-cmp,inline-8bit-counters,pc-table \
    -Xswiftc -sanitize=address \
    -Xlinker "$fuzzer_lib" \
    -Xlinker -lstdc++
build_end=$(date +%s)
echo "== built in $((build_end - build_start)) s"

binary="$(swift build --package-path "$fuzz_dir" --scratch-path "$scratch" -c release --show-bin-path)/EncodingFuzzer"

work="$(mktemp -d "${TMPDIR:-/tmp}/encoding-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
cp "$fuzz_dir"/Corpus/* "$work/corpus/"

artifacts="${FUZZ_ARTIFACTS:-$scratch/artifacts}"
mkdir -p "$artifacts"
log="$work/fuzz.log"
touch "$work/started"

# Swift's own crash backtracer reads the stack in a way AddressSanitizer reports as an
# error of its own; libFuzzer prints the crash and saves the input without it.
export SWIFT_BACKTRACE="enable=no"

echo "== fuzzing: $runs runs"
run_start=$(date +%s)
status=0
"$binary" \
    -runs="$runs" \
    -dict="$fuzz_dir/encoding.dict" \
    -max_len=256 \
    -timeout=5 \
    -rss_limit_mb=4096 \
    -print_final_stats=1 \
    -artifact_prefix="${artifacts%/}/" \
    "$@" \
    "$work/corpus" 2>&1 | tee "$log" || status=$?
run_end=$(date +%s)

echo "== fuzzing took $((run_end - run_start)) s"
grep -E '^(Done [0-9]+ runs|#[0-9]+[[:space:]]+DONE|INFO: fuzzed for|INFO: exiting:)' "$log" || true

# With -fork=N -ignore_crashes=1 libFuzzer goes on past a crash and may still exit 0:
# any reproducer written during this run counts as a failure.
found="$(find "$artifacts" -maxdepth 1 -type f -newer "$work/started" \
    \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | sort)"
if [[ $status -ne 0 || -n "$found" ]]; then
    echo "fuzz.sh: the fuzzer found failures (exit $status)" >&2
    grep -E '^.*Fatal error:|^SUMMARY:' "$log" | sort | uniq -c | sort -rn >&2 || true
    while IFS= read -r file; do
        [[ -n "$file" ]] || continue
        echo "reproducer: $file" >&2
        # In fork mode the failure message stays in the job's log: run the input again.
        "$binary" "$file" 2>&1 | grep -m1 -E 'Fatal error:|ERROR:' | sed 's/^/    /' >&2 || true
    done <<<"$found"
    exit $(( status != 0 ? status : 1 ))
fi
