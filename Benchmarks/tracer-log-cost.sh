#!/usr/bin/env bash
# The per-call cost of the tracer's call log (--log): a loop of calls of liblogged.so (the test
# fixture's library) timed without the tracer, counted, and logged (decoded by a signature,
# with a string and a double; raw, without one), to a file and to /dev/null (the formatting
# without the file system's share). Prints the median of 5 runs in nanoseconds a call, then
# callgrind's instructions a call (user space only: the write system call's kernel time is in
# the wall times, not in the instructions).
#
#     Benchmarks/tracer-log-cost.sh [CALLS]
set -euo pipefail
cd "$(dirname "$0")/.."
# The libraries built for the tracer make their generic types' metadata by accessors (the
# manifest's FFI_HOOK_DIRECT_METADATA): a traced process starts faster.
export FFI_HOOK_DIRECT_METADATA=1
calls=${1:-1000000}

(cd Programs && swift build -c release -Xswiftc -warnings-as-errors --product FFIHookTracer &&
    swift build -c release -Xswiftc -warnings-as-errors --product FFIHookTracerStart &&
    swift build -c release -Xswiftc -warnings-as-errors --product ffi-hook-tracer) >/dev/null
tracer="$(cd Programs && swift build -c release --show-bin-path)/ffi-hook-tracer"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O0 -fPIC -shared -o "$work/liblogged.so" Tests/Fixtures/TracerFixture/logged.c
cat >"$work/loop.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

long logged_call(int number, const char *text, double ratio, long big);
unsigned long logged_raw(unsigned long first, unsigned long second);

int main(int count, char **arguments) {
    long calls = atol(arguments[1]);
    int raw = count > 2 && strcmp(arguments[2], "raw") == 0;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long index = 0; index < calls; index++) {
        if (raw) {
            logged_raw((unsigned long)index, 1);
        } else {
            logged_call((int)index, "hello", 0.5, index);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    double nanoseconds = (end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec);
    printf("%.1f\n", nanoseconds / calls);
    return 0;
}
C
gcc -O2 -o "$work/loop" "$work/loop.c" -L"$work" -llogged -Wl,-rpath,"$work"

# The median of 5 runs of a command that prints its nanoseconds a call.
median() {
    for _ in 1 2 3 4 5; do "$@" 2>/dev/null; done | sort -n | sed -n 3p
}
trace=("$tracer" --library liblogged.so --signature 'logged_call=qi*dq')
printf '%-44s %10s\n' "loop of $calls calls" "ns a call"
printf '%-44s %10s\n' "no tracer" "$(median "$work/loop" "$calls")"
printf '%-44s %10s\n' "counting" "$(median "${trace[@]}" -- "$work/loop" "$calls")"
for kind in decoded raw; do
    mode=()
    [ "$kind" = raw ] && mode=(raw)
    printf '%-44s %10s\n' "counting and logging ($kind) to a file" \
        "$(median "${trace[@]}" --log "$work/log.txt" -- "$work/loop" "$calls" "${mode[@]}")"
    printf '%-44s %10s\n' "counting and logging ($kind) to /dev/null" \
        "$(median "${trace[@]}" --log /dev/null -- "$work/loop" "$calls" "${mode[@]}")"
done
head -n 2 "$work/log.txt"

if command -v valgrind >/dev/null; then
    # Valgrind cannot read the Swift library's debug information: a stripped copy.
    mkdir "$work/stripped"
    cp "$tracer" "$(dirname "$tracer")/libFFIHookTracer.so" "$work/stripped/"
    strip --strip-debug "$work/stripped/ffi-hook-tracer" "$work/stripped/libFFIHookTracer.so"
    trace=("$work/stripped/ffi-hook-tracer" "${trace[@]:1}")
    small=20000
    instructions() {
        valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" --toggle-collect=main \
            "$@" >/dev/null 2>&1
        callgrind_annotate "$work/callgrind.out" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' |
            tr -d ,
    }
    base=$(instructions "$work/loop" "$small")
    for label in counting logging; do
        options=("${trace[@]}" --)
        [ "$label" = logging ] && options=("${trace[@]}" --log "$work/log.txt" --)
        # The tracer execs the program: valgrind follows it (--trace-children).
        for mode in decoded raw; do
            [ "$label" = counting ] && [ "$mode" = raw ] && continue
            arguments=("$small")
            [ "$mode" = raw ] && arguments+=(raw)
            # The difference between two loop lengths: the start and exit cancel out.
            short=$(instructions --trace-children=yes "${options[@]}" "$work/loop" "$((small / 2))" "${arguments[@]:1}")
            long=$(instructions --trace-children=yes "${options[@]}" "$work/loop" "${arguments[@]}")
            name=$label
            [ "$label" = logging ] && name="logging ($mode)"
            echo "$name: $(((long - short) / (small / 2))) instructions a call (untraced: $base for $small calls)"
        done
    done
fi
