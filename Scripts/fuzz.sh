#!/usr/bin/env bash
# Builds a libFuzzer target of Fuzz/ (release, AddressSanitizer and coverage), replays its
# regression inputs, then fuzzes it.
#
#   Scripts/fuzz.sh [TARGET] [RUNS] [EXTRA LIBFUZZER FLAGS...]
#
# TARGET   encoding   EncodingFuzzer: the type-encoding parser (the default)
#          interface  InterfaceFuzzer: lowering signatures, preparing and calling interfaces
#          hooks      HookSequenceFuzzer: installs, removals and calls on hooked slots
#          all        each of the above in turn, with the same RUNS and flags
#          When the first argument is a number it is RUNS and the target is encoding.
# RUNS     how many inputs to run (default 1000000); 0 for no limit; NNNs (for example
#          60s) for no run limit and at most NNN seconds of fuzzing, the form for CI:
#              Scripts/fuzz.sh all 60s
#          (the same as `Scripts/fuzz.sh TARGET 0 -max_total_time=60`).
# FLAGS    passed to libFuzzer as they are, for example -fork=1 -ignore_crashes=1, -seed=N.
#
# Before fuzzing, every file in Fuzz/Regressions/TARGET/ (inputs that once failed) runs
# once; the script fails if any of them fails, and names each that does. The fuzzer then
# works on a copy of Fuzz/Corpus/TARGET in a temporary directory, so the checked-in seeds
# stay as they are. Crash, leak and timeout reproducers are written to the directory named
# by FUZZ_ARTIFACTS (default: Fuzz/.build-fuzz/artifacts/TARGET); copy the ones that show a
# bug into Fuzz/Regressions/TARGET/ under a descriptive name (not crash-*, which git ignores).
# Exits non-zero if the build fails, a regression input fails, or libFuzzer finds a crash,
# leak or timeout.
#
# Reproduce a saved input with: Fuzz/.build-fuzz/release/<Fuzzer> <reproducer file>
set -euo pipefail

usage="usage: $0 [encoding|interface|hooks|all] [RUNS|NNNs] [EXTRA LIBFUZZER FLAGS...]"

target=encoding
if [[ $# -gt 0 && ! "$1" =~ ^[0-9]+s?$ && "$1" != -* ]]; then
    target="$1"
    shift
fi
runs="${1:-1000000}"
[[ $# -gt 0 ]] && shift
if ! [[ "$runs" =~ ^[0-9]+s?$ ]]; then
    echo "$usage" >&2
    exit 2
fi

if [[ "$target" == all ]]; then
    status=0
    for each in encoding interface hooks; do
        "$0" "$each" "$runs" "$@" || status=$?
    done
    exit "$status"
fi

case "$target" in
    encoding) product=EncodingFuzzer ;;
    interface) product=InterfaceFuzzer ;;
    hooks) product=HookSequenceFuzzer ;;
    *)
        echo "fuzz.sh: unknown target '$target'" >&2
        echo "$usage" >&2
        exit 2
        ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fuzz_dir="$root/Fuzz"
scratch="$fuzz_dir/.build-fuzz"

# libFuzzer flags of the target. The hook fuzzer's checks poll for up to ten seconds for
# the background thread, so it gets a longer timeout.
target_flags=(-max_len=256 -rss_limit_mb=4096)
case "$target" in
    encoding | interface) target_flags+=(-dict="$fuzz_dir/encoding.dict" -timeout=5) ;;
    hooks) target_flags+=(-timeout=30) ;;
esac

limit_flags=()
if [[ "$runs" =~ ^([0-9]+)s$ ]]; then
    limit_flags=(-runs=-1 -max_total_time="${BASH_REMATCH[1]}")
    runs_text="at most ${BASH_REMATCH[1]} s"
elif [[ "$runs" == 0 ]]; then
    limit_flags=(-runs=-1)
    runs_text="no run limit"
else
    limit_flags=(-runs="$runs")
    runs_text="$runs runs"
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

echo "== building $product (release, address sanitizer, coverage)"
build_start=$(date +%s)
swift build \
    --package-path "$fuzz_dir" \
    --scratch-path "$scratch" \
    -c release \
    --product "$product" \
    -Xswiftc -sanitize-coverage=edge,trace-cmp,inline-8bit-counters,pc-table \
    -Xswiftc -sanitize=address \
    -Xlinker "$fuzzer_lib" \
    -Xlinker -lstdc++
build_end=$(date +%s)
echo "== built in $((build_end - build_start)) s"

binary="$(swift build --package-path "$fuzz_dir" --scratch-path "$scratch" -c release --show-bin-path)/$product"

# Swift's own crash backtracer reads the stack in a way AddressSanitizer reports as an
# error of its own; libFuzzer prints the crash and saves the input without it.
export SWIFT_BACKTRACE="enable=no"

work="$(mktemp -d "${TMPDIR:-/tmp}/$target-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Regression inputs: libFuzzer runs each file named on its command line once.
regressions=()
if [[ -d "$fuzz_dir/Regressions/$target" ]]; then
    while IFS= read -r file; do regressions+=("$file"); done < <(
        find "$fuzz_dir/Regressions/$target" -maxdepth 1 -type f ! -name '.*' | sort)
fi
if [[ ${#regressions[@]} -gt 0 ]]; then
    echo "== replaying ${#regressions[@]} regression inputs"
    if ! "$binary" "${target_flags[@]}" "${regressions[@]}" >"$work/regressions.log" 2>&1; then
        # The first failure stops libFuzzer: run each input alone to name all that fail.
        failed=0
        for file in "${regressions[@]}"; do
            if ! "$binary" "${target_flags[@]}" "$file" >"$work/one.log" 2>&1; then
                failed=$((failed + 1))
                echo "regression input fails: $file" >&2
                grep -m1 -E 'Fatal error:|ERROR:' "$work/one.log" | sed 's/^/    /' >&2 || true
            fi
        done
        if [[ $failed -eq 0 ]]; then
            echo "fuzz.sh: replaying the regression inputs together failed:" >&2
            tail -n 20 "$work/regressions.log" >&2
            failed=1
        fi
        echo "fuzz.sh: $failed regression inputs of $target fail" >&2
        exit 1
    fi
    echo "== all regression inputs pass"
fi

mkdir "$work/corpus"
if compgen -G "$fuzz_dir/Corpus/$target/*" >/dev/null; then
    cp "$fuzz_dir/Corpus/$target"/* "$work/corpus/"
fi

artifacts="${FUZZ_ARTIFACTS:-$scratch/artifacts/$target}"
mkdir -p "$artifacts"
log="$work/fuzz.log"
touch "$work/started"

echo "== fuzzing $product: $runs_text"
run_start=$(date +%s)
status=0
"$binary" \
    "${limit_flags[@]}" \
    "${target_flags[@]}" \
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
    echo "fuzz.sh: the fuzzer found failures in $target (exit $status)" >&2
    grep -E '^.*Fatal error:|^SUMMARY:' "$log" | sort | uniq -c | sort -rn >&2 || true
    while IFS= read -r file; do
        [[ -n "$file" ]] || continue
        echo "reproducer: $file" >&2
        # In fork mode the failure message stays in the job's log: run the input again.
        "$binary" "${target_flags[@]}" "$file" 2>&1 | grep -m1 -E 'Fatal error:|ERROR:' | sed 's/^/    /' >&2 || true
    done <<<"$found"
    exit $((status != 0 ? status : 1))
fi
